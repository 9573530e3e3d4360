//! Counter-based random numbers: explicit threefry-2x32 keys, as in JAX and MLX.
//!
//! A key is a u32 array of shape `[2]` ([`key`]); the same key gives the same bits
//! on every wmx backend, and [`bits`], [`split`], [`uniform`], [`randint`] and
//! [`bernoulli`] give the values `mlx.core.random` gives for that key (the
//! conformance suite checks goldens made by MLX). There is no hidden global state:
//! [`split`] a key to get independent ones, and never reuse a key for two draws.
//! [`permutation`] is MLX's too (an argsort of random words).
//!
//! Bit layout (MLX's `RandomBits`): for `E` words per key, `h = E / 2` and
//! `o = E % 2`, the hash of counter `(c, c + h + o)` gives words `c` and `c + h + o`
//! for `c < h`, and when `E` is odd word `h` is the first half of the hash of
//! `(h, 0)`.
//!
//! [`normal`] uses Box–Muller on two uniform draws (MLX uses the inverse error
//! function, so normal values differ from MLX's for the same key); [`categorical`]
//! draws as MLX does (Gumbel-max, or the inverse CDF for a single distribution); [`truncated_normal`] maps uniform draws by
//! the inverse error function ([`crate::erfinv`]), as MLX does.

use crate::ops::{self as o, node, op_device};
use crate::{Array, DType, Error, Primitive, Result};

/// The key of `seed`: `[seed >> 32, seed & 0xffffffff]` as u32 on the default
/// device (MLX's `mx.random.key`).
pub fn key(seed: u64) -> Result<Array> {
    Array::from_slice_on(
        &[(seed >> 32) as u32, seed as u32],
        &[2],
        &crate::default_device()?,
    )
}

fn check_key(op: &'static str, key: &Array) -> Result<()> {
    if key.dtype() != DType::U32 || key.shape() != [2] {
        return Err(Error::invalid(
            op,
            format!(
                "a key is a u32 array of shape [2] (random::key), got {} {:?}",
                key.dtype(),
                key.shape()
            ),
        ));
    }
    Ok(())
}

/// Uniformly distributed u32 bits of `shape` (MLX's `bits` with width 4).
pub fn bits(key: &Array, shape: &[usize]) -> Result<Array> {
    check_key("random::bits", key)?;
    bits_node(key, shape, DType::U32)
}

/// The primitive for keys `[..., 2]` and the output shape `[..., *shape]`: u32
/// bits, or for a float `dtype` their unit-interval values.
pub(crate) fn bits_node(keys: &Array, out_shape: &[usize], dtype: DType) -> Result<Array> {
    let keys = o::contiguous(keys)?;
    let d = op_device(&keys);
    node(Primitive::RandomBits, vec![keys], out_shape, dtype, d)
}

/// `num` new keys `[num, 2]` from `key` (MLX's `split`); take row `i` with
/// `slice`/`take`, or use [`split2`].
pub fn split(key: &Array, num: usize) -> Result<Array> {
    bits(key, &[num, 2])
}

/// Two new keys from `key`.
pub fn split2(key: &Array) -> Result<(Array, Array)> {
    let ks = split(key, 2)?;
    let row = |i: isize| o::reshape(&ks.slice(&[o::Slice::range(i, i + 1)])?, &[2]);
    Ok((row(0)?, row(1)?))
}

/// A scalar of `dtype` on `key`'s device.
fn constant(key: &Array, v: f64, dtype: DType) -> Result<Array> {
    crate::with_device(key.device(), || o::scalar(v, dtype))
}

/// The dtype the continuous distributions compute their transcendental steps in:
/// f64 where the key's device computes it, so the f32 result is the correctly
/// rounded value on every such backend (the same bits on the CPU and GPUs with
/// f64; a tie within 2^-52 of an f32 rounding boundary is the only exception),
/// else f32 (browsers), within a few f32 ulp of it.
fn wide(key: &Array) -> DType {
    if key.device().check_dtype(DType::F64).is_ok() {
        DType::F64
    } else {
        DType::F32
    }
}

/// `z`, computed in [`wide`], rounded to f32 and then to `dtype` (the same two
/// roundings everywhere).
fn narrow(z: &Array, dtype: DType) -> Result<Array> {
    o::astype(&o::astype(z, DType::F32)?, dtype)
}

