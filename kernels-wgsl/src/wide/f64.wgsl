// f64 math, for adapters with SHADER_F64 (native Vulkan: NVIDIA, AMD, lavapipe).
// The packed u32-word kernels move f64 data as pairs of words; the 64-bit kernels
// (wide.wgsl and each family's wide.wgsl) compute on it with this math.
//
// GLSL.std.450 defines exp, log, pow and the trigonometric functions for 16- and
// 32-bit floats only, so they are computed here from f64 arithmetic: argument
// reduction, then polynomials (Taylor series, or Chebyshev fits made by
// `f64_fits.py` for erfc). NaN and inf are tested through an f32 conversion (which
// keeps them) since naga compiles `x != x` to an ordered compare.

// Scalar `k` of the parameters (words 4 + 2k, 5 + 2k) as an f64.
fn scalar(k: u32) -> f64 { return from_bits(P[4u + 2u * k], P[5u + 2u * k]); }

// The f64 with these bits, by arithmetic (WGSL cannot bitcast a pair of words).
fn from_bits(lo: u32, hi: u32) -> f64 {
    let e = (hi >> 20u) & 0x7ffu;
    let m = f64(hi & 0xfffffu) * 4294967296.0lf + f64(lo);
    var v: f64;
    if (e == 0x7ffu) {
        v = select(f64(inf_f()), f64(nan_f()), m != 0.0lf);
    } else if (e == 0u) {
        v = ldexp(m, -1074);
    } else {
        v = ldexp(m + 4503599627370496.0lf, i32(e) - 1075);
    }
    return select(v, -v, (hi & 0x80000000u) != 0u);
}

fn inf_f() -> f32 { let b = 0x7f800000u; return bitcast<f32>(b); }
fn nan_f() -> f32 { let b = 0x7fc00000u; return bitcast<f32>(b); }
fn inf_d() -> f64 { return f64(inf_f()); }
fn nan_d() -> f64 { return f64(nan_f()); }
fn isnan_d(x: f64) -> bool { return (bitcast<u32>(f32(x)) & 0x7fffffffu) > 0x7f800000u; }
fn isinf_d(x: f64) -> bool { return abs(x) == inf_d(); }
fn signbit_d(x: f64) -> bool { return (bitcast<u32>(f32(x)) & 0x80000000u) != 0u; }
// Nonzero as a truth value (NaN is true).
fn nz_d(x: f64) -> bool { return !(x == 0.0lf); }

// ---- casts (SEMANTICS.md): to f32 rounded to nearest, to integers truncated and
// saturated (NaN to 0), and to the f32 rounded to odd that a copy then rounds
// correctly to f16/bf16/u8/bool (rounding twice through f32 would not be exact).

fn to_f32(x: f64) -> u32 { return bitcast<u32>(f32(x)); }
fn to_i32(x: f64) -> u32 {
    if (isnan_d(x)) { return 0u; }
    return bitcast<u32>(i32(clamp(x, -2147483648.0lf, 2147483647.0lf)));
}
fn to_u32(x: f64) -> u32 {
    if (isnan_d(x)) { return 0u; }
    return u32(clamp(x, 0.0lf, 4294967295.0lf));
}
fn to_f32_odd(x: f64) -> u32 {
    let f = f32(x);
    var b = bitcast<u32>(f);
    if ((b & 0x7fffffffu) >= 0x7f800000u || f64(f) == x) { return b; }
    // Inexact: truncate toward zero, then set the last bit.
    if (abs(f64(f)) > abs(x)) { b = b - 1u; }
    if ((b & 0x7fffffffu) == 0u) { return (b & 0x80000000u) | 1u; }
    return b | 1u;
}
// i64/u64 <-> f64: the magnitude's high word times 2^32 is exact, so the sum
// rounds once; back, the truncated value splits exactly into two words.
fn from_i64(a: vec2<u32>) -> f64 {
    let m = abs64(a);
    let v = f64(m.y) * 4294967296.0lf + f64(m.x);
    return select(v, -v, neg_bit(a));
}
fn from_u64(a: vec2<u32>) -> f64 { return f64(a.y) * 4294967296.0lf + f64(a.x); }
fn to_u64(x: f64) -> vec2<u32> {
    let t = trunc(x);
    if (isnan_d(x) || t <= 0.0lf) { return vec2<u32>(0u, 0u); }
    if (t >= 18446744073709551616.0lf) { return vec2<u32>(0xffffffffu, 0xffffffffu); }
    let hi = floor(t / 4294967296.0lf);
    return vec2<u32>(u32(t - hi * 4294967296.0lf), u32(hi));
}
fn to_i64(x: f64) -> vec2<u32> {
    if (isnan_d(x)) { return vec2<u32>(0u, 0u); }
    let t = trunc(x);
    if (t >= 9223372036854775808.0lf) { return vec2<u32>(0xffffffffu, 0x7fffffffu); }
    if (t <= -9223372036854775808.0lf) { return vec2<u32>(0u, 0x80000000u); }
    let a = abs(t);
    let hi = floor(a / 4294967296.0lf);
    let m = vec2<u32>(u32(a - hi * 4294967296.0lf), u32(hi));
    return select(m, neg64(m), t < 0.0lf);
}

