// Attention for few rows per key head (decoding): the (up to) four rows of one
// (batch, key head) and one chunk of keys in a workgroup of 256, 16-bit k and v
// read in 16-byte loads straight from the buffers, nothing indexed at run time in
// registers (NVIDIA's driver keeps naga's loops: arrays indexed in them spill).
//
// LANES = DH / 8 adjacent invocations share a key row, 8 dims each (one load);
// the workgroup's SLOTS = 256 / LANES row slots take U keys each per block of
// KB = SLOTS * U keys. Per block: each invocation's four rows' partial scores are
// reduced over its LANES by a reduce-scatter of shuffles (each invocation ends
// with one row's score: 2 + log2(LANES) - 2 shuffles a key, not 4 log2(LANES));
// the scores go to workgroup memory, where 64 invocations a row take the block's
// maximum, rescale, and write the weights back; then every invocation adds its
// keys' weighted values to its four rows' 8 output dims. The block's values load
// while its scores are computed, the next block's keys while its softmax runs.
// At the end the slots' outputs are summed through workgroup memory, row by row.
// Scores are in log2 units (exp2).
//
// The prelude sets DH (32, 64 or 128), LANES, PARTS and the dtype helpers.
// Parameters and output as flash.wgsl's (one row block: P[5] = 1). k and v rows
// start on 16 bytes and subgroups hold at least LANES invocations (the host
// checks).

const NT: u32 = 256u;
const SLOTS: u32 = NT / LANES;
const U: u32 = 4u;
const KB: u32 = SLOTS * U;
// Scores of a row an invocation takes in the softmax (64 invocations a row).
const PER: u32 = KB / 64u;
const NEG: f32 = -3.0e38;

// Two blocks' scores, then weights ([key][row]), alternating; at the end the
// slots' outputs (two vec4s an invocation).
var<workgroup> sp: array<vec4<f32>, 512>;
// Per row: partial maxima or sums of groups of invocations.
var<workgroup> part: array<f32, 256>;
// The four rows' queries (pre-scaled): registers would cost a second workgroup per
// compute unit.
var<workgroup> qsh: array<vec4<f32>, 128>;
var<workgroup> cf: vec4<f32>;
var<workgroup> rowm: vec4<f32>;
var<workgroup> rowl: vec4<f32>;

// Eight elements of a 16-byte load, as two vec4s.
fn dec_lo(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(vec2<f32>(x2b(w.x)), vec2<f32>(x2b(w.y))); }
fn dec_hi(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(vec2<f32>(x2b(w.z)), vec2<f32>(x2b(w.w))); }
fn dev_lo(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(vec2<f32>(x2c(w.x)), vec2<f32>(x2c(w.y))); }
fn dev_hi(w: vec4<u32>) -> vec4<f32> { return vec4<f32>(vec2<f32>(x2c(w.z)), vec2<f32>(x2c(w.w))); }

fn dot8(q: u32, ka: vec4<f32>, kb: vec4<f32>) -> f32 {
    let a = fma(qsh[q], ka, qsh[q + 1u] * kb);
    return (a.x + a.y) + (a.z + a.w);
}

// The four rows' partial scores of one key (this invocation's 8 dims; qr: row r's
// first query vec4 of them in qsh).
fn dec_scores(k: vec4<u32>, q0: u32, q1: u32, q2: u32, q3: u32) -> vec4<f32> {
    let ka = dec_lo(k);
    let kb = dec_hi(k);
    return vec4<f32>(dot8(q0, ka, kb), dot8(q1, ka, kb), dot8(q2, ka, kb), dot8(q3, ka, kb));
}

// The four rows' partial scores of one key, reduced over the LANES invocations of
// its slot: invocation dl ends with row dl / (LANES / 4)'s whole score.
fn dec_reduce(p: vec4<f32>, dl: u32) -> f32 {
    let h = LANES / 2u;
    let up = (dl & h) != 0u;
    let keep = select(p.xy, p.zw, up);
    let give = select(p.zw, p.xy, up);
    let s2 = keep + subgroupShuffleXor(give, h);
    let q = LANES / 4u;
    let up2 = (dl & q) != 0u;
    var s = select(s2.x, s2.y, up2) + subgroupShuffleXor(select(s2.y, s2.x, up2), q);
    // The lanes below q (none at LANES = 4).
    if (LANES >= 16u) { s += subgroupShuffleXor(s, 2u); }
    if (LANES >= 8u) { s += subgroupShuffleXor(s, 1u); }
    return s;
}

