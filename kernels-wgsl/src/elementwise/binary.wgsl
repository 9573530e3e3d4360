// Binary op functions, one per (op, compute type). f16/bf16 compute in f32; u8 and
// bool compute in u32 and are masked on store. The prelude's `op` picks one.
// Integer add/subtract/multiply wrap (WGSL integer arithmetic wraps).

fn add_f32(a: f32, b: f32) -> f32 { return a + b; }
fn add_i32(a: i32, b: i32) -> i32 { return a + b; }
fn add_u32(a: u32, b: u32) -> u32 { return a + b; }
fn subtract_f32(a: f32, b: f32) -> f32 { return a - b; }
fn subtract_i32(a: i32, b: i32) -> i32 { return a - b; }
fn subtract_u32(a: u32, b: u32) -> u32 { return a - b; }
fn multiply_f32(a: f32, b: f32) -> f32 { return a * b; }
fn multiply_i32(a: i32, b: i32) -> i32 { return a * b; }
fn multiply_u32(a: u32, b: u32) -> u32 { return a * b; }
// WGSL bounds division only for |b| in [2^-126, 2^126]; beyond it (NVIDIA: a times
// a reciprocal that flushes to zero) both operands are scaled by 1/4 first, exactly.
fn divide_f32(a: f32, b: f32) -> f32 {
    if (abs(b) > 8.507059e37) { return (a * 0.25) / (b * 0.25); }
    return a / b;
}

// floor(a / b) with a / b rounded as f32 division rounds it (the CPU's rule). WGSL
// division may be 2.5 ulp off (NVIDIA's is: x / x can be 0.99999994), so below 2^23
// the quotient is first made correctly rounded (Markstein: the remainder a - q b
// is exact through fma, and one correction with a refined reciprocal). Checking
// candidates by their remainders gives floor of the exact quotient instead, which
// differs where rounding reaches the next integer: 2155165184 / 1694.4348 is
// 1271907.993, and rounds to 1271908.
fn floor_divide_f32(a: f32, b: f32) -> f32 {
    let q = divide_f32(a, b);
    if (!(abs(q) < 8388608.0) || b == 0.0 || isinf_f(a) || isinf_f(b)) { return floor(q); }
    // Scaled by a power of two so that 1 / b is a normal number (NVIDIA flushes
    // subnormals); with |q| < 2^23 the scaled a stays in range.
    var s = 1.0;
    if (abs(b) > 8.507059e37) { s = 0.25; }
    if (abs(b) < 1.1754944e-38) { s = 18446744073709551616.0; }
    let a1 = a * s;
    let b1 = b * s;
    var y = 1.0 / b1;
    y = fma(fma(-b1, y, 1.0), y, y);
    let qr = fma(fma(-q, b1, a1), y, q);
    // A negative quotient in f32's subnormal range (|a / b| > 2^-150, so it does not
    // round to zero) floors to -1 even where the driver flushed it to zero; checked
    // on a * 2^64, far from the flush.
    if (qr == 0.0 && a != 0.0 && (a < 0.0) != (b < 0.0)
        && abs(divide_f32(a * 18446744073709551616.0, b)) > 1.2924697e-26) {
        return -1.0;
    }
    return floor(qr);
}

// Rounds toward -inf; by zero gives 0; MIN / -1 wraps to MIN (WGSL defines it so).
fn floor_divide_i32(a: i32, b: i32) -> i32 {
    if (b == 0i) { return 0i; }
    let q = a / b;
    if ((a % b != 0i) && ((a < 0i) != (b < 0i))) { return q - 1i; }
    return q;
}
fn floor_divide_u32(a: u32, b: u32) -> u32 {
    if (b == 0u) { return 0u; }
    return a / b;
}

