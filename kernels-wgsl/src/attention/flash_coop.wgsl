// Attention forward on cooperative matrices (tensor cores): f16 q, k, v, f32
// accumulation, the `flash` kernel's parameters and rows (row r = position * g +
// head-in-group of one (batch, key head)), no key chunks. A workgroup takes 64 rows
// as four subgroups of 32 invocations, each owning 16 rows and working alone: no
// workgroup barrier, no staged keys. Each subgroup holds its query rows as
// fragments, reads key and value fragments straight from the buffers (k and v bound
// as f16 arrays, rows 16-byte aligned: the host checks), and keeps its 16 x DH
// output in f32 accumulators.
//
// Per step of KT keys: scores q @ k^T (f32) through workgroup memory to the
// element-wise part (two invocations a row, 16 keys each, each from its own column
// so the rows' reads fall in different banks), weights exp2(s - m) as
// f16 back as a fragment, weights @ v into the accumulators. A cooperative
// accumulator cannot be scaled row by row, so a row's reference maximum m moves
// only when a step's maximum exceeds it by more than TH (the weights stay <= 2^TH,
// safe in f16); then the subgroup rescales its accumulators through workgroup
// memory, which after the first step is rare. A 16-key block past the keys' end
// reads the last 16 keys instead (every load in bounds) with the keys it repeats
// masked. Scores are in log2 units (exp2).
//
// The prelude sets DH (a multiple of 16 up to 128) and the stores st_o / st2_o;
// q, k, v are bound as f16 arrays IA, IB, IC.

const CR: u32 = 64u;              // rows per workgroup
const CT: u32 = 128u;             // invocations: four subgroups of 32
const KT: u32 = 32u;              // keys per step (64: slower, run 169)
const NB: u32 = KT / 16u;         // 16-key blocks per step
const TH: f32 = 8.0;              // growth of a row's maximum (log2) before a rescale
const CNEG: f32 = -3.0e38;
// Halves per row of a subgroup's area: its query rows (16 x DH), then in their
// place its step's weights (16 x KT).
const QW: u32 = max(DH, KT);

var<workgroup> cq: array<f16, 4u * 16u * QW>;
// Per subgroup: its step's scores (16 x KT), or one 16 x 16 output block.
var<workgroup> cs: array<f32, 4u * 16u * KT>;

// Scores of the subgroup's rows against the 16 keys whose rows start at `at`
// (stride ks), into its scores from element dst (row stride KT).
fn coop_scores(q0: coop_mat16x16<f16, A>, q1: coop_mat16x16<f16, A>, q2: coop_mat16x16<f16, A>,
               q3: coop_mat16x16<f16, A>, q4: coop_mat16x16<f16, A>, q5: coop_mat16x16<f16, A>,
               q6: coop_mat16x16<f16, A>, q7: coop_mat16x16<f16, A>, at: u32, ks: u32, dst: u32) {
    var s = coop_mat16x16<f32, C>();
    s = coopMultiplyAdd(q0, coopLoad<coop_mat16x16<f16, B>>(&IB[at], ks), s);
    if (DH > 16u) { s = coopMultiplyAdd(q1, coopLoad<coop_mat16x16<f16, B>>(&IB[at + 16u], ks), s); }
    if (DH > 32u) { s = coopMultiplyAdd(q2, coopLoad<coop_mat16x16<f16, B>>(&IB[at + 32u], ks), s); }
    if (DH > 48u) { s = coopMultiplyAdd(q3, coopLoad<coop_mat16x16<f16, B>>(&IB[at + 48u], ks), s); }
    if (DH > 64u) { s = coopMultiplyAdd(q4, coopLoad<coop_mat16x16<f16, B>>(&IB[at + 64u], ks), s); }
    if (DH > 80u) { s = coopMultiplyAdd(q5, coopLoad<coop_mat16x16<f16, B>>(&IB[at + 80u], ks), s); }
    if (DH > 96u) { s = coopMultiplyAdd(q6, coopLoad<coop_mat16x16<f16, B>>(&IB[at + 96u], ks), s); }
    if (DH > 112u) { s = coopMultiplyAdd(q7, coopLoad<coop_mat16x16<f16, B>>(&IB[at + 112u], ks), s); }
    coopStoreT(s, &cs[dst], KT);
}

// Values of keys from `at` (stride vs), dims 16 i .. 16 i + 16, row-major.
fn coop_v(at: u32, i: u32, vs: u32) -> coop_mat16x16<f16, B> {
    return coopLoadT<coop_mat16x16<f16, B>>(&IC[at + 16u * i], vs);
}

// An accumulator with row `lane / 2` times f (through the subgroup's scores area).
fn coop_scale(o: coop_mat16x16<f32, C>, sb: u32, lane: u32, f: f32) -> coop_mat16x16<f32, C> {
    coopStoreT(o, &cs[sb], 16u);
    subgroupBarrier();
    let e = sb + lane * 8u;
    for (var j = 0u; j < 8u; j++) { cs[e + j] *= f; }
    subgroupBarrier();
    let r = coopLoadT<coop_mat16x16<f32, C>>(&cs[sb], 16u);
    subgroupBarrier();
    return r;
}

