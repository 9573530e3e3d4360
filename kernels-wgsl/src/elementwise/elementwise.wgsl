// Elementwise skeletons for one, two and three inputs (unary, copy/cast, binary,
// axpby, select). The prelude supplies the bindings P (parameters), O (output) and
// A/B/C (inputs), the loaders ld_a/xa/va..., the store helper st_o, and `op`.
//
// An invocation owns whole output words (and, in the contiguous kernels, whole
// vec4<u32> groups of words): bool/u8/f16/bf16 outputs are packed several per word,
// so two invocations writing one word would race. The last, partial group keeps the
// bytes past the end of the output as they were.
//
// Parameters, contiguous kernels: [n, 0, s0, s1, off_a, off_b, off_c]
// Parameters, general kernels:    [n, rank, s0, s1, off_a, off_b, off_c,
//                                  shape[rank], strides_a[rank], strides_b[rank], strides_c[rank]]
// Offsets and strides are in elements; strides are i32 bit patterns and the offset
// arithmetic wraps in u32, which gives the right address for negative strides.

@compute @workgroup_size(WG)
fn contig1(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
           @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let oa = P[4];
    var a0: CA;
    if (MODE_A == 0u) { a0 = ld_a(oa); }
    let nv = (n + BLK - 1u) / BLK;
    for (var v = thread_index(lid, wid, nwg); v < nv; v += thread_count(nwg)) {
        let i0 = v * BLK;
        let full = i0 + BLK <= n;
        var av = vec4<u32>();
        if (MODE_A == 1u && full) { av = va((oa >> (LA + 2u)) + v); }
        var r = vec4<u32>();
        if (LO == 1u && full) {
            // 16-bit elements in pairs: one unpack/pack per word (f16: one
            // unpack2x16float and one pack2x16float) and no per-element masking.
            for (var k = 0u; k < 4u; k++) {
                let i = i0 + 2u * k;
                var a = vec2<CA>(a0, a0);
                if (MODE_A == 1u) { a = x2a(av[k]); } else if (MODE_A != 0u) { a = vec2<CA>(ld_a(oa + i), ld_a(oa + i + 1u)); }
                r[k] = st2_o(vec2<CO>(op(a.x), op(a.y)));
            }
            O[v] = r;
            continue;
        }
        if (!full) { r = O[v]; }
        for (var k = 0u; k < 4u; k++) {
            var word = r[k];
            for (var j = 0u; j < EPO; j++) {
                let i = i0 + k * EPO + j;
                if (i < n) {
                    var a = a0;
                    if (MODE_A == 1u && full) { a = xa(av[k], j); } else if (MODE_A != 0u) { a = ld_a(oa + i); }
                    word = put(word, j, st_o(op(a)));
                }
            }
            r[k] = word;
        }
        O[v] = r;
    }
}

@compute @workgroup_size(WG)
fn contig2(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
           @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let oa = P[4];
    let ob = P[5];
    var a0: CA;
    var b0: CB;
    if (MODE_A == 0u) { a0 = ld_a(oa); }
    if (MODE_B == 0u) { b0 = ld_b(ob); }
    let nv = (n + BLK - 1u) / BLK;
    for (var v = thread_index(lid, wid, nwg); v < nv; v += thread_count(nwg)) {
        let i0 = v * BLK;
        let full = i0 + BLK <= n;
        var av = vec4<u32>();
        var bv = vec4<u32>();
        if (MODE_A == 1u && full) { av = va((oa >> (LA + 2u)) + v); }
        if (MODE_B == 1u && full) { bv = vb((ob >> (LB + 2u)) + v); }
        var r = vec4<u32>();
        if (LO == 1u && full) {
            for (var k = 0u; k < 4u; k++) {
                let i = i0 + 2u * k;
                var a = vec2<CA>(a0, a0);
                var b = vec2<CB>(b0, b0);
                if (MODE_A == 1u) { a = x2a(av[k]); } else if (MODE_A != 0u) { a = vec2<CA>(ld_a(oa + i), ld_a(oa + i + 1u)); }
                if (MODE_B == 1u) { b = x2b(bv[k]); } else if (MODE_B != 0u) { b = vec2<CB>(ld_b(ob + i), ld_b(ob + i + 1u)); }
                r[k] = st2_o(vec2<CO>(op(a.x, b.x), op(a.y, b.y)));
            }
            O[v] = r;
            continue;
        }
        if (!full) { r = O[v]; }
        for (var k = 0u; k < 4u; k++) {
            var word = r[k];
            for (var j = 0u; j < EPO; j++) {
                let i = i0 + k * EPO + j;
                if (i < n) {
                    var a = a0;
                    var b = b0;
                    if (MODE_A == 1u && full) { a = xa(av[k], j); } else if (MODE_A != 0u) { a = ld_a(oa + i); }
                    if (MODE_B == 1u && full) { b = xb(bv[k], j); } else if (MODE_B != 0u) { b = ld_b(ob + i); }
                    word = put(word, j, st_o(op(a, b)));
                }
            }
            r[k] = word;
        }
        O[v] = r;
    }
}