// The sort key of an f64 from its words: an unsigned order of the value, NaN
// last, -0 as +0.
fn key_d(lo: u32, hi: u32) -> vec2<u32> {
    let mag = hi & 0x7fffffffu;
    if (mag > 0x7ff00000u || (mag == 0x7ff00000u && lo != 0u)) {
        return vec2<u32>(0xffffffffu, 0xffffffffu);
    }
    if (mag == 0u && lo == 0u) { return vec2<u32>(0u, 0x80000000u); }
    if ((hi & 0x80000000u) != 0u) { return vec2<u32>(~lo, ~hi); }
    return vec2<u32>(lo, hi | 0x80000000u);
}

fn from_f32(w: u32) -> f64 { return f64(bitcast<f32>(w)); }
fn from_i32(w: u32) -> f64 { return f64(bitcast<i32>(w)); }
fn from_u32(w: u32) -> f64 { return f64(w); }

// ---- arithmetic

fn sign_d(x: f64) -> f64 {
    if (x > 0.0lf) { return 1.0lf; }
    if (x < 0.0lf) { return -1.0lf; }
    return x;
}
fn max_d(a: f64, b: f64) -> f64 {
    if (isnan_d(a) || isnan_d(b)) { return nan_d(); }
    return select(b, a, a > b || (a == b && !signbit_d(a)));
}
fn min_d(a: f64, b: f64) -> f64 {
    if (isnan_d(a) || isnan_d(b)) { return nan_d(); }
    return select(b, a, a < b || (a == b && signbit_d(a)));
}
// The exponent e of finite x > 0 (x = m 2^e, m in [1, 2)): read from f32(x) after
// scaling x into f32's normal range (f32(x) may round up to the next power of two).
fn exponent_d(x: f64) -> i32 {
    var y = x;
    var adj = 0;
    // Steps of 2^240 land inside [2^-123, 2^123] from either side.
    for (var i = 0; i < 5 && y < 1.0e-37lf; i++) { y = ldexp(y, 240); adj -= 240; }
    for (var i = 0; i < 5 && y > 1.0e37lf; i++) { y = ldexp(y, -240); adj += 240; }
    var e = i32((bitcast<u32>(f32(y)) >> 23u) & 0xffu) - 127;
    if (scale2(y, -e) < 1.0lf) { e -= 1; }
    return e + adj;
}

// fmod(a, b) of finite a >= 0, b > 0, exactly: subtract b 2^k with t <= r < 2t
// (Sterbenz: each difference is exact), the remainder halving each step.
fn fmod_pos(a: f64, b: f64) -> f64 {
    var r = a;
    let eb = exponent_d(b);
    for (var i = 0; i < 2200 && r >= b; i++) {
        let k = exponent_d(r) - eb;
        var t = scale2(b, k);
        if (t > r || isinf_d(t)) { t = scale2(b, k - 1); }
        r = r - t;
    }
    return r;
}

