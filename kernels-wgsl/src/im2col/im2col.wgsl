// Convolution columns (im2col): x [N, in0, in1, in2, C] row-major from element x0
// into cols [N, out0, out1, out2, T, C], T = k0 k1 k2 taps (row-major): element
// q / idil of each axis where q (columns.wgsl) is a multiple of idil inside the
// input, else the fill (the padding and the holes of the dilation).
//
// Parameters: columns.wgsl's geometry, then at 25: words per row CW, lanes shift
// SH, rows, and the fill word (the fill's bits in every element of a word).

// Whole words (C a multiple of the words' elements, x0 aligned): 2^SH lanes to a
// column row, each copying every 2^SH-th word of it.
@compute @workgroup_size(WG)
fn im2col_rows(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let cw = P[25];
    let sh = P[26];
    let lanes = 1u << sh;
    let total = P[27] << sh;
    let x0 = P[1] / EPO;
    for (var i = thread_index(lid, wid, nwg); i < total; i += thread_count(nwg)) {
        let row = i >> sh;
        let src = im2col_row(row);
        for (var j = i & (lanes - 1u); j < cw; j += lanes) {
            var v = P[28];
            if (src != NONE) { v = wa(x0 + src * cw + j); }
            O[row * cw + j] = v;
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
