// Matrix product on cooperative matrices (tensor cores) for f16 operands read in
// 16-byte vectors: O[b] = alpha * A[b] @ B[b] + beta * C[b], f32 accumulation. Same
// parameters and tiling of the grid as matmul.wgsl, tiles of 128 x VBN (128, or 64
// for products of few tiles: VBN comes from the prelude).
//
// Subgroups of 32 invocations (8 or 4); subgroup s owns rows 32 (s / (VBN / 64))
// .. + 32 and columns 64 (s % (VBN / 64)) .. + 64 of the tile: 2 x 4 accumulators
// of 16 x 16, so each 16-deep step loads 6 fragments for 8 multiply-adds (bench
// --coop-peak: the multiply-adds alone run ~590 TFLOP/s on the H200).
// A and B tiles 64 deep are staged through workgroup memory as f16, each read as
// rows of its contiguous dimension (A_MFAST, B_KFAST from the prelude pick
// whether A is read along M and B along K, i.e. transposed views), 8 halves per
// 16-byte load; the next tile's loads are issued before the current tile's
// products. Rows are padded by 8 halves (16 bytes) so fragment loads spread over
// the banks. What was measured against this form is in bench/NOTES.md (runs 43,
// 113, 139, 140).
//
// The host checks: every operand row start a multiple of 8 elements (offsets,
// leading strides and batch strides), K and the contiguous extents multiples of 8
// (a vector never straddles the end), A and B bound as vec4 words. Rows and columns
// past M, N and K read zeros; the epilogue writes only inside the output.

const VBM: u32 = 128u;
const VBK: u32 = 64u;
// Subgroups of 32 invocations, each owning 32 x 64 of the tile.
const VNT: u32 = VBM * VBN / 64u;
// Strides of the staged tiles: a "long" tile has VBM (A) or VBN (B) rows of VBK
// (+ 8) halves, a "wide" one VBK rows of VBM or VBN (+ 8).
const LS: u32 = VBK + 8u;
const WSA: u32 = VBM + 8u;
const WSB: u32 = VBN + 8u;
// 16-byte vectors per row of a long tile, and per invocation per tile of A and B.
const VPR: u32 = VBK / 8u;
const NA: u32 = VBM * VBK / 8u / VNT;
const NB: u32 = VBN * VBK / 8u / VNT;
const TSA: u32 = max(VBM * LS, VBK * WSA);
const TSB: u32 = max(VBN * LS, VBK * WSB);

// Staged as vec4<f16> so that a 16-byte load is stored in two 8-byte stores; a
// cooperative load through a vec4 pointer counts its stride in vec4s.
var<workgroup> ta: array<vec4<f16>, TSA / 4u>;
var<workgroup> tb: array<vec4<f16>, TSB / 4u>;
var<workgroup> te: array<f32, VNT * 8u>;

// Vector j of this invocation's share of a tile of operand B (else A): a long tile
// (VBN or VBM rows from r0, VBK deep from k0, each row along K) or a wide one (VBK
// rows along K, VBN or VBM columns from r0). `base`: element offset of the
// operand's matrix; `ld`: its row stride; `rows`: the operand's extent along r.
// Zeros outside the operand.
fn vload(b: bool, long: bool, lid: u32, j: u32, base: u32, ld: u32, r0: u32, rows: u32,
         k0: u32, k_dim: u32) -> vec4<u32> {
    let e = lid + j * VNT;
    var r = e / VPR;
    var c = (e % VPR) * 8u;
    var ok = r0 + r < rows && k0 + c < k_dim;
    var at = base + (r0 + r) * ld + k0 + c;
    if (!long) {
        let vpr = select(VBM, VBN, b) / 8u;
        r = e / vpr;
        c = (e % vpr) * 8u;
        ok = k0 + r < k_dim && r0 + c < rows;
        at = base + (k0 + r) * ld + r0 + c;
    }
    if (!ok) { return vec4<u32>(0u); }
    if (b) { return vb(at >> 3u); }
    return va(at >> 3u);
}

// Where vector j of this invocation goes in a staged tile of B (else A).
fn vslot(b: bool, long: bool, lid: u32, j: u32) -> u32 {
    let e = lid + j * VNT;
    if (long) { return (e / VPR) * LS + (e % VPR) * 8u; }
    let vpr = select(VBM, VBN, b) / 8u;
    return (e / vpr) * select(WSA, WSB, b) + (e % vpr) * 8u;
}

