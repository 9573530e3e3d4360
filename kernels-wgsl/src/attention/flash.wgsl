// Flash attention forward: softmax(q k^T * scale + mask) v over keys, one pass
// with an online softmax, the key and value tiles in workgroup memory, no L x L
// scores in memory.
//
// The rows of one key head are its g query heads at each query position, row
// r = position * g + head-in-group, so grouped-query heads share the tiles. A
// workgroup takes BQ rows of one (batch, key head) and, with splits, one chunk
// of the keys. Each row has SPLIT adjacent invocations, each holding DS = DH /
// SPLIT of its query (pre-scaled) and output dims in registers; their partial
// scores are summed by subgroup shuffles. Per KC keys of a tile an invocation
// scores them, rescales its output once by the new running maximum, then adds
// the weighted values. Scores are in log2 units (exp2).
//
// The prelude sets DH, SPLIT, BQ, BK, PARTS, flash_row_sum (a score summed over
// its row's SPLIT invocations) and the dtype helpers ld_a/ld_b/ld_c (q, k, v) and
// st_o/st2_o.
//
// Parameters (u32 words; offsets and strides in elements):
//  0 R (rows per key head: g * Lq), 1 g, 2 Lq, 3 Lk, 4 Hkv, 5 row blocks per key
//  head, 6 workgroups, 7 scale * log2(e) (f32 bits), 8 mask (0 none, 1 causal,
//  2 sliding window), 9 window, 10..13 q offset and strides of batch, head and
//  position, 14..17 k's, 18..21 v's, 22 keys per split (a multiple of BK), 23 B,
//  24 BK / KC, 25 word-aligned rows (bit 0 q, 1 k, 2 v).
// Output: row-major [B, Hq, Lq, DH] of the output dtype, normalised; with PARTS,
// f32 [splits, B, Hq, Lq, DH + 2]: the unnormalised sum, the running maximum (in
// natural-log units) and the sum of weights.

const DS: u32 = DH / SPLIT;
const Q4: u32 = DS / 4u;
const NT: u32 = BQ * SPLIT;
// Keys scored before one rescale of the output.
const KC: u32 = min(8u, BK);
const ROW4: u32 = DH / 4u;
// Masked scores: finite, so differences never make NaN; exp2 of it is 0.
const NEG: f32 = -3.0e38;

var<workgroup> Ks: array<vec4<f32>, BK * ROW4>;
var<workgroup> Vs: array<vec4<f32>, BK * ROW4>;

// Four elements of q, k or v from element e: whole words where the rows start
// on word boundaries (P[25] bit 0, 1, 2 for q, k, v), else element by element.
fn flash_ld4(which: u32, e: u32) -> vec4<f32> {
    let words = (P[25] >> which) & 1u;
    if (words != 0u) {
        switch which {
            case 0u: { return flash_words_a(e); }
            case 1u: { return flash_words_b(e); }
            default: { return flash_words_c(e); }
        }
    }
    switch which {
        case 0u: { return vec4<f32>(f32(ld_a(e)), f32(ld_a(e + 1u)), f32(ld_a(e + 2u)), f32(ld_a(e + 3u))); }
        case 1u: { return vec4<f32>(f32(ld_b(e)), f32(ld_b(e + 1u)), f32(ld_b(e + 2u)), f32(ld_b(e + 3u))); }
        default: { return vec4<f32>(f32(ld_c(e)), f32(ld_c(e + 1u)), f32(ld_c(e + 2u)), f32(ld_c(e + 3u))); }
    }
}

