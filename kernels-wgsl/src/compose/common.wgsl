// Shared helpers: float classification by bits, f16/bf16 conversions, saturating
// float->int casts, element extract/store for every storage dtype, grid indexing.
//
// NaN and inf are tested on the bit pattern rather than with `x != x`: drivers may
// fold float self-comparisons.

// Workgroup size (power of two, at most 256: workgroup arrays are sized 256).
override WG: u32 = 256u;
// Contiguous elementwise kernels: how each input is read (0 broadcast scalar,
// 1 aligned vec4 packed like the output, 2 element loads).
override MODE_A: u32 = 2u;
override MODE_B: u32 = 2u;
override MODE_C: u32 = 2u;

// Workgroups form a 2-D grid so more than 65535 of them can be launched; all kernels
// loop grid-stride over their work items.
fn thread_index(lid: vec3<u32>, wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid.x;
}
fn thread_count(nwg: vec3<u32>) -> u32 { return nwg.x * nwg.y * WG; }

fn isnan_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn isinf_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
// Nonzero as a truth value: NaN counts as true, -0 as false.
fn nz_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) != 0u; }
// Through a `let`: a const-expression evaluating to NaN or inf is an error in
// WGSL (browsers enforce it; naga does not).
fn nan_f() -> f32 { let b = 0x7fc00000u; return bitcast<f32>(b); }
fn inf_f() -> f32 { let b = 0x7f800000u; return bitcast<f32>(b); }
fn signbit_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x80000000u) != 0u; }

// binary16 bits (low 16 bits of h) -> f32, exact. Done by hand because
// unpack2x16float may flush f16 subnormals.
fn f16_val(h: u32) -> f32 {
    let s = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0x1fu) {
        return bitcast<f32>(s | 0x7f800000u | (m << 13u));
    }
    if (e == 0u) {
        // Subnormal or zero: m * 2^-24, a normal f32 (or zero).
        let v = f32(m) * 5.9604644775390625e-8;
        return select(v, -v, s != 0u);
    }
    return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}

// f32 -> binary16 bits, round to nearest even, overflow to inf, NaN stays NaN.
// By hand because the rounding of pack2x16float is not specified.
fn f16_bits(f: f32) -> u32 {
    let x = bitcast<u32>(f);
    let sign = (x >> 16u) & 0x8000u;
    let ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {
        return sign | 0x7e00u | ((ax >> 13u) & 0x3ffu);
    }
    if (ax >= 0x477ff000u) {
        // >= 65520 (the midpoint between 65504 and 2^16) rounds to inf.
        return sign | 0x7c00u;
    }
    if (ax >= 0x38800000u) {
        // Normal binary16: drop 13 mantissa bits with round-to-nearest-even.
        let r = ax + 0xfffu + ((ax >> 13u) & 1u);
        return sign | ((r - 0x38000000u) >> 13u);
    }
    let e = ax >> 23u;
    if (e < 102u) {
        return sign;
    }
    // Subnormal binary16: value / 2^-24, rounded to nearest even.
    let m = (ax & 0x7fffffu) | 0x800000u;
    let shift = 126u - e;
    let half = 1u << (shift - 1u);
    let rem = m & ((1u << shift) - 1u);
    var q = m >> shift;
    if (rem > half || (rem == half && (q & 1u) == 1u)) {
        q = q + 1u;
    }
    return sign | q;
}

fn bf16_val(h: u32) -> f32 { return bitcast<f32>(h << 16u); }

// f32 -> bfloat16 bits, round to nearest even, NaN kept (made quiet).
fn bf16_bits(f: f32) -> u32 {
    let x = bitcast<u32>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (x >> 16u) | 0x40u;
    }
    return (x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u;
}

// Float -> integer casts: truncate toward zero, saturate, NaN -> 0.
fn f2i(x: f32) -> i32 {
    if (isnan_f(x)) { return 0i; }
    if (x >= 2147483648.0) { return 2147483647i; }
    if (x <= -2147483648.0) { return -2147483647i - 1i; }
    return i32(x);
}

fn f2u(x: f32) -> u32 {
    if (isnan_f(x) || x <= 0.0) { return 0u; }
    if (x >= 4294967296.0) { return 0xffffffffu; }
    return u32(x);
}

