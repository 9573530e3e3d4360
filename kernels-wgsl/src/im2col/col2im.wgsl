// The adjoint of im2col (the input gradient of a convolution's columns): cols
// [N, out0, out1, out2, T, C] row-major from element x0 into dx [N, in0, in1, in2, C].
// Input element s sums, in f32, the column elements of every tap k and position o
// with o * stride + k * kdil - lo = s * idil on each axis.
//
// Parameters as im2col.wgsl's (SH: lanes to an input row, one word each).


// The sum over taps for input row `row` of the column elements at word offset
// `j` of their rows (`cw` words a row) and element `lane` of the word, or, with
// cw = C, element j itself (lane 0 of one-element words).
fn col2im_sum(row: u32, j: u32, cw: u32, lane: u32, elems: bool) -> f32 {
    let s = ax_pos(row, 0u);
    var acc = 0.0;
    var t = 0u;
    let k1n = ax(1u, 2u);
    let k2n = ax(2u, 2u);
    for (var k0 = 0u; k0 < ax(0u, 2u); k0++) {
        let o0 = col2im_pos(0u, s.x, k0);
        if (o0 == NONE) { t += k1n * k2n; continue; }
        for (var k1 = 0u; k1 < k1n; k1++) {
            let o1 = col2im_pos(1u, s.y, k1);
            if (o1 == NONE) { t += k2n; continue; }
            for (var k2 = 0u; k2 < k2n; k2++) {
                let o2 = col2im_pos(2u, s.z, k2);
                if (o2 != NONE) {
                    let col = ((s.w * ax(0u, 1u) + o0) * ax(1u, 1u) + o1) * ax(2u, 1u) + o2;
                    let at = (col * P[3] + t) * cw + j;
                    if (elems) {
                        acc += f32(ld_a(P[1] + at));
                    } else {
                        acc += f32(xa(wa(P[1] / EPO + at), lane));
                    }
                }
                t++;
            }
        }
    }
    return acc;
}

// Whole words (C a multiple of the words' elements, x0 aligned): one thread a word.
@compute @workgroup_size(WG)
fn col2im_rows(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let cw = P[25];
    let sh = P[26];
    let total = P[27] << sh;
    for (var i = thread_index(lid, wid, nwg); i < total; i += thread_count(nwg)) {
        let row = i >> sh;
        let j = i & ((1u << sh) - 1u);
        if (j >= cw) { continue; }
        var word = 0u;
        for (var e = 0u; e < EPO; e++) {
            word = put(word, e, st_o(CO(col2im_sum(row, j, cw, e, false))));
        }
        O[row * cw + j] = word;
    }
}

// Any alignment: each element from its own sum.
fn general_elem(e: u32) -> u32 {
    return st_o(CO(col2im_sum(e / P[2], e % P[2], P[2], 0u, true)));
}
