// Kernels on 64-bit elements, generic over the element type `E` the prelude
// names: `f64` (adapters with SHADER_F64; its math in f64.wgsl) or `vec2<u32>`, a
// 64-bit integer as (low, high) words (int64.wgsl; every adapter).
//
// The prelude declares WG, `alias E`, the bindings P (parameters), O (output), A, B
// and C (inputs) with their element types, and the module's code: `op`
// (elementwise), `ident` and `combine` (reductions, scans, scatter_add), `better`
// and `isnan_e` (arg reductions), `start` and `at` (gen), `key` (sort keys).

// ---- elementwise: parameters [n, rank, off_a, off_b, s0, s1, s2, s3,
//      shape[rank], strides_a[rank], strides_b[rank]]; offsets and strides in
//      elements, strides as i32 bit patterns (u32 arithmetic wraps to the right
//      address). s0..s3: two 64-bit scalars as (low, high) words.

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

// ---- reductions: one workgroup per output, grid-stride over outputs.
// Parameters [n_out, n_red, rank_out, rank_red, offset, shape_out, strides_out,
// shape_red, strides_red, parts, chunk]: `reduce` writes `parts` partial results
// per output (output r * parts + p reduces elements p * chunk .. of the reduced
// ones), so no invocation loops long (lavapipe stops a shader's loops after 65 535
// iterations) and a long reduction has more than one workgroup.

var<workgroup> SH: array<E, WG>;
var<workgroup> SI: array<u32, WG>;

fn red_base(r: u32) -> u32 { let k = P[2]; return loc(r, k, 5u, 5u + k, P[4]); }
fn red_at(j: u32, base: u32) -> u32 {
    let k = P[2];
    let q = P[3];
    return loc(j, q, 5u + 2u * k, 5u + 2u * k + q, base);
}

@compute @workgroup_size(WG)
fn reduce(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = lid.x;
    let tail = 5u + 2u * P[2] + 2u * P[3];
    let parts = P[tail];
    let chunk = P[tail + 1u];
    for (var r = wid.x + wid.y * nwg.x; r < P[0] * parts; r += nwg.x * nwg.y) {
        let base = red_base(r / parts);
        let j0 = (r % parts) * chunk;
        let j1 = min(j0 + chunk, P[1]);
        var acc = ident();
        for (var j = j0 + t; j < j1; j += WG) { acc = combine(acc, A[red_at(j, base)]); }
        SH[t] = acc;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (t < s) { SH[t] = combine(SH[t], SH[t + s]); }
            workgroupBarrier();
        }
        if (t == 0u) { O[r] = SH[0]; }
        workgroupBarrier();
    }
}

// Arg reductions: the first NaN wins, else the extreme value, ties to the lower
// index.
fn arg_take(av: E, ai: u32, bv: E, bi: u32) -> bool {
    let na = isnan_e(av);
    let nb = isnan_e(bv);
    if (na || nb) { return nb && (!na || bi < ai); }
    if (better(av, bv)) { return true; }
    if (better(bv, av)) { return false; }
    return bi < ai;
}

@compute @workgroup_size(WG)
fn argreduce(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = lid.x;
    for (var r = wid.x + wid.y * nwg.x; r < P[0]; r += nwg.x * nwg.y) {
        let base = red_base(r);
        var v: E;
        var i = 0xffffffffu;
        for (var j = t; j < P[1]; j += WG) {
            let x = A[red_at(j, base)];
            if (i == 0xffffffffu || arg_take(v, i, x, j)) { v = x; i = j; }
        }
        SH[t] = v;
        SI[t] = i;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (t < s && SI[t + s] != 0xffffffffu
                && (SI[t] == 0xffffffffu || arg_take(SH[t], SI[t], SH[t + s], SI[t + s]))) {
                SH[t] = SH[t + s];
                SI[t] = SI[t + s];
            }
            workgroupBarrier();
        }
        if (t == 0u) { O[r] = select(SI[0], 0u, SI[0] == 0xffffffffu); }
        workgroupBarrier();
    }
}

// ---- scans along an axis of a row-major input: [lines, len, inner, offset,
// flags (1 reverse, 2 exclusive)]; one workgroup per line, WG elements at a time.

@compute @workgroup_size(WG)
fn scan(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = lid.x;
    let len = P[1];
    let inner = P[2];
    let rev = (P[4] & 1u) != 0u;
    let excl = (P[4] & 2u) != 0u;
    for (var l = wid.x + wid.y * nwg.x; l < P[0]; l += nwg.x * nwg.y) {
        let first = (l / inner) * len * inner + l % inner;
        var carry = ident();
        for (var c = 0u; c < len; c += WG) {
            let k = c + t;
            let kk = select(k, len - 1u - k, rev);
            var v = ident();
            if (k < len) { v = A[P[3] + first + kk * inner]; }
            SH[t] = v;
            workgroupBarrier();
            for (var s = 1u; s < WG; s <<= 1u) {
                var u = SH[t];
                if (t >= s) { u = combine(SH[t - s], u); }
                workgroupBarrier();
                SH[t] = u;
                workgroupBarrier();
            }
            var res = combine(carry, SH[t]);
            if (excl) { res = select(combine(carry, SH[max(t, 1u) - 1u]), carry, t == 0u); }
            if (k < len) { O[first + kk * inner] = res; }
            carry = combine(carry, SH[WG - 1u]);
            workgroupBarrier();
        }
    }
}

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