// Sign of the divisor; x % 0 is NaN for floats and 0 for integers.
fn remainder_f32(a: f32, b: f32) -> f32 {
    var r = fmod_f32(a, b);
    if (isnan_f(r)) { return r; }
    // A zero remainder takes the divisor's sign, as in numpy. Tested and built on
    // the bits: a driver assuming no signed zeros (NVIDIA's) folds `r == 0 ? 0 : r`.
    if ((bitcast<u32>(r) & 0x7fffffffu) == 0u) { return bitcast<f32>(select(0u, 0x80000000u, b < 0.0)); }
    if ((r < 0.0) != (b < 0.0)) { r = r + b; }
    return r;
}
fn remainder_i32(a: i32, b: i32) -> i32 {
    if (b == 0i) { return 0i; }
    var r = a % b;
    if (r != 0i && ((r < 0i) != (b < 0i))) { r = r + b; }
    return r;
}
fn remainder_u32(a: u32, b: u32) -> u32 {
    if (b == 0u) { return 0u; }
    return a % b;
}

// |a|^n for an integral n >= 0 by squaring: exact where f32 allows, and defined for
// negative bases (WGSL's pow is not).
fn powi_f32(a: f32, n: u32) -> f32 {
    var r = 1.0;
    var x = a;
    var e = n;
    loop {
        if ((e & 1u) != 0u) { r = r * x; }
        e = e >> 1u;
        if (e == 0u) { break; }
        x = x * x;
    }
    return r;
}

fn power_f32(a: f32, b: f32) -> f32 {
    if (b == 0.0 || a == 1.0) { return 1.0; }
    if (isnan_f(a) || isnan_f(b)) { return nan_f(); }
    let integral = floor(b) == b;
    // Squaring is exact-ish only for tiny exponents (its error grows with n).
    if (integral && abs(b) <= 4.0) {
        let r = powi_f32(a, u32(abs(b)));
        if (b < 0.0) { return 1.0 / r; }
        return r;
    }
    let aa = abs(a);
    var r: f32;
    if (isinf_f(b)) {
        if (aa == 1.0) { return 1.0; }
        r = select(0.0, inf_f(), (aa > 1.0) == (b > 0.0));
        return r;
    } else if (aa == 0.0) {
        r = select(0.0, inf_f(), b < 0.0);
    } else if (isinf_f(a)) {
        r = select(0.0, inf_f(), b > 0.0);
    } else {
        r = exp2_acc(b * log2_acc(aa));
    }
    if (signbit_f(a)) {
        if (!integral) {
            if (aa == 0.0 || isinf_f(a)) { return r; }
            return nan_f();
        }
        // Odd integral exponents keep the sign of the base.
        if (fract(b * 0.5) != 0.0) { return -r; }
    }
    return r;
}

// Exponentiation by squaring, wrapping. Negative exponents: 0 unless the base is 1
// (-> 1) or -1 (-> +-1).
fn power_i32(a: i32, b: i32) -> i32 {
    if (b < 0i) {
        if (a == 1i) { return 1i; }
        if (a == -1i) { return select(1i, -1i, (b & 1i) != 0i); }
        return 0i;
    }
    var r = 1i;
    var x = a;
    var e = u32(b);
    loop {
        if (e == 0u) { break; }
        if ((e & 1u) != 0u) { r = r * x; }
        e = e >> 1u;
        x = x * x;
    }
    return r;
}
fn power_u32(a: u32, b: u32) -> u32 {
    var r = 1u;
    var x = a;
    var e = b;
    loop {
        if (e == 0u) { break; }
        if ((e & 1u) != 0u) { r = r * x; }
        e = e >> 1u;
        x = x * x;
    }
    return r;
}

// NaN in either input gives NaN.
fn maximum_f32(a: f32, b: f32) -> f32 {
    if (isnan_f(a)) { return a; }
    if (isnan_f(b)) { return b; }
    return max(a, b);
}
fn maximum_i32(a: i32, b: i32) -> i32 { return max(a, b); }
fn maximum_u32(a: u32, b: u32) -> u32 { return max(a, b); }
fn minimum_f32(a: f32, b: f32) -> f32 {
    if (isnan_f(a)) { return a; }
    if (isnan_f(b)) { return b; }
    return min(a, b);
}
fn minimum_i32(a: i32, b: i32) -> i32 { return min(a, b); }
fn minimum_u32(a: u32, b: u32) -> u32 { return min(a, b); }

