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
// Real cube root (WGSL has none): exp2(log2 |a| / 3), then a Newton step in the
// form that neither overflows nor underflows; 0, inf and NaN come back as they are.
fn cbrt_f32(a: f32) -> f32 {
    let m = abs(a);
    if (m == 0.0 || isinf_f(m) || isnan_f(m)) { return a; }
    var y = exp2(log2(m) / 3.0);
    y = (2.0 * y + m / (y * y)) / 3.0;
    return select(y, -y, a < 0.0);
}
fn exp_f32(a: f32) -> f32 { return exp_acc(a); }
// For f16/bf16 results (ops.rs picks `*_narrow` there): the driver's exp is within
// a few f32 ulp, so the rounded result stays within 1 narrow ulp, while exp_acc's
// extra ALU work made f16 exp ALU-bound (H100: 0.65 of PyTorch). Drivers flush f32
// subnormal results: exp_acc below -87 (0 in f16), and for bf16, which holds them,
// exp_tiny (kept out of the f16 kernel: its registers cost f16 exp 9 % on the H200).
fn exp_narrow(a: f32) -> f32 {
    if (isnan_f(a)) { return a; }
    if (a < -87.0) { return exp_acc(a); }
    return exp(a);
}
fn exp_bf16(a: f32) -> f32 {
    if (isnan_f(a)) { return a; }
    if (a < -87.0) { return exp_tiny(a); }
    return exp(a);
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
    return exp_acc(a) - 1.0;
}
// Drivers' log/log2 are only absolutely accurate (2^-21) near 1; these are ~1 ulp.
fn log_f32(a: f32) -> f32 {
    if (!(a > 0.0) || isinf_f(a)) { return log_special(a); }
    let p = log_parts(a);
    return p.x * 0.6931471805599453 + p.y;
}
fn log1p_f32(a: f32) -> f32 {
    if (a > -0.4 && a < 0.6) { return log1p_series(a); }
    return log_f32(1.0 + a);
}
fn log2_f32(a: f32) -> f32 {
    if (!(a > 0.0) || isinf_f(a)) { return log_special(a); }
    let p = log_parts(a);
    return p.x + p.y * 1.4426950408889634;
}
// sin, cos and tan to a few ulp for every f32 (drivers' sin/cos are only bounded on
// [-pi, pi]): reduce_pio2 finds a = q*pi/2 + r, |r| <= pi/4, exactly (Payne-Hanek),
// then Cephes' minimax polynomials on r.
fn sin_f32(a: f32) -> f32 {
    let t = reduce_pio2(a);
    let q = u32(t.y) & 3u;
    let s = sin_poly(t.x);
    let c = cos_poly(t.x);
    return select(select(-c, -s, q == 2u), select(c, s, q == 0u), q < 2u);
}
fn cos_f32(a: f32) -> f32 {
    let t = reduce_pio2(a);
    let q = u32(t.y) & 3u;
    let s = sin_poly(t.x);
    let c = cos_poly(t.x);
    return select(select(s, -c, q == 2u), select(-s, c, q == 0u), q < 2u);
}
fn tan_f32(a: f32) -> f32 {
    let t = reduce_pio2(a);
    let s = sin_poly(t.x);
    let c = cos_poly(t.x);
    if (a == 0.0) { return a; } // keeps -0
    return select(s / c, -c / s, (u32(t.y) & 1u) == 1u);
}
fn sin_poly(r: f32) -> f32 {
    if (r == 0.0) { return r; } // keeps -0
    let z = r * r;
    return ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
}
fn cos_poly(r: f32) -> f32 {
    let z = r * r;
    return ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z
        - 0.5 * z + 1.0;
}

