// Matrix product on cooperative matrices (tensor cores), f16 operands, f32
// accumulation: O[b] = alpha * A[b] @ B[b] + beta * C[b]. Same parameters and
// tiling of the grid as matmul.wgsl (tiles of CBM x CBN).
//
// Four subgroups of SG invocations (the prelude sets SG, the adapter's fixed
// subgroup size) share a 64 x 64 output tile; each owns a 32 x 32 quarter as 2 x 2
// 16 x 16 accumulators. A and B tiles (64 x 32 and 32 x 64) are staged through
// workgroup memory as f16, read from global through their strides (so transposed
// and broadcast operands work as in the plain kernel). The accumulators go back
// through workgroup memory (f32) for the epilogue: alpha, beta * C and the rounding
// stay fused, as in the plain kernel.

const CBM: u32 = 64u;
const CBN: u32 = 64u;
const CBK: u32 = 32u;
const CNT: u32 = 4u * SG;

var<workgroup> ca: array<f16, CBM * CBK>; // [m][k]
var<workgroup> cb: array<f16, CBK * CBN>; // [k][n]
var<workgroup> cc: array<f32, CBM * CBN>; // [m][n]

@compute @workgroup_size(CNT)
fn matmul_coop(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>, @builtin(subgroup_id) sg: u32) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[3]) { return; }
    let m_dim = P[0];
    let n_dim = P[1];
    let k_dim = P[2];
    let tile = mm_tile(t, CBM, CBN);
    let m0 = tile.m0;
    let n0 = tile.n0;
    let ob = tile.po;
    let pa = tile.pa;
    let pb = tile.pb;
    let pc = tile.pc;
    let flags = P[18];
    let a_mfast = (flags & 1u) != 0u;
    let b_nfast = (flags & 2u) != 0u;
    let a_sm = P[8];
    let a_sk = P[9];
    let b_sk = P[11];
    let b_sn = P[12];
    // This subgroup's 32 x 32 quarter.
    let qm = (sg / 2u) * 32u;
    let qn = (sg % 2u) * 32u;

    var acc00 = coop_mat16x16<f32, C>();
    var acc01 = coop_mat16x16<f32, C>();
    var acc10 = coop_mat16x16<f32, C>();
    var acc11 = coop_mat16x16<f32, C>();
    for (var k0 = 0u; k0 < k_dim; k0 += CBK) {
        for (var e = lid; e < CBM * CBK; e += CNT) {
            var m = e / CBK;
            var k = e % CBK;
            if (a_mfast) { m = e % CBM; k = e / CBM; }
            let gm = m0 + m;
            let gk = k0 + k;
            var v = 0.0;
            if (gm < m_dim && gk < k_dim) { v = ld_a(pa + gm * a_sm + gk * a_sk); }
            ca[m * CBK + k] = f16(v);
        }
        for (var e = lid; e < CBK * CBN; e += CNT) {
            var n = e / CBK;
            var k = e % CBK;
            if (b_nfast) { n = e % CBN; k = e / CBN; }
            let gn = n0 + n;
            let gk = k0 + k;
            var v = 0.0;
            if (gn < n_dim && gk < k_dim) { v = ld_b(pb + gk * b_sk + gn * b_sn); }
            cb[k * CBN + n] = f16(v);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < CBK; kk += 16u) {
            let ia0 = qm * CBK + kk;
            let ia1 = (qm + 16u) * CBK + kk;
            let ib0 = kk * CBN + qn;
            let ib1 = kk * CBN + qn + 16u;
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&ca[ia0], CBK);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&ca[ia1], CBK);
            let b0 = coopLoadT<coop_mat16x16<f16, B>>(&cb[ib0], CBN);
            let b1 = coopLoadT<coop_mat16x16<f16, B>>(&cb[ib1], CBN);
            acc00 = coopMultiplyAdd(a0, b0, acc00);
            acc01 = coopMultiplyAdd(a0, b1, acc01);
            acc10 = coopMultiplyAdd(a1, b0, acc10);
            acc11 = coopMultiplyAdd(a1, b1, acc11);
        }
        workgroupBarrier();
    }
    let i00 = qm * CBN + qn;
    let i01 = qm * CBN + qn + 16u;
    let i10 = (qm + 16u) * CBN + qn;
    let i11 = (qm + 16u) * CBN + qn + 16u;
    coopStoreT(acc00, &cc[i00], CBN);
    coopStoreT(acc01, &cc[i01], CBN);
    coopStoreT(acc10, &cc[i10], CBN);
    coopStoreT(acc11, &cc[i11], CBN);
    workgroupBarrier();

    // Epilogue: one output word per step (two f16 values, N even: the host checks).
    let alpha = bitcast<f32>(P[16]);
    let beta = bitcast<f32>(P[17]);
    let read_c = (flags & 4u) != 0u;
    let epw = 1u << LO;
    for (var w = lid; w < CBM * CBN / epw; w += CNT) {
        let e0 = w * epw;
        let m = e0 / CBN;
        let gm = m0 + m;
        let gn = n0 + e0 % CBN;
        if (gm < m_dim && gn < n_dim) {
            var r = vec2<f32>(0.0);
            for (var j = 0u; j < epw; j++) {
                var y = alpha * cc[e0 + j];
                if (read_c && gn + j < n_dim) {
                    y += beta * ld_c(pc + gm * P[14] + (gn + j) * P[15]);
                }
                r[j] = y;
            }
            let o = ob + gm * n_dim + gn;
            if (LO == 1u) {
                O[o >> 1u] = st2_o(r);
            } else {
                O[o] = st_o(r.x);
            }
        }
    }
}