// Python's remainder (the CPU's rule): fmod, then moved to the divisor's sign;
// a zero takes the divisor's sign.
fn rem_d(a: f64, b: f64) -> f64 {
    if (isnan_d(a) || isnan_d(b) || isinf_d(a) || b == 0.0lf) { return nan_d(); }
    var r = a;
    if (!isinf_d(b)) {
        r = fmod_pos(abs(a), abs(b));
        if (a < 0.0lf) { r = -r; }
    }
    if (r == 0.0lf) { return select(0.0lf, -0.0lf, b < 0.0lf); }
    if ((r < 0.0lf) != (b < 0.0lf)) { return r + b; }
    return r;
}

// ---- exponentials and logarithms

const LN2_HI: f64 = 6.93147180369123816490e-01lf;  // 33 bits: k * LN2_HI is exact
const LN2_LO: f64 = 1.90821492927058770002e-10lf;
const INV_LN2: f64 = 1.44269504088896338700e+00lf;

// 2^k for any k a result may need (two steps: 2^1024 is not an f64).
fn scale2(x: f64, k: i32) -> f64 { let h = k / 2; return ldexp(ldexp(x, h), k - h); }

// exp(r) - 1 for |r| <= ln2 / 2 (Taylor series to r^15).
fn expm1_small(r: f64) -> f64 {
    var p = 1.0lf / 1307674368000.0lf;
    p = fma(p, r, 1.0lf / 87178291200.0lf);
    p = fma(p, r, 1.0lf / 6227020800.0lf);
    p = fma(p, r, 1.0lf / 479001600.0lf);
    p = fma(p, r, 1.0lf / 39916800.0lf);
    p = fma(p, r, 1.0lf / 3628800.0lf);
    p = fma(p, r, 1.0lf / 362880.0lf);
    p = fma(p, r, 1.0lf / 40320.0lf);
    p = fma(p, r, 1.0lf / 5040.0lf);
    p = fma(p, r, 1.0lf / 720.0lf);
    p = fma(p, r, 1.0lf / 120.0lf);
    p = fma(p, r, 1.0lf / 24.0lf);
    p = fma(p, r, 1.0lf / 6.0lf);
    p = fma(p, r, 0.5lf);
    return fma(p * r, r, r);
}

fn exp_d(x: f64) -> f64 {
    if (isnan_d(x)) { return x; }
    if (x > 709.782712893384lf) { return inf_d(); }
    if (x < -745.2lf) { return 0.0lf; }
    let k = round(x * INV_LN2);
    let r = fma(-k, LN2_LO, fma(-k, LN2_HI, x));
    return scale2(1.0lf + expm1_small(r), i32(k));
}

fn expm1_d(x: f64) -> f64 {
    if (isnan_d(x)) { return x; }
    if (x > 709.782712893384lf) { return inf_d(); }
    if (x < -40.0lf) { return -1.0lf; }
    if (x == 0.0lf) { return x; }
    if (abs(x) <= 0.34657359027997264lf) { return expm1_small(x); }
    let k = round(x * INV_LN2);
    let r = fma(-k, LN2_LO, fma(-k, LN2_HI, x));
    let e = expm1_small(r);
    let ki = i32(k);
    if (ki > 56) { return scale2(1.0lf + e, ki); }
    // 2^k (e + 1) - 1 = 2^k e + (2^k - 1), the second term exact.
    return ldexp(e, ki) + (ldexp(1.0lf, ki) - 1.0lf);
}

// log(m) for m in [sqrt(1/2), sqrt(2)): with f = m - 1 and s = f / (2 + f),
// log(m) = 2 atanh(s) = f - f^2/2 + s (f^2/2 + R), R = 2 (s^2/3 + s^4/5 + ...).
fn log_mant(m: f64) -> f64 {
    let f = m - 1.0lf;
    let s = f / (2.0lf + f);
    let z = s * s;
    var p = 2.0lf / 25.0lf;
    p = fma(p, z, 2.0lf / 23.0lf);
    p = fma(p, z, 2.0lf / 21.0lf);
    p = fma(p, z, 2.0lf / 19.0lf);
    p = fma(p, z, 2.0lf / 17.0lf);
    p = fma(p, z, 2.0lf / 15.0lf);
    p = fma(p, z, 2.0lf / 13.0lf);
    p = fma(p, z, 2.0lf / 11.0lf);
    p = fma(p, z, 2.0lf / 9.0lf);
    p = fma(p, z, 2.0lf / 7.0lf);
    p = fma(p, z, 2.0lf / 5.0lf);
    p = fma(p, z, 2.0lf / 3.0lf);
    let hfsq = 0.5lf * f * f;
    return f - (hfsq - s * (hfsq + p * z));
}

