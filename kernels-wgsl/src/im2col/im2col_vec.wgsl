// im2col and col2im over vec4s of words (the `_vec` ops): every channel row whole
// vec4s (C a multiple of 4 words, the input's offset 16-byte aligned), read and
// written a vec4 at a time. Parameters as im2col.wgsl's, with CV (vec4s a row) for
// CW and, for im2col, output positions (not column rows) at 27.

// im2col: 2^SH lanes to an output position, each copying every 2^SH-th vec4 of each
// of its T column rows (the position decoded once for all its taps).
@compute @workgroup_size(WG)
fn im2col_vec(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let cv = P[25];
    let sh = P[26];
    let lanes = 1u << sh;
    let total = P[27] << sh;
    let x0 = P[1] / (4u << LA);
    let fill = vec4<u32>(P[28]);
    let k1n = ax(1u, 2u);
    let k2n = ax(2u, 2u);
    for (var i = thread_index(lid, wid, nwg); i < total; i += thread_count(nwg)) {
        let pos = i >> sh;
        let o = ax_pos(pos, 1u);
        var at = pos * P[3] * cv;
        for (var k0 = 0u; k0 < ax(0u, 2u); k0++) {
            let q0 = im2col_src(0u, o.x, k0);
            for (var k1 = 0u; k1 < k1n; k1++) {
                let q1 = im2col_src(1u, o.y, k1);
                let line = ((o.w * ax(0u, 0u) + q0) * ax(1u, 0u) + q1) * ax(2u, 0u);
                for (var k2 = 0u; k2 < k2n; k2++) {
                    let q2 = im2col_src(2u, o.z, k2);
                    let ok = q0 != NONE && q1 != NONE && q2 != NONE;
                    let src = x0 + (line + q2) * cv;
                    for (var j = i & (lanes - 1u); j < cv; j += lanes) {
                        var v = fill;
                        if (ok) { v = va(src + j); }
                        O[at + j] = v;
                    }
                    at += cv;
                }
            }
        }
    }
}

// col2im: a thread per vec4 j of an input row, summing in f32 the columns' vec4s at
// j of every (position, tap) that reads the row. Element e of word w is channel
// (4j + w) * EPW + e.
const EPW: u32 = 1u << LA;

fn c2_add(acc: ptr<function, array<vec4<f32>, 2>>, v: vec4<u32>) {
    let e = split4(v);
    (*acc)[0] += e.lo;
    if (EPW > 1u) { (*acc)[1] += e.hi; }
}

fn c2_word(acc: array<vec4<f32>, 2>, w: u32) -> u32 {
    if (EPW == 1u) { return st_o(CO(acc[0][w])); }
    return (st_o(CO(acc[0][w])) & 0xffffu) | (st_o(CO(acc[1][w])) << 16u);
}

@compute @workgroup_size(WG)
fn col2im_vec(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let cv = P[25];
    let sh = P[26];
    let total = P[27] << sh;
    let x0 = P[1] / (4u << LA);
    let k1n = ax(1u, 2u);
    let k2n = ax(2u, 2u);
    for (var i = thread_index(lid, wid, nwg); i < total; i += thread_count(nwg)) {
        let j = i & ((1u << sh) - 1u);
        if (j >= cv) { continue; }
        let row = i >> sh;
        let s = ax_pos(row, 0u);
        var acc: array<vec4<f32>, 2>;
        var t = 0u;
        for (var k0 = 0u; k0 < ax(0u, 2u); k0++) {
            let o0 = col2im_pos(0u, s.x, k0);
            if (o0 == NONE) { t += k1n * k2n; continue; }
            for (var k1 = 0u; k1 < k1n; k1++) {
                let o1 = col2im_pos(1u, s.y, k1);
                if (o1 == NONE) { t += k2n; continue; }
                let line = ((s.w * ax(0u, 1u) + o0) * ax(1u, 1u) + o1) * ax(2u, 1u);
                for (var k2 = 0u; k2 < k2n; k2++) {
                    let o2 = col2im_pos(2u, s.z, k2);
                    if (o2 != NONE) { c2_add(&acc, va(x0 + ((line + o2) * P[3] + t) * cv + j)); }
                    t++;
                }
            }
        }
        O[row * cv + j] = vec4<u32>(c2_word(acc, 0u), c2_word(acc, 1u), c2_word(acc, 2u), c2_word(acc, 3u));
    }
}
