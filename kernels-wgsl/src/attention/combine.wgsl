// The split-KV combine: each chunk's partial results (flash.wgsl's PARTS layout,
// f32 [S, rows, DH + 2]: unnormalised sum, maximum score in natural-log units,
// sum of weights) into the normalised output, rows of D of the output dtype. An
// invocation writes whole output words.
//
// Parameters: [n (output elements), S, rows, D].

const CNEG: f32 = -3.0e38;

fn combine_elem(e: u32) -> f32 {
    let d = P[3];
    let w = d + 2u;
    let row = e / d;
    let t = e - row * d;
    let rows = P[2];
    var top = CNEG;
    for (var s = 0u; s < P[1]; s++) { top = max(top, ld_a((s * rows + row) * w + d)); }
    var total = 0.0;
    var acc = 0.0;
    for (var s = 0u; s < P[1]; s++) {
        let base = (s * rows + row) * w;
        let m = ld_a(base + d);
        let f = select(exp(m - top), 0.0, m <= CNEG);
        total += f * ld_a(base + d + 1u);
        acc += f * ld_a(base + t);
    }
    return select(0.0, acc / total, total > 0.0);
}

@compute @workgroup_size(WG)
fn flash_combine(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let nw = (n + EPO - 1u) / EPO;
    for (var o = thread_index(lid, wid, nwg); o < nw; o += thread_count(nwg)) {
        var word = 0u;
        for (var j = 0u; j < EPO; j++) {
            let e = o * EPO + j;
            if (e < n) { word = put(word, j, st_o(combine_elem(e))); }
        }
        O[o] = word;
    }
}