// Element j of a u32 word, as the dtype's compute type.
fn ex_f32(w: u32, j: u32) -> f32 { return bitcast<f32>(w); }
fn ex_i32(w: u32, j: u32) -> i32 { return bitcast<i32>(w); }
fn ex_u32(w: u32, j: u32) -> u32 { return w; }
// ex_f16 and st_f16 come from the prelude (software or hardware conversion).
fn ex_bf16(w: u32, j: u32) -> f32 { return bf16_val((w >> (j << 4u)) & 0xffffu); }
fn ex_u16(w: u32, j: u32) -> u32 { return (w >> (j << 4u)) & 0xffffu; }
fn ex_u8(w: u32, j: u32) -> u32 { return (w >> (j << 3u)) & 0xffu; }
fn ex_bool(w: u32, j: u32) -> u32 { return (w >> (j << 3u)) & 0xffu; }
// Both elements of a 16-bit word (x2_f16/st2_f16 come from the prelude too).
fn x2_bf16(w: u32) -> vec2<f32> { return vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u)); }
fn x2_u16(w: u32) -> vec2<u32> { return vec2<u32>(w & 0xffffu, w >> 16u); }

// Compute value -> storage bits (in the low bits of the result).
fn st_f32(v: f32) -> u32 { return bitcast<u32>(v); }
fn st_i32(v: i32) -> u32 { return bitcast<u32>(v); }
fn st_u32(v: u32) -> u32 { return v; }
fn st_bf16(v: f32) -> u32 { return bf16_bits(v); }
fn st_u16(v: u32) -> u32 { return v & 0xffffu; }
fn st_u8(v: u32) -> u32 { return v & 0xffu; }
fn st_bool(v: u32) -> u32 { return select(0u, 1u, v != 0u); }
fn st2_bf16(v: vec2<f32>) -> u32 { return bf16_bits(v.x) | (bf16_bits(v.y) << 16u); }
fn st2_u16(v: vec2<u32>) -> u32 { return (v.x & 0xffffu) | (v.y << 16u); }

// Integer to f32 rounded to odd (an inexact result is truncated toward zero and
// gets an odd last bit), so a second rounding to f16/bf16 is the correct single
// rounding of the integer. f32(i) itself may round away from zero, up to 2^31.
fn i2f_odd(i: i32) -> f32 {
    let r = f32(i);
    let back = f2i(r);
    if (back == i && r != 2147483648.0) { return r; }
    let away = r == 2147483648.0 || (i > 0i && back > i) || (i < 0i && back < i);
    var m = bitcast<u32>(r);
    if (away) { m -= 1u; }
    return bitcast<f32>(m | 1u);
}
fn u2f_odd(u: u32) -> f32 {
    let r = f32(u);
    if (r >= 4294967296.0) { return bitcast<f32>((bitcast<u32>(r) - 1u) | 1u); }
    let back = u32(r);
    if (back == u) { return r; }
    var m = bitcast<u32>(r);
    if (back > u) { m -= 1u; }
    return bitcast<f32>(m | 1u);
}

// ---- accurate exp/log building blocks (drivers' exp/log/pow are loosely bounded by
// WGSL: exp 3+2|x| ulp, log 2^-21 absolute near 1, pow inherits both).