// C's fmodf, exact: long division of the integer mantissas (a - b*trunc(a/b) loses
// every bit once the quotient passes 2^24). NaN for b == 0, x inf or NaN inputs.
fn fmod_f32(x: f32, y: f32) -> f32 {
    var ux = bitcast<u32>(x);
    var uy = bitcast<u32>(y);
    var ex = i32((ux >> 23u) & 0xffu);
    var ey = i32((uy >> 23u) & 0xffu);
    let sx = ux & 0x80000000u;
    if ((uy << 1u) == 0u || isnan_f(y) || ex == 0xff) { return nan_f(); }
    if ((ux << 1u) <= (uy << 1u)) {
        if ((ux << 1u) == (uy << 1u)) { return 0.0 * x; }
        return x;
    }
    // Mantissas with the implicit bit (subnormals normalised).
    if (ex == 0) {
        var i = ux << 9u;
        while ((i >> 31u) == 0u) { ex -= 1; i <<= 1u; }
        ux <<= u32(1 - ex);
    } else {
        ux = (ux & 0x007fffffu) | 0x00800000u;
    }
    if (ey == 0) {
        var i = uy << 9u;
        while ((i >> 31u) == 0u) { ey -= 1; i <<= 1u; }
        uy <<= u32(1 - ey);
    } else {
        uy = (uy & 0x007fffffu) | 0x00800000u;
    }
    while (ex > ey) {
        let i = ux - uy;
        if ((i >> 31u) == 0u) {
            if (i == 0u) { return 0.0 * x; }
            ux = i;
        }
        ux <<= 1u;
        ex -= 1;
    }
    let i = ux - uy;
    if ((i >> 31u) == 0u) {
        if (i == 0u) { return 0.0 * x; }
        ux = i;
    }
    while ((ux >> 23u) == 0u) { ux <<= 1u; ex -= 1; }
    if (ex > 0) {
        ux = (ux - 0x00800000u) | (u32(ex) << 23u);
    } else {
        ux >>= u32(1 - ex);
    }
    return bitcast<f32>(ux | sx);
}

// atan on [0, 1] to ~2 ulp (Cephes atanf: one reduction by pi/4, then an odd
// polynomial); WGSL allows drivers' atan/atan2 4096 ulp.
fn atan_unit(t: f32) -> f32 {
    var base = 0.0;
    var x = t;
    if (t > 0.41421356) {
        base = 0.78539816;
        x = (t - 1.0) / (t + 1.0);
    }
    let z = x * x;
    let p = (((0.0805374449538 * z - 0.138776856032) * z + 0.199777106478) * z
        - 0.333329491539) * z * x + x;
    return base + p;
}

// sqrt(a² + b²) scaled by the larger magnitude, so no square overflows or
// underflows; an infinite input gives inf even beside a NaN (IEEE 754's rule).
fn hypot_f32(a: f32, b: f32) -> f32 {
    let x = abs(a);
    let y = abs(b);
    if (isinf_f(x) || isinf_f(y)) { return inf_f(); }
    if (isnan_f(x) || isnan_f(y)) { return nan_f(); }
    let m = max(x, y);
    if (m == 0.0) { return 0.0; }
    // divide_f32: past 2^126 NVIDIA's a / b flushed r to 0 (hypot(max, max) was max).
    let r = divide_f32(min(x, y), m);
    return m * sqrt(1.0 + r * r);
}

