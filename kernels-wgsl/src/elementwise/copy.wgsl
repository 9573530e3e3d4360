// Fill and arange. (Strided copy and cast use the one-input elementwise kernels
// with the cast selected as `op` by the prelude.)
//
// Parameters: [n, 0, s0, s1]. fill: s0 is the output word pattern (the value's
// storage bits repeated for packed dtypes, computed on the host). arange: s0 = start,
// s1 = step, as f32 bits for float outputs and i32 bits otherwise; for float outputs
// the slot after n holds step - f32(step) (f32 bits).

@compute @workgroup_size(WG)
fn fill(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let pat = P[2];
    let nv = (n + BLK - 1u) / BLK;
    for (var v = thread_index(lid, wid, nwg); v < nv; v += thread_count(nwg)) {
        let i0 = v * BLK;
        if (i0 + BLK <= n) {
            O[v] = vec4<u32>(pat);
        } else {
            var r = O[v];
            for (var k = 0u; k < 4u; k++) {
                for (var j = 0u; j < EPO; j++) {
                    if (i0 + k * EPO + j < n) { r[k] = put(r[k], j, pat & MASK_O); }
                }
            }
            O[v] = r;
        }
    }
}

@compute @workgroup_size(WG)
fn arange(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let nv = (n + BLK - 1u) / BLK;
    for (var v = thread_index(lid, wid, nwg); v < nv; v += thread_count(nwg)) {
        let i0 = v * BLK;
        var r = vec4<u32>();
        if (i0 + BLK > n) { r = O[v]; }
        for (var k = 0u; k < 4u; k++) {
            for (var j = 0u; j < EPO; j++) {
                let i = i0 + k * EPO + j;
                if (i < n) { r[k] = put(r[k], j, st_o(arange_val(i))); }
            }
        }
        O[v] = r;
    }
}
