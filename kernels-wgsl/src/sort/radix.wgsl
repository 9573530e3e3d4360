// Stable LSD radix argsort of long rows, 4 bits (RADIX_DIGITS) per pass: the path
// without subgroups (radix8.wgsl takes 8 bits a pass with them). One workgroup
// (WG = 256) per tile of RADIX_TILE positions of one row; elements are (key, index)
// pairs in a scratch buffer of rows * len keys followed by as many indices. A pass is:
// radix_hist (each tile's digit counts, laid out [row][digit][tile]), an exclusive
// scan of that table along each row (the scan kernels), radix_scatter (each tile's
// pairs reordered by digit in workgroup memory, then written to their places).
//
// Parameters: [rows, len, tiles per row, shift, x_off, flags, 0, 0]. flags: 1 the
// first pass (keys from input a through sort_key, indices are positions), 2 the last
// pass (write only the indices, one word each), 4 each element's value as a 32-bit
// word (ld_a's) in place of its index (a sort: the last pass writes the values).

const RADIX_TILE: u32 = 2048u;       // RADIX_PER consecutive positions per invocation
const RADIX_PER: u32 = 8u;
const RADIX_DIGITS: u32 = 16u;

var<workgroup> RH: array<atomic<u32>, 16>;

// The digit of this pass (shift P[3]).
fn radix_digit(key: u32) -> u32 { return (key >> P[3]) & (RADIX_DIGITS - 1u); }

@compute @workgroup_size(WG)
fn radix_hist(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let lid = lid3.x;
    let tiles = P[2];
    let g = radix_tile(wid, nwg);
    let valid = g < P[0] * tiles;
    if (lid < RADIX_DIGITS) { atomicStore(&RH[lid], 0u); }
    workgroupBarrier();
    let r = g / max(tiles, 1u);
    let t = g - r * tiles;
    let first = (P[5] & 1u) != 0u;
    for (var k = 0u; k < RADIX_TILE / WG; k++) {
        let p = t * RADIX_TILE + k * WG + lid;
        if (valid && p < P[1]) {
            atomicAdd(&RH[radix_digit(radix_key(first, r, p))], 1u);
        }
    }
    workgroupBarrier();
    if (valid && lid < RADIX_DIGITS) {
        O[(r * RADIX_DIGITS + lid) * tiles + t] = atomicLoad(&RH[lid]);
    }
}

// Counters of digit pairs, two 16-bit halves per word: word (d / 2) * WG + lid holds
// invocation lid's counts of digits d & ~1 (low) and d | 1 (high); after the scan,
// their exclusive prefixes. Then reused to stage the tile's keys, then its indices,
// in their sorted order (so the writes are runs of consecutive places).
var<workgroup> RC: array<u32, 2048>;
var<workgroup> RS: array<u32, 256>;  // invocation totals of the counter scan
var<workgroup> RZ: array<u32, 16>;   // per digit: tile-local start - the prefix's own half
var<workgroup> RB: array<u32, 16>;   // per digit: its place in the row - tile-local start

fn half(w: u32, hi: u32) -> u32 { return (w >> (16u * hi)) & 0xffffu; }

