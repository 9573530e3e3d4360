// Stable LSD radix sort of long rows, 8 bits per pass, ranked with subgroup ballots
// (radix.wgsl's 4-bit passes are the path without subgroups). Same passes, pairs and
// parameters as radix.wgsl: radix8_hist (each tile's digit counts, laid out
// [row][digit][tile]), an exclusive scan of that table along each row, radix8_scatter.
//
// WG is 8 subgroups of the adapter's smallest size (at most 8 subgroups of any size
// it runs, each of at most 32 lanes: a ballot is one word), a tile R8_PER * WG
// positions. Subgroup s (a dense index, in no assumed relation to invocation
// indices) owns tile positions [s * 8z, (s + 1) * 8z) for subgroups of z: round i,
// lane l holds s * 8z + i * z + l, so (s, i, l) is position order and ranking in that
// order keeps the sort stable.

const R8_PER: u32 = 8u;
const R8_DIGITS: u32 = 256u;
const R8_GROUPS: u32 = 8u;

// Per subgroup and digit: counts, then their exclusive prefix over subgroups; then
// the tile's keys, then its values, staged in sorted order. Slot 2048 takes the
// writes of lanes past the row (never read).
var<workgroup> R8H: array<atomic<u32>, 2049>;
var<workgroup> R8D: array<u32, 256>;          // per digit: tile start, then row place - tile start
var<workgroup> R8M: array<atomic<u32>, 8>;    // bit per subgroup's lowest invocation
var<workgroup> R8T: array<u32, 8>;            // per subgroup: its invocations' digit totals

fn r8_digit(key: u32) -> u32 { return (key >> P[3]) & (R8_DIGITS - 1u); }

// Lanes below `lane`, as a ballot's first word (subgroups of at most 32 lanes).
fn r8_below(lane: u32) -> u32 { return (1u << lane) - 1u; }

// The valid lanes of this subgroup whose digit equals d (nine ballots: validity, then
// one a bit, each kept where this lane's bit agrees).
fn r8_match(d: u32, valid: bool) -> u32 {
    var m = subgroupBallot(valid).x;
    for (var b = 0u; b < 8u; b++) {
        let bit = (d >> b) & 1u;
        m &= ~(subgroupBallot(bit != 0u).x ^ (0u - bit));
    }
    return m;
}

// Lane's rank among the elements of digit d (R8_DIGITS: none) this subgroup counted
// in row `row` of R8H, which then counts this round's (its lanes m) too. Every lane
// runs the same instructions (no branch: without guaranteed reconvergence, a branch
// between ballots could split them); lanes of one digit read, then write, the same
// values.
fn r8_rank(row: u32, d: u32, m: u32, below: u32) -> u32 {
    let at = select(2048u, row * R8_DIGITS + d, d < R8_DIGITS);
    let cur = atomicLoad(&R8H[at]);
    atomicStore(&R8H[at], cur + countOneBits(m));
    return cur + countOneBits(m & below);
}

// This subgroup's dense index: how many subgroups have a lower lowest invocation.
fn r8_subgroup(lid: u32) -> u32 {
    if (lid < 8u) { atomicStore(&R8M[lid], 0u); }
    workgroupBarrier();
    let first = subgroupMin(lid);
    if (lid == first) { atomicOr(&R8M[first >> 5u], 1u << (first & 31u)); }
    workgroupBarrier();
    var s = countOneBits(atomicLoad(&R8M[first >> 5u]) & ((1u << (first & 31u)) - 1u));
    for (var w = 0u; w < (first >> 5u); w++) { s += countOneBits(atomicLoad(&R8M[w])); }
    return s;
}

@compute @workgroup_size(WG)
fn radix8_hist(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let lid = lid3.x;
    let len = P[1];
    let tiles = P[2];
    let g = radix_tile(wid, nwg);
    let valid = g < P[0] * tiles;
    for (var e = lid; e < R8_GROUPS * R8_DIGITS; e += WG) { atomicStore(&R8H[e], 0u); }
    let s = r8_subgroup(lid);
    let r = min(g / max(tiles, 1u), P[0] - 1u);
    let t = g - r * tiles;
    let first = (P[5] & 1u) != 0u;
    // Counted per subgroup (positions in any order), then summed; lanes past the
    // row count in the unread slot.
    for (var k = 0u; k < R8_PER; k++) {
        let p = t * R8_PER * WG + k * WG + lid;
        let d = r8_digit(radix_key(first, r, min(p, len - 1u)));
        atomicAdd(&R8H[select(2048u, s * R8_DIGITS + d, valid && p < len)], 1u);
    }
    workgroupBarrier();
    if (valid) {
        for (var d = lid; d < R8_DIGITS; d += WG) {
            var c = 0u;
            for (var h = 0u; h < R8_GROUPS; h++) { c += atomicLoad(&R8H[h * R8_DIGITS + d]); }
            O[(r * R8_DIGITS + d) * tiles + t] = c;
        }
    }
}