// x = m 2^e with m in [sqrt(1/2), sqrt(2)), for finite x > 0.
struct Split { m: f64, e: i32 }
fn split_d(x: f64) -> Split {
    var e = exponent_d(x);
    var m = scale2(x, -e);
    if (m >= 1.4142135623730951lf) { m = m * 0.5lf; e = e + 1; }
    return Split(m, e);
}

fn log_d(x: f64) -> f64 {
    if (isnan_d(x) || x < 0.0lf) { return nan_d(); }
    if (x == 0.0lf) { return -inf_d(); }
    if (isinf_d(x)) { return x; }
    let s = split_d(x);
    let k = f64(s.e);
    return fma(k, LN2_HI, log_mant(s.m) + k * LN2_LO);
}

fn log2_d(x: f64) -> f64 {
    if (isnan_d(x) || x < 0.0lf) { return nan_d(); }
    if (x == 0.0lf) { return -inf_d(); }
    if (isinf_d(x)) { return x; }
    let s = split_d(x);
    let l = log_mant(s.m);
    // 1/ln2 in two parts: the result is exact for powers of two.
    return f64(s.e) + fma(l, 1.44269502162933349609lf, l * 1.92596299112661746888e-08lf);
}

fn log1p_d(x: f64) -> f64 {
    if (isnan_d(x) || x < -1.0lf) { return nan_d(); }
    if (x == -1.0lf) { return -inf_d(); }
    if (isinf_d(x)) { return x; }
    let u = 1.0lf + x;
    if (u == 1.0lf) { return x; }
    // log(u) * x / (u - 1): the rounding of 1 + x cancels (Goldberg).
    return log_d(u) * (x / (u - 1.0lf));
}

fn pow_d(a: f64, b: f64) -> f64 {
    if (b == 0.0lf || a == 1.0lf) { return 1.0lf; }
    if (isnan_d(a) || isnan_d(b)) { return nan_d(); }
    let bi = trunc(b) == b;
    let odd = bi && abs(b) < 9007199254740992.0lf && fract(b * 0.5lf) != 0.0lf;
    if (a == 0.0lf) {
        let r = select(0.0lf, inf_d(), b < 0.0lf);
        return select(r, select(r, -r, signbit_d(a)), odd);
    }
    if (isinf_d(b)) {
        if (a == -1.0lf) { return 1.0lf; }
        return select(0.0lf, inf_d(), (abs(a) > 1.0lf) == (b > 0.0lf));
    }
    if (isinf_d(a)) {
        let r = select(0.0lf, inf_d(), b > 0.0lf);
        return select(r, select(r, -r, a < 0.0lf), odd);
    }
    if (a < 0.0lf && !bi) { return nan_d(); }
    // Integer powers up to 4 by squaring (at most three roundings; exact where
    // the result is representable, as pow(-2, 3) must be).
    if (bi && abs(b) <= 4.0lf) {
        var n = u32(abs(b));
        var base = a;
        var r = 1.0lf;
        while (n > 0u) {
            if ((n & 1u) == 1u) { r = r * base; }
            base = base * base;
            n = n >> 1u;
        }
        if (b > 0.0lf) { return r; }
        let q = 1.0lf / r;
        if (!isinf_d(r) && abs(q) >= 2.2250738585072014e-308lf) { return q; }
    }
    // exp(b log|a|) with the product's rounding error carried: exp(p + e) ~ exp(p)(1 + e).
    let l = log_d(abs(a));
    let p = b * l;
    let e = fma(b, l, -p);
    var r = exp_d(p);
    // Past the range r is 0 or inf: inf * e + inf would be NaN for e < 0 (NVIDIA).
    if (!isinf_d(r)) { r = fma(r, e, r); }
    return select(r, -r, a < 0.0lf && odd);
}

