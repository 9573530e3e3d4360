// Tiled matrix product: O[b] = alpha * A[b] @ B[b] + beta * C[b], accumulated in f32.
//
// Each workgroup computes a BM x BN tile of one batch element's output; each of its
// WX x WY invocations an 8 x 8 block held in registers (16 vec4 accumulators: rows
// ty*4+i and BM/2+ty*4+i, columns tx*4+j and BN/2+tx*4+j, so neighbouring
// invocations read neighbouring vec4s of workgroup memory: no bank conflicts).
// A and B tiles pass through workgroup memory BK deep. Operands are read in place
// through their strides; the load order follows whichever axis is contiguous.
//
// The prelude sets WX, WY (invocations per row/column of the workgroup), BK, MM_VEC
// and the dtype helpers ld_a/ld_b/ld_c and st_o/st2_o.
//
// Parameters (u32 words; strides and offsets in elements, i32 bits, wrapping):
//  0 M, 1 N, 2 K, 3 tiles (batch * tiles_m * tiles_n), 4 batch rank R, 5 tiles_n,
//  6 tiles_m, 7 a_off, 8 a_sm, 9 a_sk, 10 b_off, 11 b_sk, 12 b_sn, 13 c_off,
//  14 c_sm, 15 c_sn, 16 alpha (f32 bits), 17 beta (f32 bits), 18 flags (bit 0: A's
//  m axis is the contiguous one, bit 1: B's n axis is, bit 2: C is read),
//  19.. batch shape[R], A batch strides[R], B batch strides[R], C batch strides[R].

const BM: u32 = 8u * WY;
const BN: u32 = 8u * WX;
const NT: u32 = WX * WY;
// Elements of the A and B tiles each invocation moves per K step.
const LDA: u32 = BM * BK / NT;
const LDB: u32 = BN * BK / NT;

var<workgroup> As: array<vec4<f32>, BK * BM / 4u>; // As[k][m]
var<workgroup> Bs: array<vec4<f32>, BK * BN / 4u>; // Bs[k][n]

// Per-invocation values the epilogue needs.
var<private> mm_n: u32;
var<private> mm_c: u32;
var<private> mm_o: u32;
var<private> mm_alpha: f32;
var<private> mm_beta: f32;
var<private> mm_read_c: bool;

// Four outputs of row gm from column gn: alpha * v (+ beta * C), rounded once.
fn mm_store4(gm: u32, gn: u32, v: vec4<f32>) {
    let n = mm_n;
    var r = v * mm_alpha;
    if (mm_read_c) {
        let cb = mm_c + gm * P[14];
        for (var j = 0u; j < 4u; j++) {
            if (gn + j < n) {
                r[j] = r[j] + mm_beta * ld_c(cb + (gn + j) * P[15]);
            }
        }
    }
    let o = mm_o + gm * n + gn;
    if (LO == 1u) {
        // 16-bit output, N even (the host checks): whole words, no sharing.
        if (gn < n) { O[o >> 1u] = st2_o(vec2<f32>(r.x, r.y)); }
        if (gn + 2u < n) { O[(o >> 1u) + 1u] = st2_o(vec2<f32>(r.z, r.w)); }
    } else {
        for (var j = 0u; j < 4u; j++) {
            if (gn + j < n) { O[o + j] = st_o(r[j]); }
        }
    }
}

// Per-invocation scalars the load helpers need (set once per workgroup).
var<private> mm_lid: u32;
var<private> mm_m: u32;
var<private> mm_k: u32;
var<private> mm_a_sm: u32;
var<private> mm_a_sk: u32;
var<private> mm_b_sk: u32;
var<private> mm_b_sn: u32;

