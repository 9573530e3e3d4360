//! Host values and the dtype rules of `docs/SEMANTICS.md`, written independently
//! of core: rounding to f32/f16/bf16, casts and promotion.

use wmx_spec::DType;

/// One element on the host: integers and bool exactly (`I`), floats as the exact
/// f64 value of the element (`F`).
#[derive(Clone, Copy, Debug)]
pub enum Val {
    /// Integer or bool (0/1).
    I(i128),
    /// Float.
    F(f64),
}

impl Val {
    /// The value as f64 (integers beyond 2^53 round).
    pub fn f(self) -> f64 {
        match self {
            Val::I(i) => i as f64,
            Val::F(x) => x,
        }
    }
    /// The integer (panics on a float).
    pub fn as_int(self) -> i128 {
        match self {
            Val::I(i) => i,
            Val::F(x) => panic!("expected an integer value, got float {x}"),
        }
    }
    /// Nonzero (NaN is nonzero).
    pub fn nonzero(self) -> bool {
        match self {
            Val::I(i) => i != 0,
            Val::F(x) => x != 0.0,
        }
    }
    /// Identical values: same integer, or same float bits up to NaN payload.
    pub fn same(self, o: Val) -> bool {
        match (self, o) {
            (Val::I(a), Val::I(b)) => a == b,
            (Val::F(a), Val::F(b)) => (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl std::fmt::Display for Val {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Val::I(i) => write!(f, "{i}"),
            Val::F(x) => write!(f, "{x:e}"),
        }
    }
}

/// (significand bits incl. the implicit one, min normal exponent, max exponent).
fn format_of(dt: DType) -> (i32, i32, i32) {
    match dt {
        DType::F32 => (24, -126, 127),
        DType::F16 => (11, -14, 15),
        DType::BF16 => (8, -126, 127),
        DType::F64 => (53, -1022, 1023),
        _ => panic!("{dt} is not a float dtype"),
    }
}

/// Binary exponent of a finite nonzero f64 (`|x|` in `[2^e, 2^(e+1))`).
fn exponent(x: f64) -> i32 {
    let bits = x.abs().to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32;
    if e == 0 {
        -1023 // f64 subnormal: far below every target's range
    } else {
        e - 1023
    }
}

/// Rounds `x` to the nearest value of float dtype `dt`, ties to even, with
/// subnormals, overflow to ±inf and NaN kept (IEEE 754 roundTiesToEven).
pub fn round_to(dt: DType, x: f64) -> f64 {
    // Every f64 is its own rounding (and the scaling below would overflow there).
    if !x.is_finite() || x == 0.0 || dt == DType::F64 {
        return x;
    }
    let (p, emin, emax) = format_of(dt);
    let q = exponent(x).max(emin) - (p - 1); // exponent of one unit in the last place
    let scaled = x.abs() * 2f64.powi(-q); // exact: a power-of-two scaling
    let r = scaled.round_ties_even() * 2f64.powi(q);
    let r = if r >= 2f64.powi(emax + 1) {
        f64::INFINITY
    } else {
        r
    };
    if x < 0.0 { -r } else { r }
}

/// One unit in the last place of `dt` at the magnitude of `x` (finite `x`).
pub fn ulp(dt: DType, x: f64) -> f64 {
    let (p, emin, _) = format_of(dt);
    let e = if x == 0.0 || !x.is_finite() {
        emin
    } else {
        exponent(x).max(emin)
    };
    pow2(e - (p - 1))
}

/// 2^k for k in f64's range, subnormals included (`powi` divides by 2^-k, which
/// overflows past 2^1023).
fn pow2(k: i32) -> f64 {
    if k >= -1022 {
        2f64.powi(k)
    } else {
        f64::from_bits(1u64 << (k + 1074).clamp(0, 51))
    }
}

/// Rounds an exact integer to float dtype `dt` with a single rounding (even for
/// i64 values beyond 2^53, where going through f64 would round twice).
pub fn int_to_float(dt: DType, v: i128) -> f64 {
    let (p, _, _) = format_of(dt);
    let a = v.unsigned_abs();
    let bits = 128 - a.leading_zeros() as i32;
    let m = if bits <= p {
        a as f64
    } else {
        let shift = (bits - p) as u32;
        let mut q = a >> shift;
        let rem = a & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        if rem > half || (rem == half && q & 1 == 1) {
            q += 1;
        }
        (q as f64) * 2f64.powi(shift as i32) // ≤ p+1 bits: exact in f64
    };
    round_to(dt, if v < 0 { -m } else { m })
}

/// Wraps an integer into `dt` (two's complement, keep the low bits); bool: `!= 0`.
pub fn wrap(dt: DType, v: i128) -> i128 {
    match dt {
        DType::Bool => (v != 0) as i128,
        DType::U8 => v.rem_euclid(1 << 8),
        DType::U32 => v.rem_euclid(1 << 32),
        DType::I32 => (v + (1 << 31)).rem_euclid(1 << 32) - (1 << 31),
        DType::I64 => (v + (1 << 63)).rem_euclid(1 << 64) - (1 << 63),
        DType::U64 => v.rem_euclid(1 << 64),
        _ => panic!("wrap to float dtype {dt}"),
    }
}

/// `astype` of one value from `from` to `to` (SEMANTICS.md, Casts).
pub fn cast(v: Val, to: DType) -> Val {
    match (v, to) {
        (v, DType::Bool) => Val::I(v.nonzero() as i128),
        (Val::I(i), t) if t.is_float() => Val::F(int_to_float(t, i)),
        (Val::F(x), t) if t.is_float() => Val::F(round_to(t, x)),
        (Val::I(i), t) => Val::I(wrap(t, i)),
        (Val::F(x), t) => {
            let (lo, hi) = crate::rng::int_range(t);
            if x.is_nan() {
                Val::I(0)
            } else {
                let tr = x.trunc();
                Val::I(if tr <= lo as f64 {
                    lo
                } else if tr >= hi as f64 {
                    hi
                } else {
                    tr as i128
                })
            }
        }
    }
}

/// The dtype two operands are converted to (MLX promotion, SEMANTICS/dtype docs),
/// as an explicit table independent of `DType::promote`.
pub fn promote(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    let rank = |d: DType| DType::ALL.iter().position(|&x| x == d).unwrap();
    let (lo, hi) = if rank(a) <= rank(b) { (a, b) } else { (b, a) };
    match (lo, hi) {
        (Bool, x) => x,
        (U8, U32) => U32,
        (U8, I32) => I32,
        (U8, I64) | (U32, I32) | (U32, I64) | (I32, I64) => I64,
        (U8 | U32, U64) => U64,
        // No integer type holds both (MLX: f32).
        (I32 | I64, U64) => F32,
        (U8 | U32 | I32 | I64 | U64, f) => f,
        (F16, BF16) => F32,
        (F16 | BF16, F32) => F32,
        (F16 | BF16 | F32, F64) => F64,
        _ => unreachable!("{lo} {hi}"),
    }
}

/// The float dtype float math on `d` produces (ints and bool → f32).
pub fn to_float(d: DType) -> DType {
    if d.is_float() { d } else { DType::F32 }
}