fn sigmoid_d(x: f64) -> f64 {
    if (x < 0.0lf) { let e = exp_d(x); return e / (1.0lf + e); }
    return 1.0lf / (1.0lf + exp_d(-x));
}

fn tanh_d(x: f64) -> f64 {
    if (isnan_d(x)) { return x; }
    let a = abs(x);
    if (a < 3.7e-9lf) { return x; }
    var t = 1.0lf;
    if (a < 22.0lf) {
        let e = expm1_d(2.0lf * a);
        t = e / (e + 2.0lf);
    }
    return select(t, -t, x < 0.0lf);
}

// ---- trigonometry: x = k pi/2 + r with pi/2 in four parts (accurate for
// |x| below about 2^40; beyond, the reduction loses bits), then series on
// |r| <= pi/4.

const PIO2_1: f64 = 1.57079632673412561417e+00lf;
const PIO2_2: f64 = 6.07710050630396597660e-11lf;
const PIO2_3: f64 = 2.02226624871116645580e-21lf;
// pi/2 less the three parts above (to 25 digits): the reduced argument near a
// multiple of pi/2 (tan's poles) needs it.
const PIO2_4: f64 = 8.478427660368899643958701e-32lf;

fn sin_poly_d(r: f64) -> f64 {
    if (r == 0.0lf) { return r; }
    let z = r * r;
    var p = -1.0lf / 121645100408832000.0lf;
    p = fma(p, z, 1.0lf / 355687428096000.0lf);
    p = fma(p, z, -1.0lf / 1307674368000.0lf);
    p = fma(p, z, 1.0lf / 6227020800.0lf);
    p = fma(p, z, -1.0lf / 39916800.0lf);
    p = fma(p, z, 1.0lf / 362880.0lf);
    p = fma(p, z, -1.0lf / 5040.0lf);
    p = fma(p, z, 1.0lf / 120.0lf);
    p = fma(p, z, -1.0lf / 6.0lf);
    return fma(r * z, p, r);
}
fn cos_poly_d(r: f64) -> f64 {
    let z = r * r;
    var p = -1.0lf / 6402373705728000.0lf;
    p = fma(p, z, 1.0lf / 20922789888000.0lf);
    p = fma(p, z, -1.0lf / 87178291200.0lf);
    p = fma(p, z, 1.0lf / 479001600.0lf);
    p = fma(p, z, -1.0lf / 3628800.0lf);
    p = fma(p, z, 1.0lf / 40320.0lf);
    p = fma(p, z, -1.0lf / 720.0lf);
    p = fma(p, z, 1.0lf / 24.0lf);
    let hz = 0.5lf * z;
    let w = 1.0lf - hz;
    // 1 - hz loses what (1 - w) - hz recovers.
    return w + (((1.0lf - w) - hz) + z * z * p);
}

struct Reduced { r: f64, q: u32 }
fn reduce_pio2_d(x: f64) -> Reduced {
    if (abs(x) <= 0.7853981633974483lf) { return Reduced(x, 0u); }
    let k = round(x * 6.36619772367581382433e-01lf);
    let r = fma(-k, PIO2_4, fma(-k, PIO2_3, fma(-k, PIO2_2, fma(-k, PIO2_1, x))));
    return Reduced(r, u32(i32(k - 4.0lf * floor(k * 0.25lf))));
}

fn sin_d(x: f64) -> f64 {
    if (isnan_d(x) || isinf_d(x)) { return nan_d(); }
    let t = reduce_pio2_d(x);
    switch (t.q) {
        case 0u: { return sin_poly_d(t.r); }
        case 1u: { return cos_poly_d(t.r); }
        case 2u: { return -sin_poly_d(t.r); }
        default: { return -cos_poly_d(t.r); }
    }
}
fn cos_d(x: f64) -> f64 {
    if (isnan_d(x) || isinf_d(x)) { return nan_d(); }
    let t = reduce_pio2_d(x);
    switch (t.q) {
        case 0u: { return cos_poly_d(t.r); }
        case 1u: { return -sin_poly_d(t.r); }
        case 2u: { return -cos_poly_d(t.r); }
        default: { return sin_poly_d(t.r); }
    }
}
fn tan_d(x: f64) -> f64 {
    if (isnan_d(x) || isinf_d(x)) { return nan_d(); }
    let t = reduce_pio2_d(x);
    let s = sin_poly_d(t.r);
    let c = cos_poly_d(t.r);
    return select(s / c, -c / s, (t.q & 1u) == 1u);
}

