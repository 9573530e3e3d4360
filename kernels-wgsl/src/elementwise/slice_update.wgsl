// Slice update, in gather form (element i for the `general` loop of words.wgsl): out[i] = i in the region ? update[its index there]
// : base[i]. The region starts at `start` and steps by `step` on each axis, `count`
// long (the update's shape). Computing each output word from its own position (no
// scatter) keeps packed outputs (bool, u8, f16, bf16) free of races between
// invocations, and reads base and update in place through their strides.
//
// Parameters: [n, rank, 0, 0, off_base, off_update, 0,
//              shape[rank], strides_base[rank], strides_update[rank],
//              start[rank], step[rank] (i32 bits), count[rank]]
// The output is row-major in `shape`; strides and offsets in elements (i32 bits,
// offset arithmetic wrapping in u32 as in the general elementwise kernels).

fn general_elem(i: u32) -> u32 {
    let rank = P[1];
    var rem = i;
    var pa = P[4];
    var pb = P[5];
    var inside = true;
    for (var d = rank; d > 0u; d--) {
        let s = P[6u + d];
        let q = rem / s;
        let c = rem - q * s;
        rem = q;
        pa += c * P[6u + rank + d];
        // Position along the region on this axis, if any.
        let rel = i32(c) - i32(P[6u + 3u * rank + d]);
        let step = bitcast<i32>(P[6u + 4u * rank + d]);
        let k = rel / step;
        inside = inside && k * step == rel && k >= 0i && u32(k) < P[6u + 5u * rank + d];
        pb += u32(k) * P[6u + 2u * rank + d];
    }
    if (inside) {
        return st_o(ld_b(pb));
    }
    return st_o(ld_a(pa));
}
