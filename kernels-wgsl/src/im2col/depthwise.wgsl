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
        let first = ax_pos(start, 1u);
        var o0 = first.x;
        var o1 = first.y;
        var o2 = first.z;
        var batch = first.w;
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

// The vec4 variants (`_vec` ops): every channel row whole vec4s of words and each
// input's offset 16-byte aligned, so a thread moves 4 words (4 * EA channels) per load.
// Element e of word w of a vec4 is channel (4j + w) * EA + e of vec4 j.
const EA: u32 = 1u << LA;

fn dw_fma(acc: ptr<function, Split4>, x: Split4, y: Split4) {
    (*acc).lo = fma(x.lo, y.lo, (*acc).lo);
    if (EA > 1u) { (*acc).hi = fma(x.hi, y.hi, (*acc).hi); }
}

// Tap k2 of the position `pos` along the last axis into acc, if it reads an input.
fn dw_vec_tap(acc: ptr<function, Split4>, pos: u32, len2: u32, k2: u32, base: u32, cv: u32, wt: Split4) {
    if (pos < len2) {
        let q = dw_map(2u, pos, k2);
        if (q != NONE) { dw_fma(acc, split4(va(base + q * cv)), wt); }
    }
}

// dw_vec_tap where axis 2's read index is linear (q, NONE when outside 0..qn): the
// accumulators of positions past the axis are never stored.
fn dw_vec_lin(acc: ptr<function, Split4>, q: i32, qn: u32, base: u32, cv: u32, wt: Split4) {
    if (u32(q) < qn) { dw_fma(acc, split4(va(base + u32(q) * cv)), wt); }
}

// The weights as [T, C] vec4s of words (element e of word w of vec4 t * CV + j the
// weight of channel (4j + w) * EA + e at tap t), staged once per workgroup where
// they fit; the element bits of weight i (of [C, T]) from its word.
const DW_WT: u32 = 512u;
var<workgroup> dw_wt: array<vec4<u32>, DW_WT>;

fn dw_bits_b(i: u32) -> u32 {
    let bits = 32u >> LB;
    return (wb(i >> LB) >> ((i & ((1u << LB) - 1u)) * bits)) & (0xffffffffu >> (32u - bits));
}

// Stages the weights into dw_wt if their T x CV vec4s fit (uniform), and says so.
fn dw_stage(lid: u32, cv: u32) -> bool {
    let taps = P[3];
    let staged = taps * cv <= DW_WT;
    if (staged) {
        let bits = 32u >> LB;
        for (var u = lid; u < taps * cv * 4u; u += WG) {
            let t = u / (cv * 4u);
            let cw = u - t * cv * 4u;
            var word = 0u;
            for (var e = 0u; e < EA; e++) {
                word |= dw_bits_b(P[25] + (cw * EA + e) * taps + t) << (e * bits);
            }
            dw_wt[u >> 2u][u & 3u] = word;
        }
    }
    workgroupBarrier();
    return staged;
}

// The four words of output position `pos` (word index `at`), if it exists.
fn dw_vec_store(at: u32, pos: u32, len2: u32, acc: Split4) {
    if (pos >= len2) { return; }
    for (var w = 0u; w < 4u; w++) {
        var word = put(0u, 0u, st_o(CO(acc.lo[w])));
        if (EPO > 1u) { word = put(word, 1u, st_o(CO(acc.hi[w]))); }
        O[at + w] = word;
    }
}

// depthwise_rows over vec4s: a thread sums vec4 j of four consecutive positions along
// the last axis. Parameters as depthwise_rows' with CV (vec4s a row) for CW.
@compute @workgroup_size(WG)
fn depthwise_vec(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let own = select(1u, 0u, P[26] != 0u);
    let other = 1u - own;
    let cv = P[27];
    let sh = P[28];
    let nb = P[29];
    let total = P[30] << sh;
    let k1n = ax(1u, 2u);
    let k2n = ax(2u, 2u);
    let len2 = ax(2u, own);
    let staged = dw_stage(lid.x, cv);
    for (var i = thread_index(lid, wid, nwg); i < total; i += thread_count(nwg)) {
        let j = i & ((1u << sh) - 1u);
        if (j >= cv) { continue; }
        var r = i >> sh;
        let first = (r % nb) * 4u;
        r = r / nb;
        let p1 = r % ax(1u, own);
        r = r / ax(1u, own);
        let p0 = r % ax(0u, own);
        let batch = r / ax(0u, own);
        var a0 = Split4(vec4<f32>(0.0), vec4<f32>(0.0));
        var a1 = a0;
        var a2 = a0;
        var a3 = a0;
        // Weight rows of the vec4's channels: element e of word w at wrow[w] + e * T.
        let wrow = P[25] + 4u * j * EA * P[3];
        let wstep = EA * P[3];
        // Axis 2's read index is linear in position and tap where nothing divides
        // (forward without input dilation, transposed at stride 1): qb + p qs + k2 qk.
        let fwd = P[26] == 0u;
        let lin = select(ax(2u, 3u) == 1u, ax(2u, 5u) == 1u, fwd);
        let lo2 = bitcast<i32>(ax(2u, 6u));
        let qs = i32(select(ax(2u, 5u), ax(2u, 3u), fwd));
        let qk = select(-i32(ax(2u, 4u)), i32(ax(2u, 4u)), fwd);
        let qb = i32(first) * qs + select(lo2, -lo2, fwd);
        let qn = ax(2u, other);
        var t = 0u;
        for (var k0 = 0u; k0 < ax(0u, 2u); k0++) {
            let q0 = dw_map(0u, p0, k0);
            if (q0 == NONE) { t += k1n * k2n; continue; }
            for (var k1 = 0u; k1 < k1n; k1++) {
                let q1 = dw_map(1u, p1, k1);
                if (q1 == NONE) { t += k2n; continue; }
                let base = P[1] / (4u * EA) + ((batch * ax(0u, other) + q0) * ax(1u, other) + q1) * ax(2u, other) * cv + j;
                for (var k2 = 0u; k2 < k2n; k2++) {
                    var wt: Split4;
                    if (staged) {
                        wt = split4(dw_wt[t * cv + j]);
                    } else {
                        let w0 = wrow + t;
                        wt.lo = vec4<f32>(f32(ld_b(w0)), f32(ld_b(w0 + wstep)),
                                          f32(ld_b(w0 + 2u * wstep)), f32(ld_b(w0 + 3u * wstep)));
                        if (EA > 1u) {
                            let w1 = w0 + P[3];
                            wt.hi = vec4<f32>(f32(ld_b(w1)), f32(ld_b(w1 + wstep)),
                                              f32(ld_b(w1 + 2u * wstep)), f32(ld_b(w1 + 3u * wstep)));
                        }
                    }
                    if (lin) {
                        let q = qb + i32(k2) * qk;
                        dw_vec_lin(&a0, q, qn, base, cv, wt);
                        dw_vec_lin(&a1, q + qs, qn, base, cv, wt);
                        dw_vec_lin(&a2, q + 2 * qs, qn, base, cv, wt);
                        dw_vec_lin(&a3, q + 3 * qs, qn, base, cv, wt);
                    } else {
                        dw_vec_tap(&a0, first, len2, k2, base, cv, wt);
                        dw_vec_tap(&a1, first + 1u, len2, k2, base, cv, wt);
                        dw_vec_tap(&a2, first + 2u, len2, k2, base, cv, wt);
                        dw_vec_tap(&a3, first + 3u, len2, k2, base, cv, wt);
                    }
                    t++;
                }
            }
        }
        let row = ((batch * ax(0u, own) + p0) * ax(1u, own) + p1) * len2 + first;
        dw_vec_store(((row * cv) + j) * 4u, first, len2, a0);
        dw_vec_store(((row + 1u) * cv + j) * 4u, first + 1u, len2, a1);
        dw_vec_store(((row + 2u) * cv + j) * 4u, first + 2u, len2, a2);
        dw_vec_store(((row + 3u) * cv + j) * 4u, first + 3u, len2, a3);
    }
}

