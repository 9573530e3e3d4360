// Row operations over the last axis: softmax, log_softmax, layer_norm, rms_norm.
// One workgroup per row. Pass 1 reads the row once and reduces it (softmax: the
// running max and the sum of exp(x - max), merged; layer_norm: Welford count, mean
// and M2, merged with Chan's formula, so constant rows have exactly zero variance;
// rms_norm: the sum of squares); pass 2 reads it again (from cache for rows that
// fit) and writes the result. All in f32; the prelude sets NORM_OP (0 softmax,
// 1 log_softmax, 2 layer_norm, 3 rms_norm) and ld_a (x), ld_w, ld_b2 (weight, bias).
//
// Parameters (u32 words; strides and offsets in elements, i32 bits, wrapping):
//  0 L, 1 rows, 2 batch rank R, 3 x_off, 4 x_sl (stride along the row), 5 w_off,
//  6 w_s, 7 b_off, 8 b_s, 9 eps (f32 bits), 10.. batch shape[R], x batch strides[R].
// The output is row-major [rows, L]; 16-bit outputs need an even L (the host
// checks), so no word is shared between rows.

var<workgroup> nr_a: array<f32, 256>;
var<workgroup> nr_b: array<f32, 256>;
var<workgroup> nr_c: array<f32, 256>;

// exp(x - m), the textbook formula: a +inf entry or an all -inf row makes NaN, as
// in numpy and PyTorch.
fn nr_exp(x: f32, m: f32) -> f32 {
    return exp_acc(x - m);
}

fn nr_max(a: f32, b: f32) -> f32 {
    if (isnan_f(a) || isnan_f(b)) { return nan_f(); }
    return max(a, b);
}

// Merges (m1, s1) into (m2, s2): the sums rescaled to the larger max.
fn nr_merge_sm(m1: f32, s1: f32, m2: f32, s2: f32) -> vec2<f32> {
    let m = nr_max(m1, m2);
    var t1 = s1;
    var t2 = s2;
    if (m1 != m) { t1 = s1 * nr_exp(m1, m); }
    if (m2 != m) { t2 = s2 * nr_exp(m2, m); }
    return vec2<f32>(m, t1 + t2);
}

// Chan's merge of (n, mean, M2) triples.
fn nr_merge_w(a: vec3<f32>, b: vec3<f32>) -> vec3<f32> {
    let n = a.x + b.x;
    if (n == 0.0) { return a; }
    let d = b.y - a.y;
    let f = b.x / n;
    return vec3<f32>(n, a.y + d * f, a.z + b.z + d * d * a.x * f);
}

// One element into an invocation's partial state: softmax (max, sum of exp),
// layer_norm (count, mean, M2), rms_norm (sum of squares, -, -).
fn nr_acc(st: vec3<f32>, v: f32) -> vec3<f32> {
    if (NORM_OP <= 1u) {
        // exp(v - max) is 0 for -inf (the max is then larger, or the row is all
        // -inf and pass 2 makes NaN) and NaN for +inf.
        if (isinf_f(v) && v < 0.0) { return st; }
        let r = nr_merge_sm(st.x, st.y, v, select(1.0, nan_f(), isinf_f(v)));
        return vec3<f32>(r, 0.0);
    } else if (NORM_OP == 2u) {
        let n = st.x + 1.0;
        let d = v - st.y;
        let mean = st.y + d / n;
        return vec3<f32>(n, mean, st.z + d * (v - mean));
    }
    return vec3<f32>(fma(v, v, st.x), 0.0, 0.0);
}

fn nr_init() -> vec3<f32> {
    if (NORM_OP <= 1u) { return vec3<f32>(-inf_f(), 0.0, 0.0); }
    return vec3<f32>(0.0);
}