// atan on [0, inf]: 1/z past 1, then a shift by pi/6 past tan(pi/12), then the
// series to z^29.
fn atan_pos(z0: f64) -> f64 {
    var z = z0;
    var add = 0.0lf;
    var flip = false;
    if (z > 1.0lf) { z = 1.0lf / z; flip = true; }
    if (z > 0.2679491924311227lf) {
        let c = 0.57735026918962576451lf;
        z = (z - c) / fma(z, c, 1.0lf);
        add = 0.52359877559829887308lf;
    }
    let w = z * z;
    var p = 1.0lf / 29.0lf;
    p = fma(p, w, -1.0lf / 27.0lf);
    p = fma(p, w, 1.0lf / 25.0lf);
    p = fma(p, w, -1.0lf / 23.0lf);
    p = fma(p, w, 1.0lf / 21.0lf);
    p = fma(p, w, -1.0lf / 19.0lf);
    p = fma(p, w, 1.0lf / 17.0lf);
    p = fma(p, w, -1.0lf / 15.0lf);
    p = fma(p, w, 1.0lf / 13.0lf);
    p = fma(p, w, -1.0lf / 11.0lf);
    p = fma(p, w, 1.0lf / 9.0lf);
    p = fma(p, w, -1.0lf / 7.0lf);
    p = fma(p, w, 1.0lf / 5.0lf);
    p = fma(p, w, -1.0lf / 3.0lf);
    var r = add + fma(z * w, p, z);
    if (flip) { r = (1.57079632679489655800lf - r) + 6.12323399573676603587e-17lf; }
    return r;
}

fn atan2_d(y: f64, x: f64) -> f64 {
    if (isnan_d(x) || isnan_d(y)) { return nan_d(); }
    let pi = 3.14159265358979311600lf;
    let neg = signbit_d(y);
    var r: f64;
    if (y == 0.0lf) {
        r = select(0.0lf, pi, signbit_d(x));
    } else if (isinf_d(x) && isinf_d(y)) {
        r = select(0.7853981633974483lf, 2.356194490192345lf, x < 0.0lf);
    } else if (isinf_d(x)) {
        r = select(0.0lf, pi, x < 0.0lf);
    } else if (x == 0.0lf || isinf_d(y)) {
        r = 1.5707963267948966lf;
    } else {
        let a = atan_pos(abs(y) / abs(x));
        // pi - a with pi's low part.
        r = select(a, (pi - a) + 1.22464679914735317723e-16lf, x < 0.0lf);
    }
    return select(r, -r, neg);
}

// ---- erf, erfc and erfinv

// erf for |x| < 1: the Taylor series to x^41.
fn erf_small(x: f64) -> f64 {
    let z = x * x;
    var p = 0.0lf;
    var t = 1.0lf;
    // 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)), summed from the smallest term.
    var c: array<f64, 21>;
    for (var n = 0u; n < 21u; n++) {
        c[n] = t / f64(2u * n + 1u);
        t = -t / f64(n + 1u);
    }
    for (var n = 20i; n >= 0; n--) { p = fma(p, z, c[n]); }
    return x * p * 1.12837916709551257390lf;
}

// exp(-x^2) with x^2's rounding carried (x^2 = h + l exactly).
fn exp_negsq(x: f64) -> f64 {
    let h = x * x;
    let l = fma(x, x, -h);
    let e = exp_d(-h);
    return fma(-e, l, e);
}

