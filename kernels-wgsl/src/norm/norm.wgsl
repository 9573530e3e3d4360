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
//  6 w_s, 7 b_off, 8 b_s, 9 eps (f32 bits), 10 log2 of the invocations per row
//  (norm_rows_v: WG / 2^P[10] rows per workgroup), 11.. batch shape[R], x batch
//  strides[R].
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

// Merges the states of each run of 2^tl invocations (a row's); every invocation
// gets its row's.
fn nr_reduce(st: vec3<f32>, lid: u32, tl: u32) -> vec3<f32> {
    nr_a[lid] = st.x;
    nr_b[lid] = st.y;
    nr_c[lid] = st.z;
    workgroupBarrier();
    let t = lid & ((1u << tl) - 1u);
    for (var s = (1u << tl) >> 1u; s > 0u; s >>= 1u) {
        if (t < s) {
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
    let b0 = lid - t;
    return vec3<f32>(nr_a[b0], nr_b[b0], nr_c[b0]);
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
        let s = P[10u + d];
        let q = bi / s;
        let c = bi - q * s;
        bi = q;
        px += c * P[10u + rank + d];
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
    let r = nr_consts(nr_reduce(st, lid, countTrailingZeros(WG)), l);
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
            nr_store((ob >> 1u) + w, st2_o(y));
        } else {
            nr_store(ob + w, st_o(y.x));
        }
    }
}

// The elements of a vec4 of words (4 f32, or 8 f16/bf16 of which the first 4 are
// in [0] and the next in [1]).
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

// Stores the outputs of one vec4 of x's words (its first four elements in ya, the
// next four, for 16-bit x, in yb), starting at element e of the output (a multiple
// of a vec4 of its words).
fn nr_emit(e: u32, ya: vec4<f32>, yb: vec4<f32>) {
    if (LO == 1u) {
        nr_store4(e >> 3u, vec4<u32>(st2_o(ya.xy), st2_o(ya.zw), st2_o(yb.xy), st2_o(yb.zw)));
    } else {
        nr_store4(e >> 2u, vec4<u32>(st_o(ya.x), st_o(ya.y), st_o(ya.z), st_o(ya.w)));
        if (LA == 1u) {
            nr_store4((e >> 2u) + 1u, vec4<u32>(st_o(yb.x), st_o(yb.y), st_o(yb.z), st_o(yb.w)));
        }
    }
}

var<workgroup> nr_s: array<f32, 512>;

// Sum over each run of 2^tl invocations (a row), through nr_s[base ..] (two bases
// so that consecutive sums need no barrier between them).
fn nr_sum(v: f32, lid: u32, tl: u32, base: u32) -> f32 {
    nr_s[base + lid] = v;
    workgroupBarrier();
    let t = lid & ((1u << tl) - 1u);
    for (var s = (1u << tl) >> 1u; s > 0u; s >>= 1u) {
        if (t < s) { nr_s[base + lid] += nr_s[base + lid + s]; }
        workgroupBarrier();
    }
    return nr_s[base + lid - t];
}

// The row kernels below hold a row in registers: up to four vec4 loads of words
// per invocation, in named variables and handled by one call each (no arrays
// indexed in loops, which compilers may place in memory).

fn nr_sum4(v: vec4<f32>) -> f32 {
    return (v.x + v.y) + (v.z + v.w);
}

fn nr_max4(m: f32, v: vec4<f32>) -> f32 {
    return nr_max(nr_max(nr_max(m, v.x), nr_max(v.y, v.z)), v.w);
}

// The largest element of vec4 w (m if `ok` is false).
fn nr_wmax(m: f32, w: vec4<u32>, ok: bool) -> f32 {
    if (!ok) { return m; }
    let x = nr_unpack(w);
    var r = nr_max4(m, x[0]);
    if (LA == 1u) { r = nr_max4(r, x[1]); }
    return r;
}

fn nr_exp4(v: vec4<f32>, m: f32) -> vec4<f32> {
    return vec4<f32>(nr_exp(v.x, m), nr_exp(v.y, m), nr_exp(v.z, m), nr_exp(v.w, m));
}

// exp(x - m) of vec4 w's elements (zeros if `ok` is false or m is -inf: nothing
// but -inf entries).
fn nr_wexp(w: vec4<u32>, ok: bool, m: f32) -> array<vec4<f32>, 2> {
    var e: array<vec4<f32>, 2>;
    if (!ok || (isinf_f(m) && m < 0.0)) { return e; }
    let x = nr_unpack(w);
    e[0] = nr_exp4(x[0], m);
    if (LA == 1u) { e[1] = nr_exp4(x[1], m); }
    return e;
}

// Sum of (x - c) (p = 1) or (x - c)^2 (p = 2) over vec4 w's elements.
fn nr_wsum(w: vec4<u32>, ok: bool, c: f32, p: u32) -> f32 {
    if (!ok) { return 0.0; }
    let x = nr_unpack(w);
    let a = x[0] - c;
    let b = x[1] - c;
    if (p == 1u) { return nr_sum4(a) + select(0.0, nr_sum4(b), LA == 1u); }
    return nr_sum4(a * a) + select(0.0, nr_sum4(b * b), LA == 1u);
}