// e^r for |r| <= ln2/2: degree-7 Taylor polynomial (truncation < 0.1 ulp).
fn exp_poly(r: f32) -> f32 {
    var p = 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    return p * r + 1.0;
}
// p * 2^k for p in [0.7, 1.42]. Normal results (k in [-125, 127]) multiply by 2^k
// built from its exponent bits: exact, so bit-identical to ldexp, and far cheaper
// on GPUs that expand ldexp. 2^128 is no float, yet p * 2^128 may be: two steps there.
fn scale2(p: f32, k: i32) -> f32 {
    if (k >= -125i && k <= 127i) { return p * bitcast<f32>(u32(k + 127i) << 23u); }
    if (k > 127i) { return ldexp(p * 2.0, k - 1i); }
    return ldexp(p, k);
}
// scale2 with results below 2^-126 built from p's bits (rounded to nearest even):
// drivers that flush subnormals (NVIDIA) flush ldexp's subnormal results too, and
// bf16 holds them. Kept out of scale2, which the row kernels inline: in softmax
// the extra registers halved its speed on the H200.
fn scale2_sub(p: f32, k: i32) -> f32 {
    let b = bitcast<u32>(p);
    let ep = i32((b >> 23u) & 0xffu);
    if (k >= -125i || ep == 0i || ep == 255i) { return scale2(p, k); }
    let e = ep + k;
    let sign = b & 0x80000000u;
    if (e >= 1i) { return bitcast<f32>(sign | (u32(e) << 23u) | (b & 0x7fffffu)); }
    let shift = u32(1i - e);
    if (shift > 24u) { return bitcast<f32>(sign); }
    let m = (b & 0x7fffffu) | 0x800000u;
    let q = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    let up = rem > half || (rem == half && (q & 1u) == 1u);
    return bitcast<f32>(sign | (q + select(0u, 1u, up)));
}
// x rounded to the nearest integer (ties to even) for |x| < 2^22, as an i32: the
// bits of x + 1.5 * 2^23 (an add, then integer ops), where round() then f32 -> i32
// take two trips through GPUs' slower conversion units. (The float is f32(k): the
// shortcut (x + 1.5 * 2^23) - 1.5 * 2^23 is folded back to x by some drivers.)
fn round_i(x: f32) -> i32 {
    return bitcast<i32>(x + 12582912.0) - 0x4b400000i;
}
// e^a to ~1 ulp: a = k ln2 + r (Cody-Waite split, k * LN2_HI exact).
fn exp_acc(a: f32) -> f32 {
    if (isnan_f(a)) { return a; }
    if (a > 88.72284) { return inf_f(); }
    if (a < -103.97208) { return 0.0; }
    let ki = round_i(a * 1.442695041);
    let k = f32(ki);
    let r = (a - k * 0.693145751953125) - k * 1.4286068203e-6;
    return scale2(exp_poly(r), ki);
}
// exp_acc of a < -87 (results near or below 2^-126) through scale2_sub.
fn exp_tiny(a: f32) -> f32 {
    if (a < -103.97208) { return 0.0; }
    let ki = round_i(a * 1.442695041);
    let k = f32(ki);
    let r = (a - k * 0.693145751953125) - k * 1.4286068203e-6;
    return scale2_sub(exp_poly(r), ki);
}
// 2^t to ~1 ulp (t = k + f exactly, |f| <= 1/2).
fn exp2_acc(t: f32) -> f32 {
    if (isnan_f(t)) { return t; }
    if (t >= 128.0) { return inf_f(); }
    if (t < -150.0) { return 0.0; }
    let ki = round_i(t);
    return scale2(exp_poly((t - f32(ki)) * 0.6931471805599453), ki);
}
// log(1 + a) for a in (-0.4, 0.6): 2 atanh(s), s = a / (2 + a), |s| <= 0.25.
fn log1p_series(a: f32) -> f32 {
    let s = a / (2.0 + a);
    let s2 = s * s;
    var p = 1.0 / 19.0;
    p = p * s2 + 1.0 / 17.0;
    p = p * s2 + 1.0 / 15.0;
    p = p * s2 + 1.0 / 13.0;
    p = p * s2 + 1.0 / 11.0;
    p = p * s2 + 1.0 / 9.0;
    p = p * s2 + 1.0 / 7.0;
    p = p * s2 + 1.0 / 5.0;
    p = p * s2 + 1.0 / 3.0;
    p = p * s2 + 1.0;
    return 2.0 * s * p;
}
// For finite x > 0: (e, ln m) with x = m 2^e, m in [sqrt(1/2), sqrt(2)), so m - 1 is
// exact and log1p_series applies.
fn log_parts(x: f32) -> vec2<f32> {
    var b = bitcast<u32>(x);
    var e = i32((b >> 23u) & 0xffu) - 127;
    if (e == -127) {
        b = bitcast<u32>(x * 8388608.0); // subnormal: scale by 2^23 first
        e = i32((b >> 23u) & 0xffu) - 150;
    }
    var m = bitcast<f32>((b & 0x7fffffu) | 0x3f800000u);
    if (m > 1.41421356) {
        m = m * 0.5;
        e += 1;
    }
    return vec2<f32>(f32(e), log1p_series(m - 1.0));
}
// log of x <= 0, NaN or inf.
fn log_special(x: f32) -> f32 {
    if (x == 0.0) { return -inf_f(); }
    if (isinf_f(x) && x > 0.0) { return x; }
    return nan_f();
}
// log2(x) for finite x > 0, to ~1 ulp.
fn log2_acc(x: f32) -> f32 {
    let p = log_parts(x);
    return p.x + p.y * 1.4426950408889634;
}