/// `Err` unless `dtype` is a float dtype (the continuous distributions).
fn check_float(op: &'static str, dtype: DType) -> Result<()> {
    if dtype.is_float() {
        Ok(())
    } else {
        Err(Error::UnsupportedDType { op, dtype })
    }
}

/// `Err` unless `lo < hi` (NaN bounds included); `close` ends the range as printed.
fn check_range(op: &'static str, lo: f64, hi: f64, close: &str) -> Result<()> {
    if lo.partial_cmp(&hi) == Some(std::cmp::Ordering::Less) {
        Ok(())
    } else {
        Err(Error::invalid(
            op,
            format!("empty range [{lo}, {hi}{close}"),
        ))
    }
}

/// Samples uniform on `[low, high)` of `shape` and float `dtype` (MLX's formula:
/// `bits / (2^32 - 1)` in f32, capped below 1, cast to `dtype`, then
/// `low + (high - low) * u` in `dtype`).
pub fn uniform(key: &Array, shape: &[usize], low: f64, high: f64, dtype: DType) -> Result<Array> {
    check_float("random::uniform", dtype)?;
    check_range("random::uniform", low, high, ")")?;
    let unit = unit(key, shape, dtype)?;
    if low == 0.0 && high == 1.0 {
        // `0 + 1 * u` is `u`, already below 1: the bits' pass alone.
        return Ok(unit);
    }
    let lo = constant(key, low, dtype)?;
    let range = o::subtract(&constant(key, high, dtype)?, &lo)?;
    // The product is stored rounded, as MLX's: through `stop_gradient` (a view
    // that fusion does not look through), so no GPU compiler contracts it with
    // the add into one fused multiply-add (NVIDIA's does inside a fused kernel).
    let x = o::add(&o::stop_gradient(&o::multiply(&range, &unit)?)?, &lo)?;
    // The last rounding may reach `high` (f16: 2 + 2 * (1 - 2^-11) is 4); MLX's
    // values otherwise.
    o::minimum(&x, &constant(key, below(high, dtype), dtype)?)
}

/// The largest value of `dtype` below `x` (rounded to `dtype` first).
fn below(x: f64, dtype: DType) -> f64 {
    use half::{bf16, f16};
    let x32 = x as f32;
    let step = |b: u32| if x32 > 0.0 { b - 1 } else { b + 1 };
    match dtype {
        DType::F16 => {
            let h = f16::from_f64(x);
            match h.to_f64() {
                0.0 => -f16::from_bits(1).to_f64(),
                v if v > 0.0 => f16::from_bits(h.to_bits() - 1).to_f64(),
                _ => f16::from_bits(h.to_bits() + 1).to_f64(),
            }
        }
        DType::BF16 => {
            let h = bf16::from_f64(x);
            match h.to_f64() {
                0.0 => -bf16::from_bits(1).to_f64(),
                v if v > 0.0 => bf16::from_bits(h.to_bits() - 1).to_f64(),
                _ => bf16::from_bits(h.to_bits() + 1).to_f64(),
            }
        }
        _ if x32 == 0.0 => -(f32::from_bits(1) as f64),
        _ => f32::from_bits(step(x32.to_bits())) as f64,
    }
}

/// Uniform on `[0, 1)` in `dtype`, MLX's way, in the bits' own pass: MLX divides
/// `f32(bits)` by f32(2^32 - 1), which is 2^32 (so a multiply by 2^-32 is the same
/// exact scaling), caps it below 1 in `dtype` and casts.
fn unit(key: &Array, shape: &[usize], dtype: DType) -> Result<Array> {
    check_key("random::bits", key)?;
    bits_node(key, shape, dtype)
}

