// Stable LSD radix argsort of long rows, RADIX_BITS bits per pass. One workgroup
// (WG = 256) per tile of RADIX_TILE positions of one row; elements are (key, index)
// pairs, two u32 words each, in a scratch buffer of rows * len pairs. A pass is:
// radix_hist (each tile's digit counts, laid out [row][digit][tile]), an exclusive
// scan of that table along each row (the scan kernels), radix_scatter (each tile's
// pairs reordered by digit in workgroup memory, then written to their places).
//
// Parameters: [rows, len, tiles per row, shift, x_off, flags, 0, 0]. flags: 1 the
// first pass (keys from input a through sort_key, indices are positions), 2 the last
// pass (write only the indices, one word each).

const RADIX_TILE: u32 = 1024u;       // 4 consecutive positions per invocation
const RADIX_DIGITS: u32 = 16u;

var<workgroup> RH: array<atomic<u32>, 16>;

fn radix_key(first: bool, r: u32, p: u32) -> u32 {
    let e = r * P[1] + p;
    if (first) { return sort_key(ld_a(P[4] + e)); }
    return wa(2u * e);
}

fn radix_tile(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.x + wid.y * nwg.x; }

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
            atomicAdd(&RH[(radix_key(first, r, p) >> P[3]) & 15u], 1u);
        }
    }
    workgroupBarrier();
    if (valid && lid < RADIX_DIGITS) {
        O[(r * RADIX_DIGITS + lid) * tiles + t] = atomicLoad(&RH[lid]);
    }
}

// Counters of digit pairs, two 16-bit halves per word: word (d / 2) * WG + lid holds
// invocation lid's counts of digits d & ~1 (low) and d | 1 (high); after the scan,
// their exclusive prefixes. Reused to stage the tile's keys and indices in order.
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
    let shift = P[3];
    let first = (P[5] & 1u) != 0u;
    let g = radix_tile(wid, nwg);
    let valid = g < P[0] * tiles;
    let r = g / max(tiles, 1u);
    let t = g - r * tiles;
    let p0 = t * RADIX_TILE;
    for (var k = 0u; k < 8u; k++) { RC[k * WG + lid] = 0u; }
    // This invocation's four consecutive pairs; digit 16 marks a position past the row.
    var keys = vec4<u32>();
    var idx = vec4<u32>();
    var dig = vec4<u32>(16u);
    for (var i = 0u; i < 4u; i++) {
        let p = p0 + 4u * lid + i;
        if (valid && p < len) {
            let e = r * len + p;
            if (first) {
                keys[i] = sort_key(ld_a(P[4] + e));
                idx[i] = p;
            } else {
                keys[i] = wa(2u * e);
                idx[i] = wa(2u * e + 1u);
            }
            dig[i] = (keys[i] >> shift) & 15u;
        }
    }
    // Rank of each pair among this invocation's earlier pairs of its digit.
    var own = vec4<u32>();
    for (var i = 1u; i < 4u; i++) {
        for (var j = 0u; j < i; j++) {
            own[i] += select(0u, 1u, dig[j] == dig[i]);
        }
    }
    workgroupBarrier();
    for (var i = 0u; i < 4u; i++) {
        let d = dig[i];
        if (d < RADIX_DIGITS) {
            RC[(d >> 1u) * WG + lid] += 1u << (16u * (d & 1u));
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
    var pos = vec4<u32>();
    for (var i = 0u; i < 4u; i++) {
        let d = dig[i];
        if (d < RADIX_DIGITS) {
            pos[i] = half(RC[(d >> 1u) * WG + lid], d & 1u) + RZ[d] + own[i];
        }
    }
    workgroupBarrier();
    for (var i = 0u; i < 4u; i++) {
        if (dig[i] < RADIX_DIGITS) {
            RC[pos[i]] = keys[i];
            RC[RADIX_TILE + pos[i]] = idx[i];
        }
    }
    workgroupBarrier();
    let n = min(RADIX_TILE, len - min(p0, len));
    let last = (P[5] & 2u) != 0u;
    for (var k = 0u; k < RADIX_TILE / WG; k++) {
        let e = k * WG + lid;
        if (valid && e < n) {
            let key = RC[e];
            let dst = r * len + RB[(key >> shift) & 15u] + e;
            if (last) {
                O[dst] = RC[RADIX_TILE + e];
            } else {
                O[2u * dst] = key;
                O[2u * dst + 1u] = RC[RADIX_TILE + e];
            }
        }
    }
}
