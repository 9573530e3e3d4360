// Attention forward on cooperative matrices (tensor cores): f16 q, k, v, f32
// accumulation, the `flash` kernel's parameters and rows (row r = position * g +
// head-in-group of one (batch, key head)), no key chunks. A workgroup takes 128 rows
// as eight subgroups of 32 invocations (four ran 15-30 % slower: run 193), each
// owning 16 rows: it holds its query rows as fragments and its 16 x DH output in
// f32 accumulators. The workgroup steps
// through the keys any of its rows sees, KT at a time: each step's keys and values
// are staged in workgroup memory by 16-byte loads (k and v bound as vec4 words,
// rows on 16 bytes: the host checks), the next step's loaded into registers while
// this one is multiplied (cooperative loads straight from storage buffers ran at a
// third of staged ones: matmul's run 45).
//
// Per step: scores q @ k^T (f32) through workgroup memory to the element-wise part
// (two invocations a row, 16 keys each, each from its own column so the rows'
// reads fall in different banks), weights exp2(s - m) as f16 back as a fragment,
// weights @ v into the accumulators. A cooperative accumulator cannot be scaled
// row by row, so a row's reference maximum m moves only when a step's maximum
// exceeds it by more than TH (the weights stay <= 2^TH, safe in f16); then the
// subgroup rescales its accumulators through workgroup memory, which after the
// first step is rare. A 16-key block past the keys' end reads the last 16 keys
// instead (every load in bounds) with the keys it repeats masked. Scores are in
// log2 units (exp2).
//
// The prelude sets DH (a multiple of 16 up to 128) and the stores st_o / st2_o;
// q, k, v are bound as vec4 words IA, IB, IC.

const SG: u32 = 8u;               // subgroups of 32 a workgroup, 16 rows each
const CR: u32 = 16u * SG;         // rows per workgroup
const CT: u32 = 32u * SG;         // invocations
const KT: u32 = 32u;              // keys per step (64: slower, run 169)
const NB: u32 = KT / 16u;         // 16-key blocks per step
const TH: f32 = 8.0;              // growth of a row's maximum (log2) before a rescale
const CNEG: f32 = -3.0e38;
// Staged rows (keys, values, at first the queries) are padded by 8 halves so that
// fragment loads spread over the banks (weight rows are not: padded ones ran 12 %
// slower, run 174).
const TS: u32 = DH + 8u;
const PS: u32 = KT;
// 16-byte vectors of a step's keys (or values), and per invocation.
const KV: u32 = KT * DH / 8u;
const NV: u32 = (KV + CT - 1u) / CT;

// The step's keys (rows 0 .. KT) then values (KT .. 2 KT), as vec4<f16> (a
// cooperative load through a vec4 pointer counts its stride in vec4s); before the
// first step, the workgroup's 64 query rows.
var<workgroup> ckv: array<vec4<f16>, 2u * KT * TS / 4u>;
// Per subgroup: its step's weights (16 x KT, rows PS apart), and its step's scores
// (16 x KT) or one 16 x 16 output block; in vec4s, so that the element-wise part
// reads and writes four at once.
var<workgroup> cq: array<vec4<f16>, SG * 16u * PS / 4u>;
var<workgroup> cs: array<vec4<f32>, SG * 16u * KT / 4u>;

// Scores of the subgroup's rows against the 16 staged keys from row `kr`, into its
// scores from element dst (row stride KT).
fn coop_scores(q0: coop_mat16x16<f16, A>, q1: coop_mat16x16<f16, A>, q2: coop_mat16x16<f16, A>,
               q3: coop_mat16x16<f16, A>, q4: coop_mat16x16<f16, A>, q5: coop_mat16x16<f16, A>,
               q6: coop_mat16x16<f16, A>, q7: coop_mat16x16<f16, A>, kr: u32, dst: u32) {
    let at = kr * (TS / 4u);
    var s = coop_mat16x16<f32, C>();
    s = coopMultiplyAdd(q0, coopLoad<coop_mat16x16<f16, B>>(&ckv[at], TS / 4u), s);
    if (DH > 16u) { s = coopMultiplyAdd(q1, coopLoad<coop_mat16x16<f16, B>>(&ckv[at + 4u], TS / 4u), s); }
    if (DH > 32u) { s = coopMultiplyAdd(q2, coopLoad<coop_mat16x16<f16, B>>(&ckv[at + 8u], TS / 4u), s); }
    if (DH > 48u) { s = coopMultiplyAdd(q3, coopLoad<coop_mat16x16<f16, B>>(&ckv[at + 12u], TS / 4u), s); }
    if (DH > 64u) { s = coopMultiplyAdd(q4, coopLoad<coop_mat16x16<f16, B>>(&ckv[at + 16u], TS / 4u), s); }
    if (DH > 80u) { s = coopMultiplyAdd(q5, coopLoad<coop_mat16x16<f16, B>>(&ckv[at + 20u], TS / 4u), s); }
    if (DH > 96u) { s = coopMultiplyAdd(q6, coopLoad<coop_mat16x16<f16, B>>(&ckv[at + 24u], TS / 4u), s); }
    if (DH > 112u) { s = coopMultiplyAdd(q7, coopLoad<coop_mat16x16<f16, B>>(&ckv[at + 28u], TS / 4u), s); }
    coopStoreT(s, &cs[dst / 4u], KT / 4u);
}