// IEEE atan2 with every special case (signed zeros, infinities), NaN propagated.
fn arctan2_f32(y: f32, x: f32) -> f32 {
    if (isnan_f(x) || isnan_f(y)) { return nan_f(); }
    let pi = 3.14159265358979;
    let ay = abs(y);
    let ax = abs(x);
    let xneg = (bitcast<u32>(x) >> 31u) == 1u;
    var a: f32;
    if (ay == 0.0) {
        a = select(0.0, pi, xneg);
    } else if (isinf_f(ay) && isinf_f(ax)) {
        a = select(0.25 * pi, 0.75 * pi, xneg);
    } else if (ay > ax) {
        let u = atan_unit(ax / ay);
        a = select(0.5 * pi - u, 0.5 * pi + u, xneg);
    } else {
        let u = atan_unit(ay / ax);
        a = select(u, pi - u, xneg);
    }
    return select(a, -a, (bitcast<u32>(y) >> 31u) == 1u);
}

// Comparisons: false when either side is NaN, except not_equal (true). Tested on bits
// so a driver cannot assume NaN-free floats.
fn equal_f32(a: f32, b: f32) -> bool { return !isnan_f(a) && !isnan_f(b) && a == b; }
fn equal_i32(a: i32, b: i32) -> bool { return a == b; }
fn equal_u32(a: u32, b: u32) -> bool { return a == b; }
fn not_equal_f32(a: f32, b: f32) -> bool { return !equal_f32(a, b); }
fn not_equal_i32(a: i32, b: i32) -> bool { return a != b; }
fn not_equal_u32(a: u32, b: u32) -> bool { return a != b; }
fn less_f32(a: f32, b: f32) -> bool { return !isnan_f(a) && !isnan_f(b) && a < b; }
fn less_i32(a: i32, b: i32) -> bool { return a < b; }
fn less_u32(a: u32, b: u32) -> bool { return a < b; }
fn less_equal_f32(a: f32, b: f32) -> bool { return !isnan_f(a) && !isnan_f(b) && a <= b; }
fn less_equal_i32(a: i32, b: i32) -> bool { return a <= b; }
fn less_equal_u32(a: u32, b: u32) -> bool { return a <= b; }
fn greater_f32(a: f32, b: f32) -> bool { return less_f32(b, a); }
fn greater_i32(a: i32, b: i32) -> bool { return a > b; }
fn greater_u32(a: u32, b: u32) -> bool { return a > b; }
fn greater_equal_f32(a: f32, b: f32) -> bool { return less_equal_f32(b, a); }
fn greater_equal_i32(a: i32, b: i32) -> bool { return a >= b; }
fn greater_equal_u32(a: u32, b: u32) -> bool { return a >= b; }

// Nonzero is true; NaN is true.
fn logical_and_f32(a: f32, b: f32) -> bool { return nz_f(a) && nz_f(b); }
fn logical_and_i32(a: i32, b: i32) -> bool { return a != 0i && b != 0i; }
fn logical_and_u32(a: u32, b: u32) -> bool { return a != 0u && b != 0u; }
fn logical_or_f32(a: f32, b: f32) -> bool { return nz_f(a) || nz_f(b); }
fn logical_or_i32(a: i32, b: i32) -> bool { return a != 0i || b != 0i; }
fn logical_or_u32(a: u32, b: u32) -> bool { return a != 0u || b != 0u; }

fn bitwise_and_i32(a: i32, b: i32) -> i32 { return a & b; }
fn bitwise_and_u32(a: u32, b: u32) -> u32 { return a & b; }
fn bitwise_or_i32(a: i32, b: i32) -> i32 { return a | b; }
fn bitwise_or_u32(a: u32, b: u32) -> u32 { return a | b; }
fn bitwise_xor_i32(a: i32, b: i32) -> i32 { return a ^ b; }
fn bitwise_xor_u32(a: u32, b: u32) -> u32 { return a ^ b; }
// numpy's shifts: 0 past the bit width or by a negative amount (right shifts of
// negative values: -1); WGSL would take the amount modulo 32.
fn left_shift_i32(a: i32, b: i32) -> i32 { return select(0i, a << u32(b), b >= 0i && b < 32i); }
fn left_shift_u32(a: u32, b: u32) -> u32 { return select(0u, a << b, b < 32u); }
fn right_shift_i32(a: i32, b: i32) -> i32 {
    return select(select(0i, -1i, a < 0i), a >> u32(b), b >= 0i && b < 32i);
}
fn right_shift_u32(a: u32, b: u32) -> u32 { return select(0u, a >> b, b < 32u); }

