// Batched factorisations of f32 or f64 matrices (the scalar R, with og, os,
// nan_r and the block side BS from scalar32.wgsl or wide.wgsl), one workgroup per
// matrix: the blocks (n <= BS) in workgroup memory, the diagonal blocks of core's blocked Cholesky,
// triangular solves and LU; LU of tall panels and Householder QR in the output
// buffer itself (global memory).
//
// Parameters: [count, n, a0, m]: `count` row-major m×n matrices from element a0
// of input a (the blocks are square: m = n); the output holds `count` results,
// each its block's shape (LinalgBlock::out_shape).

// One invocation per column of the largest f32 block.
const NT: u32 = 64u;

// The lower triangle, row i from element i (i + 1) / 2.
var<workgroup> S: array<R, BS * (BS + 1u) / 2u>;
// LU's whole matrix, row-major.
var<workgroup> F: array<R, BS * BS>;

fn tri(i: u32, j: u32) -> u32 { return i * (i + 1u) / 2u + j; }

fn block_load(t: u32, lid: u32) {
    let n = P[1];
    let base = P[2] + t * n * n;
    for (var e = lid; e < n * n; e += NT) {
        let i = e / n;
        let j = e % n;
        if (j <= i) { S[tri(i, j)] = ld_a(base + e); }
    }
}

fn block_store(t: u32, lid: u32) {
    let n = P[1];
    let base = t * n * n;
    for (var e = lid; e < n * n; e += NT) {
        let i = e / n;
        let j = e % n;
        var v = R(0.0);
        if (j <= i) { v = S[tri(i, j)]; }
        O[base + e] = st_o(v);
    }
}

// Cholesky: L with A = L Lᵀ from A's lower triangle (right-looking). A matrix
// that is not positive definite gives NaN from its failing column on.
@compute @workgroup_size(NT)
fn chol_small(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[0]) { return; }
    let n = P[1];
    block_load(t, lid);
    workgroupBarrier();
    for (var k = 0u; k < n; k++) {
        let akk = S[tri(k, k)];
        // sqrt of a negative pivot is NaN, which then fills the trailing matrix.
        let d = sqrt(select(nan_r(), akk, akk > 0.0));
        workgroupBarrier();
        for (var i = k + 1u + lid; i < n; i += NT) { S[tri(i, k)] = S[tri(i, k)] / d; }
        if (lid == 0u) { S[tri(k, k)] = d; }
        workgroupBarrier();
        let m = n - k - 1u;
        for (var e = lid; e < m * m; e += NT) {
            let i = k + 1u + e / m;
            let j = k + 1u + e % m;
            if (j <= i) { S[tri(i, j)] = S[tri(i, j)] - S[tri(i, k)] * S[tri(j, k)]; }
        }
        workgroupBarrier();
    }
    block_store(t, lid);
}

// The inverse of a lower-triangular matrix (its lower triangle read), row by
// row in place: x_ij = -(sum_{j <= k < i} l_ik x_kj) / l_ii, x_ii = 1 / l_ii.
@compute @workgroup_size(NT)
fn tri_inv_small(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[0]) { return; }
    let n = P[1];
    block_load(t, lid);
    workgroupBarrier();
    for (var i = 0u; i < n; i++) {
        // Row i of L is still in place; rows above hold X.
        var x = R(0.0);
        let j = lid;
        if (j <= i) {
            let lii = S[tri(i, i)];
            if (j == i) {
                x = 1.0 / lii;
            } else {
                var s = R(0.0);
                for (var k = j; k < i; k++) { s += S[tri(i, k)] * S[tri(k, j)]; }
                x = -s / lii;
            }
        }
        workgroupBarrier();
        if (j <= i) { S[tri(i, j)] = x; }
        workgroupBarrier();
    }
    block_store(t, lid);
}

