// Rotary position embedding (MLX's `fast.rope`), one output word per invocation.
//
// Parameters: [words, n, L, D, dims, traditional, scale (f32 bits), per, x0, o0, f0].
// x holds n elements in rows of D, L rows per sequence (row-major from element x0).
// The first `dims` elements of a row rotate in pairs, (2k, 2k + 1) when traditional,
// else (k, k + dims / 2), by theta = scale * p * inv_freqs[f0 + k], where the position
// p = offsets[o0 + e / per] + (row % L); the other elements are copied.

fn rope_elem(e: u32) -> f32 {
    let d = P[3];
    let dims = P[4];
    let j = e % d;
    let x0 = P[8];
    if (j >= dims) { return ld_a(x0 + e); }
    var k = j >> 1u;
    var first = (j & 1u) == 0u;
    var lo = e - (j & 1u);
    var step = 1u;
    if (P[5] == 0u) {
        let h = dims >> 1u;
        first = j < h;
        k = select(j - h, j, first);
        lo = select(e - h, e, first);
        step = h;
    }
    let p = f32(ld_b(P[9] + e / P[7])) + f32((e / d) % P[2]);
    let theta = bitcast<f32>(P[6]) * p * ld_c(P[10] + k);
    let c = cos_f32(theta);
    let s = sin_f32(theta);
    let a = ld_a(x0 + lo);
    let b = ld_a(x0 + lo + step);
    return select(a * s + b * c, a * c - b * s, first);
}

@compute @workgroup_size(WG)
fn rope(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var w = thread_index(lid, wid, nwg); w < P[0]; w += thread_count(nwg)) {
        var word = 0u;
        for (var j = 0u; j < EPO; j++) {
            let e = (w << LO) + j;
            if (e < P[1]) { word = put(word, j, st_o(rope_elem(e))); }
        }
        O[w] = word;
    }
}