// Stores 8 halves at `at` (a multiple of 8) of the B tile (else the A tile). Through
// f32 and back, exactly (naga 30 types bitcast<vec2<f16>>(u32) as f32).
fn vstore(b: bool, at: u32, v: vec4<u32>) {
    let lo = vec4<f16>(vec2<f16>(unpack2x16float(v.x)), vec2<f16>(unpack2x16float(v.y)));
    let hi = vec4<f16>(vec2<f16>(unpack2x16float(v.z)), vec2<f16>(unpack2x16float(v.w)));
    let i = at >> 2u;
    if (b) {
        tb[i] = lo;
        tb[i + 1u] = hi;
    } else {
        ta[i] = lo;
        ta[i + 1u] = hi;
    }
}

// A fragment: rows m..m+16, depth kk..kk+16 of the staged A tile.
fn frag_a(m: u32, kk: u32) -> coop_mat16x16<f16, A> {
    if (A_MFAST) { return coopLoad<coop_mat16x16<f16, A>>(&ta[(kk * WSA + m) >> 2u], WSA / 4u); }
    return coopLoadT<coop_mat16x16<f16, A>>(&ta[(m * LS + kk) >> 2u], LS / 4u);
}
// B fragment: depth kk..kk+16, columns n..n+16 of the staged B tile.
fn frag_b(kk: u32, n: u32) -> coop_mat16x16<f16, B> {
    if (B_KFAST) { return coopLoad<coop_mat16x16<f16, B>>(&tb[(n * LS + kk) >> 2u], LS / 4u); }
    return coopLoadT<coop_mat16x16<f16, B>>(&tb[(kk * WSB + n) >> 2u], WSB / 4u);
}

struct Epi { ob: u32, pc: u32, gm: u32, gn: u32, alpha: f32, beta: f32, read_c: bool }

