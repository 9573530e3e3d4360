// Scans (cumulative sum, prod, max, min) along one axis of a row-major input, with
// the reduction prelude's ACC, acc_init, acc_load, combine and st_acc. Outputs are
// 32-bit accumulators (the host casts to packed dtypes afterwards).
//
// Parameters: [rows, len, inner, nblocks, x_off, flags, 0, 0]: `rows` x `len` x
// `inner` elements, scanned along `len`. flags: 1 reverse, 2 exclusive, 4 add the
// carry of input b (one per block), 8 write only each block's total.

const SCAN_K: u32 = 8u;              // elements per invocation in scan_blocks

// WG * SCAN_K elements of one block, one padding word per 32 so that invocations
// reading their SCAN_K consecutive elements hit different banks.
var<workgroup> SV: array<ACC, 2112>;
var<workgroup> ST: array<ACC, 256>;  // per-invocation totals

fn sv(e: u32) -> u32 { return e + (e >> 5u); }

// Position in memory of logical position p of a line of `len` (reversed scans walk
// backwards).
fn scan_pos(p: u32, len: u32) -> u32 {
    return select(p, len - 1u - p, (P[5] & 1u) != 0u);
}

// One invocation per line (`inner` > 1: neighbouring invocations read neighbouring
// elements), serial along the line.
@compute @workgroup_size(WG)
fn scan_lines(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let len = P[1];
    let inner = P[2];
    let excl = (P[5] & 2u) != 0u;
    for (var t = thread_index(lid, wid, nwg); t < P[0] * inner; t += thread_count(nwg)) {
        let o = t / inner;
        let base = o * len * inner + (t - o * inner);
        var acc = acc_init();
        for (var p = 0u; p < len; p++) {
            let i = base + scan_pos(p, len) * inner;
            let v = acc_load(ld_a(P[4] + i));
            let next = combine(acc, v);
            O[i] = st_acc(select(next, acc, excl));
            acc = next;
        }
    }
}

// One workgroup per block of WG * SCAN_K positions of a contiguous line (`inner` =
// 1): coalesced loads into workgroup memory, a serial scan of SCAN_K elements per
// invocation, a tree scan of the invocation totals, coalesced stores. Long lines
// take three passes (block totals, their exclusive scan, blocks with carries).
// Barriers stay in uniform control flow: only loads and stores are guarded.
@compute @workgroup_size(WG)
fn scan_blocks(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let lid = lid3.x;
    let len = P[1];
    let nb = P[3];
    let flags = P[5];
    let g = wid.x + wid.y * nwg.x;
    let valid = g < P[0] * nb;
    let r = g / max(nb, 1u);
    let p0 = (g - r * nb) * WG * SCAN_K;
    let row = r * len;
    for (var k = 0u; k < SCAN_K; k++) {
        let p = p0 + k * WG + lid;
        var v = acc_init();
        if (valid && p < len) {
            v = acc_load(ld_a(P[4] + row + scan_pos(p, len)));
        }
        SV[sv(k * WG + lid)] = v;
    }
    workgroupBarrier();
    var s = acc_init();
    for (var k = 0u; k < SCAN_K; k++) {
        s = combine(s, SV[sv(lid * SCAN_K + k)]);
        SV[sv(lid * SCAN_K + k)] = s;
    }
    ST[lid] = s;
    workgroupBarrier();
    for (var d = 1u; d < WG; d <<= 1u) {
        var t = ST[lid];
        if (lid >= d) { t = combine(ST[lid - d], t); }
        workgroupBarrier();
        ST[lid] = t;
        workgroupBarrier();
    }
    var carry = acc_init();
    if (valid && (flags & 4u) != 0u) { carry = ld_b(g); }
    var prefix = carry;
    if (lid > 0u) { prefix = combine(carry, ST[lid - 1u]); }
    let excl = (flags & 2u) != 0u;
    var prev = prefix;
    for (var k = 0u; k < SCAN_K; k++) {
        let e = lid * SCAN_K + k;
        let incl = combine(prefix, SV[sv(e)]);
        SV[sv(e)] = select(incl, prev, excl);
        prev = incl;
    }
    workgroupBarrier();
    if (valid && (flags & 8u) != 0u) {
        if (lid == 0u) { O[g] = st_acc(ST[WG - 1u]); }
    } else if (valid) {
        for (var k = 0u; k < SCAN_K; k++) {
            let p = p0 + k * WG + lid;
            if (p < len) { O[row + scan_pos(p, len)] = st_acc(SV[sv(k * WG + lid)]); }
        }
    }
}
