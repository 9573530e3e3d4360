// ---- row operations over the last axis (op from NORM_OPS as NORM_OP): one
// workgroup per row. Parameters [len, rows, rank_rows, offset, stride,
// w_offset, w_stride, b_offset, b_stride, eps (2 words), row shape, row strides].
// A: x; B: weight; C: bias (A again where absent).

fn row_sum(v: f64, t: u32) -> f64 {
    SH[t] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (t < s) { SH[t] = SH[t] + SH[t + s]; }
        workgroupBarrier();
    }
    let r = SH[0];
    workgroupBarrier();
    return r;
}
fn row_max(v: f64, t: u32) -> f64 {
    SH[t] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (t < s) { SH[t] = max_d(SH[t], SH[t + s]); }
        workgroupBarrier();
    }
    let r = SH[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG)
fn norm(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = lid.x;
    let len = P[0];
    let st = P[4];
    let eps = from_bits(P[9], P[10]);
    for (var r = wid.x + wid.y * nwg.x; r < P[1]; r += nwg.x * nwg.y) {
        let base = loc(r, P[2], 11u, 11u + P[2], P[3]);
        let out = r * len;
        if (NORM_OP <= 1u) {
            var mx = -inf_d();
            for (var j = t; j < len; j += WG) { mx = max_d(mx, A[base + j * st]); }
            mx = row_max(mx, t);
            // A row of -inf: every exp is exp(nan); numpy gives nan too.
            var s = 0.0lf;
            for (var j = t; j < len; j += WG) { s += exp_d(A[base + j * st] - mx); }
            s = row_sum(s, t);
            if (NORM_OP == 0u) {
                let inv = 1.0lf / s;
                for (var j = t; j < len; j += WG) { O[out + j] = exp_d(A[base + j * st] - mx) * inv; }
            } else {
                let ls = log_d(s);
                for (var j = t; j < len; j += WG) { O[out + j] = (A[base + j * st] - mx) - ls; }
            }
        } else {
            var mean = 0.0lf;
            if (NORM_OP == 2u) {
                var s = 0.0lf;
                for (var j = t; j < len; j += WG) { s += A[base + j * st]; }
                mean = row_sum(s, t) / f64(len);
            }
            var q = 0.0lf;
            for (var j = t; j < len; j += WG) { let d = A[base + j * st] - mean; q = fma(d, d, q); }
            let inv = 1.0lf / sqrt(row_sum(q, t) / f64(len) + eps);
            for (var j = t; j < len; j += WG) {
                var y = (A[base + j * st] - mean) * inv;
                if (P[6] != 0xffffffffu) { y = y * B[P[5] + j * P[6]]; }
                if (P[8] != 0xffffffffu) { y = y + C[P[7] + j * P[8]]; }
                O[out + j] = y;
            }
        }
    }
}