@compute @workgroup_size(WG)
fn radix_scatter(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let lid = lid3.x;
    let len = P[1];
    let tiles = P[2];
    let count = P[0] * len;
    let first = (P[5] & 1u) != 0u;
    let last = (P[5] & 2u) != 0u;
    let values = (P[5] & 4u) != 0u;
    let g = radix_tile(wid, nwg);
    let valid = g < P[0] * tiles;
    let r = g / max(tiles, 1u);
    let t = g - r * tiles;
    let p0 = t * RADIX_TILE;
    for (var k = 0u; k < 8u; k++) { RC[k * WG + lid] = 0u; }
    // This invocation's consecutive pairs; digit 16 marks a position past the row.
    var keys: array<u32, 8>;
    var idx: array<u32, 8>;
    var dig: array<u32, 8>;
    for (var i = 0u; i < RADIX_PER; i++) {
        let p = p0 + RADIX_PER * lid + i;
        dig[i] = 16u;
        if (valid && p < len) {
            keys[i] = radix_key(first, r, p);
            idx[i] = radix_carried(first, values, r, p);
            dig[i] = radix_digit(keys[i]);
        }
    }
    workgroupBarrier();
    // Count, keeping each pair's rank among this invocation's earlier ones of its
    // digit (the invocation owns its counter words: no atomics).
    var pos: array<u32, 8>;
    for (var i = 0u; i < RADIX_PER; i++) {
        let d = dig[i];
        if (d < RADIX_DIGITS) {
            let c = (d >> 1u) * WG + lid;
            let w = RC[c];
            pos[i] = half(w, d & 1u);
            RC[c] = w + (1u << (16u * (d & 1u)));
        }
    }
    workgroupBarrier();
    // Exclusive scan of RC in index order: 8 words per invocation, then the totals.
    // Both halves add independently: neither can exceed RADIX_TILE.
    var s = 0u;
    for (var k = 0u; k < 8u; k++) { s += RC[8u * lid + k]; }
    RS[lid] = s;
    workgroupBarrier();
    for (var d = 1u; d < WG; d <<= 1u) {
        var v = RS[lid];
        if (lid >= d) { v += RS[lid - d]; }
        workgroupBarrier();
        RS[lid] = v;
        workgroupBarrier();
    }
    var run = 0u;
    if (lid > 0u) { run = RS[lid - 1u]; }
    for (var k = 0u; k < 8u; k++) {
        let c = RC[8u * lid + k];
        RC[8u * lid + k] = run;
        run += c;
    }
    workgroupBarrier();
    // Digit d = 2q + h: the prefix's half h counts digits 2q' + h (q' < q) before
    // it; the tile-local start of d counts every digit below d.
    if (lid < RADIX_DIGITS) {
        let q = lid >> 1u;
        let h = lid & 1u;
        var start = 0u;
        for (var d = 0u; d < lid; d++) {
            let e0 = RC[(d >> 1u) * WG];
            var e1 = RS[WG - 1u];
            if ((d >> 1u) + 1u < 8u) { e1 = RC[((d >> 1u) + 1u) * WG]; }
            start += half(e1, d & 1u) - half(e0, d & 1u);
        }
        RZ[lid] = start - half(RC[q * WG], h);
        if (valid) {
            RB[lid] = wb((r * RADIX_DIGITS + lid) * tiles + t) - start;
        }
    }
    workgroupBarrier();
    for (var i = 0u; i < RADIX_PER; i++) {
        let d = dig[i];
        if (d < RADIX_DIGITS) {
            pos[i] += half(RC[(d >> 1u) * WG + lid], d & 1u) + RZ[d];
        }
    }
    workgroupBarrier();
    for (var i = 0u; i < RADIX_PER; i++) {
        if (dig[i] < RADIX_DIGITS) { RC[pos[i]] = keys[i]; }
    }
    workgroupBarrier();
    let n = min(RADIX_TILE, len - min(p0, len));
    var dst: array<u32, 8>;
    for (var k = 0u; k < RADIX_PER; k++) {
        let e = k * WG + lid;
        if (valid && e < n) {
            let key = RC[e];
            dst[k] = r * len + RB[radix_digit(key)] + e;
            if (!last) { O[dst[k]] = key; }
        }
    }
    workgroupBarrier();
    for (var i = 0u; i < RADIX_PER; i++) {
        if (dig[i] < RADIX_DIGITS) { RC[pos[i]] = idx[i]; }
    }
    workgroupBarrier();
    for (var k = 0u; k < RADIX_PER; k++) {
        let e = k * WG + lid;
        if (valid && e < n) {
            O[select(count, 0u, last) + dst[k]] = RC[e];
        }
    }
}
