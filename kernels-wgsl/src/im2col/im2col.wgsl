// Convolution columns (im2col): x [N, in0, in1, in2, C] row-major from element x0
// into cols [N, out0, out1, out2, T, C], T = k0 k1 k2 taps (row-major). Tap k of
// output position o reads the input dilated by idil at q = o * stride + k * kdil - lo
// on each axis: element q / idil where q is a multiple of idil inside the input,
// else zero (the padding and the holes of the dilation).
//
// Parameters: [n, x0, C, T, per axis a < 3 at 4 + 7a: in, out, k, stride, kdil,
// idil, lo (i32 bits), then at 25: words per row CW, lanes shift SH, rows]. Fewer
// spatial axes have length-1 ones.

const NONE: u32 = 0xffffffffu;

fn ax(a: u32, f: u32) -> u32 { return P[4u + 7u * a + f]; }

// The input index on axis a that position o and tap k read, or NONE.
fn im2col_src(a: u32, o: u32, k: u32) -> u32 {
    let q = i32(o * ax(a, 3u) + k * ax(a, 4u)) - bitcast<i32>(ax(a, 6u));
    if (q < 0i) { return NONE; }
    var s = u32(q);
    let idil = ax(a, 5u);
    if (idil != 1u) {
        if (s % idil != 0u) { return NONE; }
        s = s / idil;
    }
    return select(NONE, s, s < ax(a, 0u));
}

// The input row (image and position, without the channel) that column row `row`
// (image, position, tap) reads, or NONE.
fn im2col_row(row: u32) -> u32 {
    var r = row / P[3];
    var tap = row - r * P[3];
    let o2 = r % ax(2u, 1u);
    r = r / ax(2u, 1u);
    let o1 = r % ax(1u, 1u);
    r = r / ax(1u, 1u);
    let o0 = r % ax(0u, 1u);
    r = r / ax(0u, 1u);
    let k2 = tap % ax(2u, 2u);
    tap = tap / ax(2u, 2u);
    let k1 = tap % ax(1u, 2u);
    let k0 = tap / ax(1u, 2u);
    let s0 = im2col_src(0u, o0, k0);
    let s1 = im2col_src(1u, o1, k1);
    let s2 = im2col_src(2u, o2, k2);
    if (s0 == NONE || s1 == NONE || s2 == NONE) { return NONE; }
    return ((r * ax(0u, 0u) + s0) * ax(1u, 0u) + s1) * ax(2u, 0u) + s2;
}

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
            var v = 0u;
            if (src != NONE) { v = wa(x0 + src * cw + j); }
            O[row * cw + j] = v;
        }
    }
}

// Any alignment: each element of each output word from its own position.
fn general_elem(e: u32) -> u32 {
    let c = e % P[2];
    let src = im2col_row(e / P[2]);
    if (src == NONE) { return st_o(CO(0.0)); }
    return st_o(CO(ld_a(P[1] + src * P[2] + c)));
}