// LU with partial pivoting (LAPACK's getf2): at step k the row with the largest
// |a_ik| (the first of equals) swaps into row k. Every invocation finds the same
// pivot and keeps the same row permutation r (A[r] = L U) in its registers, so
// nothing but the matrix lives in workgroup memory (BS² elements, at most 16 KiB).
// Output rows: LU's row i, then r_i as a float. A zero pivot leaves U's zero
// (the triangular solves then give inf or NaN).
@compute @workgroup_size(NT)
fn lu_small(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[0]) { return; }
    let n = P[1];
    let base = P[2] + t * n * n;
    for (var e = lid; e < n * n; e += NT) { F[e] = ld_a(base + e); }
    var r: array<u32, BS>;
    for (var i = 0u; i < n; i++) { r[i] = i; }
    workgroupBarrier();
    for (var k = 0u; k < n; k++) {
        var p = k;
        var best = abs(F[k * n + k]);
        for (var i = k + 1u; i < n; i++) {
            let v = abs(F[i * n + k]);
            if (v > best) { best = v; p = i; }
        }
        workgroupBarrier();
        if (p != k) {
            for (var j = lid; j < n; j += NT) {
                let tmp = F[k * n + j];
                F[k * n + j] = F[p * n + j];
                F[p * n + j] = tmp;
            }
            let tr = r[k];
            r[k] = r[p];
            r[p] = tr;
        }
        workgroupBarrier();
        // A zero pivot leaves its (zero) column as it is, as LAPACK's getf2.
        let pivot = F[k * n + k];
        if (pivot != 0.0) {
            for (var i = k + 1u + lid; i < n; i += NT) { F[i * n + k] = F[i * n + k] / pivot; }
        }
        workgroupBarrier();
        let m = n - k - 1u;
        for (var e = lid; e < m * m; e += NT) {
            let i = k + 1u + e / m;
            let j = k + 1u + e % m;
            F[i * n + j] = F[i * n + j] - F[i * n + k] * F[k * n + j];
        }
        workgroupBarrier();
    }
    let w = n + 1u;
    let out = t * n * w;
    for (var e = lid; e < n * w; e += NT) {
        let i = e / w;
        let j = e % w;
        var v = R(r[i]);
        if (j < n) { v = F[i * n + j]; }
        O[out + e] = st_o(v);
    }
}

// ---- in global memory: LU panels and QR (256 invocations) ----

const GT: u32 = 256u;
// Partial results of a reduction: values and (the pivot search's) row indices.
var<workgroup> gv: array<R, GT>;
var<workgroup> gi: array<u32, GT>;
var<workgroup> gs: array<R, 16>;
// A row of U (LU), or a Householder vector from its first row, v_0 = 1 (QR).
var<workgroup> gu: array<R, 512>;
// QR: tau of each reflection, and tau vᵀ a_c for each column c being updated.
var<workgroup> gtau: array<R, 512>;
var<workgroup> gw: array<R, 512>;

// The sum (or maximum) of x over the workgroup, the same in every invocation:
// 16 partial results of 16, then every invocation adds those 16 in one order.
fn gred(x: R, lid: u32, max_: bool) -> R {
    gv[lid] = x;
    workgroupBarrier();
    if (lid < 16u) {
        var y = gv[16u * lid];
        for (var e = 1u; e < 16u; e++) {
            let z = gv[16u * lid + e];
            y = select(y + z, max(y, z), max_);
        }
        gs[lid] = y;
    }
    workgroupBarrier();
    var r = gs[0];
    for (var e = 1u; e < 16u; e++) {
        let z = gs[e];
        r = select(r + z, max(r, z), max_);
    }
    workgroupBarrier();
    return r;
}