// Output dims 16 i .. 16 i + 16 of the subgroup's rows times inv: invocation `lane`
// writes row lane / 2, eight consecutive dims (whole words for f16).
fn coop_out(o: coop_mat16x16<f32, C>, i: u32, sb: u32, lane: u32, live: bool, orow: u32, inv: f32) {
    coopStoreT(o, &cs[sb], 16u);
    subgroupBarrier();
    if (live) {
        let src = sb + lane * 8u;
        let e = orow * DH + 16u * i + (lane % 2u) * 8u;
        for (var j = 0u; j < 8u; j += 2u) {
            let v = vec2<f32>(cs[src + j], cs[src + j + 1u]) * inv;
            if (LO == 1u) {
                O[(e + j) >> 1u] = st2_o(v);
            } else {
                O[e + j] = st_o(v.x);
                O[e + j + 1u] = st_o(v.y);
            }
        }
    }
    subgroupBarrier();
}

@compute @workgroup_size(CT)
fn flash_coop(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[6]) { return; }
    let rows = P[0];
    let g = P[1];
    let lq = P[2];
    let lk = P[3];
    // One chunk of keys (no split-KV here).
    let cell = flash_cell(t);
    let blk = cell.blk;
    let hk = cell.hk;
    let b = cell.b;
    let r0 = blk * CR + 16u * sg;
    if (r0 >= rows) { return; }
    let nr = min(16u, rows - r0);
    let mode = P[8];
    let shift = i32(lk) - i32(lq);

    // The keys any of the subgroup's rows sees: [k_lo, k_end).
    var k_lo = 0;
    var k_end = i32(lk);
    if (mode >= 1u) { k_end = min(k_end, i32((r0 + nr - 1u) / g) + shift + 1); }
    if (mode == 2u) { k_lo = max(0, i32(r0 / g) + shift - i32(P[9]) + 1); }

    // This invocation's row (lane / 2) and half of each step's keys (lane % 2).
    let my = lane / 2u;
    let half = lane % 2u;
    let live = my < nr;
    let r = r0 + min(my, nr - 1u);
    let pos = r / g;
    let h = hk * g + r % g;
    var hi = i32(lk) - 1;
    var lo = 0;
    if (mode >= 1u) { hi = i32(pos) + shift; }
    if (mode == 2u) { lo = hi - i32(P[9]) + 1; }

    // The query rows, staged, then held as fragments.
    let qb = P[10] + b * P[11] + h * P[12] + pos * P[13];
    let sq = sg * 16u * QW;
    for (var c = half * (DH / 2u); c < (half + 1u) * (DH / 2u); c++) {
        var x = f16(0.0);
        if (live) { x = IA[qb + c]; }
        cq[sq + my * DH + c] = x;
    }
    subgroupBarrier();
    let q0 = coopLoadT<coop_mat16x16<f16, A>>(&cq[sq], DH);
    var q1 = coop_mat16x16<f16, A>();
    var q2 = coop_mat16x16<f16, A>();
    var q3 = coop_mat16x16<f16, A>();
    var q4 = coop_mat16x16<f16, A>();
    var q5 = coop_mat16x16<f16, A>();
    var q6 = coop_mat16x16<f16, A>();
    var q7 = coop_mat16x16<f16, A>();
    if (DH > 16u) { q1 = coopLoadT<coop_mat16x16<f16, A>>(&cq[sq + 16u], DH); }
    if (DH > 32u) { q2 = coopLoadT<coop_mat16x16<f16, A>>(&cq[sq + 32u], DH); }
    if (DH > 48u) { q3 = coopLoadT<coop_mat16x16<f16, A>>(&cq[sq + 48u], DH); }
    if (DH > 64u) { q4 = coopLoadT<coop_mat16x16<f16, A>>(&cq[sq + 64u], DH); }
    if (DH > 80u) { q5 = coopLoadT<coop_mat16x16<f16, A>>(&cq[sq + 80u], DH); }
    if (DH > 96u) { q6 = coopLoadT<coop_mat16x16<f16, A>>(&cq[sq + 96u], DH); }
    if (DH > 112u) { q7 = coopLoadT<coop_mat16x16<f16, A>>(&cq[sq + 112u], DH); }
    subgroupBarrier();

    let scale = bitcast<f32>(P[7]);
    let kb = P[14] + b * P[15] + hk * P[16];
    let vb = P[18] + b * P[19] + hk * P[20];
    let ks = P[17];
    let vs = P[21];
    let sb = sg * 16u * KT;
    // This invocation's scores and weights: row `my`, columns KT / 2 half .. + KT / 2
    // of a step.
    let srow = sb + my * KT + (KT / 2u) * half;
    let prow = sq + my * KT + (KT / 2u) * half;
    var m = CNEG;   // the row's reference maximum
    var l = 0.0;    // this invocation's share of the row's sum of weights
    var o0 = coop_mat16x16<f32, C>();
    var o1 = coop_mat16x16<f32, C>();
    var o2 = coop_mat16x16<f32, C>();
    var o3 = coop_mat16x16<f32, C>();
    var o4 = coop_mat16x16<f32, C>();
    var o5 = coop_mat16x16<f32, C>();
    var o6 = coop_mat16x16<f32, C>();
    var o7 = coop_mat16x16<f32, C>();
    for (var kt = (k_lo / i32(KT)) * i32(KT); kt < k_end; kt += i32(KT)) {
        // Block bi's first key, kept inside the keys (lk >= 16: the host checks).
        for (var bi = 0u; bi < NB; bi++) {
            let j = min(u32(kt) + 16u * bi, lk - 16u);
            coop_scores(q0, q1, q2, q3, q4, q5, q6, q7, kb + j * ks, ks, sb + 16u * bi);
        }
        subgroupBarrier();

        // The step's maximum of the row, then its weights against the reference.
        // Each row's invocation starts at its own column (the rows' reads then fall
        // in different banks).
        var tmax = CNEG;
        let rot = (my + 16u * half) % (KT / 2u);
        for (var c0 = 0u; c0 < KT / 2u; c0++) {
            let c = (c0 + rot) % (KT / 2u);
            let col = (KT / 2u) * half + c;
            let fresh = kt + i32(col & ~15u);
            let kj = i32(min(u32(fresh), lk - 16u) + (col & 15u));
            if (kj >= fresh && kj >= lo && kj <= hi) { tmax = max(tmax, cs[srow + c] * scale); }
        }
        tmax = max(tmax, subgroupShuffleXor(tmax, 1u));
        let grow = tmax > m + TH;
        var f = 1.0;
        if (grow) {
            f = exp2(m - tmax);
            m = tmax;
        }
        var lt = 0.0;
        for (var c0 = 0u; c0 < KT / 2u; c0++) {
            let c = (c0 + rot) % (KT / 2u);
            let col = (KT / 2u) * half + c;
            let fresh = kt + i32(col & ~15u);
            let kj = i32(min(u32(fresh), lk - 16u) + (col & 15u));
            var p = 0.0;
            if (kj >= fresh && kj >= lo && kj <= hi) { p = exp2(cs[srow + c] * scale - m); }
            lt += p;
            cq[prow + c] = f16(p);
        }
        l = l * f + lt;
        subgroupBarrier();
        if (subgroupAny(grow)) {
            o0 = coop_scale(o0, sb, lane, f);
            if (DH > 16u) { o1 = coop_scale(o1, sb, lane, f); }
            if (DH > 32u) { o2 = coop_scale(o2, sb, lane, f); }
            if (DH > 48u) { o3 = coop_scale(o3, sb, lane, f); }
            if (DH > 64u) { o4 = coop_scale(o4, sb, lane, f); }
            if (DH > 80u) { o5 = coop_scale(o5, sb, lane, f); }
            if (DH > 96u) { o6 = coop_scale(o6, sb, lane, f); }
            if (DH > 112u) { o7 = coop_scale(o7, sb, lane, f); }
        }

        // weights @ v.
        for (var bi = 0u; bi < NB; bi++) {
            let pf = coopLoadT<coop_mat16x16<f16, A>>(&cq[sq + 16u * bi], KT);
            let v = vb + min(u32(kt) + 16u * bi, lk - 16u) * vs;
            o0 = coopMultiplyAdd(pf, coop_v(v, 0u, vs), o0);
            if (DH > 16u) { o1 = coopMultiplyAdd(pf, coop_v(v, 1u, vs), o1); }
            if (DH > 32u) { o2 = coopMultiplyAdd(pf, coop_v(v, 2u, vs), o2); }
            if (DH > 48u) { o3 = coopMultiplyAdd(pf, coop_v(v, 3u, vs), o3); }
            if (DH > 64u) { o4 = coopMultiplyAdd(pf, coop_v(v, 4u, vs), o4); }
            if (DH > 80u) { o5 = coopMultiplyAdd(pf, coop_v(v, 5u, vs), o5); }
            if (DH > 96u) { o6 = coopMultiplyAdd(pf, coop_v(v, 6u, vs), o6); }
            if (DH > 112u) { o7 = coopMultiplyAdd(pf, coop_v(v, 7u, vs), o7); }
        }
        subgroupBarrier();
    }

    // The output, normalised (a row that sees no key: zeros).
    let total = l + subgroupShuffleXor(l, 1u);
    let inv = select(0.0, 1.0 / total, total > 0.0);
    let orow = (b * P[4] * g + h) * lq + pos;
    coop_out(o0, 0u, sb, lane, live, orow, inv);
    if (DH > 16u) { coop_out(o1, 1u, sb, lane, live, orow, inv); }
    if (DH > 32u) { coop_out(o2, 2u, sb, lane, live, orow, inv); }
    if (DH > 48u) { coop_out(o3, 3u, sb, lane, live, orow, inv); }
    if (DH > 64u) { coop_out(o4, 4u, sb, lane, live, orow, inv); }
    if (DH > 80u) { coop_out(o5, 5u, sb, lane, live, orow, inv); }
    if (DH > 96u) { coop_out(o6, 6u, sb, lane, live, orow, inv); }
    if (DH > 112u) { coop_out(o7, 7u, sb, lane, live, orow, inv); }
}