// Staged values of the 16 keys from step row `kr`, dims 16 i .. 16 i + 16.
fn coop_v(kr: u32, i: u32) -> coop_mat16x16<f16, B> {
    return coopLoadT<coop_mat16x16<f16, B>>(&ckv[(KT + kr) * (TS / 4u) + 4u * i], TS / 4u);
}

// Vector j of this invocation's share of a step's keys (else values) from key kt:
// row e / (DH / 8) of the step, 8 halves at (e % (DH / 8)) * 8; zeros past the share.
fn kv_load(val: bool, li: u32, j: u32, kt: u32, lk: u32, base: u32, ld: u32) -> vec4<u32> {
    let e = li + j * CT;
    if (e >= KV) { return vec4<u32>(0u); }
    let rr = e / (DH / 8u);
    let kr = min(kt + 16u * (rr / 16u), lk - 16u) + rr % 16u;
    let at = (base + kr * ld + (e % (DH / 8u)) * 8u) >> 3u;
    if (val) { return vc(at); }
    return vb(at);
}

// Stores vector j of kv_load into the staged keys (else values). Through f32 and
// back, exactly (naga 30 types bitcast<vec2<f16>>(u32) as f32).
fn kv_store(val: bool, li: u32, j: u32, v: vec4<u32>) {
    let e = li + j * CT;
    if (e >= KV) { return; }
    let rr = e / (DH / 8u) + select(0u, KT, val);
    let i = (rr * TS + (e % (DH / 8u)) * 8u) >> 2u;
    ckv[i] = vec4<f16>(vec2<f16>(unpack2x16float(v.x)), vec2<f16>(unpack2x16float(v.y)));
    ckv[i + 1u] = vec4<f16>(vec2<f16>(unpack2x16float(v.z)), vec2<f16>(unpack2x16float(v.w)));
}

// An accumulator with row `lane / 2` times f (through the subgroup's scores area).
fn coop_scale(o: coop_mat16x16<f32, C>, sb: u32, lane: u32, f: f32) -> coop_mat16x16<f32, C> {
    coopStoreT(o, &cs[sb / 4u], 4u);
    subgroupBarrier();
    let e = sb / 4u + lane * 2u;
    cs[e] *= f;
    cs[e + 1u] *= f;
    subgroupBarrier();
    let r = coopLoadT<coop_mat16x16<f32, C>>(&cs[sb / 4u], 4u);
    subgroupBarrier();
    return r;
}