// LU with partial pivoting of a tall m×n panel (m >= n, n <= 64), LAPACK's getf2
// in the output: at step j the row with the largest |a_ij| (the first of equals)
// swaps into row j, column j below it is divided by the pivot, and the panel
// right of it takes the rank-1 update. Output rows of n + 1: the packed L and U
// row, then r_i as a float (A[r] = L U); row m: the number of swaps, zeros.
@compute @workgroup_size(GT)
fn lu_panel(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[0]) { return; }
    let n = P[1];
    let m = P[3];
    let w1 = n + 1u;
    let ob = t * (m + 1u) * w1;
    let ab = P[2] + t * m * n;
    for (var e = lid; e < m * w1; e += GT) {
        let i = e / w1;
        let c = e % w1;
        os(ob + e, select(R(i), ld_a(ab + i * n + c), c < n));
    }
    for (var c = lid; c < w1; c += GT) { os(ob + m * w1 + c, R(0.0)); }
    storageBarrier();
    var swaps = 0u;
    for (var j = 0u; j < min(m, n); j++) {
        // The pivot: the largest |a_ij| of rows j.., the first of equals (NaN never
        // wins; a column of NaN keeps row j).
        var best = R(-1.0);
        var bi = j;
        for (var i = j + lid; i < m; i += GT) {
            let v = abs(og(ob + i * w1 + j));
            if (v > best) { best = v; bi = i; }
        }
        gv[lid] = best;
        gi[lid] = bi;
        workgroupBarrier();
        if (lid < 16u) {
            var bv = gv[16u * lid];
            var bx = gi[16u * lid];
            for (var e = 1u; e < 16u; e++) {
                let v = gv[16u * lid + e];
                let x = gi[16u * lid + e];
                if (v > bv || (v == bv && x < bx)) { bv = v; bx = x; }
            }
            gu[lid] = bv;
            gu[16u + lid] = R(bx);
        }
        workgroupBarrier();
        var pv = gu[0];
        var p = u32(gu[16u]);
        for (var e = 1u; e < 16u; e++) {
            let v = gu[e];
            let x = u32(gu[16u + e]);
            if (v > pv || (v == pv && x < p)) { pv = v; p = x; }
        }
        workgroupBarrier();
        if (p != j) {
            swaps += 1u;
            for (var c = lid; c < w1; c += GT) {
                let a = O[ob + j * w1 + c];
                O[ob + j * w1 + c] = O[ob + p * w1 + c];
                O[ob + p * w1 + c] = a;
            }
        }
        storageBarrier();
        for (var c = j + lid; c < n; c += GT) { gu[c] = og(ob + j * w1 + c); }
        workgroupBarrier();
        // A zero pivot leaves its (zero) column as it is, as LAPACK's getf2.
        let piv = gu[j];
        if (piv != 0.0) {
            for (var i = j + 1u + lid; i < m; i += GT) { os(ob + i * w1 + j, og(ob + i * w1 + j) / piv); }
        }
        storageBarrier();
        let cols = n - j - 1u;
        for (var e = lid; e < (m - j - 1u) * cols; e += GT) {
            let i = j + 1u + e / cols;
            let c = j + 1u + e % cols;
            os(ob + i * w1 + c, og(ob + i * w1 + c) - og(ob + i * w1 + j) * gu[c]);
        }
        storageBarrier();
        workgroupBarrier();
    }
    if (lid == 0u) { os(ob + m * w1, R(swaps)); }
}

// H = I - tau v vᵀ (v in gu from row j) applied to columns c0..c1 of the rows
// j..m of the row-major matrix at `base` with row stride `st`.
fn qr_apply(base: u32, st: u32, j: u32, m: u32, c0: u32, c1: u32, tau: R, lid: u32) {
    let cols = c1 - c0;
    if (cols == 0u || tau == 0.0) { return; }
    // gw[c] = tau vᵀ a_c: invocations in groups over the rows when the columns are
    // fewer than the workgroup (coalesced: a group's invocations read a row's
    // neighbouring columns).
    if (cols >= GT) {
        for (var c = lid; c < cols; c += GT) {
            var d = R(0.0);
            for (var i = j; i < m; i++) { d += gu[i - j] * og(base + i * st + c0 + c); }
            gw[c] = tau * d;
        }
    } else {
        let groups = GT / cols;
        let g = lid / cols;
        let c = lid % cols;
        var d = R(0.0);
        if (g < groups) {
            for (var i = j + g; i < m; i += groups) { d += gu[i - j] * og(base + i * st + c0 + c); }
        }
        gv[lid] = d;
        workgroupBarrier();
        if (lid < cols) {
            var s = R(0.0);
            for (var e = 0u; e < groups; e++) { s += gv[lid + e * cols]; }
            gw[lid] = tau * s;
        }
    }
    workgroupBarrier();
    for (var e = lid; e < (m - j) * cols; e += GT) {
        let i = j + e / cols;
        let c = e % cols;
        let at = base + i * st + c0 + c;
        os(at, og(at) - gu[i - j] * gw[c]);
    }
    storageBarrier();
    workgroupBarrier();
}