// erfc(x) for x >= 1: exp(-x^2) g(x), g a Chebyshev fit (f64_fits.py) on
// [1, 2], [2, 3.5], [3.5, 6] in x and [6, 27] in 1/x.
fn erfc_large(x: f64) -> f64 {
    if (x >= 27.3lf) { return 0.0lf; }
    var g: f64;
    if (x < 2.0lf) {
        g = erfc_g1(2.0lf * x - 3.0lf);
    } else if (x < 3.5lf) {
        g = erfc_g2((x - 2.75lf) / 0.75lf);
    } else if (x < 6.0lf) {
        g = erfc_g3((x - 4.75lf) / 1.25lf);
    } else {
        let u = 1.0lf / x;
        let a = 1.0lf / 27.0lf;
        let b = 1.0lf / 6.0lf;
        g = erfc_g4((2.0lf * u - (a + b)) / (b - a)) * u;
    }
    return exp_negsq(x) * g;
}

fn erf_d(x: f64) -> f64 {
    if (isnan_d(x)) { return x; }
    let a = abs(x);
    if (a < 1.0lf) { return erf_small(x); }
    let r = 1.0lf - erfc_large(a);
    return select(r, -r, x < 0.0lf);
}

// erfinv: a start from the single-precision fit (evaluated in f64, with w in f64
// so it tracks x up to 1 - 2^-53), then Halley steps on erf(y) - x, or on
// erfc(y) - (1 - x) past erf(1) where 1 - x is exact and erf's rounding would
// dominate.
fn erfinv_d(a: f64) -> f64 {
    let x = abs(a);
    if (isnan_d(a) || x > 1.0lf) { return nan_d(); }
    if (x == 1.0lf) { return select(-inf_d(), inf_d(), a > 0.0lf); }
    if (a == 0.0lf) { return a; }
    var w = -log_d((1.0lf - x) * (1.0lf + x));
    var p: f64;
    if (w < 5.0lf) {
        w = w - 2.5lf;
        p = 2.81022636e-08lf;
        p = 3.43273939e-07lf + p * w;
        p = -3.5233877e-06lf + p * w;
        p = -4.39150654e-06lf + p * w;
        p = 0.00021858087lf + p * w;
        p = -0.00125372503lf + p * w;
        p = -0.00417768164lf + p * w;
        p = 0.246640727lf + p * w;
        p = 1.50140941lf + p * w;
    } else {
        w = sqrt(w) - 3.0lf;
        p = -0.000200214257lf;
        p = 0.000100950558lf + p * w;
        p = 0.00134934322lf + p * w;
        p = -0.00367342844lf + p * w;
        p = 0.00573950773lf + p * w;
        p = -0.0076224613lf + p * w;
        p = 0.00943887047lf + p * w;
        p = 1.00167406lf + p * w;
        p = 2.83297682lf + p * w;
    }
    var y = p * x;
    let tail = x > 0.8427007929497149lf;
    // Up to 8 steps: the start is ~1e-7 relative for most x, poorer very near 1.
    for (var it = 0u; it < 8u; it++) {
        var f: f64;
        var d = 1.12837916709551257390lf * exp_negsq(y);
        if (tail) {
            f = erfc_large(max(y, 1.0lf)) - (1.0lf - x);
            d = -d;
        } else {
            f = erf_d(y) - x;
        }
        if (f == 0.0lf || d == 0.0lf) { break; }
        let step = f / (d + y * f);
        y = y - step;
        if (abs(step) <= 1e-17lf * abs(y)) { break; }
    }
    return select(y, -y, a < 0.0lf);
}

// ---- erfc fits (generated by f64_fits.py)

