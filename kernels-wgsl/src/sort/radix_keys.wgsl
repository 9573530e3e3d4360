// What both radix sorts (radix.wgsl, radix8.wgsl) read: the key of position p of row
// r (on the first pass from input a through sort_key, then from the pairs), and the
// tile of a workgroup.

fn radix_key(first: bool, r: u32, p: u32) -> u32 {
    let e = r * P[1] + p;
    if (first) { return sort_key(ld_a(P[4] + e)); }
    return wa(e);
}

fn radix_tile(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.x + wid.y * nwg.x; }
