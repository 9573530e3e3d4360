// Unary op functions, one per (op, compute type). Float math exists for f32 only
// (f16/bf16 compute in f32; integers are promoted by the caller).

fn negative_f32(a: f32) -> f32 { return -a; }
fn negative_i32(a: i32) -> i32 { return 0i - a; }
fn negative_u32(a: u32) -> u32 { return 0u - a; }
fn abs_f32(a: f32) -> f32 { return abs(a); }
// abs(MIN) wraps to MIN.
fn abs_i32(a: i32) -> i32 { return select(a, 0i - a, a < 0i); }
fn abs_u32(a: u32) -> u32 { return a; }
// sign(+-0) = +-0, sign(NaN) = NaN.
fn sign_f32(a: f32) -> f32 {
    if (isnan_f(a) || a == 0.0) { return a; }
    return select(-1.0, 1.0, a > 0.0);
}
fn sign_i32(a: i32) -> i32 { return sign(a); }
fn sign_u32(a: u32) -> u32 { return min(a, 1u); }
fn square_f32(a: f32) -> f32 { return a * a; }
fn square_i32(a: i32) -> i32 { return a * a; }
fn square_u32(a: u32) -> u32 { return a * a; }

fn sqrt_f32(a: f32) -> f32 { return sqrt(a); }
fn rsqrt_f32(a: f32) -> f32 { return 1.0 / sqrt(a); }
// exp to ~1 ulp on every driver (WGSL only promises 3 + 2|x| ulp): a = k ln2 + r with
// |r| <= ln2/2 (Cody-Waite split, k*LN2_HI exact), exp(r) by its degree-7 Taylor
// polynomial (truncation < 0.1 ulp), then scaled by 2^k.
fn exp_f32(a: f32) -> f32 {
    if (isnan_f(a)) { return a; }
    if (a > 88.72284) { return inf_f(); }
    if (a < -103.97208) { return 0.0; }
    let k = round(a * 1.442695041);
    let r = (a - k * 0.693145751953125) - k * 1.4286068203e-6;
    var p = 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    // 2^128 is not a float, yet exp(88.72) is: scale in two steps there.
    if (k > 127.0) { return ldexp(p * 2.0, i32(k) - 1); }
    return ldexp(p, i32(k));
}
// exp(x) - 1 without cancellation near 0: Taylor series for |x| < 0.5.
fn expm1_f32(a: f32) -> f32 {
    if (abs(a) < 0.5) {
        var p = 1.0 / 39916800.0;
        p = p * a + 1.0 / 3628800.0;
        p = p * a + 1.0 / 362880.0;
        p = p * a + 1.0 / 40320.0;
        p = p * a + 1.0 / 5040.0;
        p = p * a + 1.0 / 720.0;
        p = p * a + 1.0 / 120.0;
        p = p * a + 1.0 / 24.0;
        p = p * a + 1.0 / 6.0;
        p = p * a + 0.5;
        p = p * a + 1.0;
        return p * a;
    }
    return exp_f32(a) - 1.0;
}
fn log_f32(a: f32) -> f32 { return log(a); }
// log(1 + x) = 2 atanh(s), s = x / (2 + x): an odd series in s, |s| <= 0.25 for
// x in (-0.4, 0.6); outside, 1 + x is far enough from 1 for log.
fn log1p_f32(a: f32) -> f32 {
    if (a > -0.4 && a < 0.6) {
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
    return log(1.0 + a);
}
fn log2_f32(a: f32) -> f32 { return log2(a); }
fn sin_f32(a: f32) -> f32 { return sin(a); }
fn cos_f32(a: f32) -> f32 { return cos(a); }
fn tan_f32(a: f32) -> f32 { return tan(a); }
// Through expm1: accurate near 0 and no inf/inf for large |x|.
fn tanh_f32(a: f32) -> f32 {
    // NaN and ±0 map to themselves (keeps the sign of zero).
    if (isnan_f(a) || a == 0.0) { return a; }
    let x = abs(a);
    if (x > 10.0) { return select(-1.0, 1.0, a > 0.0); }
    let t = expm1_f32(2.0 * x);
    let r = t / (t + 2.0);
    return select(-r, r, a >= 0.0);
}
fn sigmoid_f32(a: f32) -> f32 { return 1.0 / (1.0 + exp_f32(-a)); }
// erf: odd Taylor series below 1 (relative accuracy near 0), Abramowitz-Stegun 7.1.26
// above (absolute error 1.5e-7 where erf >= 0.84).
fn erf_f32(a: f32) -> f32 {
    if (isnan_f(a)) { return a; }
    let x = abs(a);
    if (x < 1.0) {
        let z = x * x;
        var p = -1.0 / 918086400.0;
        p = p * z + 1.0 / 76204800.0;
        p = p * z - 1.0 / 6894720.0;
        p = p * z + 1.0 / 685440.0;
        p = p * z - 1.0 / 75600.0;
        p = p * z + 1.0 / 9360.0;
        p = p * z - 1.0 / 1320.0;
        p = p * z + 1.0 / 216.0;
        p = p * z - 1.0 / 42.0;
        p = p * z + 1.0 / 10.0;
        p = p * z - 1.0 / 3.0;
        p = p * z + 1.0;
        // 2/sqrt(pi)
        return a * p * 1.1283791670955126;
    }
    if (x >= 4.0) { return select(-1.0, 1.0, a > 0.0); }
    let t = 1.0 / (1.0 + 0.3275911 * x);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let r = 1.0 - poly * exp_f32(-x * x);
    return select(-r, r, a > 0.0);
}
fn floor_f32(a: f32) -> f32 { return floor(a); }
fn floor_i32(a: i32) -> i32 { return a; }
fn floor_u32(a: u32) -> u32 { return a; }
fn ceil_f32(a: f32) -> f32 { return ceil(a); }
fn ceil_i32(a: i32) -> i32 { return a; }
fn ceil_u32(a: u32) -> u32 { return a; }
// WGSL round() rounds half to even.
fn round_f32(a: f32) -> f32 { return round(a); }
fn round_i32(a: i32) -> i32 { return a; }
fn round_u32(a: u32) -> u32 { return a; }

fn logical_not_f32(a: f32) -> bool { return !nz_f(a); }
fn logical_not_i32(a: i32) -> bool { return a == 0i; }
fn logical_not_u32(a: u32) -> bool { return a == 0u; }
fn isnan_f32(a: f32) -> bool { return isnan_f(a); }
fn isnan_i32(a: i32) -> bool { return false; }
fn isnan_u32(a: u32) -> bool { return false; }
fn isinf_f32(a: f32) -> bool { return isinf_f(a); }
fn isinf_i32(a: i32) -> bool { return false; }
fn isinf_u32(a: u32) -> bool { return false; }