@compute @workgroup_size(NT)
fn flash(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
         @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = wid.x + wid.y * nwg.x;
    if (t >= P[6]) { return; }
    let rows = P[0];
    let g = P[1];
    let lq = P[2];
    let lk = P[3];
    let cell = flash_cell(t);
    let blk = cell.blk;
    let hk = cell.hk;
    let b = cell.b;
    let split = cell.split;
    let row0 = blk * BQ;
    let r = row0 + lid / SPLIT;
    let c = lid % SPLIT;
    let live = r < rows;
    let pos = min(r, rows - 1u) / g;
    let h = hk * g + min(r, rows - 1u) % g;
    let mode = P[8];
    // The keys of this workgroup: its split's chunk, cut by the band of its rows.
    let shift = i32(lk) - i32(lq);
    var k_lo = i32(split * P[22]);
    var k_end = min(i32(lk), k_lo + i32(P[22]));
    if (mode >= 1u) { k_end = min(k_end, i32((min(row0 + BQ, rows) - 1u) / g) + shift + 1); }
    if (mode == 2u) { k_lo = max(k_lo, i32(row0 / g) + shift - i32(P[9]) + 1); }
    // This row's band: keys j with lo <= j <= hi.
    var hi = i32(lk) - 1;
    var lo = 0;
    if (mode >= 1u) { hi = i32(pos) + shift; }
    if (mode == 2u) { lo = hi - i32(P[9]) + 1; }

    let scale = bitcast<f32>(P[7]);
    var q: array<vec4<f32>, Q4>;
    var o: array<vec4<f32>, Q4>;
    let qb = P[10] + b * P[11] + h * P[12] + pos * P[13] + c * DS;
    for (var i = 0u; i < Q4; i++) {
        q[i] = flash_ld4(0u, qb + 4u * i) * scale;
        o[i] = vec4<f32>(0.0);
    }
    var m = NEG;
    var l = 0.0;
    let kb = P[14] + b * P[15] + hk * P[16];
    let vb = P[18] + b * P[19] + hk * P[20];
    let ksl = P[17];
    let vsl = P[21];
    var kt = (max(k_lo, 0) / i32(BK)) * i32(BK);
    for (; kt < k_end; kt += i32(BK)) {
        workgroupBarrier();
        for (var e = lid; e < BK * ROW4; e += NT) {
            let j = e / ROW4;
            let d = (e % ROW4) * 4u;
            let kj = u32(kt) + j;
            var kv = vec4<f32>(0.0);
            var vv = vec4<f32>(0.0);
            if (kj < lk) {
                kv = flash_ld4(1u, kb + kj * ksl + d);
                vv = flash_ld4(2u, vb + kj * vsl + d);
            }
            Ks[e] = kv;
            Vs[e] = vv;
        }
        workgroupBarrier();
        // KC keys at a time: their scores, one rescale, their values (a runtime
        // bound on the chunks keeps compilers from unrolling the whole tile).
        for (var j0 = 0u; j0 < P[24]; j0++) {
            var s: array<f32, KC>;
            var mt = m;
            for (var jj = 0u; jj < KC; jj++) {
                let j = j0 * KC + jj;
                var acc = vec4<f32>(0.0);
                let base = j * ROW4 + c * Q4;
                for (var i = 0u; i < Q4; i++) { acc = fma(q[i], Ks[base + i], acc); }
                let x = flash_row_sum(acc.x + acc.y + acc.z + acc.w);
                let kj = kt + i32(j);
                let keep = kj >= k_lo && kj < k_end && kj >= lo && kj <= hi;
                s[jj] = select(NEG, x, keep);
                mt = max(mt, s[jj]);
            }
            if (mt > NEG) {
                let corr = select(exp2(m - mt), 0.0, m == NEG);
                l *= corr;
                for (var i = 0u; i < Q4; i++) { o[i] *= corr; }
                for (var jj = 0u; jj < KC; jj++) {
                    let p = exp2(s[jj] - mt);
                    l += p;
                    let base = (j0 * KC + jj) * ROW4 + c * Q4;
                    for (var i = 0u; i < Q4; i++) { o[i] = fma(vec4<f32>(p), Vs[base + i], o[i]); }
                }
                m = mt;
            }
        }
    }
    if (!live) { return; }
    let hq = P[4] * g;
    let orow = ((b * hq + h) * lq + pos);
    if (PARTS) {
        let ob = (split * P[23] * hq * lq + orow) * (DH + 2u);
        for (var i = 0u; i < Q4; i++) {
            for (var j = 0u; j < 4u; j++) { O[ob + c * DS + 4u * i + j] = bitcast<u32>(o[i][j]); }
        }
        if (c == 0u) {
            O[ob + DH] = bitcast<u32>(select(m * 0.6931471805599453, NEG, m == NEG));
            O[ob + DH + 1u] = bitcast<u32>(l);
        }
        return;
    }
    let inv = select(0.0, 1.0 / l, l > 0.0);
    let ob = orow * DH + c * DS;
    for (var i = 0u; i < Q4; i++) {
        let v = o[i] * inv;
        let e = ob + 4u * i;
        if (LO == 1u) {
            O[e >> 1u] = st2_o(v.xy);
            O[(e >> 1u) + 1u] = st2_o(v.zw);
        } else {
            O[e] = st_o(v.x);
            O[e + 1u] = st_o(v.y);
            O[e + 2u] = st_o(v.z);
            O[e + 3u] = st_o(v.w);
        }
    }
}
