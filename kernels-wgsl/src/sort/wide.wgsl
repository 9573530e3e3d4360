// Sort keys of 64-bit elements read as words (A: array<u32>): the low key words,
// then the high ones, each pair the module's `key`, an unsigned order of the value.
@compute @workgroup_size(WG)
fn keys(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    for (var i = gid(lid, wid, nwg); i < n; i += gcount(nwg)) {
        let e = loc_a(i);
        let k = key(A[2u * e], A[2u * e + 1u]);
        O[i] = k.x;
        O[n + i] = k.y;
    }
}