// Writes one 16 x 16 accumulator at output rows e.gm.., columns e.gn..: through this
// subgroup's 256 floats of workgroup memory, each lane then taking 8 consecutive
// elements of one row (alpha, beta * C and the rounding applied here).
fn epilogue(acc: coop_mat16x16<f32, C>, sg: u32, lane: u32, e: Epi) {
    let s = sg * 256u;
    coopStoreT(acc, &te[s], 16u);
    workgroupBarrier();
    let r = lane >> 1u;
    let c = (lane & 1u) * 8u;
    let gm = e.gm + r;
    let gn = e.gn + c;
    if (gm < P[0] && gn < P[1]) {
        let o = e.ob + gm * P[1] + gn;
        for (var j = 0u; j < 8u; j += 2u) {
            var y = vec2<f32>(e.alpha * te[s + r * 16u + c + j], e.alpha * te[s + r * 16u + c + j + 1u]);
            if (e.read_c) {
                y.x += e.beta * ld_c(e.pc + gm * P[14] + (gn + j) * P[15]);
                y.y += e.beta * ld_c(e.pc + gm * P[14] + (gn + j + 1u) * P[15]);
            }
            if (LO == 1u) {
                O[(o + j) >> 1u] = st2_o(y);
            } else {
                O[o + j] = st_o(y.x);
                O[o + j + 1u] = st_o(y.y);
            }
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(VNT)
fn matmul_coop_vec(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                   @builtin(num_workgroups) nwg: vec3<u32>, @builtin(subgroup_id) sg: u32,
                   @builtin(subgroup_invocation_id) lane: u32) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[3]) { return; }
    let m_dim = P[0];
    let n_dim = P[1];
    let k_dim = P[2];
    let tile = mm_tile(t, VBM, VBN);
    let m0 = tile.m0;
    let n0 = tile.n0;
    let ob = tile.po;
    let pa = tile.pa;
    let pb = tile.pb;
    let pc = tile.pc;
    // Row strides of the operands as staged: A along K (P[8]) or along M (P[9]),
    // B along N (P[11]) or along K (P[12]).
    let lda = select(P[8], P[9], A_MFAST);
    let ldb = select(P[11], P[12], B_KFAST);
    let wm = (sg / (VBN / 64u)) * 32u;
    let wn = (sg % (VBN / 64u)) * 64u;

    var acc0 = coop_mat16x16<f32, C>();
    var acc1 = coop_mat16x16<f32, C>();
    var acc2 = coop_mat16x16<f32, C>();
    var acc3 = coop_mat16x16<f32, C>();
    var acc4 = coop_mat16x16<f32, C>();
    var acc5 = coop_mat16x16<f32, C>();
    var acc6 = coop_mat16x16<f32, C>();
    var acc7 = coop_mat16x16<f32, C>();
    var va_: array<vec4<u32>, NA>;
    var vb_: array<vec4<u32>, NB>;
    for (var j = 0u; j < NA; j++) {
        va_[j] = vload(false, !A_MFAST, lid, j, pa, lda, m0, m_dim, 0u, k_dim);
    }
    for (var j = 0u; j < NB; j++) {
        vb_[j] = vload(true, B_KFAST, lid, j, pb, ldb, n0, n_dim, 0u, k_dim);
    }
    for (var k0 = 0u; k0 < k_dim; k0 += VBK) {
        for (var j = 0u; j < NA; j++) {
            vstore(false, vslot(false, !A_MFAST, lid, j), va_[j]);
        }
        for (var j = 0u; j < NB; j++) {
            vstore(true, vslot(true, B_KFAST, lid, j), vb_[j]);
        }
        workgroupBarrier();
        // The next tile's vectors are in flight during this tile's products.
        let k1 = k0 + VBK;
        if (k1 < k_dim) {
            for (var j = 0u; j < NA; j++) {
                va_[j] = vload(false, !A_MFAST, lid, j, pa, lda, m0, m_dim, k1, k_dim);
            }
            for (var j = 0u; j < NB; j++) {
                vb_[j] = vload(true, B_KFAST, lid, j, pb, ldb, n0, n_dim, k1, k_dim);
            }
        }
        for (var kk = 0u; kk < VBK; kk += 16u) {
            let fa0 = frag_a(wm, kk);
            let fa1 = frag_a(wm + 16u, kk);
            let fb0 = frag_b(kk, wn);
            let fb1 = frag_b(kk, wn + 16u);
            let fb2 = frag_b(kk, wn + 32u);
            let fb3 = frag_b(kk, wn + 48u);
            acc0 = coopMultiplyAdd(fa0, fb0, acc0);
            acc1 = coopMultiplyAdd(fa0, fb1, acc1);
            acc2 = coopMultiplyAdd(fa0, fb2, acc2);
            acc3 = coopMultiplyAdd(fa0, fb3, acc3);
            acc4 = coopMultiplyAdd(fa1, fb0, acc4);
            acc5 = coopMultiplyAdd(fa1, fb1, acc5);
            acc6 = coopMultiplyAdd(fa1, fb2, acc6);
            acc7 = coopMultiplyAdd(fa1, fb3, acc7);
        }
        workgroupBarrier();
    }

    let alpha = bitcast<f32>(P[16]);
    let beta = bitcast<f32>(P[17]);
    let read_c = (P[18] & 4u) != 0u;
    let g0 = m0 + wm;
    let h0 = n0 + wn;
    epilogue(acc0, sg, lane, Epi(ob, pc, g0, h0, alpha, beta, read_c));
    epilogue(acc1, sg, lane, Epi(ob, pc, g0, h0 + 16u, alpha, beta, read_c));
    epilogue(acc2, sg, lane, Epi(ob, pc, g0, h0 + 32u, alpha, beta, read_c));
    epilogue(acc3, sg, lane, Epi(ob, pc, g0, h0 + 48u, alpha, beta, read_c));
    epilogue(acc4, sg, lane, Epi(ob, pc, g0 + 16u, h0, alpha, beta, read_c));
    epilogue(acc5, sg, lane, Epi(ob, pc, g0 + 16u, h0 + 16u, alpha, beta, read_c));
    epilogue(acc6, sg, lane, Epi(ob, pc, g0 + 16u, h0 + 32u, alpha, beta, read_c));
    epilogue(acc7, sg, lane, Epi(ob, pc, g0 + 16u, h0 + 48u, alpha, beta, read_c));
}
