// What both radix sorts (radix.wgsl, radix8.wgsl) read: the key of position p of row
// r (on the first pass from input a through sort_key, then from the pairs), the word
// it carries, and the tile of a workgroup.

fn radix_key(first: bool, r: u32, p: u32) -> u32 {
    let e = r * P[1] + p;
    if (first) { return sort_key(ld_a(P[4] + e)); }
    return wa(e);
}

// The word position p of row r carries: on the first pass its element's bits (flag
// 4, a sort) or its position, then the pairs' second half. Not a select: on the first
// pass input a is x, with no second half (the branches are uniform).
fn radix_carried(first: bool, values: bool, r: u32, p: u32) -> u32 {
    let e = r * P[1] + p;
    if (first && values) { return bitcast<u32>(ld_a(P[4] + e)); }
    if (first) { return p; }
    return wa(P[0] * P[1] + e);
}

fn radix_tile(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.x + wid.y * nwg.x; }