// Merges the invocations' states; every invocation gets the row's.
fn nr_reduce(st: vec3<f32>, lid: u32) -> vec3<f32> {
    nr_a[lid] = st.x;
    nr_b[lid] = st.y;
    nr_c[lid] = st.z;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            if (NORM_OP <= 1u) {
                let r = nr_merge_sm(nr_a[lid], nr_b[lid], nr_a[lid + s], nr_b[lid + s]);
                nr_a[lid] = r.x;
                nr_b[lid] = r.y;
            } else if (NORM_OP == 2u) {
                let r = nr_merge_w(vec3<f32>(nr_a[lid], nr_b[lid], nr_c[lid]),
                                   vec3<f32>(nr_a[lid + s], nr_b[lid + s], nr_c[lid + s]));
                nr_a[lid] = r.x;
                nr_b[lid] = r.y;
                nr_c[lid] = r.z;
            } else {
                nr_a[lid] += nr_a[lid + s];
            }
        }
        workgroupBarrier();
    }
    return vec3<f32>(nr_a[0], nr_b[0], nr_c[0]);
}

// Per-row constants of pass 2 from the row's state r, computed once: softmax
// (max, 1 / sum), log_softmax (max, log sum), layer_norm (mean, 1 / std),
// rms_norm (1 / rms).
fn nr_consts(r: vec3<f32>, l: u32) -> vec2<f32> {
    let eps = bitcast<f32>(P[9]);
    if (NORM_OP == 0u) {
        return vec2<f32>(r.x, 1.0 / r.y);
    } else if (NORM_OP == 1u) {
        return vec2<f32>(r.x, log_f32(r.y));
    } else if (NORM_OP == 2u) {
        return vec2<f32>(r.y, 1.0 / sqrt(r.z / f32(l) + eps));
    }
    return vec2<f32>(1.0 / sqrt(r.x / f32(l) + eps), 0.0);
}

// The output at column j for input v, given the row's constants c.
fn nr_out(v: f32, j: u32, c: vec2<f32>) -> f32 {
    if (NORM_OP == 0u) {
        return nr_exp(v, c.x) * c.y;
    } else if (NORM_OP == 1u) {
        return (v - c.x) - c.y;
    } else if (NORM_OP == 2u) {
        return fma((v - c.x) * c.y, ld_w(P[5] + j * P[6]), ld_b2(P[7] + j * P[8]));
    }
    return v * c.x * ld_w(P[5] + j * P[6]);
}

// Element offset of row `row`'s first element.
fn nr_row(row: u32) -> u32 {
    let rank = P[2];
    var bi = row;
    var px = P[3];
    for (var d = rank; d > 0u; d--) {
        let s = P[9u + d];
        let q = bi / s;
        let c = bi - q * s;
        bi = q;
        px += c * P[9u + rank + d];
    }
    return px;
}

@compute @workgroup_size(WG)
fn norm_rows(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= P[1]) { return; }
    let l = P[0];
    let px = nr_row(row);
    let sl = P[4];
    var st = nr_init();
    for (var j = lid; j < l; j += WG) {
        st = nr_acc(st, ld_a(px + j * sl));
    }
    let r = nr_consts(nr_reduce(st, lid), l);
    // Pass 2: write the row (16-bit outputs a word, two elements, at a time).
    let ob = row * l;
    let epw = 1u << LO;
    for (var w = lid; w * epw < l; w += WG) {
        var y = vec2<f32>(0.0);
        for (var e = 0u; e < epw; e++) {
            let j = w * epw + e;
            if (j < l) { y[e] = nr_out(ld_a(px + j * sl), j, r); }
        }
        if (LO == 1u) {
            O[(ob >> 1u) + w] = st2_o(y);
        } else {
            O[ob + w] = st_o(y.x);
        }
    }
}

// The elements of a vec4 of words (4 f32, or 8 f16/bf16 of which the first 4 are
// in `lo` and the next in `hi`).
fn nr_unpack(q: vec4<u32>) -> array<vec4<f32>, 2> {
    if (LA == 1u) {
        let a = x2a(q.x);
        let b = x2a(q.y);
        let c = x2a(q.z);
        let d = x2a(q.w);
        return array<vec4<f32>, 2>(vec4<f32>(a, b), vec4<f32>(c, d));
    }
    return array<vec4<f32>, 2>(
        vec4<f32>(xa(q.x, 0u), xa(q.y, 0u), xa(q.z, 0u), xa(q.w, 0u)), vec4<f32>(0.0));
}