// (hi << s) | (lo >> (32 - s)) for s in 0..=32.
fn shl2(hi: u32, lo: u32, s: u32) -> u32 {
    if (s == 0u) { return hi; }
    if (s >= 32u) { return lo; }
    return (hi << s) | (lo >> (32u - s));
}
// a = q*pi/2 + r with |r| <= pi/4; returns (r, q mod 4). a = M * 2^E (M the 24-bit
// mantissa); a*2/pi mod 4 needs only the bits of 2/pi from 2^-(E-1) on (earlier ones
// give multiples of 4): M times a 96-bit window of them is exact in integers.
fn reduce_pio2(a: f32) -> vec2<f32> {
    if (isnan_f(a) || isinf_f(a)) { return vec2<f32>(nan_f(), 0.0); }
    if (abs(a) <= 0.78539816) { return vec2<f32>(a, 0.0); }
    var two_over_pi = array<u32, 8>(0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u,
                                    0xdb629599u, 0x3c439041u, 0xfe5163abu, 0xdebbc561u);
    let bits = bitcast<u32>(a);
    let e = i32((bits >> 23u) & 0xffu) - 150;
    let m = (bits & 0x7fffffu) | 0x800000u;
    let j = max(1, e - 1);
    let o = u32(j - 1);
    let wi = o / 32u;
    let sh = o % 32u;
    let w0 = shl2(two_over_pi[wi], two_over_pi[wi + 1u], sh);
    let w1 = shl2(two_over_pi[wi + 1u], two_over_pi[wi + 2u], sh);
    let w2 = shl2(two_over_pi[wi + 2u], two_over_pi[wi + 3u], sh);
    // P = m * (w0:w1:w2), 120 bits in p3:p2:p1:p0.
    let x2 = mul_wide(m, w2);
    let x1 = mul_wide(m, w1);
    let x0 = mul_wide(m, w0);
    let p0 = x2.x;
    let p1 = x2.y + x1.x;
    let c1 = select(0u, 1u, p1 < x1.x);
    let p2a = x1.y + x0.x;
    let c2a = select(0u, 1u, p2a < x0.x);
    let p2 = p2a + c1;
    let c2b = select(0u, 1u, p2 < p2a);
    let p3 = x0.y + c2a + c2b;
    // a*2/pi mod 4 = P / 2^t; move the two integer bits to the top of p3.
    let t = u32(j + 95 - e);
    let l = 126u - t;
    let q3 = shl2(p3, p2, l);
    let q2 = shl2(p2, p1, l);
    let q1 = shl2(p1, p0, l);
    var q = q3 >> 30u;
    var hi = (q3 << 2u) | (q2 >> 30u);
    var lo = (q2 << 2u) | (q1 >> 30u);
    var neg = false;
    if (hi >= 0x80000000u) {
        // fraction >= 1/2: use fraction - 1 and the next quadrant.
        q += 1u;
        neg = true;
        lo = ~lo + 1u;
        hi = ~hi + select(0u, 1u, lo == 0u);
    }
    var lz = countLeadingZeros(hi);
    var mant = shl2(hi, lo, lz);
    if (hi == 0u) {
        lz = 32u + countLeadingZeros(lo);
        mant = lo << (lz - 32u);
    }
    let f = ldexp(f32(mant), -32 - i32(lz));
    var r = f * 1.5707963705062866 + f * -4.3711388286737929e-8;
    if (neg) { r = -r; }
    if (a < 0.0) {
        r = -r;
        q = 4u - (q & 3u);
    }
    return vec2<f32>(r, f32(q & 3u));
}
// Branch-free (both halves computed, one selected: no divergence in a warp of mixed
// inputs, which made the expm1 form ~2x slower inside fused kernels on the H200):
// an odd Taylor series below 0.35 (relative error < 1e-9), (e - 1) / (e + 1) with
// e = exp(2|x|) up to 2 (e >= 2, so e - 1 is exact; |x| capped at 10, where tanh
// rounds to 1), 1 - 2 / (e + 1) above: a division 2.5 ulp off (NVIDIA's) made the
// quotient 1 + 2^-23 near |x| = 8.6, and the small term's error stays far below
// an ulp of the result. NaN maps to NaN, -0 to -0 (the sign is copied from the input).
fn tanh_f32(a: f32) -> f32 {
    let x = min(abs(a), 10.0);
    let x2 = x * x;
    var p = 21844.0 / 6081075.0;
    p = p * x2 - 1382.0 / 155925.0;
    p = p * x2 + 62.0 / 2835.0;
    p = p * x2 - 17.0 / 315.0;
    p = p * x2 + 2.0 / 15.0;
    p = p * x2 - 1.0 / 3.0;
    let small = x + x * x2 * p;
    // exp(2x) for 2x in [0, 20]: no overflow or NaN checks needed.
    let y = 2.0 * x;
    let ki = round_i(y * 1.442695041);
    let k = f32(ki);
    let e = exp_poly((y - k * 0.693145751953125) - k * 1.4286068203e-6)
        * bitcast<f32>(u32(ki + 127i) << 23u);
    let large = select(1.0 - 2.0 / (e + 1.0), (e - 1.0) / (e + 1.0), x < 2.0);
    let r = select(large, small, x < 0.35);
    let signed = bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(a) & 0x80000000u));
    return select(signed, a, isnan_f(a));
}
// For f16/bf16 results (see exp_narrow): the series to x^7 (relative error < 6e-6
// below 0.35) and the driver's exp, half the ALU work of tanh_f32.
fn tanh_narrow(a: f32) -> f32 {
    let x = min(abs(a), 10.0);
    let x2 = x * x;
    let small = x + x * x2 * ((x2 * (-17.0 / 315.0) + 2.0 / 15.0) * x2 - 1.0 / 3.0);
    let e = exp(2.0 * x);
    let r = select(1.0 - 2.0 / (e + 1.0), small, x < 0.35);
    let signed = bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(a) & 0x80000000u));
    return select(signed, a, isnan_f(a));
}
fn sigmoid_f32(a: f32) -> f32 { return 1.0 / (1.0 + exp_acc(-a)); }
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
    let r = 1.0 - poly * exp_acc(-x * x);
    return select(-r, r, a > 0.0);
}
// erfinv: Giles' single-precision approximation ("Approximating the erfinv
// function", 2011) on w = -log((1 - x)(1 + x)), with the accurate log.
fn erfinv_f32(a: f32) -> f32 {
    let x = abs(a);
    if (isnan_f(a) || x > 1.0) { return nan_f(); }
    if (x == 1.0) { return select(-inf_f(), inf_f(), a > 0.0); }
    if (a == 0.0) { return a; }
    var w = -log_f32((1.0 - x) * (1.0 + x));
    var p: f32;
    if (w < 5.0) {
        w = w - 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    return p * a;
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

// f64 forms (`{op}_d`, adapters with SHADER_F64; f64 modules only). The math that
// f64.wgsl implements in software (exp_d, sin_d, erf_d, ...) is named so there.
fn negative_d(a: f64) -> f64 { return -a; }
fn abs_d(a: f64) -> f64 { return abs(a); }
fn square_d(a: f64) -> f64 { return a * a; }
fn sqrt_d(a: f64) -> f64 { return sqrt(a); }
fn rsqrt_d(a: f64) -> f64 { return 1.0lf / sqrt(a); }
// |a| = m 2^(3q + r) (m from split_d, r in 0..2): cbrt = cbrt(m 2^r) 2^q, from an
// f32 estimate and three Newton steps in f64.
fn cbrt_d(a: f64) -> f64 {
    if (a == 0.0lf || isnan_d(a) || isinf_d(a)) { return a; }
    let s = split_d(abs(a));
    var q = s.e / 3;
    var r = s.e - 3 * q;
    if (r < 0) { r += 3; q -= 1; }
    let m = scale2(s.m, r);
    var y = f64(exp2(log2(f32(m)) / 3.0));
    for (var i = 0; i < 3; i++) { y = (2.0lf * y + m / (y * y)) / 3.0lf; }
    let c = scale2(y, q);
    return select(c, -c, a < 0.0lf);
}
fn floor_d(a: f64) -> f64 { return floor(a); }
fn ceil_d(a: f64) -> f64 { return ceil(a); }
// Half to even from floor: Mesa 22.3's lavapipe rounded a uniform 5.5 to 5 through
// the f64 `round` (RoundEven). The result keeps a's sign, zeros included.
fn round_d(a: f64) -> f64 {
    if (a == 0.0lf) { return a; }
    let m = abs(a);
    let f = floor(m);
    let d = m - f;
    let odd = f - 2.0lf * floor(f * 0.5lf) == 1.0lf;
    let r = f + select(0.0lf, 1.0lf, d > 0.5lf || (d == 0.5lf && odd));
    return select(r, -r, a < 0.0lf);
}
fn logical_not_d(a: f64) -> bool { return a == 0.0lf; }

// i64 forms (`{op}_l`, on the word pairs of int64.wgsl): the ops defined on
// integers; float math promotes to f32 before it gets here.
fn negative_l(a: vec2<u32>) -> vec2<u32> { return neg64(a); }
fn abs_l(a: vec2<u32>) -> vec2<u32> { return abs64(a); }
fn sign_l(a: vec2<u32>) -> vec2<u32> {
    if (neg_bit(a)) { return vec2<u32>(0xffffffffu, 0xffffffffu); }
    return vec2<u32>(select(0u, 1u, nz_l(a)), 0u);
}
fn square_l(a: vec2<u32>) -> vec2<u32> { return mul64(a, a); }
fn floor_l(a: vec2<u32>) -> vec2<u32> { return a; }
fn ceil_l(a: vec2<u32>) -> vec2<u32> { return a; }
fn round_l(a: vec2<u32>) -> vec2<u32> { return a; }
fn logical_not_l(a: vec2<u32>) -> bool { return !nz_l(a); }
fn isnan_l(a: vec2<u32>) -> bool { return false; }
fn isinf_l(a: vec2<u32>) -> bool { return false; }

// u64 forms (`{op}_ul`).
fn negative_ul(a: vec2<u32>) -> vec2<u32> { return neg64(a); }
fn abs_ul(a: vec2<u32>) -> vec2<u32> { return a; }
fn sign_ul(a: vec2<u32>) -> vec2<u32> { return vec2<u32>(select(0u, 1u, nz_l(a)), 0u); }
fn square_ul(a: vec2<u32>) -> vec2<u32> { return mul64(a, a); }
fn floor_ul(a: vec2<u32>) -> vec2<u32> { return a; }
fn ceil_ul(a: vec2<u32>) -> vec2<u32> { return a; }
fn round_ul(a: vec2<u32>) -> vec2<u32> { return a; }
fn logical_not_ul(a: vec2<u32>) -> bool { return !nz_l(a); }
fn isnan_ul(a: vec2<u32>) -> bool { return false; }
fn isinf_ul(a: vec2<u32>) -> bool { return false; }
