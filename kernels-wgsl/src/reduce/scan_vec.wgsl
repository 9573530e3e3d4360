// Scans of 32-bit elements in vec4s (the parameters of scan.wgsl; flags 1 reverse,
// 2 exclusive, 16 input b holds the row's block totals): rows start on a vec4
// (offset and length multiples of 4, or one row; reversed scans need the length
// a multiple of 4) and the bindings are arrays of vec4. Rows of several blocks
// take two passes: `scan_totals_v` writes each block's total, then each block of
// `scan_blocks_v` combines the totals before it itself. A workgroup scans a block
// of up to SCAN_ITER tiles of SCAN_V * WG vec4s, carrying the running total from
// tile to tile. In a tile, invocation lid holds vec4s
// lid, lid + WG, lid + 2WG, lid + 3WG: every load and store is a coalesced
// 16-byte one, four in flight per invocation. Each vec4 is scanned in registers;
// the vec4s' totals are scanned as four columns of WG at once (`col_scan`).

const SCAN_V: u32 = 4u;     // vec4s per invocation and tile

var<workgroup> SCAN_TILES: u32;
var<workgroup> SCAN_FLAGS: u32;
var<workgroup> SCAN_CARRY: ACC;

struct ColScan {
    before: vec4<ACC>,  // the combination of the columns' earlier slots
    total: vec4<ACC>,   // the columns' totals
}

fn ident4() -> vec4<ACC> { let i = acc_init(); return vec4<ACC>(i, i, i, i); }
fn comb4(a: vec4<ACC>, b: vec4<ACC>) -> vec4<ACC> {
    return vec4<ACC>(combine(a.x, b.x), combine(a.y, b.y), combine(a.z, b.z), combine(a.w, b.w));
}
fn acc_word(w: u32) -> ACC { return acc_load(xa(w, 0u)); }

// Logical vec4 q of the row starting at element row0 (a multiple of 4), in logical
// order and inclusively scanned; positions past len hold the identity.
fn scan_vload(row0: u32, q: u32, len: u32, rev: bool) -> vec4<ACC> {
    var x = ident4();
    let p = 4u * q;
    if (p >= len) { return x; }
    if (rev) {
        let w = va((row0 + len) / 4u - 1u - q);
        x = vec4<ACC>(acc_word(w.w), acc_word(w.z), acc_word(w.y), acc_word(w.x));
    } else {
        let w = va(row0 / 4u + q);
        x.x = acc_word(w.x);
        if (p + 1u < len) { x.y = acc_word(w.y); }
        if (p + 2u < len) { x.z = acc_word(w.z); }
        if (p + 3u < len) { x.w = acc_word(w.w); }
    }
    x.y = combine(x.x, x.y);
    x.z = combine(x.y, x.z);
    x.w = combine(x.z, x.w);
    return x;
}

// Stores logical vec4 q of the output row starting at row0: `pre` combined with the
// scanned x (inclusive) or with its previous element (exclusive).
fn scan_vstore(row0: u32, q: u32, len: u32, rev: bool, excl: bool, pre: ACC, x: vec4<ACC>) {
    let p = 4u * q;
    if (p >= len) { return; }
    var y = vec4<ACC>(combine(pre, x.x), combine(pre, x.y), combine(pre, x.z), combine(pre, x.w));
    if (excl) { y = vec4<ACC>(pre, y.x, y.y, y.z); }
    let s = vec4<u32>(st_acc(y.x), st_acc(y.y), st_acc(y.z), st_acc(y.w));
    if (rev) {
        O[(row0 + len) / 4u - 1u - q] = s.wzyx;
    } else if (p + 4u <= len) {
        O[row0 / 4u + q] = s;
    } else {
        let v = row0 / 4u + q;
        O[v].x = s.x;
        if (p + 1u < len) { O[v].y = s.y; }
        if (p + 2u < len) { O[v].z = s.z; }
    }
}

// Tiles of a block inside its row (a workgroup-uniform loop bound); SCAN_FLAGS
// holds the flags for a uniform read.
fn block_tiles(lid: u32, q_block: u32, len: u32, valid: bool) -> u32 {
    if (lid == 0u) {
        SCAN_FLAGS = P[5];
        let vecs = (len + 3u) / 4u;
        let tile = SCAN_V * WG;
        SCAN_TILES = select(0u, min(SCAN_ITER, (vecs - min(q_block, vecs) + tile - 1u) / tile), valid);
    }
    return workgroupUniformLoad(&SCAN_TILES);
}

var<workgroup> SCAN_W: array<vec4<ACC>, 544>;  // the invocations' column values, padded (two tiles)
var<workgroup> SCAN_G: array<vec4<ACC>, 32>;   // the groups' totals (two tiles)

fn swi(i: u32) -> u32 { return i + (i >> 4u); }

