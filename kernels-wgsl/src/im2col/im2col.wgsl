// Convolution columns (im2col): x [N, in0, in1, in2, C] row-major from element x0
// into cols [N, out0, out1, out2, T, C], T = k0 k1 k2 taps (row-major): element
// q / idil of each axis where q (columns.wgsl) is a multiple of idil inside the
// input, else the fill (the padding and the holes of the dilation).
//
// Parameters: columns.wgsl's geometry, then at 25: words per row CW, lanes shift
// SH, output positions, and the fill word (the fill's bits in every element of a
// word).

// Whole words (C a multiple of the words' elements, x0 aligned): 2^SH lanes to an
// output position, each copying every 2^SH-th word of each of its T column rows
// (the position decoded once for all its taps; P[27] counts positions).
@compute @workgroup_size(WG)
fn im2col_rows(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let cw = P[25];
    let sh = P[26];
    let lanes = 1u << sh;
    let total = P[27] << sh;
    let x0 = P[1] / EPO;
    let k1n = ax(1u, 2u);
    let k2n = ax(2u, 2u);
    for (var i = thread_index(lid, wid, nwg); i < total; i += thread_count(nwg)) {
        let pos = i >> sh;
        var r = pos;
        let o2 = r % ax(2u, 1u);
        r = r / ax(2u, 1u);
        let o1 = r % ax(1u, 1u);
        r = r / ax(1u, 1u);
        let o0 = r % ax(0u, 1u);
        let batch = r / ax(0u, 1u);
        var at = pos * P[3] * cw;
        for (var k0 = 0u; k0 < ax(0u, 2u); k0++) {
            let q0 = im2col_src(0u, o0, k0);
            for (var k1 = 0u; k1 < k1n; k1++) {
                let q1 = im2col_src(1u, o1, k1);
                let line = ((batch * ax(0u, 0u) + q0) * ax(1u, 0u) + q1) * ax(2u, 0u);
                for (var k2 = 0u; k2 < k2n; k2++) {
                    let q2 = im2col_src(2u, o2, k2);
                    let ok = q0 != NONE && q1 != NONE && q2 != NONE;
                    let src = x0 + (line + q2) * cw;
                    for (var j = i & (lanes - 1u); j < cw; j += lanes) {
                        var v = P[28];
                        if (ok) { v = wa(src + j); }
                        O[at + j] = v;
                    }
                    at += cw;
                }
            }
        }
    }
}

// Any alignment: each element of each output word from its own position.
fn general_elem(e: u32) -> u32 {
    let c = e % P[2];
    let src = im2col_row(e / P[2]);
    if (src == NONE) { return P[28]; }
    return st_o(CO(ld_a(P[1] + src * P[2] + c)));
}