/// Standard normal samples truncated to `[lower, upper]` (MLX's
/// `truncated_normal`): uniform draws on `(erf(lower/√2), erf(upper/√2))` mapped
/// by `√2 erfinv` (computed as [`normal`]'s transform is), clipped to the bounds,
/// cast to float `dtype`. Bounds may
/// be infinite; both far in one tail (where f32's erf cannot tell them apart, past
/// about 5) give samples at the nearer bound's end of the interval.
pub fn truncated_normal(
    key: &Array,
    lower: f64,
    upper: f64,
    shape: &[usize],
    dtype: DType,
) -> Result<Array> {
    check_float("random::truncated_normal", dtype)?;
    check_range("random::truncated_normal", lower, upper, "]")?;
    let s2 = std::f64::consts::SQRT_2;
    // Inside (-1, 1): erfinv(±1) is ±inf, which a draw at the end would give.
    let edge = 1.0 - f64::from(f32::EPSILON) / 2.0;
    let a = libm::erf(lower / s2).max(-edge);
    let b = libm::erf(upper / s2).min(edge);
    let u = if a < b {
        uniform(key, shape, a, b, DType::F32)?
    } else {
        crate::with_device(key.device(), || o::full(shape, a, DType::F32))?
    };
    let w = wide(key);
    let z = o::multiply(&o::erfinv(&o::astype(&u, w)?)?, &constant(key, s2, w)?)?;
    let z = narrow(&z, DType::F32)?;
    let z = o::maximum(
        &o::minimum(&z, &constant(key, upper, DType::F32)?)?,
        &constant(key, lower, DType::F32)?,
    )?;
    o::astype(&z, dtype)
}

/// Normal samples `loc + scale * z` of `shape` and float `dtype`, `z` from the
/// Box–Muller transform of two f32 uniform draws. The transform is computed in f64
/// where the key's device computes f64 and rounded to f32, then to `dtype`: the
/// correctly rounded value, the same bits on the CPU and on every GPU with f64
/// (an exact tie aside); in f32 on devices without f64 (browsers), within a few
/// f32 ulp of it.
pub fn normal(key: &Array, shape: &[usize], loc: f64, scale: f64, dtype: DType) -> Result<Array> {
    check_float("random::normal", dtype)?;
    let mut two = vec![2];
    two.extend_from_slice(shape);
    let w = wide(key);
    let u = o::astype(&unit(key, &two, DType::F32)?, w)?;
    let half = |i: isize| -> Result<Array> {
        o::squeeze(&u.slice(&[o::Slice::range(i, i + 1)])?, Some(&[0]))
    };
    // 1 - u is in (0, 1]: the log is finite.
    let u1 = o::subtract(&constant(key, 1.0, w)?, &half(0)?)?;
    let r = o::sqrt(&o::multiply(&constant(key, -2.0, w)?, &o::log(&u1)?)?)?;
    let theta = o::multiply(&constant(key, std::f64::consts::TAU, w)?, &half(1)?)?;
    let z = o::multiply(&r, &o::cos(&theta)?)?;
    let z = o::add(
        &o::multiply(&z, &constant(key, scale, w)?)?,
        &constant(key, loc, w)?,
    )?;
    narrow(&z, dtype)
}

/// Integers uniform on `[low, high)` of `shape` and integer `dtype` (MLX's
/// formula: `floor` of an f32 uniform draw, clamped to `[low, high - 1]`).
pub fn randint(key: &Array, shape: &[usize], low: i64, high: i64, dtype: DType) -> Result<Array> {
    if !dtype.is_int() {
        return Err(Error::UnsupportedDType {
            op: "random::randint",
            dtype,
        });
    }
    if high <= low {
        return Err(Error::invalid(
            "random::randint",
            format!("empty range [{low}, {high})"),
        ));
    }
    // As numpy: bounds the dtype cannot hold are an error, not a saturated draw.
    let (min, max): (i128, i128) = match dtype {
        DType::U8 => (0, u8::MAX as i128),
        DType::U32 => (0, u32::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::U64 => (0, u64::MAX as i128),
        _ => (i64::MIN as i128, i64::MAX as i128),
    };
    for (name, v, lo, hi) in [
        ("low", low as i128, min, max),
        ("high", high as i128, min + 1, max + 1),
    ] {
        if v < lo || v > hi {
            return Err(Error::OutOfRange {
                op: "random::randint",
                msg: format!(
                    "{name} {v} is out of bounds for {dtype} (low in [{min}, {max}], high in [{}, {}])",
                    min + 1,
                    max + 1
                ),
            });
        }
    }
    let u = uniform(key, shape, low as f64, high as f64, DType::F32)?;
    let i = o::astype(&o::floor(&u)?, dtype)?;
    let i = o::minimum(&i, &constant(key, (high - 1) as f64, dtype)?)?;
    o::maximum(&i, &constant(key, low as f64, dtype)?)
}

/// Booleans of `shape`, true with probability `p` (MLX's formula: `bits < p *
/// 2^32` in f32; `p = 0` gives all false, `p = 1` all true). A `p` outside
/// `[0, 1]`, or NaN, is an error (as numpy's).
pub fn bernoulli(key: &Array, p: f64, shape: &[usize]) -> Result<Array> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::OutOfRange {
            op: "random::bernoulli",
            msg: format!("probability {p} is not in [0, 1]"),
        });
    }
    // The f32 just above 2^32, so p = 1 is true for every u32.
    let upper = 4_294_967_296.0 + 512.0;
    let b = o::astype(&bits(key, shape)?, DType::F32)?;
    let t = o::multiply(
        &constant(key, p, DType::F32)?,
        &constant(key, upper, DType::F32)?,
    )?;
    o::less(&b, &t)
}

