// Single-pass scan of contiguous lines with float accumulators (decoupled look-back
// with fallback): blocks are handed out in the order workgroups start (counter
// S[0]); each publishes its total (S[1 + g]) and, once it knows its carry, its
// inclusive prefix (S[1 + B + g]); a block reads its predecessors' words back to the
// nearest prefix. A predecessor still silent after P[7] polls has its total
// recomputed from the input here, so no workgroup ever depends on another one
// being scheduled (WebGPU promises no forward progress between workgroups). Words
// hold ~bits of the accumulator (0, a NaN pattern nothing publishes, means "not
// yet"; NaN totals are published as the canonical NaN). The carry's association
// depends on the order blocks finish: sums may differ in the last bit between runs.
//
// Parameters as scan_blocks, P[6] = B (blocks of every line), P[7] the polls of a
// silent predecessor before its total is recomputed. S: [counter, B totals,
// B prefixes], all 0 before the dispatch.

var<workgroup> BLK: u32;
var<workgroup> LOOK: vec2<u32>;      // (state: 0 silent, 1 total, 2 prefix; value)
var<workgroup> RT: array<ACC, 256>;  // fallback totals

fn publish(v: ACC) -> u32 {
    var b = bitcast<u32>(v);
    if (v != v) { b = 0x7fc00000u; }
    return ~b;
}

// Total of block j of a line starting at `row` (element offset), as the block
// computes it itself: each invocation's SCAN_K elements in order, then the tree.
fn block_total(lid: u32, row: u32, j: u32, len: u32) -> ACC {
    var s = acc_init();
    for (var k = 0u; k < SCAN_K; k++) {
        let p = j * WG * SCAN_K + lid * SCAN_K + k;
        if (p < len) { s = combine(s, acc_load(ld_a(P[4] + row + scan_pos(p, len)))); }
    }
    RT[lid] = s;
    workgroupBarrier();
    for (var d = 1u; d < WG; d <<= 1u) {
        var t = RT[lid];
        if (lid >= d) { t = combine(RT[lid - d], t); }
        workgroupBarrier();
        RT[lid] = t;
        workgroupBarrier();
    }
    return RT[WG - 1u];
}

@compute @workgroup_size(WG)
fn scan_onepass(@builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let len = P[1];
    let nb = P[3];
    let nall = P[6];
    let flags = P[5];
    if (lid == 0u) { BLK = atomicAdd(&S[0], 1u); }
    let g = workgroupUniformLoad(&BLK);
    if (g >= nall) { return; }           // padding of a folded 2-D grid
    let r = g / max(nb, 1u);
    let bi = g - r * nb;
    let p0 = bi * WG * SCAN_K;
    let row = r * len;
    for (var k = 0u; k < SCAN_K; k++) {
        let p = p0 + k * WG + lid;
        var v = acc_init();
        if (p < len) { v = acc_load(ld_a(P[4] + row + scan_pos(p, len))); }
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
    let total = ST[WG - 1u];
    if (lid == 0u) {
        if (bi == 0u) {
            atomicStore(&S[1u + nall + g], publish(total));
        } else {
            atomicStore(&S[1u + g], publish(total));
        }
    }
    // Look back (uniformly: every invocation takes the same branches).
    var carry = acc_init();
    var j = bi;
    var spins = 0u;
    loop {
        if (j == 0u) { break; }
        if (lid == 0u) {
            let w = atomicLoad(&S[1u + nall + r * nb + j - 1u]);
            if (w != 0u) {
                LOOK = vec2<u32>(2u, w);
            } else {
                let a = atomicLoad(&S[1u + r * nb + j - 1u]);
                LOOK = vec2<u32>(select(0u, 1u, a != 0u), a);
            }
        }
        let look = workgroupUniformLoad(&LOOK);
        if (look.x != 0u) {
            carry = combine(bitcast<ACC>(~look.y), carry);
            if (look.x == 2u) { break; }
            j -= 1u;
            spins = 0u;
        } else {
            spins += 1u;
            if (spins >= P[7]) {
                carry = combine(block_total(lid, row, j - 1u, len), carry);
                j -= 1u;
                spins = 0u;
            }
        }
    }
    if (lid == 0u && bi > 0u) {
        atomicStore(&S[1u + nall + g], publish(combine(carry, total)));
    }
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
    for (var k = 0u; k < SCAN_K; k++) {
        let p = p0 + k * WG + lid;
        if (p < len) { O[row + scan_pos(p, len)] = st_acc(SV[sv(k * WG + lid)]); }
    }
}
