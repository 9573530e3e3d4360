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
fn ex_f16(w: u32, j: u32) -> f32 { return f16_val((w >> (j << 4u)) & 0xffffu); }
fn ex_bf16(w: u32, j: u32) -> f32 { return bf16_val((w >> (j << 4u)) & 0xffffu); }
fn ex_u16(w: u32, j: u32) -> u32 { return (w >> (j << 4u)) & 0xffffu; }
fn ex_u8(w: u32, j: u32) -> u32 { return (w >> (j << 3u)) & 0xffu; }
fn ex_bool(w: u32, j: u32) -> u32 { return (w >> (j << 3u)) & 0xffu; }

// Compute value -> storage bits (in the low bits of the result).
fn st_f32(v: f32) -> u32 { return bitcast<u32>(v); }
fn st_i32(v: i32) -> u32 { return bitcast<u32>(v); }
fn st_u32(v: u32) -> u32 { return v; }
fn st_f16(v: f32) -> u32 { return f16_bits(v); }
fn st_bf16(v: f32) -> u32 { return bf16_bits(v); }
fn st_u16(v: u32) -> u32 { return v & 0xffffu; }
fn st_u8(v: u32) -> u32 { return v & 0xffu; }
fn st_bool(v: u32) -> u32 { return select(0u, 1u, v != 0u); }

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