// A per-column parameter (at element offset `off`, stride `st`) of columns j .. j + 3.
fn nr_p4(off: u32, st: u32, j: u32, bias: bool) -> vec4<f32> {
    if (bias) {
        return vec4<f32>(ld_b2(off + j * st), ld_b2(off + (j + 1u) * st),
                         ld_b2(off + (j + 2u) * st), ld_b2(off + (j + 3u) * st));
    }
    return vec4<f32>(ld_w(off + j * st), ld_w(off + (j + 1u) * st),
                     ld_w(off + (j + 2u) * st), ld_w(off + (j + 3u) * st));
}

// Weight (bias with `bias`) of the columns of vec4 q of a row: one load where it is
// contiguous and aligned like x's rows, else one per element.
fn nr_param(q: u32, bias: bool) -> array<vec4<f32>, 2> {
    let sh = LA + 2u;
    let off = select(P[5], P[7], bias);
    let st = select(P[6], P[8], bias);
    if (st == 1u && (off & ((1u << sh) - 1u)) == 0u) {
        if (bias) { return nr_unpack(vb2((off >> sh) + q)); }
        return nr_unpack(vw((off >> sh) + q));
    }
    var r: array<vec4<f32>, 2>;
    if (st == 0u) {
        // A broadcast (absent weight or bias): one value for the whole row.
        let v = vec4<f32>(select(ld_w(off), ld_b2(off), bias));
        r[0] = v;
        r[1] = v;
        return r;
    }
    let j = q << sh;
    r[0] = nr_p4(off, st, j, bias);
    if (LA == 1u) { r[1] = nr_p4(off, st, j + 4u, bias); }
    return r;
}

// Pass 2 of log_softmax, layer_norm and rms_norm for vec4 q of the row (words w),
// given the row's constants k; the output row starts at element ob.
fn nr_wout(w: vec4<u32>, ok: bool, q: u32, ob: u32, k: vec2<f32>) {
    if (!ok) { return; }
    let x = nr_unpack(w);
    var ya: vec4<f32>;
    var yb: vec4<f32>;
    if (NORM_OP == 1u) {
        ya = (x[0] - k.x) - k.y;
        yb = (x[1] - k.x) - k.y;
    } else {
        let wt = nr_param(q, false);
        if (NORM_OP == 2u) {
            let bs = nr_param(q, true);
            ya = fma((x[0] - k.x) * k.y, wt[0], bs[0]);
            yb = fma((x[1] - k.x) * k.y, wt[1], bs[1]);
        } else {
            ya = x[0] * k.x * wt[0];
            yb = x[1] * k.x * wt[1];
        }
    }
    nr_emit(ob + (q << (LA + 2u)), ya, yb);
}

// A row's share of one invocation: up to four vec4 loads of words, the vec4
// indices q (within the row) and which of them are in it.
struct NrRow { w0: vec4<u32>, w1: vec4<u32>, w2: vec4<u32>, w3: vec4<u32>, q: vec4<u32>, ok: vec4<bool> }

// Loads invocation lid's share of its row (2^tl invocations a row, the row's nq
// vec4s from q0; `live`: the row exists).
fn nr_load(lid: u32, tl: u32, live: bool, q0: u32, nq: u32) -> NrRow {
    let t = lid & ((1u << tl) - 1u);
    let q = vec4<u32>(t, t + (1u << tl), t + (2u << tl), t + (3u << tl));
    let ok = vec4<bool>(live && q.x < nq, live && q.y < nq, live && q.z < nq, live && q.w < nq);
    var r = NrRow(vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u), vec4<u32>(0u), q, ok);
    if (ok.x) { r.w0 = va(q0 + q.x); }
    if (ok.y) { r.w1 = va(q0 + q.y); }
    if (ok.z) { r.w2 = va(q0 + q.z); }
    if (ok.w) { r.w3 = va(q0 + q.w); }
    return r;
}

// nr_wsum over the share.
fn nr_rsum(r: NrRow, c: f32, p: u32) -> f32 {
    return (nr_wsum(r.w0, r.ok.x, c, p) + nr_wsum(r.w1, r.ok.y, c, p))
        + (nr_wsum(r.w2, r.ok.z, c, p) + nr_wsum(r.w3, r.ok.w, c, p));
}

// The largest element of the share.
fn nr_rmax(r: NrRow) -> f32 {
    return nr_wmax(nr_wmax(nr_wmax(nr_wmax(-inf_f(), r.w0, r.ok.x), r.w1, r.ok.y), r.w2, r.ok.z), r.w3, r.ok.w);
}

fn nr_esum(e: array<vec4<f32>, 2>) -> f32 {
    return nr_sum4(e[0]) + nr_sum4(e[1]);
}