// alpha * x + beta * y; alpha and beta are parameter slots 2 and 3 (f32 bits).
fn axpby_f32(a: f32, b: f32) -> f32 {
    return bitcast<f32>(P[2]) * a + bitcast<f32>(P[3]) * b;
}

// f64 forms (`{op}_d`, adapters with SHADER_F64; f64 modules only), on the math of
// f64.wgsl.
fn add_d(a: f64, b: f64) -> f64 { return a + b; }
fn subtract_d(a: f64, b: f64) -> f64 { return a - b; }
fn multiply_d(a: f64, b: f64) -> f64 { return a * b; }
fn divide_d(a: f64, b: f64) -> f64 { return a / b; }
fn floor_divide_d(a: f64, b: f64) -> f64 { return floor(a / b); }
fn remainder_d(a: f64, b: f64) -> f64 { return rem_d(a, b); }
fn power_d(a: f64, b: f64) -> f64 { return pow_d(a, b); }
fn maximum_d(a: f64, b: f64) -> f64 { return max_d(a, b); }
fn minimum_d(a: f64, b: f64) -> f64 { return min_d(a, b); }
fn arctan2_d(a: f64, b: f64) -> f64 { return atan2_d(a, b); }
fn hypot_d(a: f64, b: f64) -> f64 {
    let x = abs(a);
    let y = abs(b);
    if (isinf_d(x) || isinf_d(y)) { return inf_d(); }
    if (isnan_d(x) || isnan_d(y)) { return nan_d(); }
    let m = max(x, y);
    if (m == 0.0lf) { return 0.0lf; }
    let r = min(x, y) / m;
    return m * sqrt(1.0lf + r * r);
}
fn equal_d(a: f64, b: f64) -> bool { return a == b; }
// naga compiles `!=` to an ordered compare: false for NaN.
fn not_equal_d(a: f64, b: f64) -> bool { return !(a == b); }
fn less_d(a: f64, b: f64) -> bool { return a < b; }
fn less_equal_d(a: f64, b: f64) -> bool { return a <= b; }
fn greater_d(a: f64, b: f64) -> bool { return a > b; }
fn greater_equal_d(a: f64, b: f64) -> bool { return a >= b; }
fn logical_and_d(a: f64, b: f64) -> bool { return nz_d(a) && nz_d(b); }
fn logical_or_d(a: f64, b: f64) -> bool { return nz_d(a) || nz_d(b); }