// The maximum (max_) or sum of x over an aligned group of min(subgroup, 64)
// invocations, all of one row.
fn dec_group(x: f32, sgs: u32, max_: bool) -> f32 {
    var y = x;
    for (var o = 1u; o < min(sgs, 64u); o <<= 1u) {
        let z = subgroupShuffleXor(y, o);
        y = select(y + z, max(y, z), max_);
    }
    return y;
}

// Key j's 16-byte load for lane dl of k (at kb, row stride ks) or v, or zeros past
// the chunk.
fn dec_k(kb: u32, ks: u32, j: i32, end: i32, dl: u32) -> vec4<u32> {
    if (j >= end) { return vec4<u32>(0u); }
    return vb((kb + u32(j) * ks) / 8u + dl);
}
fn dec_v(vb_: u32, vs: u32, j: i32, end: i32, dl: u32) -> vec4<u32> {
    if (j >= end) { return vec4<u32>(0u); }
    return vc((vb_ + u32(j) * vs) / 8u + dl);
}

// Values the epilogue needs.
var<private> d_lid: u32;
var<private> d_rows: u32;
var<private> d_ob: u32;       // parts: the chunk's first output row's element
var<private> d_orow0: u32;    // (b * hq + hk * g) * lq: row r's output row is
var<private> d_g: u32;        // d_orow0 + (r % g) * lq + r / g
var<private> d_lq: u32;

// Row r of the output from the slots' two vec4s of it (oa, ob).
fn dec_out(r: u32, oa: vec4<f32>, ob: vec4<f32>) {
    let lid = d_lid;
    workgroupBarrier();
    sp[2u * lid] = oa;
    sp[2u * lid + 1u] = ob;
    workgroupBarrier();
    if (r < d_rows && lid < DH / 4u) {
        var acc = vec4<f32>(0.0);
        for (var s = 0u; s < SLOTS; s++) { acc += sp[lid + s * 2u * LANES]; }
        let orow = d_orow0 + (r % d_g) * d_lq + r / d_g;
        let m = rowm[r];
        let l = rowl[r];
        if (PARTS) {
            let o = d_ob + orow * (DH + 2u);
            O[o + 4u * lid] = bitcast<u32>(acc.x);
            O[o + 4u * lid + 1u] = bitcast<u32>(acc.y);
            O[o + 4u * lid + 2u] = bitcast<u32>(acc.z);
            O[o + 4u * lid + 3u] = bitcast<u32>(acc.w);
            if (lid == 0u) {
                O[o + DH] = bitcast<u32>(select(m * 0.6931471805599453, NEG, m == NEG));
                O[o + DH + 1u] = bitcast<u32>(l);
            }
        } else {
            let v = acc * select(0.0, 1.0 / l, l > 0.0);
            let e = orow * DH + 4u * lid;
            O[e >> 1u] = st2_o(v.xy);
            O[(e >> 1u) + 1u] = st2_o(v.zw);
        }
    }
}