// softmax with one exp per element: each invocation's exp(x - its own max), scaled
// by exp(own max - row max) / sum. Matches exp(x - max) / sum, NaN cases included
// (+inf entries, all -inf rows).
fn nr_softmax(lid: u32, tl: u32, live: bool, row: u32, q0: u32, nq: u32, l: u32) {
    let r = nr_load(lid, tl, live, q0, nq);
    let mt = nr_rmax(r);
    let e0 = nr_wexp(r.w0, r.ok.x, mt);
    let e1 = nr_wexp(r.w1, r.ok.y, mt);
    let e2 = nr_wexp(r.w2, r.ok.z, mt);
    let e3 = nr_wexp(r.w3, r.ok.w, mt);
    let st = (nr_esum(e0) + nr_esum(e1)) + (nr_esum(e2) + nr_esum(e3));
    let m = nr_reduce(vec3<f32>(mt, st, 0.0), lid, tl);
    let scale = nr_exp(mt, m.x) / m.y;
    let ob = row * l;
    let sh = LA + 2u;
    if (r.ok.x) { nr_emit(ob + (r.q.x << sh), e0[0] * scale, e0[1] * scale); }
    if (r.ok.y) { nr_emit(ob + (r.q.y << sh), e1[0] * scale, e1[1] * scale); }
    if (r.ok.z) { nr_emit(ob + (r.q.z << sh), e2[0] * scale, e2[1] * scale); }
    if (r.ok.w) { nr_emit(ob + (r.q.w << sh), e3[0] * scale, e3[1] * scale); }
}

// log_softmax, layer_norm and rms_norm of a row in registers. layer_norm is
// two-pass, shifted by the row's first element so that constant rows have
// exactly zero variance.
fn nr_rows(lid: u32, tl: u32, live: bool, row: u32, q0: u32, nq: u32, l: u32) {
    let r = nr_load(lid, tl, live, q0, nq);
    let fl = f32(l);
    let eps = bitcast<f32>(P[9]);
    var k = vec2<f32>(0.0);
    if (NORM_OP == 1u) {
        let mt = nr_rmax(r);
        let st = (nr_esum(nr_wexp(r.w0, r.ok.x, mt)) + nr_esum(nr_wexp(r.w1, r.ok.y, mt)))
            + (nr_esum(nr_wexp(r.w2, r.ok.z, mt)) + nr_esum(nr_wexp(r.w3, r.ok.w, mt)));
        let m = nr_reduce(vec3<f32>(mt, st, 0.0), lid, tl);
        k = vec2<f32>(m.x, log_f32(m.y));
    } else if (NORM_OP == 2u) {
        var shift = 0.0;
        if (live) { shift = nr_unpack(va(q0))[0].x; }
        let mean = shift + nr_sum(nr_rsum(r, shift, 1u), lid, tl, 0u) / fl;
        k = vec2<f32>(mean, 1.0 / sqrt(nr_sum(nr_rsum(r, mean, 2u), lid, tl, 256u) / fl + eps));
    } else {
        k = vec2<f32>(1.0 / sqrt(nr_sum(nr_rsum(r, 0.0, 2u), lid, tl, 0u) / fl + eps), 0.0);
    }
    let ob = row * l;
    nr_wout(r.w0, r.ok.x, r.q.x, ob, k);
    nr_wout(r.w1, r.ok.y, r.q.y, ob, k);
    nr_wout(r.w2, r.ok.z, r.q.z, ob, k);
    nr_wout(r.w3, r.ok.w, r.q.w, ob, k);
}

// As norm_rows for contiguous rows whose start and length are multiples of a vec4
// of words (the host checks): one 16-byte load per 4 or 8 elements.
@compute @workgroup_size(WG)
fn norm_rows_v(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let l = P[0];
    let sh = LA + 2u;
    let nq = l >> sh;
    let per = 1u << sh;
    // Rows that fit in registers: 2^tl invocations each (the host picks the fewest
    // that hold a row in four vec4 loads each), the rest of the workgroup on others.
    let tl = P[10];
    if (nq <= (4u << tl)) {
        let row = (wid.x + wid.y * nwg.x) * (WG >> tl) + (lid >> tl);
        let live = row < P[1];
        let q0 = select(0u, nr_row(row) >> sh, live);
        if (NORM_OP == 0u) {
            nr_softmax(lid, tl, live, row, q0, nq, l);
        } else {
            nr_rows(lid, tl, live, row, q0, nq, l);
        }
        return;
    }
    let row = wid.x + wid.y * nwg.x;
    if (row >= P[1]) { return; }
    let q0 = nr_row(row) >> sh;
    var st = nr_init();
    for (var q = lid; q < nq; q += WG) {
        let v = nr_unpack(va(q0 + q));
        for (var h = 0u; h < (per + 3u) / 4u; h++) {
            for (var i = 0u; i < 4u; i++) { st = nr_acc(st, v[h][i]); }
        }
    }
    let r = nr_consts(nr_reduce(st, lid, countTrailingZeros(WG)), l);
    let ob = row * l;
    for (var q = lid; q < nq; q += WG) {
        let v = nr_unpack(va(q0 + q));
        let j0 = q * per;
        var y: array<vec4<f32>, 2>;
        for (var h = 0u; h < (per + 3u) / 4u; h++) {
            for (var i = 0u; i < 4u; i++) { y[h][i] = nr_out(v[h][i], j0 + h * 4u + i, r); }
        }
        nr_emit(ob + j0, y[0], y[1]);
    }
}
