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

@compute @workgroup_size(WG)
fn norm_rows(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= P[1]) { return; }
    let l = P[0];
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
    let sl = P[4];
    // Pass 1: per-invocation partials, then a tree merge in workgroup memory.
    var a = 0.0;
    var bsum = 0.0;
    var c = 0.0;
    if (NORM_OP <= 1u) {
        a = -inf_f();
        for (var j = lid; j < l; j += WG) {
            let v = ld_a(px + j * sl);
            // exp(v - max) is 0 for -inf (the max is then larger, or the row is
            // all -inf and pass 2 makes NaN) and NaN for +inf.
            if (isinf_f(v) && v < 0.0) { continue; }
            let r = nr_merge_sm(a, bsum, v, select(1.0, nan_f(), isinf_f(v)));
            a = r.x;
            bsum = r.y;
        }
    } else if (NORM_OP == 2u) {
        for (var j = lid; j < l; j += WG) {
            let v = ld_a(px + j * sl);
            a += 1.0;
            let d = v - bsum;
            bsum += d / a;
            c += d * (v - bsum);
        }
    } else {
        for (var j = lid; j < l; j += WG) {
            let v = ld_a(px + j * sl);
            a = fma(v, v, a);
        }
    }
    nr_a[lid] = a;
    nr_b[lid] = bsum;
    nr_c[lid] = c;
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
    let ra = nr_a[0];
    let rb = nr_b[0];
    let rc = nr_c[0];
    let eps = bitcast<f32>(P[9]);
    let lf = f32(l);
    // Pass 2: write the row (16-bit outputs a word, two elements, at a time).
    let ob = row * l;
    let epw = 1u << LO;
    for (var w = lid; w * epw < l; w += WG) {
        var r = vec2<f32>(0.0);
        for (var e = 0u; e < epw; e++) {
            let j = w * epw + e;
            if (j < l) {
                let v = ld_a(px + j * sl);
                var y = 0.0;
                if (NORM_OP == 0u) {
                    y = nr_exp(v, ra) / rb;
                } else if (NORM_OP == 1u) {
                    y = (v - ra) - log_f32(rb);
                } else if (NORM_OP == 2u) {
                    let inv = 1.0 / sqrt(rc / lf + eps);
                    y = fma((v - rb) * inv, ld_w(P[5] + j * P[6]), ld_b2(P[7] + j * P[8]));
                } else {
                    let inv = 1.0 / sqrt(ra / lf + eps);
                    y = v * inv * ld_w(P[5] + j * P[6]);
                }
                r[e] = y;
            }
        }
        if (LO == 1u) {
            O[(ob >> 1u) + w] = st2_o(r);
        } else {
            O[ob + w] = st_o(r.x);
        }
    }
}
