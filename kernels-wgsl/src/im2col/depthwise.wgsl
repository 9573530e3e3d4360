// Depthwise convolution (one filter per channel): x [N, in0, in1, in2, C] row-major
// from element x0 and w [C, T] from element P[25] into out [N, out0, out1, out2, C],
// each element the f32 sum over taps of the input element the tap reads (none in
// the padding) times the channel's weight. Parameters: columns.wgsl's geometry,
// then w0.

fn general_elem(e: u32) -> u32 {
    let c = e % P[2];
    var r = e / P[2];
    let o2 = r % ax(2u, 1u);
    r = r / ax(2u, 1u);
    let o1 = r % ax(1u, 1u);
    r = r / ax(1u, 1u);
    let o0 = r % ax(0u, 1u);
    let batch = r / ax(0u, 1u);
    let k1n = ax(1u, 2u);
    let k2n = ax(2u, 2u);
    let wrow = P[25] + c * P[3];
    var acc = 0.0;
    var t = 0u;
    for (var k0 = 0u; k0 < ax(0u, 2u); k0++) {
        let s0 = im2col_src(0u, o0, k0);
        if (s0 == NONE) { t += k1n * k2n; continue; }
        for (var k1 = 0u; k1 < k1n; k1++) {
            let s1 = im2col_src(1u, o1, k1);
            if (s1 == NONE) { t += k2n; continue; }
            for (var k2 = 0u; k2 < k2n; k2++) {
                let s2 = im2col_src(2u, o2, k2);
                if (s2 != NONE) {
                    let src = ((batch * ax(0u, 0u) + s0) * ax(1u, 0u) + s1) * ax(2u, 0u) + s2;
                    acc += f32(ld_a(P[1] + src * P[2] + c)) * f32(ld_b(wrow + t));
                }
                t++;
            }
        }
    }
    return st_o(CO(acc));
}
