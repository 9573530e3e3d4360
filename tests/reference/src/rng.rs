//! Deterministic test data: SplitMix64 and value generators per dtype.

use crate::val::{Val, round_to};
use wmx_spec::DType;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough for tests.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (every seed is fine, 0 included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_F42D_4C95_7F2D)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, n)` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform in `[lo, hi]`.
    pub fn int_in(&mut self, lo: i128, hi: i128) -> i128 {
        lo + (self.below((hi - lo + 1) as u64) as i128)
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    /// One element of a slice.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// The smallest and largest value of an integer dtype (bool: 0, 1).
pub fn int_range(dt: DType) -> (i128, i128) {
    match dt {
        DType::Bool => (0, 1),
        DType::U8 => (0, u8::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::I64 => (i64::MIN as i128, i64::MAX as i128),
        DType::U64 => (0, u64::MAX as i128),
        _ => panic!("{dt} is not an integer dtype"),
    }
}

/// Edge values of a dtype: NaN, ±inf, ±0, ±1, MIN/MAX, values near f16 overflow.
pub fn edge_values(dt: DType) -> Vec<Val> {
    let mut v = Vec::new();
    if dt.is_float() {
        for x in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            -2.5,
            3.0,
        ] {
            v.push(Val::F(x));
        }
        let big: &[f64] = match dt {
            DType::F16 => &[65504.0, -65504.0, 6.103515625e-5],
            DType::BF16 => &[3.3895313892515355e38, -1.0e30, 1.1754943508222875e-38],
            _ => &[
                f32::MAX as f64,
                f32::MIN as f64,
                65504.0,
                65519.0,
                65520.0,
                -65536.0,
                16777217.0,
                1.0e-30,
            ],
        };
        v.extend(big.iter().map(|&x| Val::F(round_to(dt, x))));
    } else {
        let (lo, hi) = int_range(dt);
        // For the 64-bit integers also the values around their word boundaries
        // (2^31, 2^32, 2^63), the first integers an f64 cannot hold (2^53 + 1),
        // and ties between f32s that round up to even (2^24 + 3, 2^40 + 3 * 2^16).
        let words: &[i128] = if matches!(dt, DType::I64 | DType::U64) {
            &[
                1 << 31,
                -(1 << 31) - 1,
                (1 << 32) - 1,
                1 << 32,
                (1 << 32) + 1,
                -(1 << 32) - 1,
                (1 << 53) + 1,
                -(1 << 53) - 1,
                (1 << 24) + 3,
                -(1 << 40) - (3 << 16),
                (1 << 40) + (3 << 16),
                1 << 63,
                (1 << 63) + 1,
            ]
        } else {
            &[]
        };
        for &x in [0, 1, -1, 2, -2, 7, -7, lo, hi, lo + 1, hi - 1]
            .iter()
            .chain(words)
        {
            if x >= lo && x <= hi && !v.iter().any(|y: &Val| y.as_int() == x) {
                v.push(Val::I(x));
            }
        }
    }
    v
}

/// The kind of values a generator produces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Domain {
    /// Anything the dtype holds: mostly moderate values, some extremes.
    Any,
    /// Floats uniform in `[lo, hi)` (rounded to the dtype); integers clamped to it.
    Range(f64, f64),
    /// Small integers (`-r..=r` clamped to the dtype); floats integral too.
    SmallInt(i64),
}

/// `n` values of `dt` in `domain` (already representable in `dt`).
pub fn values(rng: &mut Rng, dt: DType, n: usize, domain: Domain) -> Vec<Val> {
    (0..n).map(|_| value(rng, dt, domain)).collect()
}

/// One value of `dt` in `domain`.
pub fn value(rng: &mut Rng, dt: DType, domain: Domain) -> Val {
    if dt.is_float() {
        let x = match domain {
            Domain::Any => {
                // Sign, then a magnitude spread over many binades.
                let e = rng.int_in(-12, 12) as i32;
                let m = rng.uniform(1.0, 2.0);
                let s = if rng.chance(0.5) { -1.0 } else { 1.0 };
                if rng.chance(0.05) {
                    0.0
                } else {
                    s * m * 2f64.powi(e)
                }
            }
            Domain::Range(lo, hi) => rng.uniform(lo, hi),
            Domain::SmallInt(r) => rng.int_in(-(r as i128), r as i128) as f64,
        };
        Val::F(round_to(dt, x))
    } else {
        let (lo, hi) = int_range(dt);
        let x = match domain {
            Domain::Any => {
                if rng.chance(0.3) {
                    rng.int_in(lo.max(-100), hi.min(100))
                } else {
                    rng.int_in(lo, hi)
                }
            }
            Domain::Range(a, b) => {
                rng.int_in((a.ceil() as i128).max(lo), (b.floor() as i128).min(hi))
            }
            Domain::SmallInt(r) => rng.int_in((-(r as i128)).max(lo), (r as i128).min(hi)),
        };
        Val::I(x)
    }
}

/// `n` values of `dt`: first the edge values (repeated to fill if `n` is small,
/// truncated otherwise), then random values of `domain`.
pub fn with_edges(rng: &mut Rng, dt: DType, n: usize, domain: Domain) -> Vec<Val> {
    let mut v: Vec<Val> = edge_values(dt).into_iter().take(n).collect();
    while v.len() < n {
        v.push(value(rng, dt, domain));
    }
    v
}
