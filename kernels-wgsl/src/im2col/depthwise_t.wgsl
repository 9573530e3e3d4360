// The transpose of depthwise.wgsl (its input gradient): dy [N, out0, out1, out2, C]
// row-major from element x0 and w [C, T] from element P[25] into dx [N, in0, in1,
// in2, C], each element the f32 sum over the taps and positions that read it of
// dy times the channel's weight.

fn general_elem(e: u32) -> u32 {
    let c = e % P[2];
    var r = e / P[2];
    let s2 = r % ax(2u, 0u);
    r = r / ax(2u, 0u);
    let s1 = r % ax(1u, 0u);
    r = r / ax(1u, 0u);
    let s0 = r % ax(0u, 0u);
    let batch = r / ax(0u, 0u);
    let k1n = ax(1u, 2u);
    let k2n = ax(2u, 2u);
    let wrow = P[25] + c * P[3];
    var acc = 0.0;
    var t = 0u;
    for (var k0 = 0u; k0 < ax(0u, 2u); k0++) {
        let o0 = col2im_pos(0u, s0, k0);
        if (o0 == NONE) { t += k1n * k2n; continue; }
        for (var k1 = 0u; k1 < k1n; k1++) {
            let o1 = col2im_pos(1u, s1, k1);
            if (o1 == NONE) { t += k2n; continue; }
            for (var k2 = 0u; k2 < k2n; k2++) {
                let o2 = col2im_pos(2u, s2, k2);
                if (o2 != NONE) {
                    let at = ((batch * ax(0u, 1u) + o0) * ax(1u, 1u) + o1) * ax(2u, 1u) + o2;
                    acc += f32(ld_a(P[1] + at * P[2] + c)) * f32(ld_b(wrow + t));
                }
                t++;
            }
        }
    }
    return st_o(CO(acc));
}