// The same product with the fragments loaded straight from global memory (no
// staging, no barriers in the K loop), for row-major f16 operands whose rows start
// on 16-byte boundaries, M and N multiples of 64 and K of 16 (the host checks).
// The f16 views IA16 and IB16 of the operands come from the prelude.
@compute @workgroup_size(CNT)
fn matmul_coop_direct(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                      @builtin(num_workgroups) nwg: vec3<u32>, @builtin(subgroup_id) sg: u32) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[3]) { return; }
    let m_dim = P[0];
    let n_dim = P[1];
    let k_dim = P[2];
    let tiles_n = P[5];
    let per_batch = tiles_n * P[6];
    let bi = t / per_batch;
    let tt = t - bi * per_batch;
    let m0 = (tt / tiles_n) * CBM;
    let n0 = (tt % tiles_n) * CBN;
    let ob = bi * m_dim * n_dim;
    // Batches are contiguous stacks here (rank <= 1): stride in P[20], P[21].
    var pa = P[7];
    var pb = P[10];
    if (P[4] == 1u) {
        pa += bi * P[20];
        pb += bi * P[21];
    }
    let qm = m0 + (sg / 2u) * 32u;
    let qn = n0 + (sg % 2u) * 32u;
    var acc00 = coop_mat16x16<f32, C>();
    var acc01 = coop_mat16x16<f32, C>();
    var acc10 = coop_mat16x16<f32, C>();
    var acc11 = coop_mat16x16<f32, C>();
    for (var k0 = 0u; k0 < k_dim; k0 += 16u) {
        let ia0 = pa + qm * k_dim + k0;
        let ia1 = pa + (qm + 16u) * k_dim + k0;
        let ib0 = pb + k0 * n_dim + qn;
        let ib1 = pb + k0 * n_dim + qn + 16u;
        let a0 = coopLoadT<coop_mat16x16<f16, A>>(&IA16[ia0], k_dim);
        let a1 = coopLoadT<coop_mat16x16<f16, A>>(&IA16[ia1], k_dim);
        let b0 = coopLoadT<coop_mat16x16<f16, B>>(&IB16[ib0], n_dim);
        let b1 = coopLoadT<coop_mat16x16<f16, B>>(&IB16[ib1], n_dim);
        acc00 = coopMultiplyAdd(a0, b0, acc00);
        acc01 = coopMultiplyAdd(a0, b1, acc01);
        acc10 = coopMultiplyAdd(a1, b0, acc10);
        acc11 = coopMultiplyAdd(a1, b1, acc11);
    }
    let sm = (sg / 2u) * 32u;
    let sn = (sg % 2u) * 32u;
    let i00 = sm * CBN + sn;
    let i01 = sm * CBN + sn + 16u;
    let i10 = (sm + 16u) * CBN + sn;
    let i11 = (sm + 16u) * CBN + sn + 16u;
    coopStoreT(acc00, &cc[i00], CBN);
    coopStoreT(acc01, &cc[i01], CBN);
    coopStoreT(acc10, &cc[i10], CBN);
    coopStoreT(acc11, &cc[i11], CBN);
    workgroupBarrier();
    let alpha = bitcast<f32>(P[16]);
    let beta = bitcast<f32>(P[17]);
    let read_c = (P[18] & 4u) != 0u;
    var pc = P[13];
    if (P[4] == 1u) { pc += bi * P[22]; }
    let epw = 1u << LO;
    for (var w = lid; w < CBM * CBN / epw; w += CNT) {
        let e0 = w * epw;
        let gm = m0 + e0 / CBN;
        let gn = n0 + e0 % CBN;
        var r = vec2<f32>(0.0);
        for (var j = 0u; j < epw; j++) {
            var y = alpha * cc[e0 + j];
            if (read_c) { y += beta * ld_c(pc + gm * P[14] + (gn + j) * P[15]); }
            r[j] = y;
        }
        let o = ob + gm * n_dim + gn;
        if (LO == 1u) {
            O[o >> 1u] = st2_o(r);
        } else {
            O[o] = st_o(r.x);
        }
    }
}