// i64 forms (`{op}_l`, on the word pairs of int64.wgsl; SEMANTICS.md's integer
// rules: wrapping, floor division and a remainder with the divisor's sign, both 0
// for a zero divisor).
fn add_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return add64(a, b); }
fn subtract_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return sub64(a, b); }
fn multiply_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return mul64(a, b); }
fn floor_divide_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (!nz_l(b)) { return vec2<u32>(0u, 0u); }
    let qr = divmod_u64(abs64(a), abs64(b));
    if (neg_bit(a) == neg_bit(b)) { return qr.q; }
    // Toward -inf: one less than the negated quotient when inexact.
    return sub64(neg64(qr.q), vec2<u32>(select(0u, 1u, nz_l(qr.r)), 0u));
}
fn remainder_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (!nz_l(b)) { return vec2<u32>(0u, 0u); }
    let r = divmod_u64(abs64(a), abs64(b)).r;
    let t = select(r, neg64(r), neg_bit(a));
    if (nz_l(r) && neg_bit(a) != neg_bit(b)) { return add64(t, b); }
    return t;
}
fn power_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (neg_bit(b)) {
        if (eq64(a, vec2<u32>(1u, 0u))) { return a; }
        if (eq64(a, vec2<u32>(0xffffffffu, 0xffffffffu))) {
            return select(vec2<u32>(1u, 0u), a, (b.x & 1u) != 0u);
        }
        return vec2<u32>(0u, 0u);
    }
    return pow64(a, b);
}
fn maximum_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(a, b, lt_i64(a, b)); }
fn minimum_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(a, b, lt_i64(b, a)); }
fn equal_l(a: vec2<u32>, b: vec2<u32>) -> bool { return eq64(a, b); }
fn not_equal_l(a: vec2<u32>, b: vec2<u32>) -> bool { return !eq64(a, b); }
fn less_l(a: vec2<u32>, b: vec2<u32>) -> bool { return lt_i64(a, b); }
fn less_equal_l(a: vec2<u32>, b: vec2<u32>) -> bool { return !lt_i64(b, a); }
fn greater_l(a: vec2<u32>, b: vec2<u32>) -> bool { return lt_i64(b, a); }
fn greater_equal_l(a: vec2<u32>, b: vec2<u32>) -> bool { return !lt_i64(a, b); }
fn logical_and_l(a: vec2<u32>, b: vec2<u32>) -> bool { return nz_l(a) && nz_l(b); }
fn logical_or_l(a: vec2<u32>, b: vec2<u32>) -> bool { return nz_l(a) || nz_l(b); }
fn bitwise_and_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return a & b; }
fn bitwise_or_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return a | b; }
fn bitwise_xor_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return a ^ b; }
fn left_shift_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return left_shift_ul(a, b); }
fn right_shift_l(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let fill = select(0u, 0xffffffffu, neg_bit(a));
    if (b.y != 0u || b.x >= 64u) { return vec2<u32>(fill, fill); }
    // Arithmetic: the vacated high bits take the sign.
    let r = shr64(a, b.x);
    if (b.x == 0u) { return r; }
    return r | ~shr64(vec2<u32>(0xffffffffu, 0xffffffffu), b.x) & vec2<u32>(fill, fill);
}

// u64 forms (`{op}_ul`): the i64 forms where the bits agree, unsigned order and
// division where they do not.
fn add_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return add64(a, b); }
fn subtract_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return sub64(a, b); }
fn multiply_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return mul64(a, b); }
fn floor_divide_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (!nz_l(b)) { return vec2<u32>(0u, 0u); }
    return divmod_u64(a, b).q;
}
fn remainder_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (!nz_l(b)) { return vec2<u32>(0u, 0u); }
    return divmod_u64(a, b).r;
}
fn power_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return pow64(a, b); }
fn maximum_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(a, b, lt_u64(a, b)); }
fn minimum_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(a, b, lt_u64(b, a)); }
fn equal_ul(a: vec2<u32>, b: vec2<u32>) -> bool { return eq64(a, b); }
fn not_equal_ul(a: vec2<u32>, b: vec2<u32>) -> bool { return !eq64(a, b); }
fn less_ul(a: vec2<u32>, b: vec2<u32>) -> bool { return lt_u64(a, b); }
fn less_equal_ul(a: vec2<u32>, b: vec2<u32>) -> bool { return !lt_u64(b, a); }
fn greater_ul(a: vec2<u32>, b: vec2<u32>) -> bool { return lt_u64(b, a); }
fn greater_equal_ul(a: vec2<u32>, b: vec2<u32>) -> bool { return !lt_u64(a, b); }
fn logical_and_ul(a: vec2<u32>, b: vec2<u32>) -> bool { return nz_l(a) && nz_l(b); }
fn logical_or_ul(a: vec2<u32>, b: vec2<u32>) -> bool { return nz_l(a) || nz_l(b); }
fn bitwise_and_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return a & b; }
fn bitwise_or_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return a | b; }
fn bitwise_xor_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return a ^ b; }
fn left_shift_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (b.y != 0u || b.x >= 64u) { return vec2<u32>(0u, 0u); }
    return shl64(a, b.x);
}
fn right_shift_ul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (b.y != 0u || b.x >= 64u) { return vec2<u32>(0u, 0u); }
    return shr64(a, b.x);
}
