// 64-bit integers (i64, u64) as pairs of u32 words, `vec2<u32>(low, high)`: the
// host's little-endian bytes, two's complement for i64. WGSL has no 64-bit integer type, so each
// operation is written out on the words, exactly (no f64 here: these run on every
// adapter). The ops' `{op}_l` (i64) and `{op}_ul` (u64) forms sit beside their
// other forms in unary.wgsl
// and binary.wgsl; the casts that need f64 are in f64.wgsl.

fn neg_bit(a: vec2<u32>) -> bool { return (a.y & 0x80000000u) != 0u; }
fn nz_l(a: vec2<u32>) -> bool { return (a.x | a.y) != 0u; }
fn eq64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.x == b.x && a.y == b.y; }

fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}
fn neg64(a: vec2<u32>) -> vec2<u32> { return sub64(vec2<u32>(0u, 0u), a); }

// The low 64 bits of the product (the same bits signed or unsigned); mul_wide
// (compose/mul_wide.wgsl) gives the full product of two words.
fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let p = mul_wide(a.x, b.x);
    return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}

fn lt_u64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.y < b.y || (a.y == b.y && a.x < b.x); }
fn lt_i64(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ha = bitcast<i32>(a.y);
    let hb = bitcast<i32>(b.y);
    return ha < hb || (ha == hb && a.x < b.x);
}

// Shifts by 0..63 (WGSL shifts a word by less than 32 only).
fn shl64(a: vec2<u32>, n: u32) -> vec2<u32> {
    if (n == 0u) { return a; }
    if (n >= 32u) { return vec2<u32>(0u, a.x << (n - 32u)); }
    return vec2<u32>(a.x << n, (a.y << n) | (a.x >> (32u - n)));
}
fn shr64(a: vec2<u32>, n: u32) -> vec2<u32> {
    if (n == 0u) { return a; }
    if (n >= 32u) { return vec2<u32>(a.y >> (n - 32u), 0u); }
    return vec2<u32>((a.x >> n) | (a.y << (32u - n)), a.y >> n);
}
fn bit64(a: vec2<u32>, i: u32) -> u32 {
    if (i >= 32u) { return (a.y >> (i - 32u)) & 1u; }
    return (a.x >> i) & 1u;
}
// Whether any of the low `k` bits (0..64) is set.
fn low_nz(a: vec2<u32>, k: u32) -> bool {
    if (k == 0u) { return false; }
    if (k < 32u) { return (a.x & ((1u << k) - 1u)) != 0u; }
    if (k == 32u) { return a.x != 0u; }
    if (k < 64u) { return a.x != 0u || (a.y & ((1u << (k - 32u)) - 1u)) != 0u; }
    return nz_l(a);
}
// Index of the highest set bit of a nonzero value.
fn top_bit(a: vec2<u32>) -> u32 {
    if (a.y != 0u) { return 63u - countLeadingZeros(a.y); }
    return 31u - countLeadingZeros(a.x);
}

// Unsigned quotient and remainder (d != 0): shift and subtract, one bit a step;
// a divisor of one word divides the high word natively, then the low word's bits
// (16-bit divisors: four native divisions of 16-bit digits).
struct Qr64 { q: vec2<u32>, r: vec2<u32> }
fn divmod_u64(n: vec2<u32>, d: vec2<u32>) -> Qr64 {
    if (n.y == 0u && d.y == 0u) {
        return Qr64(vec2<u32>(n.x / d.x, 0u), vec2<u32>(n.x % d.x, 0u));
    }
    if (d.y == 0u) {
        let dd = d.x;
        let qh = n.y / dd;
        var r = n.y % dd;
        if (dd <= 0xffffu) {
            // r < dd < 2^16: (r << 16) | digit fits a word, and each quotient digit
            // is below 2^16.
            let t2 = (r << 16u) | (n.x >> 16u);
            let q2 = t2 / dd;
            r = t2 % dd;
            let t3 = (r << 16u) | (n.x & 0xffffu);
            return Qr64(vec2<u32>((q2 << 16u) | (t3 / dd), qh), vec2<u32>(t3 % dd, 0u));
        }
        var ql = 0u;
        for (var i = 31i; i >= 0; i--) {
            // r < dd; a bit shifted out makes r + 2^32 > dd, the difference fits.
            let carry = r >> 31u;
            r = (r << 1u) | ((n.x >> u32(i)) & 1u);
            if (carry != 0u || r >= dd) {
                r -= dd;
                ql |= 1u << u32(i);
            }
        }
        return Qr64(vec2<u32>(ql, qh), vec2<u32>(r, 0u));
    }
    if (lt_u64(n, d)) { return Qr64(vec2<u32>(0u, 0u), n); }
    var q = vec2<u32>(0u, 0u);
    var r = vec2<u32>(0u, 0u);
    for (var i = i32(top_bit(n)); i >= 0; i--) {
        let carry = neg_bit(r);
        let bit = bit64(n, u32(i));
        r = vec2<u32>((r.x << 1u) | bit, (r.y << 1u) | (r.x >> 31u));
        // A bit shifted out of r makes it exceed d; the difference fits.
        if (carry || !lt_u64(r, d)) {
            r = sub64(r, d);
            q = q | shl64(vec2<u32>(1u, 0u), u32(i));
        }
    }
    return Qr64(q, r);
}
// The sort keys: an order as an unsigned pair.
fn key_l(lo: u32, hi: u32) -> vec2<u32> { return vec2<u32>(lo, hi ^ 0x80000000u); }
fn key_ul(lo: u32, hi: u32) -> vec2<u32> { return vec2<u32>(lo, hi); }