// Relative error of the fit 1.4e-18.
fn erfc_g1(t: f64) -> f64 {
    var p = 2.02065147504418729e-13lf;
    p = fma(p, t, -1.51201806148991710e-12lf);
    p = fma(p, t, 1.02015947887744909e-11lf);
    p = fma(p, t, -7.25703261708699191e-11lf);
    p = fma(p, t, 5.04654734183512051e-10lf);
    p = fma(p, t, -3.40593858782149914e-09lf);
    p = fma(p, t, 2.23284175860622521e-08lf);
    p = fma(p, t, -1.41911861359171066e-07lf);
    p = fma(p, t, 8.72304473829848047e-07lf);
    p = fma(p, t, -5.17132867272212076e-06lf);
    p = fma(p, t, 2.94708574529999609e-05lf);
    p = fma(p, t, -1.60811173369930705e-04lf);
    p = fma(p, t, 8.36083809566712114e-04lf);
    p = fma(p, t, -4.11636316244565897e-03lf);
    p = fma(p, t, 1.90377599638693502e-02lf);
    p = fma(p, t, -8.18114588662800235e-02lf);
    p = fma(p, t, 3.21585416454317485e-01lf);
    return p;
}
// Relative error of the fit 7.5e-20.
fn erfc_g2(t: f64) -> f64 {
    var p = 2.27543417070101195e-14lf;
    p = fma(p, t, -1.43963380865417164e-13lf);
    p = fma(p, t, 7.88520006577191897e-13lf);
    p = fma(p, t, -4.80960819535287015e-12lf);
    p = fma(p, t, 2.90472379745523549e-11lf);
    p = fma(p, t, -1.71087964451300218e-10lf);
    p = fma(p, t, 9.88593453774512877e-10lf);
    p = fma(p, t, -5.60142981401324411e-09lf);
    p = fma(p, t, 3.10836999891862737e-08lf);
    p = fma(p, t, -1.68743338479360244e-07lf);
    p = fma(p, t, 8.95025082523763182e-07lf);
    p = fma(p, t, -4.63170526802046358e-06lf);
    p = fma(p, t, 2.33475421354636935e-05lf);
    p = fma(p, t, -1.14427153955735930e-04lf);
    p = fma(p, t, 5.44086455892288053e-04lf);
    p = fma(p, t, -2.50354880029600609e-03lf);
    p = fma(p, t, 1.11142085553691105e-02lf);
    p = fma(p, t, -4.74282281704761291e-02lf);
    p = fma(p, t, 1.93662096279068691e-01lf);
    return p;
}
// Relative error of the fit 1.6e-18.
fn erfc_g3(t: f64) -> f64 {
    var p = 2.42873122060344184e-13lf;
    p = fma(p, t, -1.21969930785855766e-12lf);
    p = fma(p, t, 4.90939486824653915e-12lf);
    p = fma(p, t, -2.40309695328723456e-11lf);
    p = fma(p, t, 1.18644206915977315e-10lf);
    p = fma(p, t, -5.68417156906027029e-10lf);
    p = fma(p, t, 2.68917925766724854e-09lf);
    p = fma(p, t, -1.25813947205886648e-08lf);
    p = fma(p, t, 5.81372226875975149e-08lf);
    p = fma(p, t, -2.65209109732589612e-07lf);
    p = fma(p, t, 1.19383316658194693e-06lf);
    p = fma(p, t, -5.30036789878437317e-06lf);
    p = fma(p, t, 2.31976110480193173e-05lf);
    p = fma(p, t, -1.00023746142059475e-04lf);
    p = fma(p, t, 4.24629648536714718e-04lf);
    p = fma(p, t, -1.77363065826090628e-03lf);
    p = fma(p, t, 7.28332245151928209e-03lf);
    p = fma(p, t, -2.93793107477039427e-02lf);
    p = fma(p, t, 1.16302707210247311e-01lf);
    return p;
}
// Relative error of the fit 1.2e-18.
fn erfc_g4(t: f64) -> f64 {
    var p = 1.14944612358133763e-14lf;
    p = fma(p, t, -2.63073237066926177e-13lf);
    p = fma(p, t, 6.81391220532929129e-13lf);
    p = fma(p, t, 1.09433931184903257e-11lf);
    p = fma(p, t, -9.17820363166105440e-11lf);
    p = fma(p, t, -2.11822210497614455e-10lf);
    p = fma(p, t, 7.28373813153941586e-09lf);
    p = fma(p, t, -2.08742984576535305e-08lf);
    p = fma(p, t, -5.33454704879563002e-07lf);
    p = fma(p, t, 4.99405332021962743e-06lf);
    p = fma(p, t, 4.14154324912966031e-05lf);
    p = fma(p, t, -1.08114714296651988e-03lf);
    p = fma(p, t, -3.61289363950303370e-03lf);
    p = fma(p, t, 5.61307585437384460e-01lf);
    return p;
}
