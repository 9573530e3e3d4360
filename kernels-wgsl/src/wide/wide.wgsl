// Kernels on 64-bit elements, generic over the element type `E` the prelude
// names: `f64` (adapters with SHADER_F64; its math in f64.wgsl) or `vec2<u32>`, a
// 64-bit integer as (low, high) words (int64.wgsl; every adapter). This file holds
// what the families' 64-bit kernels (`<family>/wide.wgsl`) share.
//
// The prelude declares WG, `alias E`, the bindings P (parameters), O (output), A, B
// and C (inputs) with their element types, and the module's code: `op`
// (elementwise), `ident` and `combine` (reductions, scans, scatter_add), `better`
// and `isnan_e` (arg reductions), `start` and `at` (gen), `key` (sort keys).
//
// Elementwise parameters (the map and pack kernels, sort keys): [n, rank, off_a,
// off_b, s0, s1, s2, s3, shape[rank], strides_a[rank], strides_b[rank]]; offsets
// and strides in elements, strides as i32 bit patterns (u32 arithmetic wraps to the
// right address). s0..s3: two 64-bit scalars as (low, high) words.

fn gid(lid: vec3<u32>, wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid.x;
}
fn gcount(nwg: vec3<u32>) -> u32 { return nwg.x * nwg.y * WG; }

// Element offset of row-major index `i` of a view whose shape starts at P[sh] and
// strides at P[st] (`rank` dims), from `off`.
fn loc(i: u32, rank: u32, sh: u32, st: u32, off: u32) -> u32 {
    var r = i;
    var o = off;
    for (var d = rank; d > 0u; d--) {
        let e = P[sh + d - 1u];
        o += (r % e) * P[st + d - 1u];
        r /= e;
    }
    return o;
}
fn loc_a(i: u32) -> u32 { let r = P[1]; return loc(i, r, 8u, 8u + r, P[2]); }
fn loc_b(i: u32) -> u32 { let r = P[1]; return loc(i, r, 8u, 8u + 2u * r, P[3]); }

// Workgroup scratch of the row kernels (reductions, row ops).
var<workgroup> SH: array<E, WG>;