// Householder QR (LAPACK's geqr2, then org2r for Q), in the output: the matrix
// factors in place where it fits (Q's m×n when m >= n, else R's m×n), R is
// copied out, and Q is formed in place from the reflections, the last first.
// The reflection of column j: beta = -sign(alpha) |x| (alpha = a_jj, sign(0) =
// +), tau = (beta - alpha) / beta, v = x / (alpha - beta) below v_0 = 1; none
// (tau = 0) when x is zero below the diagonal.
@compute @workgroup_size(GT)
fn qr_house(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[0]) { return; }
    let n = P[1];
    let m = P[3];
    let k = min(m, n);
    let ob = t * (m * k + k * n);
    let rb = ob + m * k;
    let tall = m >= n;
    let wb = select(rb, ob, tall);
    let ab = P[2] + t * m * n;
    for (var e = lid; e < m * n; e += GT) { os(wb + e, ld_a(ab + e)); }
    storageBarrier();
    for (var j = 0u; j < k; j++) {
        let len = m - j;
        var amx = R(0.0);
        for (var i = lid; i < len; i += GT) {
            let x = og(wb + (j + i) * n + j);
            gu[i] = x;
            if (i > 0u) { amx = max(amx, abs(x)); }
        }
        amx = gred(amx, lid, true);
        var ss = R(0.0);
        if (amx > 0.0) {
            for (var i = 1u + lid; i < len; i += GT) {
                let y = gu[i] / amx;
                ss += y * y;
            }
        }
        ss = gred(ss, lid, false);
        let alpha = gu[0];
        let xnorm = amx * sqrt(ss);
        var tau = R(0.0);
        if (xnorm > 0.0) {
            let hi = max(abs(alpha), xnorm);
            let lo = min(abs(alpha), xnorm);
            let r = lo / hi;
            let beta = -select(R(-1.0), R(1.0), alpha >= 0.0) * hi * sqrt(1.0 + r * r);
            tau = (beta - alpha) / beta;
            let scal = 1.0 / (alpha - beta);
            for (var i = 1u + lid; i < len; i += GT) {
                let v = gu[i] * scal;
                gu[i] = v;
                os(wb + (j + i) * n + j, v);
            }
            if (lid == 0u) { os(wb + j * n + j, beta); }
        }
        // Every invocation has read alpha from gu[0] before it becomes v_0.
        workgroupBarrier();
        if (lid == 0u) {
            gu[0] = R(1.0);
            gtau[j] = tau;
        }
        storageBarrier();
        qr_apply(wb, n, j, m, j + 1u, n, workgroupUniformLoad(&gtau[j]), lid);
    }
    // R out of the factored matrix; where Q forms (qb, row stride k).
    if (tall) {
        for (var e = lid; e < k * n; e += GT) {
            let i = e / n;
            let c = e % n;
            os(rb + e, select(R(0.0), og(wb + e), c >= i));
        }
    } else {
        for (var e = lid; e < m * m; e += GT) {
            let i = e / m;
            let c = e % m;
            os(ob + e, og(wb + i * n + c));
            if (c < i) { os(wb + i * n + c, R(0.0)); }
        }
    }
    storageBarrier();
    workgroupBarrier();
    // org2r: Q = H_0 ... H_{k-1} [I; 0], its columns from the last reflection's.
    for (var s = 0u; s < k; s++) {
        let i = k - 1u - s;
        let tau = workgroupUniformLoad(&gtau[i]);
        if (i + 1u < k) {
            for (var r = lid; r < m - i; r += GT) { gu[r] = select(og(ob + (i + r) * k + i), R(1.0), r == 0u); }
            workgroupBarrier();
            qr_apply(ob, k, i, m, i + 1u, k, tau, lid);
        }
        for (var r = i + 1u + lid; r < m; r += GT) { os(ob + r * k + i, -tau * og(ob + r * k + i)); }
        for (var r = lid; r < i; r += GT) { os(ob + r * k + i, R(0.0)); }
        if (lid == 0u) { os(ob + i * k + i, 1.0 - tau); }
        storageBarrier();
        workgroupBarrier();
    }
}
