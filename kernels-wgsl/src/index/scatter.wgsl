// scatter: [n, rank, axis, N, off_idx, off_upd, lo, rows, shape[rank],
// strides_idx[rank], strides_upd[rank], strides_out[rank]] over the n elements of
// the indices: the update at p is combined (the prelude's `combine`: set or add)
// with the output element at p with p[axis] = idx[p]; indices outside 0..N are
// dropped. The output holds rows lo .. lo + rows of the axis (all N but where the
// host scatters into a large base part by part); other indices are left to the
// other parts. The output
// (a copy of the base) is read and written through atomics: several updates may
// land on one element or one packed word. `merge` is `scatter_cas.wgsl`'s loop or,
// for adds the hardware does on whole words, `scatter_add.wgsl`'s one atomic add.
@compute @workgroup_size(WG)
fn scatter(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
           @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let rank = P[1];
    let axis = P[2];
    for (var i = thread_index(lid, wid, nwg); i < n; i += thread_count(nwg)) {
        var rem = i;
        var pi = P[4];
        var pu = P[5];
        var po = 0u;
        var step = 0u;
        for (var d = rank; d > 0u; d--) {
            let s = P[7u + d];
            let q = rem / s;
            let c = rem - q * s;
            rem = q;
            pi += c * P[7u + rank + d];
            pu += c * P[7u + 2u * rank + d];
            if (d - 1u == axis) {
                step = P[7u + 3u * rank + d];
            } else {
                po += c * P[7u + 3u * rank + d];
            }
        }
        let k = index_a(pi, P[3]);
        // Unsigned: k below lo wraps past rows.
        if (k == NO_INDEX || k - P[6] >= P[7]) { continue; }
        let t = po + (k - P[6]) * step;
        merge(t >> LO, t & (EPO - 1u), ld_b(pu));
    }
}
