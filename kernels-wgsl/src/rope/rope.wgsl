// Rotary position embedding (MLX's `fast.rope`).
//
// x holds n elements in rows of D, L rows per sequence (row-major from element x0);
// the first `dims` elements of a row rotate in pairs, (2k, 2k + 1) when
// traditional, else (k, k + dims / 2), by theta = (scale * p) * inv_freqs[f0 + k]
// with the position p = offsets[o0 + row / per] + row % L (`per` rows to an
// offset); the other elements are copied.
//
// Parameters: [count, per_row, L, D, dims, traditional, scale (f32 bits), per, x0,
// o0, f0, n, shift, 1/L, 1/per (f32 bits), fast]: `rope` runs `count` items,
// 2^shift to a row (the first per_row of them work); `rope_elems` writes `count`
// output words.

// sin and cos of a from one reduction: Cody-Waite with pi/2 in three parts (the
// first two short enough that k times them is exact for |k| < 2^15), else the
// exact reduction of unary.wgsl. Returns (sin, cos).
fn rope_sincos(a: f32) -> vec2<f32> {
    var r = a;
    var q = 0u;
    if (abs(a) < 51000.0) {
        let k = round(a * 0.63661975);
        r = ((a - k * 1.5703125) - k * 4.8351287841796875e-4) - k * 3.1391647326017846e-7;
        q = u32(i32(k)) & 3u;
    } else {
        let t = reduce_pio2(a);
        r = t.x;
        q = u32(t.y) & 3u;
    }
    let s = sin_poly(r);
    let c = cos_poly(r);
    switch q {
        case 0u: { return vec2<f32>(s, c); }
        case 1u: { return vec2<f32>(c, -s); }
        case 2u: { return vec2<f32>(-s, -c); }
        default: { return vec2<f32>(-c, s); }
    }
}

// a / b for a < 2^22 from the host's f32 1 / b: the estimate is within 1/2 of
// a / b, so one correction makes it exact (integer division costs ~20
// instructions on GPUs, this ~6).
fn rope_div(a: u32, b: u32, rcp: u32) -> u32 {
    if (P[15] == 0u) { return a / b; }
    var q = u32(f32(a) * bitcast<f32>(rcp));
    let r = i32(a) - i32(q * b);
    if (r < 0i) { q -= 1u; } else if (u32(r) >= b) { q += 1u; }
    return q;
}

// scale * position of a row.
fn rope_pos(row: u32) -> f32 {
    let seq = rope_div(row, P[2], P[13]);
    let p = f32(ld_b(P[9] + rope_div(row, P[7], P[14]))) + f32(row - seq * P[2]);
    return bitcast<f32>(P[6]) * p;
}

fn rope_angle(row: u32, k: u32) -> vec2<f32> {
    return rope_sincos(rope_pos(row) * ld_c(P[10] + k));
}

// Word kernel (rows and x0 aligned to whole words, dims a multiple of 2 * EPO):
// item q of a row rotates EPO pairs held in two output words (the halves' words
// q and q + dims / 2 / EPO, or words 2q and 2q + 1 when traditional); the items
// past dims / (2 * EPO) copy one word each.
@compute @workgroup_size(WG)
fn rope(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let per_row = P[1];
    let dw = P[3] / EPO;
    let pairs = P[4] / (2u * EPO);
    let trad = P[5] != 0u;
    let xw = P[8] / EPO;
    for (var it = thread_index(lid, wid, nwg); it < P[0]; it += thread_count(nwg)) {
        let row = it >> P[12];
        let q = it & ((1u << P[12]) - 1u);
        if (q >= per_row) { continue; }
        let base = row * dw;
        if (q >= pairs) {
            let w = base + 2u * pairs + (q - pairs);
            O[w] = wa(xw + w);
            continue;
        }
        var w = vec2<u32>(base + q, base + pairs + q);
        if (trad) { w = vec2<u32>(base + 2u * q, base + 2u * q + 1u); }
        let src = vec2<u32>(wa(xw + w.x), wa(xw + w.y));
        let sp = rope_pos(row);
        var dst = vec2<u32>(0u, 0u);
        for (var t = 0u; t < EPO; t++) {
            // Local indices of the pair's elements in the two words (word i / EPO).
            var ia = t;
            var ib = EPO + t;
            if (trad) { ia = 2u * t; ib = 2u * t + 1u; }
            let a = xa(src[ia / EPO], ia % EPO);
            let b = xa(src[ib / EPO], ib % EPO);
            let sc = rope_sincos(sp * ld_c(P[10] + q * EPO + t));
            dst[ia / EPO] = put(dst[ia / EPO], ia % EPO, st_o(a * sc.y - b * sc.x));
            dst[ib / EPO] = put(dst[ib / EPO], ib % EPO, st_o(a * sc.x + b * sc.y));
        }
        O[w.x] = dst.x;
        O[w.y] = dst.y;
    }
}

fn rope_elem(e: u32) -> f32 {
    let d = P[3];
    let dims = P[4];
    let j = e % d;
    let x0 = P[8];
    if (j >= dims) { return ld_a(x0 + e); }
    var k = j >> 1u;
    var first = (j & 1u) == 0u;
    var lo = e - (j & 1u);
    var step = 1u;
    if (P[5] == 0u) {
        let h = dims >> 1u;
        first = j < h;
        k = select(j - h, j, first);
        lo = select(e - h, e, first);
        step = h;
    }
    let sc = rope_angle(e / d, k);
    let a = ld_a(x0 + lo);
    let b = ld_a(x0 + lo + step);
    return select(a * sc.x + b * sc.y, a * sc.y - b * sc.x, first);
}

// Element kernel, for any alignment: each output word from its own elements.
@compute @workgroup_size(WG)
fn rope_elems(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var w = thread_index(lid, wid, nwg); w < P[0]; w += thread_count(nwg)) {
        var word = 0u;
        for (var j = 0u; j < EPO; j++) {
            let e = (w << LO) + j;
            if (e < P[11]) { word = put(word, j, st_o(rope_elem(e))); }
        }
        O[w] = word;
    }
}