@compute @workgroup_size(WG)
fn contig3(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
           @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let oa = P[4];
    let ob = P[5];
    let oc = P[6];
    var a0: CA;
    var b0: CB;
    var c0: CC;
    if (MODE_A == 0u) { a0 = ld_a(oa); }
    if (MODE_B == 0u) { b0 = ld_b(ob); }
    if (MODE_C == 0u) { c0 = ld_c(oc); }
    let nv = (n + BLK - 1u) / BLK;
    for (var v = thread_index(lid, wid, nwg); v < nv; v += thread_count(nwg)) {
        let i0 = v * BLK;
        let full = i0 + BLK <= n;
        var av = vec4<u32>();
        var bv = vec4<u32>();
        var cv = vec4<u32>();
        if (MODE_A == 1u && full) { av = va((oa >> (LA + 2u)) + v); }
        if (MODE_B == 1u && full) { bv = vb((ob >> (LB + 2u)) + v); }
        if (MODE_C == 1u && full) { cv = vc((oc >> (LC + 2u)) + v); }
        var r = vec4<u32>();
        if (LO == 1u && full) {
            for (var k = 0u; k < 4u; k++) {
                let i = i0 + 2u * k;
                var a = vec2<CA>(a0, a0);
                var b = vec2<CB>(b0, b0);
                var c = vec2<CC>(c0, c0);
                if (MODE_A == 1u) { a = x2a(av[k]); } else if (MODE_A != 0u) { a = vec2<CA>(ld_a(oa + i), ld_a(oa + i + 1u)); }
                if (MODE_B == 1u) { b = x2b(bv[k]); } else if (MODE_B != 0u) { b = vec2<CB>(ld_b(ob + i), ld_b(ob + i + 1u)); }
                if (MODE_C == 1u) { c = x2c(cv[k]); } else if (MODE_C != 0u) { c = vec2<CC>(ld_c(oc + i), ld_c(oc + i + 1u)); }
                r[k] = st2_o(vec2<CO>(op(a.x, b.x, c.x), op(a.y, b.y, c.y)));
            }
            O[v] = r;
            continue;
        }
        if (!full) { r = O[v]; }
        for (var k = 0u; k < 4u; k++) {
            var word = r[k];
            for (var j = 0u; j < EPO; j++) {
                let i = i0 + k * EPO + j;
                if (i < n) {
                    var a = a0;
                    var b = b0;
                    var c = c0;
                    if (MODE_A == 1u && full) { a = xa(av[k], j); } else if (MODE_A != 0u) { a = ld_a(oa + i); }
                    if (MODE_B == 1u && full) { b = xb(bv[k], j); } else if (MODE_B != 0u) { b = ld_b(ob + i); }
                    if (MODE_C == 1u && full) { c = xc(cv[k], j); } else if (MODE_C != 0u) { c = ld_c(oc + i); }
                    word = put(word, j, st_o(op(a, b, c)));
                }
            }
            r[k] = word;
        }
        O[v] = r;
    }
}

// Element i of any-rank strided inputs (the general variant; `general` in
// words.wgsl loops over the output words): each input's offset from i's position in
// the row-major output, P = [n, rank, 0, 0, off_a, off_b, off_c, shape[rank],
// strides_a[rank], strides_b[rank], strides_c[rank]]. ARITY (the prelude's) leaves
// the offsets of absent inputs out at compile time; `op_at` reads and applies.
fn general_elem(i: u32) -> u32 {
    let rank = P[1];
    var rem = i;
    var pa = P[4];
    var pb = P[5];
    var pc = P[6];
    for (var d = rank; d > 0u; d--) {
        let s = P[6u + d];
        let q = rem / s;
        let c = rem - q * s;
        rem = q;
        pa += c * P[6u + rank + d];
        if (ARITY > 1u) { pb += c * P[6u + 2u * rank + d]; }
        if (ARITY > 2u) { pc += c * P[6u + 3u * rank + d]; }
    }
    return st_o(op_at(pa, pb, pc));
}