@compute @workgroup_size(WG)
fn radix8_scatter(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                  @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) z: u32) {
    let lid = lid3.x;
    let len = P[1];
    let tiles = P[2];
    let count = P[0] * len;
    let first = (P[5] & 1u) != 0u;
    let last = (P[5] & 2u) != 0u;
    let values = (P[5] & 4u) != 0u;
    let g = radix_tile(wid, nwg);
    let valid = g < P[0] * tiles;
    let r = min(g / max(tiles, 1u), P[0] - 1u);
    let t = g - r * tiles;
    let p0 = t * R8_PER * WG;
    for (var e = lid; e < R8_GROUPS * R8_DIGITS; e += WG) { atomicStore(&R8H[e], 0u); }
    let s = r8_subgroup(lid);
    // This invocation's positions; digit 256 marks one past the row.
    var keys: array<u32, 8>;
    var idx: array<u32, 8>;
    var dig: array<u32, 8>;
    var rank: array<u32, 8>;
    let below = r8_below(lane);
    for (var i = 0u; i < R8_PER; i++) {
        let p = p0 + s * R8_PER * z + i * z + lane;
        // Lanes past the row read its last element (no branch before the ballots).
        let pc = min(p, len - 1u);
        keys[i] = radix_key(first, r, pc);
        idx[i] = radix_carried(first, values, r, pc);
        dig[i] = select(R8_DIGITS, r8_digit(keys[i]), valid && p < len);
    }
    // The rounds' matches first (independent of one another), then the counters.
    var peers: array<u32, 8>;
    for (var i = 0u; i < R8_PER; i++) { peers[i] = r8_match(dig[i] & (R8_DIGITS - 1u), dig[i] < R8_DIGITS); }
    for (var i = 0u; i < R8_PER; i++) { rank[i] = r8_rank(s, dig[i], peers[i], below); }
    workgroupBarrier();
    // Per digit (each invocation R8_DIGITS / WG consecutive ones, in (s, lane)
    // order): counts to exclusive prefixes over subgroups, and the digits' totals.
    let q = R8_DIGITS / WG;
    let d0 = (s * z + lane) * q;
    var tot: array<u32, 8>;
    var sum = 0u;
    for (var j = 0u; j < q; j++) {
        var run = 0u;
        for (var h = 0u; h < R8_GROUPS; h++) {
            let c = atomicLoad(&R8H[h * R8_DIGITS + d0 + j]);
            atomicStore(&R8H[h * R8_DIGITS + d0 + j], run);
            run += c;
        }
        tot[j] = run;
        sum += run;
    }
    let before = subgroupExclusiveAdd(sum);
    let all = subgroupAdd(sum);
    if (lane == 0u) { R8T[s] = all; }
    workgroupBarrier();
    var start = before;
    for (var h = 0u; h < s; h++) { start += R8T[h]; }
    for (var j = 0u; j < q; j++) {
        R8D[d0 + j] = start;
        start += tot[j];
    }
    workgroupBarrier();
    var pos: array<u32, 8>;
    for (var i = 0u; i < R8_PER; i++) {
        let d = dig[i];
        if (d < R8_DIGITS) { pos[i] = R8D[d] + atomicLoad(&R8H[s * R8_DIGITS + d]) + rank[i]; }
    }
    workgroupBarrier();
    if (valid) {
        for (var j = 0u; j < q; j++) {
            let d = d0 + j;
            R8D[d] = wb((r * R8_DIGITS + d) * tiles + t) - R8D[d];
        }
    }
    for (var i = 0u; i < R8_PER; i++) {
        if (dig[i] < R8_DIGITS) { atomicStore(&R8H[pos[i]], keys[i]); }
    }
    workgroupBarrier();
    // Stored from the staged order: runs of consecutive places per digit.
    let n = min(R8_PER * WG, len - min(p0, len));
    var dst: array<u32, 8>;
    for (var k = 0u; k < R8_PER; k++) {
        let e = k * WG + lid;
        if (valid && e < n) {
            let key = atomicLoad(&R8H[e]);
            dst[k] = r * len + R8D[r8_digit(key)] + e;
            if (!last) { O[dst[k]] = key; }
        }
    }
    workgroupBarrier();
    for (var i = 0u; i < R8_PER; i++) {
        if (dig[i] < R8_DIGITS) { atomicStore(&R8H[pos[i]], idx[i]); }
    }
    workgroupBarrier();
    for (var k = 0u; k < R8_PER; k++) {
        let e = k * WG + lid;
        if (valid && e < n) {
            O[select(count, 0u, last) + dst[k]] = atomicLoad(&R8H[e]);
        }
    }
}