/// Gumbel samples `-log(-log(u))` of `shape` and float `dtype` (MLX's formula;
/// the logs computed as [`normal`]'s steps are, in f64 for an f64 `dtype`).
pub fn gumbel(key: &Array, shape: &[usize], dtype: DType) -> Result<Array> {
    let u = uniform(key, shape, 0.0, 1.0, dtype)?;
    if dtype == DType::F64 {
        return o::negative(&o::log(&o::negative(&o::log(&u)?)?)?);
    }
    let u = o::astype(&u, wide(key))?;
    narrow(&o::negative(&o::log(&o::negative(&o::log(&u)?)?)?)?, dtype)
}

/// Indices (u32) drawn from the categorical distributions given by unnormalised
/// log-probabilities `logits` along `axis`, which is removed; MLX's draws for the
/// same key. Several distributions (or a 1-D `logits`) go by the Gumbel-max
/// trick; a single one with other axes of length 1 by the inverse of its
/// cumulative distribution, as MLX does (one uniform draw per sample, and the
/// entries equal to an infinite maximum share the mass).
pub fn categorical(key: &Array, logits: &Array, axis: isize) -> Result<Array> {
    const OP: &str = "random::categorical";
    if !logits.dtype().is_float() {
        return Err(Error::UnsupportedDType {
            op: OP,
            dtype: logits.dtype(),
        });
    }
    check_key(OP, key)?;
    let ax = crate::layout::normalize_axis(OP, axis, logits.ndim())?;
    let n = logits.shape()[ax];
    let x = o::astype(
        logits,
        if logits.dtype() == DType::F64 {
            DType::F64
        } else {
            DType::F32
        },
    )?;
    if n > 0 && logits.ndim() > 1 && logits.size() == n {
        let mut shape = logits.shape().to_vec();
        shape.remove(ax);
        let x = o::reshape(&x, &[n as isize])?;
        let m = o::max(&x, None, false)?;
        let w = o::where_(
            &o::isinf(&m)?,
            &o::astype(&o::equal(&x, &m)?, x.dtype())?,
            &o::exp(&o::subtract(&x, &m)?)?,
        )?;
        let cdf = w.cumsum(Some(0), false, false)?;
        let u = o::multiply(
            &uniform(key, &shape, 0.0, 1.0, DType::F32)?,
            &o::astype(&o::sum(&w, None, false)?, DType::F32)?,
        )?;
        // searchsorted(cdf, u, right) - 1: the entries of the nondecreasing cdf at
        // or below u, less one.
        let at_or_below = o::less_equal(&o::astype(&cdf, DType::F32)?, &o::expand_dims(&u, -1)?)?;
        let count = o::sum(&o::astype(&at_or_below, DType::U32)?, Some(&[-1]), false)?;
        return o::subtract(&count, &o::scalar_like(&count, 1.0)?);
    }
    let g = gumbel(key, logits.shape(), DType::F32)?;
    o::argmax(&o::add(&g, &o::astype(&x, DType::F32)?)?, axis, false)
}

/// A random permutation of `0..n` (u32): the argsort of `n` random words, MLX's
/// `permutation` (the same values for the same key).
pub fn permutation(key: &Array, n: usize) -> Result<Array> {
    o::argsort(&bits(key, &[n])?, Some(0))
}

/// `x` with its elements along `axis` in a random order (MLX's `permutation` of an
/// array).
pub fn shuffle(key: &Array, x: &Array, axis: isize) -> Result<Array> {
    let ax = crate::layout::normalize_axis("random::shuffle", axis, x.ndim())?;
    o::take(x, &permutation(key, x.shape()[ax])?, Some(ax as isize))
}
