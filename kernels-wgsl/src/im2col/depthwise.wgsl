// Depthwise convolution (one filter per channel) and its transpose. Forward
// (P[26] = 0): x [N, in0, in1, in2, C] row-major from element x0 and w [C, T] from
// element P[25] into out [N, out0, out1, out2, C], each element the f32 sum over
// taps of the input element the tap reads (none in the padding) times the
// channel's weight. Transposed (P[26] = 1, the input gradient): dy
// [N, out0, out1, out2, C] into dx [N, in0, in1, in2, C], each element summing dy
// at the positions whose taps read it, times the weights. Parameters:
// columns.wgsl's geometry, then w0 and the transposed flag.

// Forward: the input index tap k of position p reads on axis a; transposed: the
// output position whose tap k reads input index p.
fn dw_map(a: u32, p: u32, k: u32) -> u32 {
    if (P[26] == 0u) { return im2col_src(a, p, k); }
    return col2im_pos(a, p, k);
}

fn general_elem(e: u32) -> u32 {
    // Geometry field of the element's own lengths (out: 1, in: 0), and the read
    // array's.
    let own = select(1u, 0u, P[26] != 0u);
    let other = 1u - own;
    let c = e % P[2];
    var r = e / P[2];
    let p2 = r % ax(2u, own);
    r = r / ax(2u, own);
    let p1 = r % ax(1u, own);
    r = r / ax(1u, own);
    let p0 = r % ax(0u, own);
    let batch = r / ax(0u, own);
    let k1n = ax(1u, 2u);
    let k2n = ax(2u, 2u);
    let wrow = P[25] + c * P[3];
    var acc = 0.0;
    var t = 0u;
    for (var k0 = 0u; k0 < ax(0u, 2u); k0++) {
        let q0 = dw_map(0u, p0, k0);
        if (q0 == NONE) { t += k1n * k2n; continue; }
        for (var k1 = 0u; k1 < k1n; k1++) {
            let q1 = dw_map(1u, p1, k1);
            if (q1 == NONE) { t += k2n; continue; }
            for (var k2 = 0u; k2 < k2n; k2++) {
                let q2 = dw_map(2u, p2, k2);
                if (q2 != NONE) {
                    let at = ((batch * ax(0u, other) + q0) * ax(1u, other) + q1) * ax(2u, other) + q2;
                    acc += f32(ld_a(P[1] + at * P[2] + c)) * f32(ld_b(wrow + t));
                }
                t++;
            }
        }
    }
    return st_o(CO(acc));
}

// Whole words (C a multiple of the words' elements, both offsets aligned): a
// thread sums word j of four consecutive positions along the last axis, the
// position decoded once and each tap's weight read once for all four.
// Parameters past the flag: CW (words a row), SH (2^SH lanes to a block of four
// positions), NB (blocks along the last axis), blocks.
@compute @workgroup_size(WG)
fn depthwise_rows(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                  @builtin(num_workgroups) nwg: vec3<u32>) {
    let own = select(1u, 0u, P[26] != 0u);
    let other = 1u - own;
    let cw = P[27];
    let sh = P[28];
    let nb = P[29];
    let total = P[30] << sh;
    let k1n = ax(1u, 2u);
    let k2n = ax(2u, 2u);
    let len2 = ax(2u, own);
    for (var i = thread_index(lid, wid, nwg); i < total; i += thread_count(nwg)) {
        let j = i & ((1u << sh) - 1u);
        if (j >= cw) { continue; }
        var r = i >> sh;
        let first = (r % nb) * 4u;
        r = r / nb;
        let p1 = r % ax(1u, own);
        r = r / ax(1u, own);
        let p0 = r % ax(0u, own);
        let batch = r / ax(0u, own);
        var lo = vec4<f32>(0.0);
        var hi = vec4<f32>(0.0);
        var t = 0u;
        for (var k0 = 0u; k0 < ax(0u, 2u); k0++) {
            let q0 = dw_map(0u, p0, k0);
            if (q0 == NONE) { t += k1n * k2n; continue; }
            for (var k1 = 0u; k1 < k1n; k1++) {
                let q1 = dw_map(1u, p1, k1);
                if (q1 == NONE) { t += k2n; continue; }
                let line = (batch * ax(0u, other) + q0) * ax(1u, other) + q1;
                for (var k2 = 0u; k2 < k2n; k2++) {
                    var wv = vec2<f32>(0.0);
                    for (var e = 0u; e < EPO; e++) {
                        wv[e] = f32(ld_b(P[25] + (j * EPO + e) * P[3] + t));
                    }
                    for (var p = 0u; p < 4u; p++) {
                        let q2 = dw_map(2u, first + p, k2);
                        if (first + p < len2 && q2 != NONE) {
                            let word = wa(P[1] / EPO + (line * ax(2u, other) + q2) * cw + j);
                            lo[p] += f32(xa(word, 0u)) * wv.x;
                            if (EPO > 1u) { hi[p] += f32(xa(word, 1u)) * wv.y; }
                        }
                    }
                    t++;
                }
            }
        }
        let row = ((batch * ax(0u, own) + p0) * ax(1u, own) + p1) * len2;
        for (var p = 0u; p < 4u; p++) {
            if (first + p < len2) {
                var word = put(0u, 0u, st_o(CO(lo[p])));
                if (EPO > 1u) { word = put(word, 1u, st_o(CO(hi[p]))); }
                O[(row + first + p) * cw + j] = word;
            }
        }
    }
}
