// The split-KV combine: each chunk's partial results (flash.wgsl's PARTS layout,
// f32 [S, rows, DH + 2]: unnormalised sum, maximum score in natural-log units,
// sum of weights) into the normalised output, rows of D of the output dtype.
//
// A workgroup per row (rows past the grid taken in turn): the chunks' maxima and
// weights are reduced by the whole workgroup, each chunk's factor exp(m - top) is
// kept in workgroup memory, and groups of invocations sum every output word over
// their share of the chunks, four loads in flight at a time. (One invocation per element, reading every chunk's
// maximum twice in a dependent chain, took ~25 us for 4096 elements of 64 chunks
// on an H200; one invocation per word over all chunks ~18 us: runs 173-176.)
//
// Parameters: [S, rows, D].

const CNEG: f32 = -3.0e38;

var<workgroup> cred: array<f32, WG>;
var<workgroup> cf: array<f32, WG>;
var<workgroup> cacc: array<f32, 2 * WG>;

// The workgroup's maximum (max) or sum of x; every invocation gets it. Where the
// prelude's comb_group reduces over subgroups (comb_group_size of them), the tree
// starts at that stride.
fn combine_reduce(lid: u32, x: f32, max_: bool) -> f32 {
    let y = comb_group(x, max_);
    let stride = comb_group_size();
    workgroupBarrier();
    cred[lid] = y;
    for (var h = WG / 2u; h >= stride; h >>= 1u) {
        workgroupBarrier();
        if (lid < h) {
            let z = cred[lid + h];
            cred[lid] = select(cred[lid] + z, max(cred[lid], z), max_);
        }
    }
    workgroupBarrier();
    return cred[0];
}

// One split's share (factor f) of output word o's elements at `base`.
fn comb_load(base: u32) -> vec2<f32> {
    if (EPO == 2u) { return vec2<f32>(ld_a(base), ld_a(base + 1u)); }
    return vec2<f32>(ld_a(base), 0.0);
}

@compute @workgroup_size(WG)
fn flash_combine(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let lid = lid3.x;
    let splits = P[0];
    let rows = P[1];
    let d = P[2];
    let w = d + 2u;
    let words = d / EPO;
    for (var row = wid.x + wid.y * nwg.x; row < rows; row += nwg.x * nwg.y) {
        var top = CNEG;
        for (var s = lid; s < splits; s += WG) { top = max(top, ld_a((s * rows + row) * w + d)); }
        top = combine_reduce(lid, top, true);
        // Passes of up to WG output words; in each, chunks of WG splits: their
        // factors, then every word's sum over them, the workgroup's invocations
        // split into `parts` groups that take every parts-th split each (loads in
        // flight across the groups), their sums added at the end.
        var total = 0.0;
        for (var o0 = 0u; o0 < words; o0 += WG) {
            let nw = min(words - o0, WG);
            let parts = WG / nw;
            let part = lid / nw;
            let o = o0 + lid % nw;
            var acc = vec2<f32>(0.0);
            for (var s0 = 0u; s0 < splits; s0 += WG) {
                workgroupBarrier();
                let s = s0 + lid;
                var f = 0.0;
                if (s < splits) {
                    let base = (s * rows + row) * w;
                    let m = ld_a(base + d);
                    f = select(exp(m - top), 0.0, m <= CNEG);
                    if (o0 == 0u) { total += f * ld_a(base + d + 1u); }
                }
                cf[lid] = f;
                workgroupBarrier();
                if (part < parts) {
                    // Four splits' loads in flight at a time (the driver keeps the
                    // loop: a load a step waited on each one).
                    let lim = min(WG, splits - s0);
                    let step = (s0 * rows + row) * w + o * EPO;
                    var j = part;
                    for (; j + 3u * parts < lim; j += 4u * parts) {
                        let x0 = comb_load(step + j * rows * w);
                        let x1 = comb_load(step + (j + parts) * rows * w);
                        let x2 = comb_load(step + (j + 2u * parts) * rows * w);
                        let x3 = comb_load(step + (j + 3u * parts) * rows * w);
                        acc += cf[j] * x0 + cf[j + parts] * x1 + cf[j + 2u * parts] * x2
                            + cf[j + 3u * parts] * x3;
                    }
                    for (; j < lim; j += parts) { acc += cf[j] * comb_load(step + j * rows * w); }
                }
            }
            if (o0 == 0u) { total = combine_reduce(lid, total, false); }
            workgroupBarrier();
            for (var e = 0u; e < EPO; e++) { cacc[lid * EPO + e] = acc[e]; }
            workgroupBarrier();
            if (lid < nw) {
                let inv = select(0.0, 1.0 / total, total > 0.0);
                var word = 0u;
                for (var e = 0u; e < EPO; e++) {
                    var x = 0.0;
                    for (var p = 0u; p < parts; p++) { x += cacc[(p * nw + lid) * EPO + e]; }
                    word = put(word, e, st_o(x * inv));
                }
                O[row * words + o] = word;
            }
        }
    }
}