// Softmax of a row held in registers (at most four vec4 loads per invocation): each
// invocation takes exp(x - its own max) once per element, the row's max and sum come
// from merging those partials, and each output is that exp times
// exp(own max - row max) / sum: one exp per element instead of two, one read.
// Matches exp(x - max) / sum, NaN cases included (+inf entries, all -inf rows).
fn softmax_cached(lid: u32, row: u32, q0: u32, nq: u32, per: u32, l: u32) {
    var cache: array<array<vec4<f32>, 2>, 4>;
    var mt = -inf_f();
    var cnt = 0u;
    for (var q = lid; q < nq; q += WG) {
        let v = nr_unpack(va(q0 + q));
        cache[cnt] = v;
        for (var h = 0u; h < (per + 3u) / 4u; h++) {
            for (var i = 0u; i < 4u; i++) { mt = nr_max(mt, v[h][i]); }
        }
        cnt++;
    }
    var st = 0.0;
    let empty = isinf_f(mt) && mt < 0.0;
    for (var c = 0u; c < cnt; c++) {
        for (var h = 0u; h < (per + 3u) / 4u; h++) {
            var e = vec4<f32>(0.0);
            if (!empty) {
                for (var i = 0u; i < 4u; i++) { e[i] = nr_exp(cache[c][h][i], mt); }
            }
            cache[c][h] = e;
            st += (e.x + e.y) + (e.z + e.w);
        }
    }
    let r = nr_reduce(vec3<f32>(mt, st, 0.0), lid);
    let scale = nr_exp(mt, r.x) / r.y;
    let ob = row * l;
    var c = 0u;
    for (var q = lid; q < nq; q += WG) {
        let j0 = q * per;
        for (var h = 0u; h < (per + 3u) / 4u; h++) {
            let y = cache[c][h] * scale;
            if (LO == 1u) {
                let w = ((ob + j0) >> 1u) + h * 2u;
                O[w] = st2_o(y.xy);
                O[w + 1u] = st2_o(y.zw);
            } else {
                for (var i = 0u; i < 4u; i++) { O[ob + j0 + i] = st_o(y[i]); }
            }
        }
        c++;
    }
}

// As norm_rows for contiguous rows whose start and length are multiples of a vec4
// of words (the host checks): one 16-byte load per 4 or 8 elements.
@compute @workgroup_size(WG)
fn norm_rows_v(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= P[1]) { return; }
    let l = P[0];
    let sh = LA + 2u;
    let q0 = nr_row(row) >> sh;
    let nq = l >> sh;
    let per = 1u << sh;
    if (NORM_OP == 0u && nq <= 4u * WG) {
        softmax_cached(lid, row, q0, nq, per, l);
        return;
    }
    var st = nr_init();
    for (var q = lid; q < nq; q += WG) {
        let v = nr_unpack(va(q0 + q));
        for (var h = 0u; h < (per + 3u) / 4u; h++) {
            for (var i = 0u; i < 4u; i++) { st = nr_acc(st, v[h][i]); }
        }
    }
    let r = nr_consts(nr_reduce(st, lid), l);
    let ob = row * l;
    for (var q = lid; q < nq; q += WG) {
        let v = nr_unpack(va(q0 + q));
        let j0 = q * per;
        for (var h = 0u; h < (per + 3u) / 4u; h++) {
            var y = vec4<f32>(0.0);
            for (var i = 0u; i < 4u; i++) { y[i] = nr_out(v[h][i], j0 + h * 4u + i, r); }
            if (LO == 1u) {
                let w = ((ob + j0) >> 1u) + h * 2u;
                O[w] = st2_o(y.xy);
                O[w + 1u] = st2_o(y.zw);
            } else {
                for (var i = 0u; i < 4u; i++) { O[ob + j0 + i] = st_o(y[i]); }
            }
        }
    }
}
