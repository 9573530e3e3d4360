// The 64-bit elementwise kernels (wide/wide.wgsl has the parameters).

@compute @workgroup_size(WG)
fn map1(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = gid(lid, wid, nwg); i < P[0]; i += gcount(nwg)) {
        O[i] = op(A[loc_a(i)]);
    }
}

@compute @workgroup_size(WG)
fn map2(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = gid(lid, wid, nwg); i < P[0]; i += gcount(nwg)) {
        O[i] = op(A[loc_a(i)], B[loc_b(i)]);
    }
}

// Bool outputs, four per word: an invocation owns a whole word and keeps the bytes
// past the end of the output.
@compute @workgroup_size(WG)
fn pack1(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
         @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    for (var w = gid(lid, wid, nwg); w < (n + 3u) / 4u; w += gcount(nwg)) {
        var word = 0u;
        if (4u * w + 4u > n) { word = O[w]; }
        for (var j = 0u; j < 4u; j++) {
            let i = 4u * w + j;
            if (i < n) {
                let bit = select(0u, 1u, op(A[loc_a(i)]));
                word = (word & ~(0xffu << (8u * j))) | (bit << (8u * j));
            }
        }
        O[w] = word;
    }
}

@compute @workgroup_size(WG)
fn pack2(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
         @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    for (var w = gid(lid, wid, nwg); w < (n + 3u) / 4u; w += gcount(nwg)) {
        var word = 0u;
        if (4u * w + 4u > n) { word = O[w]; }
        for (var j = 0u; j < 4u; j++) {
            let i = 4u * w + j;
            if (i < n) {
                let bit = select(0u, 1u, op(A[loc_a(i)], B[loc_b(i)]));
                word = (word & ~(0xffu << (8u * j))) | (bit << (8u * j));
            }
        }
        O[w] = word;
    }
}

// `arange` and `full`: O[i] = at(i) (the module's start + i * step), or start()
// itself when P[2] is 1 (a fill keeps -0 as given).
@compute @workgroup_size(WG)
fn gen(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
       @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = gid(lid, wid, nwg); i < P[0]; i += gcount(nwg)) {
        O[i] = select(at(i), start(), P[2] == 1u);
    }
}
