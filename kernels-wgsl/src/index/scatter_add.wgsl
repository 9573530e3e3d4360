// Adds update u to output word w with one atomic add: 32-bit integers (two's
// complement words) and, where the adapter has float atomics, f32 (`OW` is the
// output's atomic scalar).
fn merge(w: u32, j: u32, u: CB) {
    atomicAdd(&O[w], bitcast<OW>(u));
}
