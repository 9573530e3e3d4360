// The split-KV combine: each chunk's partial results (flash.wgsl's PARTS layout,
// f32 [S, rows, DH + 2]: unnormalised sum, maximum score in natural-log units,
// sum of weights) into the normalised output, rows of D of the output dtype.
//
// A workgroup per row and CW output words (groups past the grid taken in turn):
// its invocations are CW words times G = WG / CW groups of chunks, each taking
// every G-th chunk. Two rounds of loads, four chunks in flight at a time: the
// chunks' maxima (reduced to the row's), then their maxima, weights and values
// together, each scaled by exp(m - top) as it arrives; the groups' sums are added
// through workgroup memory. (A workgroup per row whose loads waited on each other
// in turn took 12-28 us for 32 rows of 64 chunks on an H200: runs 173-178.)
//
// Parameters: [S, rows, D].

const CNEG: f32 = -3.0e38;
const CW: u32 = 16u;
override G: u32 = WG / CW;

var<workgroup> cred: array<f32, WG>;
var<workgroup> cacc: array<vec2<f32>, WG>;

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

// Output word o's elements of the chunk whose row starts at `base`.
fn comb_vals(base: u32, o: u32) -> vec2<f32> {
    if (EPO == 2u) { return vec2<f32>(ld_a(base + 2u * o), ld_a(base + 2u * o + 1u)); }
    return vec2<f32>(ld_a(base + o), 0.0);
}

// A chunk's share: its values and weight (xyz: values, weight) scaled by its factor.
var<private> c_top: f32;
var<private> c_d: u32;
fn comb_part(base: u32, o: u32) -> vec3<f32> {
    let m = ld_a(base + c_d);
    let l = ld_a(base + c_d + 1u);
    let v = comb_vals(base, o);
    let f = select(exp(m - c_top), 0.0, m <= CNEG);
    return f * vec3<f32>(v, l);
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
    let wg_row = (words + CW - 1u) / CW;
    let ow = lid % CW;
    let grp = lid / CW;
    let stride = rows * w;
    c_d = d;
    for (var t = wid.x + wid.y * nwg.x; t < rows * wg_row; t += nwg.x * nwg.y) {
        let row = t / wg_row;
        let o = (t % wg_row) * CW + ow;
        // Past the row's last word, word 0 again (its sums are not stored).
        let oo = select(0u, o, o < words);
        let first = row * w;
        var top = CNEG;
        var s = grp;
        for (; s + 3u * G < splits; s += 4u * G) {
            let m0 = ld_a(first + s * stride + d);
            let m1 = ld_a(first + (s + G) * stride + d);
            let m2 = ld_a(first + (s + 2u * G) * stride + d);
            let m3 = ld_a(first + (s + 3u * G) * stride + d);
            top = max(top, max(max(m0, m1), max(m2, m3)));
        }
        for (; s < splits; s += G) { top = max(top, ld_a(first + s * stride + d)); }
        top = combine_reduce(lid, top, true);
        c_top = top;
        var acc = vec3<f32>(0.0);
        s = grp;
        for (; s + 3u * G < splits; s += 4u * G) {
            let x0 = comb_part(first + s * stride, oo);
            let x1 = comb_part(first + (s + G) * stride, oo);
            let x2 = comb_part(first + (s + 2u * G) * stride, oo);
            let x3 = comb_part(first + (s + 3u * G) * stride, oo);
            acc += (x0 + x1) + (x2 + x3);
        }
        for (; s < splits; s += G) { acc += comb_part(first + s * stride, oo); }
        cacc[lid] = acc.xy;
        // The weights' sum: each chunk once (by the invocations of word 0).
        let total = combine_reduce(lid, select(0.0, acc.z, ow == 0u), false);
        if (grp == 0u && o < words) {
            var x = vec2<f32>(0.0);
            for (var g = 0u; g < G; g++) { x += cacc[g * CW + ow]; }
            let inv = select(0.0, 1.0 / total, total > 0.0);
            var word = put(0u, 0u, st_o(x.x * inv));
            if (EPO == 2u) { word = put(word, 1u, st_o(x.y * inv)); }
            O[row * words + o] = word;
        }
        workgroupBarrier();
    }
}
