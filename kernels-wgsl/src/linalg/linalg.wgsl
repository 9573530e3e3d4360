// Batched factorisations of small f32 matrices (n <= 64), one workgroup per
// matrix, its lower triangle packed in workgroup memory: the diagonal blocks of
// core's blocked Cholesky and triangular solves.
//
// Parameters: [count, n, a0]: `count` row-major n×n matrices from element a0 of
// input a; the output holds `count` row-major n×n matrices (lower triangular,
// zeros above the diagonal).

// One invocation per column of the largest matrix.
const NT: u32 = 64u;

// The lower triangle, row i from element i (i + 1) / 2.
var<workgroup> S: array<f32, 2080>;
// LU's whole matrix, row-major.
var<workgroup> F: array<f32, 4096>;

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
        var v = 0.0;
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
        let d = sqrt(select(nan_f(), akk, akk > 0.0));
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
        var x = 0.0;
        let j = lid;
        if (j <= i) {
            let lii = S[tri(i, i)];
            if (j == i) {
                x = 1.0 / lii;
            } else {
                var s = 0.0;
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
// nothing but the matrix lives in workgroup memory (64² f32 fill its 16 KiB).
// Output rows: LU's row i, then r_i as a float. A zero pivot gives inf or NaN.
@compute @workgroup_size(NT)
fn lu_small(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[0]) { return; }
    let n = P[1];
    let base = P[2] + t * n * n;
    for (var e = lid; e < n * n; e += NT) { F[e] = ld_a(base + e); }
    var r: array<u32, 64>;
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
        let pivot = F[k * n + k];
        for (var i = k + 1u + lid; i < n; i += NT) { F[i * n + k] = F[i * n + k] / pivot; }
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
        var v = 0.0;
        if (j < n) { v = F[i * n + j]; } else { v = f32(r[i]); }
        O[out + e] = st_o(v);
    }
}
