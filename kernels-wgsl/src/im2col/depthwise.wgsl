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

// The weights' gradient, in f32 partial sums: image [N, in0, in1, in2, C] from
// element x0 (A) and grad [N, out0, out1, out2, C] from element P[25] (B) into
// partials [S, T, C]: partial s of tap t and channel c sums image at the input
// position the tap reads times grad, over the s-th chunk of P[26] consecutive
// output positions (the last chunk shorter). A thread per (chunk, tap, channel),
// 2^SH lanes over the channels, walking its chunk with an odometer (no division
// per position). Parameters past the geometry: g0, chunk, SH, chunks S.
@compute @workgroup_size(WG)
fn depthwise_wgrad(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                   @builtin(num_workgroups) nwg: vec3<u32>) {
    let chunk = P[26];
    let sh = P[27];
    let total = (P[28] * P[3]) << sh;
    let positions = P[0] / P[2];
    let o0n = ax(0u, 1u);
    let o1n = ax(1u, 1u);
    let o2n = ax(2u, 1u);
    for (var i = thread_index(lid, wid, nwg); i < total; i += thread_count(nwg)) {
        let c = i & ((1u << sh) - 1u);
        if (c >= P[2]) { continue; }
        let st = i >> sh;
        let t = st % P[3];
        let s = st / P[3];
        let k2 = t % ax(2u, 2u);
        let k1 = (t / ax(2u, 2u)) % ax(1u, 2u);
        let k0 = t / (ax(2u, 2u) * ax(1u, 2u));
        let start = s * chunk;
        let end = min(start + chunk, positions);
        var o2 = start % o2n;
        var r = start / o2n;
        var o1 = r % o1n;
        r = r / o1n;
        var o0 = r % o0n;
        var batch = r / o0n;
        var acc = 0.0;
        for (var p = start; p < end; p++) {
            let q0 = im2col_src(0u, o0, k0);
            let q1 = im2col_src(1u, o1, k1);
            let q2 = im2col_src(2u, o2, k2);
            if (q0 != NONE && q1 != NONE && q2 != NONE) {
                let src = ((batch * ax(0u, 0u) + q0) * ax(1u, 0u) + q1) * ax(2u, 0u) + q2;
                acc += f32(ld_a(P[1] + src * P[2] + c)) * f32(ld_b(P[25] + p * P[2] + c));
            }
            o2++;
            if (o2 == o2n) {
                o2 = 0u;
                o1++;
                if (o1 == o1n) {
                    o1 = 0u;
                    o0++;
                    if (o0 == o0n) { o0 = 0u; batch++; }
                }
            }
        }
        O[(s * P[3] + t) * P[2] + c] = st_o(CO(acc));
    }
}