// The four columns' exclusive scan at invocation lid, and their totals: groups of
// 16 invocations' values (a padding entry after each group: no bank conflicts in
// the serial steps), each group scanned by one invocation, then every invocation
// walks the group totals; two barriers. Tiles alternate between two halves of the
// workgroup memory (`par`): a tile's writes follow the previous tile's barriers, so
// no third barrier guards the reads. (Subgroup shuffle scans with one barrier ran
// no faster on the H200: bench/NOTES.md, runs 130-134.)
fn col_scan(t: vec4<ACC>, lid: u32, par: u32) -> ColScan {
    let wo = par * 272u;
    let go = par * 16u;
    SCAN_W[wo + swi(lid)] = t;
    workgroupBarrier();
    let ng = WG / 16u;
    if (lid < ng) {
        var s = ident4();
        for (var i = 0u; i < 16u; i++) {
            s = comb4(s, SCAN_W[wo + swi(16u * lid + i)]);
            SCAN_W[wo + swi(16u * lid + i)] = s;
        }
        SCAN_G[go + lid] = s;
    }
    workgroupBarrier();
    var r: ColScan;
    r.before = ident4();
    r.total = ident4();
    let grp = lid / 16u;
    for (var i = 0u; i < ng; i++) {
        if (i == grp) { r.before = r.total; }
        r.total = comb4(r.total, SCAN_G[go + i]);
    }
    if ((lid & 15u) != 0u) { r.before = comb4(r.before, SCAN_W[wo + swi(lid - 1u)]); }
    return r;
}

// A workgroup's block: its index g (valid inside the grid), row r, first vec4 in
// the row, tiles inside the row (workgroup-uniform), the row's first input
// element, the row's length and direction.
struct ScanBlock {
    g: u32,
    valid: bool,
    r: u32,
    q_block: u32,
    tiles: u32,
    row_in: u32,
    len: u32,
    rev: bool,
}

fn scan_block(lid: u32, wid: vec3<u32>, nwg: vec3<u32>) -> ScanBlock {
    var k: ScanBlock;
    k.len = P[1];
    let nb = P[3];
    k.rev = (P[5] & 1u) != 0u;
    k.g = wid.x + wid.y * nwg.x;
    k.valid = k.g < P[0] * nb;
    k.r = k.g / max(nb, 1u);
    k.q_block = (k.g - k.r * nb) * SCAN_ITER * SCAN_V * WG;
    k.tiles = block_tiles(lid, k.q_block, k.len, k.valid);
    k.row_in = P[4] + k.r * k.len;
    return k;
}

// Each block's total only (the first of two passes): a reduction, no scan
// across invocations, so a light kernel of its own (the scan's registers would
// cut how many workgroups run at once).
@compute @workgroup_size(WG)
fn scan_totals_v(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let lid = lid3.x;
    let k = scan_block(lid, wid, nwg);
    var t = acc_init();
    for (var it = 0u; it < k.tiles; it++) {
        let q0 = k.q_block + it * SCAN_V * WG + lid;
        let x0 = scan_vload(k.row_in, q0, k.len, k.rev);
        let x1 = scan_vload(k.row_in, q0 + WG, k.len, k.rev);
        let x2 = scan_vload(k.row_in, q0 + 2u * WG, k.len, k.rev);
        let x3 = scan_vload(k.row_in, q0 + 3u * WG, k.len, k.rev);
        t = combine(t, combine(combine(x0.w, x1.w), combine(x2.w, x3.w)));
    }
    let total = wg_reduce(t, lid);
    if (k.valid && lid == 0u) { O[k.g / 4u][k.g & 3u] = st_acc(total); }
}

@compute @workgroup_size(WG)
fn scan_blocks_v(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let lid = lid3.x;
    let k = scan_block(lid, wid, nwg);
    let excl = (P[5] & 2u) != 0u;
    let tile = SCAN_V * WG;
    let flags = workgroupUniformLoad(&SCAN_FLAGS);
    let row_out = k.r * k.len;
    var carry = acc_init();
    if ((flags & 16u) != 0u) {
        // Input b holds the row's block totals: the carry is those before this
        // block, combined here (no pass scanning them).
        var a = acc_init();
        if (k.valid) {
            let first = k.r * P[3];
            for (var i = first + lid; i < k.g; i += WG) { a = combine(a, ld_b(i)); }
        }
        let red = wg_reduce(a, lid);
        if (lid == 0u) { SCAN_CARRY = red; }
        carry = workgroupUniformLoad(&SCAN_CARRY);
    }
    for (var it = 0u; it < k.tiles; it++) {
        let q0 = k.q_block + it * tile + lid;
        let x0 = scan_vload(k.row_in, q0, k.len, k.rev);
        let x1 = scan_vload(k.row_in, q0 + WG, k.len, k.rev);
        let x2 = scan_vload(k.row_in, q0 + 2u * WG, k.len, k.rev);
        let x3 = scan_vload(k.row_in, q0 + 3u * WG, k.len, k.rev);
        // Column c: the totals of vec4s c * WG + lid.
        let cs = col_scan(vec4<ACC>(x0.w, x1.w, x2.w, x3.w), lid, it & 1u);
        let c1 = combine(carry, cs.total.x);
        let c2 = combine(c1, cs.total.y);
        let c3 = combine(c2, cs.total.z);
        scan_vstore(row_out, q0, k.len, k.rev, excl, combine(carry, cs.before.x), x0);
        scan_vstore(row_out, q0 + WG, k.len, k.rev, excl, combine(c1, cs.before.y), x1);
        scan_vstore(row_out, q0 + 2u * WG, k.len, k.rev, excl, combine(c2, cs.before.z), x2);
        scan_vstore(row_out, q0 + 3u * WG, k.len, k.rev, excl, combine(c3, cs.before.w), x3);
        carry = combine(c3, cs.total.w);
    }
}