// The elements of the K step at k1 this invocation moves, into registers: element
// loads along whichever axis is contiguous, or (MM_VEC) one vec4 per four f32 along
// it (A along K or M, B along N or K).
fn mm_load(k1: u32, ra: ptr<function, array<f32, LDA>>, rb: ptr<function, array<f32, LDB>>,
           pa: u32, pb: u32, m0: u32, n0: u32, a_mfast: bool, b_nfast: bool) {
    let lid = mm_lid;
    if (MM_VEC) {
        for (var i = 0u; i < LDA / 4u; i++) {
            let e = lid + i * NT;
            var m = e / (BK / 4u);
            var k = (e % (BK / 4u)) * 4u;
            var at = pa + (m0 + m) * mm_a_sm + k1 + k;
            if (a_mfast) {
                k = e / (BM / 4u);
                m = (e % (BM / 4u)) * 4u;
                at = pa + m0 + m + (k1 + k) * mm_a_sk;
            }
            var v = vec4<u32>(0u);
            if (m0 + m < mm_m && k1 + k < mm_k) { v = va(at >> 2u); }
            (*ra)[4u * i] = bitcast<f32>(v.x);
            (*ra)[4u * i + 1u] = bitcast<f32>(v.y);
            (*ra)[4u * i + 2u] = bitcast<f32>(v.z);
            (*ra)[4u * i + 3u] = bitcast<f32>(v.w);
        }
        for (var i = 0u; i < LDB / 4u; i++) {
            let e = lid + i * NT;
            var k = e / (BN / 4u);
            var n = (e % (BN / 4u)) * 4u;
            var at = pb + (k1 + k) * mm_b_sk + n0 + n;
            if (!b_nfast) {
                n = e / (BK / 4u);
                k = (e % (BK / 4u)) * 4u;
                at = pb + (n0 + n) * mm_b_sn + k1 + k;
            }
            var v = vec4<u32>(0u);
            if (n0 + n < mm_n && k1 + k < mm_k) { v = vb(at >> 2u); }
            (*rb)[4u * i] = bitcast<f32>(v.x);
            (*rb)[4u * i + 1u] = bitcast<f32>(v.y);
            (*rb)[4u * i + 2u] = bitcast<f32>(v.z);
            (*rb)[4u * i + 3u] = bitcast<f32>(v.w);
        }
        return;
    }
    for (var i = 0u; i < LDA; i++) {
        let e = lid + i * NT;
        var m = e / BK;
        var k = e % BK;
        if (a_mfast) { m = e % BM; k = e / BM; }
        let gm = m0 + m;
        let gk = k1 + k;
        var v = 0.0;
        if (gm < mm_m && gk < mm_k) { v = ld_a(pa + gm * mm_a_sm + gk * mm_a_sk); }
        (*ra)[i] = v;
    }
    for (var i = 0u; i < LDB; i++) {
        let e = lid + i * NT;
        var n = e / BK;
        var k = e % BK;
        if (b_nfast) { n = e % BN; k = e / BN; }
        let gn = n0 + n;
        let gk = k1 + k;
        var v = 0.0;
        if (gn < mm_n && gk < mm_k) { v = ld_b(pb + gk * mm_b_sk + gn * mm_b_sn); }
        (*rb)[i] = v;
    }
}