@compute @workgroup_size(NT)
fn flash_decode(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
                @builtin(num_workgroups) nwg: vec3<u32>, @builtin(subgroup_size) sgs: u32) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[6]) { return; }
    let rows = P[0];
    let g = P[1];
    let lq = P[2];
    let lk = P[3];
    let cell = flash_cell(t);
    let hk = cell.hk;
    let b = cell.b;
    let split = cell.split;
    let mode = P[8];
    let shift = i32(lk) - i32(lq);
    let dl = lid % LANES;
    let slot = lid / LANES;

    // The chunk's keys, cut by the band of every row.
    var k_lo = i32(split * P[22]);
    var k_end = min(i32(lk), k_lo + i32(P[22]));
    if (mode >= 1u) { k_end = min(k_end, i32((rows - 1u) / g) + shift + 1); }
    if (mode == 2u) { k_lo = max(k_lo, shift - i32(P[9]) + 1); }
    k_lo = max(k_lo, 0);

    // This invocation's row in the softmax (64 a row) and that row's band.
    let sr = lid / 64u;
    let si = lid % 64u;
    let spos = min(sr, rows - 1u) / g;
    var hi = i32(lk) - 1;
    var lo = 0;
    if (mode >= 1u) { hi = i32(spos) + shift; }
    if (mode == 2u) { lo = hi - i32(P[9]) + 1; }

    let kb = P[14] + b * P[15] + hk * P[16];
    let vbase = P[18] + b * P[19] + hk * P[20];
    let ks = P[17];
    let vs = P[21];
    let j0 = i32(slot);
    let j1 = i32(SLOTS + slot);
    let j2 = i32(2u * SLOTS + slot);
    let j3 = i32(3u * SLOTS + slot);
    // The first block's keys, in flight while the queries load.
    var k0 = dec_k(kb, ks, k_lo + j0, k_end, dl);
    var k1 = dec_k(kb, ks, k_lo + j1, k_end, dl);
    var k2 = dec_k(kb, ks, k_lo + j2, k_end, dl);
    var k3 = dec_k(kb, ks, k_lo + j3, k_end, dl);
    // The four rows' queries (pre-scaled), a vec4 an invocation.
    let scale = bitcast<f32>(P[7]);
    if (lid < DH) {
        let rr = min(lid / (DH / 4u), rows - 1u);
        let e = P[10] + b * P[11] + (hk * g + rr % g) * P[12] + (rr / g) * P[13] + 4u * (lid % (DH / 4u));
        qsh[lid] = vec4<f32>(f32(ld_a(e)), f32(ld_a(e + 1u)), f32(ld_a(e + 2u)), f32(ld_a(e + 3u))) * scale;
    }
    workgroupBarrier();
    let q0 = 2u * dl;
    let q1 = DH / 4u + 2u * dl;
    let q2 = DH / 2u + 2u * dl;
    let q3 = 3u * DH / 4u + 2u * dl;

    // The row of this invocation's reduced score, and whether it stores it.
    let my_row = dl / (LANES / 4u);
    let writer = dl % (LANES / 4u) == 0u;

    var o0a = vec4<f32>(0.0); var o0b = vec4<f32>(0.0);
    var o1a = vec4<f32>(0.0); var o1b = vec4<f32>(0.0);
    var o2a = vec4<f32>(0.0); var o2b = vec4<f32>(0.0);
    var o3a = vec4<f32>(0.0); var o3b = vec4<f32>(0.0);
    var m = NEG;   // the running maximum of row sr
    var l = 0.0;   // this invocation's share of row sr's weights

    var buf = 0u;
    for (var base = k_lo; base < k_end; base += i32(KB)) {
        // The block's values, in flight through its scores and softmax.
        let v0 = dec_v(vbase, vs, base + j0, k_end, dl);
        let v1 = dec_v(vbase, vs, base + j1, k_end, dl);
        let v2 = dec_v(vbase, vs, base + j2, k_end, dl);
        let v3 = dec_v(vbase, vs, base + j3, k_end, dl);
        // Scores of the block's keys, one row's each after the reduction.
        let s0 = dec_reduce(dec_scores(k0, q0, q1, q2, q3), dl);
        let s1 = dec_reduce(dec_scores(k1, q0, q1, q2, q3), dl);
        let s2 = dec_reduce(dec_scores(k2, q0, q1, q2, q3), dl);
        let s3 = dec_reduce(dec_scores(k3, q0, q1, q2, q3), dl);
        let at = buf * KB;
        if (writer) {
            sp[at + u32(j0)][my_row] = s0;
            sp[at + u32(j1)][my_row] = s1;
            sp[at + u32(j2)][my_row] = s2;
            sp[at + u32(j3)][my_row] = s3;
        }
        // The next block's keys, in flight through the softmax and the values.
        let nb = base + i32(KB);
        k0 = dec_k(kb, ks, nb + j0, k_end, dl);
        k1 = dec_k(kb, ks, nb + j1, k_end, dl);
        k2 = dec_k(kb, ks, nb + j2, k_end, dl);
        k3 = dec_k(kb, ks, nb + j3, k_end, dl);
        workgroupBarrier();

        // Row sr's block maximum, over its 64 invocations.
        var bm = NEG;
        for (var i = 0u; i < PER; i++) {
            let j = si + 64u * i;
            let kj = base + i32(j);
            let s = sp[at + j][sr];
            bm = max(bm, select(NEG, s, kj < k_end && kj >= lo && kj <= hi));
        }
        let gs = min(sgs, 64u);
        bm = dec_group(bm, sgs, true);
        if (lid % gs == 0u) { part[lid / gs] = bm; }
        workgroupBarrier();
        let per_row = 64u / gs;
        var mn = m;
        for (var e = 0u; e < per_row; e++) { mn = max(mn, part[sr * per_row + e]); }
        let corr = exp2(m - mn);
        l *= corr;
        for (var i = 0u; i < PER; i++) {
            let j = si + 64u * i;
            let kj = base + i32(j);
            let s = sp[at + j][sr];
            let keep = kj < k_end && kj >= lo && kj <= hi;
            let p = select(0.0, exp2(s - mn), keep);
            sp[at + j][sr] = p;
            l += p;
        }
        m = mn;
        if (si == 0u) { cf[sr] = corr; }
        workgroupBarrier();

        // The block's weighted values.
        let c = cf;
        o0a *= c.x; o0b *= c.x; o1a *= c.y; o1b *= c.y;
        o2a *= c.z; o2b *= c.z; o3a *= c.w; o3b *= c.w;
        let p0 = sp[at + u32(j0)];
        let p1 = sp[at + u32(j1)];
        let p2 = sp[at + u32(j2)];
        let p3 = sp[at + u32(j3)];
        let v0a = dev_lo(v0); let v0b = dev_hi(v0);
        let v1a = dev_lo(v1); let v1b = dev_hi(v1);
        let v2a = dev_lo(v2); let v2b = dev_hi(v2);
        let v3a = dev_lo(v3); let v3b = dev_hi(v3);
        o0a = fma(vec4(p0.x), v0a, fma(vec4(p1.x), v1a, fma(vec4(p2.x), v2a, fma(vec4(p3.x), v3a, o0a))));
        o0b = fma(vec4(p0.x), v0b, fma(vec4(p1.x), v1b, fma(vec4(p2.x), v2b, fma(vec4(p3.x), v3b, o0b))));
        o1a = fma(vec4(p0.y), v0a, fma(vec4(p1.y), v1a, fma(vec4(p2.y), v2a, fma(vec4(p3.y), v3a, o1a))));
        o1b = fma(vec4(p0.y), v0b, fma(vec4(p1.y), v1b, fma(vec4(p2.y), v2b, fma(vec4(p3.y), v3b, o1b))));
        o2a = fma(vec4(p0.z), v0a, fma(vec4(p1.z), v1a, fma(vec4(p2.z), v2a, fma(vec4(p3.z), v3a, o2a))));
        o2b = fma(vec4(p0.z), v0b, fma(vec4(p1.z), v1b, fma(vec4(p2.z), v2b, fma(vec4(p3.z), v3b, o2b))));
        o3a = fma(vec4(p0.w), v0a, fma(vec4(p1.w), v1a, fma(vec4(p2.w), v2a, fma(vec4(p3.w), v3a, o3a))));
        o3b = fma(vec4(p0.w), v0b, fma(vec4(p1.w), v1b, fma(vec4(p2.w), v2b, fma(vec4(p3.w), v3b, o3b))));
        buf ^= 1u;
    }

    // Each row's maximum and sum of weights.
    let gs = min(sgs, 64u);
    let lsum = dec_group(l, sgs, false);
    workgroupBarrier();
    if (lid % gs == 0u) { part[lid / gs] = lsum; }
    if (si == 0u) { rowm[sr] = m; }
    workgroupBarrier();
    if (lid < 4u) {
        let per_row = 64u / gs;
        var total = 0.0;
        for (var e = 0u; e < per_row; e++) { total += part[lid * per_row + e]; }
        rowl[lid] = total;
    }

    let hq = P[4] * g;
    d_lid = lid;
    d_rows = rows;
    d_g = g;
    d_lq = lq;
    d_orow0 = (b * hq + hk * g) * lq;
    d_ob = split * P[23] * hq * lq * (DH + 2u);
    dec_out(0u, o0a, o0b);
    dec_out(1u, o1a, o1b);
    dec_out(2u, o2a, o2b);
    dec_out(3u, o3a, o3b);
}
