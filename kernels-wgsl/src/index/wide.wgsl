// ---- scatter_add without 64-bit atomics: each invocation owns one output
// element and adds the updates aimed at it, in index order. Parameters [n, rank,
// axis, len_idx, off_base, off_idx, off_upd, shape_out[rank], strides_base,
// strides_idx, strides_upd] (the index and update views share a shape: the
// output's with `len_idx` on the axis). A: base, B: indices (i32/u32 words), C:
// updates.

@compute @workgroup_size(WG)
fn scatter_add(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let rank = P[1];
    let axis = P[2];
    let dim = P[7u + axis];
    for (var i = gid(lid, wid, nwg); i < P[0]; i += gcount(nwg)) {
        // Coordinates of i; the index/update offset of coordinate 0 on the axis.
        var r = i;
        var ob = P[4];
        var oi = P[5];
        var ou = P[6];
        var pos = 0u;
        for (var d = rank; d > 0u; d--) {
            let e = P[7u + d - 1u];
            let c = r % e;
            r /= e;
            ob += c * P[7u + rank + d - 1u];
            if (d - 1u == axis) {
                pos = c;
            } else {
                oi += c * P[7u + 2u * rank + d - 1u];
                ou += c * P[7u + 3u * rank + d - 1u];
            }
        }
        var acc = A[ob];
        let si = P[7u + 2u * rank + axis];
        let su = P[7u + 3u * rank + axis];
        for (var j = 0u; j < P[3]; j++) {
            let raw = bitcast<i32>(B[oi + j * si]);
            let q = select(raw, raw + i32(dim), raw < 0);
            if (u32(q) == pos) { acc = combine(acc, C[ou + j * su]); }
        }
        O[i] = acc;
    }
}