// The registers of mm_load into the workgroup tiles As[k][m] and Bs[k][n]: a vec4
// along M or N is one store, a vec4 along K four.
fn mm_store(ra: ptr<function, array<f32, LDA>>, rb: ptr<function, array<f32, LDB>>,
            a_mfast: bool, b_nfast: bool) {
    let lid = mm_lid;
    if (MM_VEC) {
        for (var i = 0u; i < LDA / 4u; i++) {
            let e = lid + i * NT;
            if (a_mfast) {
                let k = e / (BM / 4u);
                let m = (e % (BM / 4u)) * 4u;
                As[(k * BM + m) >> 2u] = vec4<f32>((*ra)[4u * i], (*ra)[4u * i + 1u],
                                                   (*ra)[4u * i + 2u], (*ra)[4u * i + 3u]);
            } else {
                let m = e / (BK / 4u);
                let k = (e % (BK / 4u)) * 4u;
                for (var j = 0u; j < 4u; j++) {
                    As[((k + j) * BM + m) >> 2u][m & 3u] = (*ra)[4u * i + j];
                }
            }
        }
        for (var i = 0u; i < LDB / 4u; i++) {
            let e = lid + i * NT;
            if (b_nfast) {
                let k = e / (BN / 4u);
                let n = (e % (BN / 4u)) * 4u;
                Bs[(k * BN + n) >> 2u] = vec4<f32>((*rb)[4u * i], (*rb)[4u * i + 1u],
                                                   (*rb)[4u * i + 2u], (*rb)[4u * i + 3u]);
            } else {
                let n = e / (BK / 4u);
                let k = (e % (BK / 4u)) * 4u;
                for (var j = 0u; j < 4u; j++) {
                    Bs[((k + j) * BN + n) >> 2u][n & 3u] = (*rb)[4u * i + j];
                }
            }
        }
        return;
    }
    for (var i = 0u; i < LDA; i++) {
        let e = lid + i * NT;
        var m = e / BK;
        var k = e % BK;
        if (a_mfast) { m = e % BM; k = e / BM; }
        As[(k * BM + m) >> 2u][m & 3u] = (*ra)[i];
    }
    for (var i = 0u; i < LDB; i++) {
        let e = lid + i * NT;
        var n = e / BK;
        var k = e % BK;
        if (b_nfast) { n = e % BN; k = e / BN; }
        Bs[(k * BN + n) >> 2u][n & 3u] = (*rb)[i];
    }
}

// One k of the tile: the invocation's 8 x 8 outer product into its accumulators.
fn mm_fma(c: ptr<function, array<vec4<f32>, 16>>, k: u32, tx: u32, ty: u32) {
    let a_lo = As[k * (BM / 4u) + ty];
    let a_hi = As[k * (BM / 4u) + BM / 8u + ty];
    let b_lo = Bs[k * (BN / 4u) + tx];
    let b_hi = Bs[k * (BN / 4u) + BN / 8u + tx];
    (*c)[0] = fma(vec4<f32>(a_lo.x), b_lo, (*c)[0]); (*c)[1] = fma(vec4<f32>(a_lo.x), b_hi, (*c)[1]);
    (*c)[2] = fma(vec4<f32>(a_lo.y), b_lo, (*c)[2]); (*c)[3] = fma(vec4<f32>(a_lo.y), b_hi, (*c)[3]);
    (*c)[4] = fma(vec4<f32>(a_lo.z), b_lo, (*c)[4]); (*c)[5] = fma(vec4<f32>(a_lo.z), b_hi, (*c)[5]);
    (*c)[6] = fma(vec4<f32>(a_lo.w), b_lo, (*c)[6]); (*c)[7] = fma(vec4<f32>(a_lo.w), b_hi, (*c)[7]);
    (*c)[8] = fma(vec4<f32>(a_hi.x), b_lo, (*c)[8]); (*c)[9] = fma(vec4<f32>(a_hi.x), b_hi, (*c)[9]);
    (*c)[10] = fma(vec4<f32>(a_hi.y), b_lo, (*c)[10]); (*c)[11] = fma(vec4<f32>(a_hi.y), b_hi, (*c)[11]);
    (*c)[12] = fma(vec4<f32>(a_hi.z), b_lo, (*c)[12]); (*c)[13] = fma(vec4<f32>(a_hi.z), b_hi, (*c)[13]);
    (*c)[14] = fma(vec4<f32>(a_hi.w), b_lo, (*c)[14]); (*c)[15] = fma(vec4<f32>(a_hi.w), b_hi, (*c)[15]);
}