// Output dims 16 i .. 16 i + 16 of the subgroup's rows times inv: invocation `lane`
// writes row lane / 2, eight consecutive dims (whole words for f16).
fn coop_out(o: coop_mat16x16<f32, C>, i: u32, sb: u32, lane: u32, live: bool, orow: u32, inv: f32) {
    coopStoreT(o, &cs[sb / 4u], 4u);
    subgroupBarrier();
    if (live) {
        let src = sb / 4u + lane * 2u;
        let e = orow * DH + 16u * i + (lane % 2u) * 8u;
        for (var j = 0u; j < 8u; j += 2u) {
            let v = vec2<f32>(cs[src + j / 4u][j % 4u], cs[src + j / 4u][j % 4u + 1u]) * inv;
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

// An invocation's 16 scores of a step with no key masked (from element srow, in
// vec4s, the rows rotated by `rot` so that they fall in different banks): their
// maximum and the sum of their weights against the reference m, the weights
// stored as f16 from element prow.
fn coop_weights(srow: u32, prow: u32, rot: u32, scale: f32, m: f32) -> vec2<f32> {
    var tmax = CNEG;
    var lt = 0.0;
    for (var c0 = 0u; c0 < KT / 8u; c0++) {
        let c = (c0 + rot) % (KT / 8u);
        let v = cs[srow / 4u + c] * scale;
        tmax = max(tmax, max(max(v.x, v.y), max(v.z, v.w)));
        let p = exp2(v - vec4<f32>(m));
        lt += (p.x + p.y) + (p.z + p.w);
        cq[prow / 4u + c] = vec4<f16>(p);
    }
    return vec2<f32>(tmax, lt);
}

// Whether a row that sees keys lo ..= hi counts column `col` of the step from key kt:
// its 16-key block, kept inside the keys, reads the last 16 instead past the end, and
// a key it repeats from the block before is masked.
fn coop_seen(kt: i32, col: u32, lk: u32, lo: i32, hi: i32) -> bool {
    let fresh = kt + i32(col & ~15u);
    let kj = i32(min(u32(fresh), lk - 16u) + (col & 15u));
    return kj >= fresh && kj >= lo && kj <= hi;
}

@compute @workgroup_size(CT)
fn flash_coop(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32,
              @builtin(local_invocation_index) li: u32) {
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
    let w0 = blk * CR;
    let wr = min(CR, rows - w0);
    let r0 = w0 + 16u * sg;
    // A subgroup past the rows stages its share of the keys and writes nothing.
    var nr = 0u;
    if (r0 < rows) { nr = min(16u, rows - r0); }
    let mode = P[8];
    let shift = i32(lk) - i32(lq);

    // The keys any of the workgroup's rows sees: [k_lo, k_end) (its subgroups step
    // through them together: they share the staged keys).
    var k_lo = 0;
    var k_end = i32(lk);
    if (mode >= 1u) { k_end = min(k_end, i32((w0 + wr - 1u) / g) + shift + 1); }
    if (mode == 2u) { k_lo = max(0, i32(w0 / g) + shift - i32(P[9]) + 1); }

    // This invocation's row (lane / 2) and half of each step's keys (lane % 2).
    let my = lane / 2u;
    let half = lane % 2u;
    let live = my < nr;
    let r = min(r0 + min(my, max(nr, 1u) - 1u), rows - 1u);
    let pos = r / g;
    let h = hk * g + r % g;
    var hi = i32(lk) - 1;
    var lo = 0;
    if (mode >= 1u) { hi = i32(pos) + shift; }
    if (mode == 2u) { lo = hi - i32(P[9]) + 1; }

    // The query rows, staged (in the keys' place, four subgroups at a time), then
    // held as fragments.
    let qb = P[10] + b * P[11] + h * P[12] + pos * P[13];
    let sq = (sg % 4u) * 16u * TS;
    let qa = sq / 4u;
    var q0 = coop_mat16x16<f16, A>();
    var q1 = coop_mat16x16<f16, A>();
    var q2 = coop_mat16x16<f16, A>();
    var q3 = coop_mat16x16<f16, A>();
    var q4 = coop_mat16x16<f16, A>();
    var q5 = coop_mat16x16<f16, A>();
    var q6 = coop_mat16x16<f16, A>();
    var q7 = coop_mat16x16<f16, A>();
    for (var round = 0u; round < SG / 4u; round++) {
        if (sg / 4u == round) {
            for (var c = half * (DH / 2u); c < (half + 1u) * (DH / 2u); c++) {
                var x = f16(0.0);
                if (live) { x = f16(ld_a(qb + c)); }
                let e = sq + my * TS + c;
                ckv[e >> 2u][e & 3u] = x;
            }
            subgroupBarrier();
            q0 = coopLoadT<coop_mat16x16<f16, A>>(&ckv[qa], TS / 4u);
            if (DH > 16u) { q1 = coopLoadT<coop_mat16x16<f16, A>>(&ckv[qa + 4u], TS / 4u); }
            if (DH > 32u) { q2 = coopLoadT<coop_mat16x16<f16, A>>(&ckv[qa + 8u], TS / 4u); }
            if (DH > 48u) { q3 = coopLoadT<coop_mat16x16<f16, A>>(&ckv[qa + 12u], TS / 4u); }
            if (DH > 64u) { q4 = coopLoadT<coop_mat16x16<f16, A>>(&ckv[qa + 16u], TS / 4u); }
            if (DH > 80u) { q5 = coopLoadT<coop_mat16x16<f16, A>>(&ckv[qa + 20u], TS / 4u); }
            if (DH > 96u) { q6 = coopLoadT<coop_mat16x16<f16, A>>(&ckv[qa + 24u], TS / 4u); }
            if (DH > 112u) { q7 = coopLoadT<coop_mat16x16<f16, A>>(&ckv[qa + 28u], TS / 4u); }
        }
        workgroupBarrier();
    }

    let scale = bitcast<f32>(P[7]);
    let kb = P[14] + b * P[15] + hk * P[16];
    let vb_ = P[18] + b * P[19] + hk * P[20];
    let ks = P[17];
    let vs = P[21];
    let sb = sg * 16u * KT;
    let sp = sg * 16u * PS;
    // This invocation's scores and weights: row `my`, columns KT / 2 half .. + KT / 2
    // of a step.
    let srow = sb + my * KT + (KT / 2u) * half;
    let prow = sp + my * PS + (KT / 2u) * half;
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
    // The next step's keys and values, in registers.
    var rk: array<vec4<u32>, NV>;
    var rv: array<vec4<u32>, NV>;
    let k0 = (k_lo / i32(KT)) * i32(KT);
    if (k0 < k_end) {
        for (var j = 0u; j < NV; j++) {
            rk[j] = kv_load(false, li, j, u32(k0), lk, kb, ks);
            rv[j] = kv_load(true, li, j, u32(k0), lk, vb_, vs);
        }
    }
    for (var kt = k0; kt < k_end; kt += i32(KT)) {
        // Every fragment read of the last step (and of the queries) is done.
        workgroupBarrier();
        for (var j = 0u; j < NV; j++) {
            kv_store(false, li, j, rk[j]);
            kv_store(true, li, j, rv[j]);
        }
        workgroupBarrier();
        if (kt + i32(KT) < k_end) {
            for (var j = 0u; j < NV; j++) {
                rk[j] = kv_load(false, li, j, u32(kt) + KT, lk, kb, ks);
                rv[j] = kv_load(true, li, j, u32(kt) + KT, lk, vb_, vs);
            }
        }
        for (var bi = 0u; bi < NB; bi++) {
            coop_scores(q0, q1, q2, q3, q4, q5, q6, q7, 16u * bi, sb + 16u * bi);
        }
        subgroupBarrier();

        // The step's maximum of the row, then its weights against the reference.
        // Each row's invocation starts at its own column (the rows' reads then fall
        // in different banks): vec4 by vec4 where no key is masked, else one by one.
        var tmax = CNEG;
        var lt = 0.0;
        let rot = my % (KT / 2u);
        // Whether every key of the step is inside the keys and this row's range: no
        // masks (all but the steps on the diagonal and at the ends).
        let whole = kt + i32(KT) <= i32(lk) && kt >= lo && kt + i32(KT) - 1 <= hi;
        if (whole) {
            // The weights against the current reference in the same pass (a step
            // rarely moves it; they are redone below when it does).
            let r = coop_weights(srow, prow, rot, scale, m);
            tmax = r.x;
            lt = r.y;
        } else {
            for (var c0 = 0u; c0 < KT / 2u; c0++) {
                let c = (c0 + rot) % (KT / 2u);
                let e = srow + c;
                if (coop_seen(kt, (KT / 2u) * half + c, lk, lo, hi)) { tmax = max(tmax, cs[e / 4u][e % 4u] * scale); }
            }
        }
        tmax = max(tmax, subgroupShuffleXor(tmax, 1u));
        let grow = tmax > m + TH;
        var f = 1.0;
        if (grow) {
            f = exp2(m - tmax);
            m = tmax;
        }
        if (whole) {
            if (grow) { lt = coop_weights(srow, prow, rot, scale, m).y; }
        } else {
            for (var c0 = 0u; c0 < KT / 2u; c0++) {
                let c = (c0 + rot) % (KT / 2u);
                let e = srow + c;
                var p = 0.0;
                if (coop_seen(kt, (KT / 2u) * half + c, lk, lo, hi)) { p = exp2(cs[e / 4u][e % 4u] * scale - m); }
                lt += p;
                let w = prow + c;
                cq[w / 4u][w % 4u] = f16(p);
            }
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
            let pf = coopLoadT<coop_mat16x16<f16, A>>(&cq[(sp + 16u * bi) / 4u], PS / 4u);
            let v = 16u * bi;
            o0 = coopMultiplyAdd(pf, coop_v(v, 0u), o0);
            if (DH > 16u) { o1 = coopMultiplyAdd(pf, coop_v(v, 1u), o1); }
            if (DH > 32u) { o2 = coopMultiplyAdd(pf, coop_v(v, 2u), o2); }
            if (DH > 48u) { o3 = coopMultiplyAdd(pf, coop_v(v, 3u), o3); }
            if (DH > 64u) { o4 = coopMultiplyAdd(pf, coop_v(v, 4u), o4); }
            if (DH > 80u) { o5 = coopMultiplyAdd(pf, coop_v(v, 5u), o5); }
            if (DH > 96u) { o6 = coopMultiplyAdd(pf, coop_v(v, 6u), o6); }
            if (DH > 112u) { o7 = coopMultiplyAdd(pf, coop_v(v, 7u), o7); }
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