// a^e for e >= 0 by squaring, wrapping.
fn pow64(a: vec2<u32>, e0: vec2<u32>) -> vec2<u32> {
    var r = vec2<u32>(1u, 0u);
    var x = a;
    var e = e0;
    loop {
        if (!nz_l(e)) { break; }
        if ((e.x & 1u) != 0u) { r = mul64(r, x); }
        e = shr64(e, 1u);
        x = mul64(x, x);
    }
    return r;
}
fn abs64(a: vec2<u32>) -> vec2<u32> { return select(a, neg64(a), neg_bit(a)); }

// ---- casts (SEMANTICS.md): to narrower integers keep the low bits; to f32
// rounded to nearest even (or to odd, which a copy then rounds correctly to
// f16/bf16); from floats truncated and saturated, NaN to 0.

fn l_from_i32(w: u32) -> vec2<u32> {
    return vec2<u32>(w, select(0u, 0xffffffffu, (w & 0x80000000u) != 0u));
}
fn l_from_u32(w: u32) -> vec2<u32> { return vec2<u32>(w, 0u); }

// f32 bits of the magnitude `m`, rounded to nearest even, or to odd.
fn mag_to_f32(m: vec2<u32>, odd: bool) -> u32 {
    if (m.y == 0u && m.x < 0x1000000u) { return bitcast<u32>(f32(m.x)); }
    let p = top_bit(m);
    let sh = p - 23u;
    var mant = shr64(m, sh).x;
    let half = bit64(m, sh - 1u) != 0u;
    let sticky = low_nz(m, sh - 1u);
    if (odd) {
        if (half || sticky) { mant = mant | 1u; }
    } else if (half && (sticky || (mant & 1u) != 0u)) {
        mant += 1u;
    }
    // A carry into bit 24 moves the exponent up by itself.
    return ((p + 127u) << 23u) + (mant - 0x800000u);
}
fn signed_to_f32(a: vec2<u32>, odd: bool) -> u32 {
    return mag_to_f32(abs64(a), odd) | (a.y & 0x80000000u);
}
fn i64_to_f32(a: vec2<u32>) -> u32 { return signed_to_f32(a, false); }
fn i64_to_f32_odd(a: vec2<u32>) -> u32 { return signed_to_f32(a, true); }
fn u64_to_f32(a: vec2<u32>) -> u32 { return mag_to_f32(a, false); }
fn u64_to_f32_odd(a: vec2<u32>) -> u32 { return mag_to_f32(a, true); }
fn low_word(a: vec2<u32>) -> u32 { return a.x; }
// An index: the value where it fits in i32, else -2^31 (out of range of the axis).
fn i64_to_index(a: vec2<u32>) -> u32 {
    let fits = (a.y == 0u && a.x < 0x80000000u) || (a.y == 0xffffffffu && a.x >= 0x80000000u);
    return select(0x80000000u, a.x, fits);
}
fn u64_to_index(a: vec2<u32>) -> u32 {
    return select(0x80000000u, a.x, a.y == 0u && a.x < 0x80000000u);
}

// The magnitude of f32 bits `w` truncated to an integer below 2^64 (k: the
// exponent, 0..63).
fn f32_mag(w: u32, k: u32) -> vec2<u32> {
    let m = vec2<u32>((w & 0x7fffffu) | 0x800000u, 0u);
    if (k > 23u) { return shl64(m, k - 23u); }
    return shr64(m, 23u - k);
}
// f32 bits to u64: truncated, saturated (negatives to 0), NaN to 0.
fn f32_to_u64(w: u32) -> vec2<u32> {
    let e = (w >> 23u) & 0xffu;
    if ((e == 0xffu && (w & 0x7fffffu) != 0u) || e < 127u || (w & 0x80000000u) != 0u) {
        return vec2<u32>(0u, 0u);
    }
    if (e - 127u >= 64u) { return vec2<u32>(0xffffffffu, 0xffffffffu); }
    return f32_mag(w, e - 127u);
}
// f32 bits to i64: truncated, saturated, NaN to 0.
fn f32_to_i64(w: u32) -> vec2<u32> {
    let e = (w >> 23u) & 0xffu;
    if (e == 0xffu && (w & 0x7fffffu) != 0u) { return vec2<u32>(0u, 0u); }
    if (e < 127u) { return vec2<u32>(0u, 0u); }
    let neg = (w & 0x80000000u) != 0u;
    let k = e - 127u;
    if (k >= 63u) {
        return select(vec2<u32>(0xffffffffu, 0x7fffffffu), vec2<u32>(0u, 0x80000000u), neg);
    }
    let mag = f32_mag(w, k);
    return select(mag, neg64(mag), neg);
}
