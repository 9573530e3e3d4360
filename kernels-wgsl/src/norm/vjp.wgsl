// The vjp of layer_norm and rms_norm over the last axis, one workgroup per row:
// the row's statistics as the forward computes them (norm.wgsl's NORM_OP 2:
// Welford; 3: the sum of squares), then the means of g = dy w and g xhat, then
//   dx = r (g - mean(g) - xhat mean(g xhat))      (layer_norm; r = 1 / std)
//   dx = r (g - xhat mean(g xhat))                (rms_norm; r = 1 / rms)
// into output 0 and, when asked, dy xhat (the weight's gradient before its sum
// over rows) into output 1. All in f32. A: x, B: the weight, C: dy.
//
// Parameters (u32 words; strides and offsets in elements, i32 bits, wrapping):
//  0 L, 1 rows, 2 batch rank R, 3 x_off, 4 x_sl, 5 w_off, 6 w_s, 7 dy_off,
//  8 dy_sl, 9 eps (f32 bits), 10 outputs (1 or 2), 11.. batch shape[R], x batch
//  strides[R], dy batch strides[R].
// The output is row-major [outputs, rows, L]; 16-bit outputs need an even L (the
// host checks), so no word is shared between rows.

// Element offset of row `row`'s first element in the view whose batch strides
// start at P[11 + k R] and whose offset is P[off].
fn vj_row(row: u32, k: u32, off: u32) -> u32 {
    let rank = P[2];
    var bi = row;
    var p = P[off];
    for (var d = rank; d > 0u; d--) {
        let s = P[10u + d];
        let q = bi / s;
        let c = bi - q * s;
        bi = q;
        p += c * P[10u + k * rank + d];
    }
    return p;
}

// The workgroup's sums of v (after nr_reduce: its reads of nr_a and nr_b end
// before the first barrier here).
fn vj_sum2(v: vec2<f32>, lid: u32) -> vec2<f32> {
    workgroupBarrier();
    nr_a[lid] = v.x;
    nr_b[lid] = v.y;
    workgroupBarrier();
    for (var s = WG >> 1u; s > 0u; s >>= 1u) {
        if (lid < s) {
            nr_a[lid] += nr_a[lid + s];
            nr_b[lid] += nr_b[lid + s];
        }
        workgroupBarrier();
    }
    return vec2<f32>(nr_a[0], nr_b[0]);
}

@compute @workgroup_size(WG)
fn norm_vjp_rows(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= P[1]) { return; }
    let l = P[0];
    let px = vj_row(row, 1u, 3u);
    let pd = vj_row(row, 2u, 7u);
    let sl = P[4];
    let sd = P[8];
    let eps = bitcast<f32>(P[9]);
    var st = nr_init();
    for (var j = lid; j < l; j += WG) {
        st = nr_acc(st, ld_a(px + j * sl));
    }
    let r = nr_reduce(st, lid, countTrailingZeros(WG));
    var mean = 0.0;
    var rs = 1.0 / sqrt(r.x / f32(l) + eps);
    if (NORM_OP == 2u) {
        mean = r.y;
        rs = 1.0 / sqrt(r.z / f32(l) + eps);
    }
    var s = vec2<f32>(0.0);
    for (var j = lid; j < l; j += WG) {
        let xh = (ld_a(px + j * sl) - mean) * rs;
        let g = ld_c(pd + j * sd) * ld_b(P[5] + j * P[6]);
        s += vec2<f32>(g, g * xh);
    }
    let m = vj_sum2(s, lid) / f32(l);
    let mg = select(0.0, m.x, NORM_OP == 2u);
    // Outputs a word (one f32 or two 16-bit elements) at a time.
    let epw = 1u << LO;
    let o0 = row * l / epw;
    let o1 = (P[1] + row) * l / epw;
    for (var w = lid; w * epw < l; w += WG) {
        var dx = vec2<f32>(0.0);
        var t = vec2<f32>(0.0);
        for (var e = 0u; e < epw; e++) {
            let j = w * epw + e;
            if (j < l) {
                let xh = (ld_a(px + j * sl) - mean) * rs;
                let dy = ld_c(pd + j * sd);
                let g = dy * ld_b(P[5] + j * P[6]);
                dx[e] = rs * (g - mg - xh * m.y);
                t[e] = dy * xh;
            }
        }
        if (LO == 1u) {
            O[o0 + w] = st2_o(dx);
            if (P[10] == 2u) { O[o1 + w] = st2_o(t); }
        } else {
            O[o0 + w] = st_o(dx.x);
            if (P[10] == 2u) { O[o1 + w] = st_o(t.x); }
        }
    }
}