// depthwise_wgrad over vec4s: a thread per (chunk, tap, vec4 j of channels), the
// same parameters (SH for the vec4s). The output is f32: channel (4j + w) * EA + e.
@compute @workgroup_size(WG)
fn depthwise_wgrad_vec(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                       @builtin(num_workgroups) nwg: vec3<u32>) {
    let chunk = P[26];
    let sh = P[27];
    let total = (P[28] * P[3]) << sh;
    let cv = P[2] / (4u * EA);
    let positions = P[0] / P[2];
    let o0n = ax(0u, 1u);
    let o1n = ax(1u, 1u);
    let o2n = ax(2u, 1u);
    let x0 = P[1] / (4u * EA);
    let g0 = P[25] / (4u * EA);
    for (var i = thread_index(lid, wid, nwg); i < total; i += thread_count(nwg)) {
        let j = i & ((1u << sh) - 1u);
        if (j >= cv) { continue; }
        let st = i >> sh;
        let t = st % P[3];
        let s = st / P[3];
        let k2 = t % ax(2u, 2u);
        let k1 = (t / ax(2u, 2u)) % ax(1u, 2u);
        let k0 = t / (ax(2u, 2u) * ax(1u, 2u));
        let start = s * chunk;
        let end = min(start + chunk, positions);
        let first = ax_pos(start, 1u);
        var o0 = first.x;
        var o1 = first.y;
        var o2 = first.z;
        var batch = first.w;
        var acc = Split4(vec4<f32>(0.0), vec4<f32>(0.0));
        // A run of positions along the last axis at a time, where (without input
        // dilation) the read index steps by the stride.
        let in2 = ax(2u, 0u);
        let s2 = ax(2u, 3u);
        let lin = ax(2u, 5u) == 1u;
        var p = start;
        while (p < end) {
            let run = min(end - p, o2n - o2);
            let q0 = im2col_src(0u, o0, k0);
            let q1 = im2col_src(1u, o1, k1);
            if (q0 != NONE && q1 != NONE) {
                let row = x0 + ((batch * ax(0u, 0u) + q0) * ax(1u, 0u) + q1) * in2 * cv + j;
                let g = g0 + p * cv + j;
                if (lin) {
                    var q = i32(o2 * s2 + k2 * ax(2u, 4u)) - bitcast<i32>(ax(2u, 6u));
                    for (var e = 0u; e < run; e++) {
                        if (u32(q) < in2) {
                            dw_fma(&acc, split4(va(row + u32(q) * cv)), split4(vb(g + e * cv)));
                        }
                        q += i32(s2);
                    }
                } else {
                    for (var e = 0u; e < run; e++) {
                        let q2 = im2col_src(2u, o2 + e, k2);
                        if (q2 != NONE) {
                            dw_fma(&acc, split4(va(row + q2 * cv)), split4(vb(g + e * cv)));
                        }
                    }
                }
            }
            p += run;
            o2 = 0u;
            o1++;
            if (o1 == o1n) {
                o1 = 0u;
                o0++;
                if (o0 == o0n) { o0 = 0u; batch++; }
            }
        }
        let at = (s * P[3] + t) * P[2] + 4u * j * EA;
        for (var w = 0u; w < 4u; w++) {
            O[at + w * EA] = st_o(CO(acc.lo[w]));
            if (EA > 1u) { O[at + w * EA + 1u] = st_o(CO(acc.hi[w])); }
        }
    }
}