@compute @workgroup_size(NT)
fn matmul(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[3]) { return; }
    let m_dim = P[0];
    let n_dim = P[1];
    let k_dim = P[2];
    let tile = mm_tile(t, BM, BN);
    let m0 = tile.m0;
    let n0 = tile.n0;
    mm_o = tile.po;
    let pa = tile.pa;
    let pb = tile.pb;
    let pc = tile.pc;
    mm_n = n_dim;
    mm_c = pc;
    mm_alpha = bitcast<f32>(P[16]);
    mm_beta = bitcast<f32>(P[17]);
    let flags = P[18];
    mm_read_c = (flags & 4u) != 0u;
    let a_mfast = (flags & 1u) != 0u;
    let b_nfast = (flags & 2u) != 0u;
    mm_lid = lid;
    mm_m = m_dim;
    mm_k = k_dim;
    mm_a_sm = P[8];
    mm_a_sk = P[9];
    mm_b_sk = P[11];
    mm_b_sn = P[12];

    let tx = lid % WX;
    let ty = lid / WX;
    var c: array<vec4<f32>, 16>;

    // The next tile's elements are loaded into registers while the current one is
    // multiplied (register double buffering): global latency overlaps the FMAs.
    var ra: array<f32, LDA>;
    var rb: array<f32, LDB>;
    mm_load(0u, &ra, &rb, pa, pb, m0, n0, a_mfast, b_nfast);
    for (var k0 = 0u; k0 < k_dim; k0 += BK) {
        mm_store(&ra, &rb, a_mfast, b_nfast);
        if (k0 + BK < k_dim) {
            mm_load(k0 + BK, &ra, &rb, pa, pb, m0, n0, a_mfast, b_nfast);
        }
        workgroupBarrier();
        if (MM_VEC) {
            // Unrolled here: NVIDIA's driver kept naga's loop, 10-30 % slower. The
            // element variant keeps it (bf16 ran 18 % slower unrolled; run 108).
            for (var k = 0u; k < BK; k += 8u) {
                mm_fma(&c, k, tx, ty);
                mm_fma(&c, k + 1u, tx, ty);
                mm_fma(&c, k + 2u, tx, ty);
                mm_fma(&c, k + 3u, tx, ty);
                mm_fma(&c, k + 4u, tx, ty);
                mm_fma(&c, k + 5u, tx, ty);
                mm_fma(&c, k + 6u, tx, ty);
                mm_fma(&c, k + 7u, tx, ty);
            }
        } else {
            for (var k = 0u; k < BK; k++) { mm_fma(&c, k, tx, ty); }
        }
        workgroupBarrier();
    }

    let r_lo = m0 + ty * 4u;
    let r_hi = m0 + BM / 2u + ty * 4u;
    let n_lo = n0 + tx * 4u;
    let n_hi = n0 + BN / 2u + tx * 4u;
    if (r_lo < m_dim) { mm_store4(r_lo, n_lo, c[0]); mm_store4(r_lo, n_hi, c[1]); }
    if (r_lo + 1u < m_dim) { mm_store4(r_lo + 1u, n_lo, c[2]); mm_store4(r_lo + 1u, n_hi, c[3]); }
    if (r_lo + 2u < m_dim) { mm_store4(r_lo + 2u, n_lo, c[4]); mm_store4(r_lo + 2u, n_hi, c[5]); }
    if (r_lo + 3u < m_dim) { mm_store4(r_lo + 3u, n_lo, c[6]); mm_store4(r_lo + 3u, n_hi, c[7]); }
    if (r_hi < m_dim) { mm_store4(r_hi, n_lo, c[8]); mm_store4(r_hi, n_hi, c[9]); }
    if (r_hi + 1u < m_dim) { mm_store4(r_hi + 1u, n_lo, c[10]); mm_store4(r_hi + 1u, n_hi, c[11]); }
    if (r_hi + 2u < m_dim) { mm_store4(r_hi + 2u, n_lo, c[12]); mm_store4(r_hi + 2u, n_hi, c[13]); }
    if (r_hi + 3u < m_dim) { mm_store4(r_hi + 3u, n_lo, c[14]); mm_store4(r_hi + 3u, n_hi, c[15]); }
}
