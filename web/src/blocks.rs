//! The building blocks for JavaScript: joining (`concatenate`, `stack`, `pad`,
//! `roll`), indexing (`take`, `takeAlongAxis`, `scatter`, `scatterAdd`,
//! `putAlongAxis`, `oneHot`), scans (`cumsum`, `cumprod`, `cummax`, `cummin`),
//! sorting (`sort`, `argsort`, `topk`) and counter-based random numbers
//! (`randomKey`, `randomSplit`, `randomBits`, `randomUniform`, `randomNormal`,
//! `randomRandint`, `randomBernoulli`, `randomCategorical`, `randomPermutation`).

use crate::api::{JsResult, NdArray, lead, wrap};
use crate::convert::{self as cv, err, js_err};
use crate::types::*;
use wasm_bindgen::prelude::*;
use wmx_core::{self as wc, Array, DType, PadMode, ReduceOp, random};

/// The arrays of a JS array (each an `NdArray` or host data).
fn arrays(what: &str, v: &JsValue) -> JsResult<Vec<Array>> {
    if !js_sys::Array::is_array(v) {
        return Err(js_err(format!("{what}: expected an array of arrays")));
    }
    js_sys::Array::from(v).iter().map(|a| lead(&a)).collect()
}

fn axis_or(v: Option<i32>, default: isize) -> isize {
    v.map_or(default, |a| a as isize)
}

/// Joins arrays along an existing axis (default 0).
#[wasm_bindgen]
pub fn concatenate(arrays_: ArrayInputs, axis: Option<i32>) -> JsResult<NdArray> {
    let xs = arrays("concatenate", &arrays_)?;
    wrap(wc::concatenate(
        &xs.iter().collect::<Vec<_>>(),
        axis_or(axis, 0),
    ))
}

/// Joins arrays of one shape along a new axis (default 0).
#[wasm_bindgen]
pub fn stack(arrays_: ArrayInputs, axis: Option<i32>) -> JsResult<NdArray> {
    let xs = arrays("stack", &arrays_)?;
    wrap(wc::stack(&xs.iter().collect::<Vec<_>>(), axis_or(axis, 0)))
}

/// Pads with `widths` (`[[before, after], ...]`, or one pair for every axis);
/// `mode` is `"constant"` (default, with `value`, default 0), `"edge"` or
/// `"reflect"`.
#[wasm_bindgen]
pub fn pad(
    x: &ArrayInput,
    widths: PadWidthsArg,
    mode: Option<PadModeArg>,
    value: Option<f64>,
) -> JsResult<NdArray> {
    let mode = opt(mode).as_string();
    let flat = cv::shape("pad widths", &js_sys::Array::from(&widths).flat(1).into())?;
    if flat.len() % 2 != 0 {
        return Err(js_err("pad: widths are [before, after] pairs"));
    }
    let pairs: Vec<(usize, usize)> = flat.chunks(2).map(|p| (p[0], p[1])).collect();
    let mode = match mode.as_deref().unwrap_or("constant") {
        "constant" => PadMode::Constant(value.unwrap_or(0.0)),
        "edge" => PadMode::Edge,
        "reflect" => PadMode::Reflect,
        m => {
            return Err(js_err(format!(
                "pad: unknown mode {m:?} (constant, edge, reflect)"
            )));
        }
    };
    wrap(wc::pad(&lead(x)?, &pairs, mode))
}

/// Shifts elements along `axis` with wrap-around (the flattened array when
/// `axis` is omitted).
#[wasm_bindgen]
pub fn roll(x: &ArrayInput, shift: i32, axis: Option<i32>) -> JsResult<NdArray> {
    wrap(wc::roll(
        &lead(x)?,
        shift as isize,
        axis.map(|a| a as isize),
    ))
}

/// Elements at integer `indices` along `axis` (the flattened array when omitted);
/// negative indices count from the end, others out of range read NaN (floats) or
/// the dtype's extreme.
#[wasm_bindgen]
pub fn take(x: &ArrayInput, indices: &ArrayInput, axis: Option<i32>) -> JsResult<NdArray> {
    wrap(wc::take(
        &lead(x)?,
        &lead(indices)?,
        axis.map(|a| a as isize),
    ))
}

/// `out[p] = x[p with p[axis] = indices[p]]` (numpy's `take_along_axis`).
#[wasm_bindgen(js_name = takeAlongAxis)]
pub fn take_along_axis(
    x: &ArrayInput,
    indices: &ArrayInput,
    axis: Option<i32>,
) -> JsResult<NdArray> {
    wrap(wc::take_along_axis(
        &lead(x)?,
        &lead(indices)?,
        axis.map(|a| a as isize),
    ))
}

/// A copy of `x` with `updates` written at `indices` along `axis` (the inverse of
/// `take`; out-of-range indices are dropped).
#[wasm_bindgen]
pub fn scatter(
    x: &ArrayInput,
    indices: &ArrayInput,
    updates: &ArrayInput,
    axis: i32,
) -> JsResult<NdArray> {
    wrap(wc::scatter(
        &lead(x)?,
        &lead(indices)?,
        &lead(updates)?,
        axis as isize,
    ))
}

/// As `scatter`, adding: duplicate indices accumulate.
#[wasm_bindgen(js_name = scatterAdd)]
pub fn scatter_add(
    x: &ArrayInput,
    indices: &ArrayInput,
    updates: &ArrayInput,
    axis: i32,
) -> JsResult<NdArray> {
    wrap(wc::scatter_add(
        &lead(x)?,
        &lead(indices)?,
        &lead(updates)?,
        axis as isize,
    ))
}

/// numpy's `put_along_axis`, returning a new array.
#[wasm_bindgen(js_name = putAlongAxis)]
pub fn put_along_axis(
    x: &ArrayInput,
    indices: &ArrayInput,
    values: &ArrayInput,
    axis: i32,
) -> JsResult<NdArray> {
    wrap(wc::put_along_axis(
        &lead(x)?,
        &lead(indices)?,
        &lead(values)?,
        axis as isize,
    ))
}

/// One-hot rows of length `depth` (`dtype` default f32).
#[wasm_bindgen(js_name = oneHot)]
pub fn one_hot(indices: &ArrayInput, depth: u32, dtype: Option<DTypeArg>) -> JsResult<NdArray> {
    let dtype = opt(dtype);
    wrap(wc::one_hot(
        &lead(indices)?,
        depth as usize,
        cv::dtype(&dtype, DType::F32)?,
    ))
}

fn scan(
    op: ReduceOp,
    x: &ArrayInput,
    axis: Option<i32>,
    reverse: Option<bool>,
    inclusive: Option<bool>,
) -> JsResult<NdArray> {
    wrap(wc::scan(
        op,
        &lead(x)?,
        axis.map(|a| a as isize),
        reverse.unwrap_or(false),
        inclusive.unwrap_or(true),
    ))
}

/// Cumulative sum along `axis` (flattened when omitted); `reverse` and
/// `inclusive` (default true) as MLX's.
#[wasm_bindgen]
pub fn cumsum(
    x: &ArrayInput,
    axis: Option<i32>,
    reverse: Option<bool>,
    inclusive: Option<bool>,
) -> JsResult<NdArray> {
    scan(ReduceOp::Sum, x, axis, reverse, inclusive)
}

/// Cumulative product (see `cumsum`).
#[wasm_bindgen]
pub fn cumprod(
    x: &ArrayInput,
    axis: Option<i32>,
    reverse: Option<bool>,
    inclusive: Option<bool>,
) -> JsResult<NdArray> {
    scan(ReduceOp::Prod, x, axis, reverse, inclusive)
}

/// Running maximum (see `cumsum`).
#[wasm_bindgen]
pub fn cummax(
    x: &ArrayInput,
    axis: Option<i32>,
    reverse: Option<bool>,
    inclusive: Option<bool>,
) -> JsResult<NdArray> {
    scan(ReduceOp::Max, x, axis, reverse, inclusive)
}

/// Running minimum (see `cumsum`).
#[wasm_bindgen]
pub fn cummin(
    x: &ArrayInput,
    axis: Option<i32>,
    reverse: Option<bool>,
    inclusive: Option<bool>,
) -> JsResult<NdArray> {
    scan(ReduceOp::Min, x, axis, reverse, inclusive)
}

/// Sorted along `axis` (the last when omitted), stably, NaN last.
#[wasm_bindgen]
pub fn sort(x: &ArrayInput, axis: Option<i32>) -> JsResult<NdArray> {
    wrap(wc::sort(&lead(x)?, Some(axis_or(axis, -1))))
}

/// The u32 indices that sort along `axis` (the last when omitted), stably.
#[wasm_bindgen]
pub fn argsort(x: &ArrayInput, axis: Option<i32>) -> JsResult<NdArray> {
    wrap(wc::argsort(&lead(x)?, Some(axis_or(axis, -1))))
}

/// `[values, indices]` of the `k` largest along `axis` (the last when omitted),
/// largest first.
#[wasm_bindgen]
pub fn topk(x: &ArrayInput, k: u32, axis: Option<i32>) -> JsResult<NdPair> {
    let (v, i) = wc::topk(&lead(x)?, k as usize, axis_or(axis, -1)).map_err(err)?;
    Ok(js_sys::Array::of2(&NdArray::wrap(v).into(), &NdArray::wrap(i).into()).unchecked_into())
}

/// `[wq, scales, biases]`: `w` (f32, f16 or bf16, rank 2 or more) quantized along
/// its last axis in MLX's affine format, bit for bit (`groupSize` 32, 64 or 128,
/// default 64; `bits` 2, 3, 4, 5, 6 or 8, default 4): the packed values (u32) and
/// one scale and bias per group (`w`'s dtype).
#[wasm_bindgen]
pub fn quantize(
    w: &ArrayInput,
    group_size: Option<u32>,
    bits: Option<u32>,
) -> JsResult<QuantizedParts> {
    let (g, b) = quant_args(group_size, bits);
    let (wq, s, bi) = wc::quantize(&lead(w)?, g, b).map_err(err)?;
    let parts = [wq, s, bi].map(|a| JsValue::from(NdArray::wrap(a)));
    Ok(js_sys::Array::of3(&parts[0], &parts[1], &parts[2]).unchecked_into())
}

/// The values `scales * q + biases` of a quantized matrix (see `quantize`), in the
/// scales' dtype.
#[wasm_bindgen]
pub fn dequantize(
    wq: &ArrayInput,
    scales: &ArrayInput,
    biases: &ArrayInput,
    group_size: Option<u32>,
    bits: Option<u32>,
) -> JsResult<NdArray> {
    let (g, b) = quant_args(group_size, bits);
    wrap(wc::dequantize(
        &lead(wq)?,
        &lead(scales)?,
        &lead(biases)?,
        g,
        b,
    ))
}

/// `x @ dequantize(w).T` (`transpose`, the default: w is `[N, K]`, a linear
/// layer's weight) or `x @ dequantize(w)`, accumulated in f32, in x's dtype (which
/// must be the scales'). Up to 8 rows of x run one matrix-vector kernel.
#[wasm_bindgen(js_name = "quantizedMatmul")]
pub fn quantized_matmul(
    x: &ArrayInput,
    wq: &ArrayInput,
    scales: &ArrayInput,
    biases: &ArrayInput,
    transpose: Option<bool>,
    group_size: Option<u32>,
    bits: Option<u32>,
) -> JsResult<NdArray> {
    let (g, b) = quant_args(group_size, bits);
    wrap(wc::quantized_matmul(
        &lead(x)?,
        &lead(wq)?,
        &lead(scales)?,
        &lead(biases)?,
        transpose.unwrap_or(true),
        g,
        b,
    ))
}

/// MLX's defaults: groups of 64, 4 bits.
fn quant_args(group_size: Option<u32>, bits: Option<u32>) -> (usize, usize) {
    (
        group_size.unwrap_or(64) as usize,
        bits.unwrap_or(4) as usize,
    )
}

/// The key of `seed` (an integer below 2^53): a u32 array of shape [2], as MLX's
/// `random.key`.
#[wasm_bindgen(js_name = randomKey)]
pub fn random_key(seed: f64) -> JsResult<NdArray> {
    if !(seed >= 0.0 && seed.fract() == 0.0 && seed <= 9007199254740991.0) {
        return Err(js_err(format!(
            "randomKey: seed {seed} is not an integer in [0, 2^53)"
        )));
    }
    wrap(random::key(seed as u64))
}

/// `num` new keys `[num, 2]`.
#[wasm_bindgen(js_name = randomSplit)]
pub fn random_split(key: &ArrayInput, num: u32) -> JsResult<NdArray> {
    wrap(random::split(&lead(key)?, num as usize))
}

/// Uniform u32 bits of `shape`.
#[wasm_bindgen(js_name = randomBits)]
pub fn random_bits(key: &ArrayInput, shape: ShapeArg) -> JsResult<NdArray> {
    wrap(random::bits(&lead(key)?, &cv::shape("randomBits", &shape)?))
}

/// Uniform on [low, high) (defaults 0 and 1; `dtype` default f32).
#[wasm_bindgen(js_name = randomUniform)]
pub fn random_uniform(
    key: &ArrayInput,
    shape: ShapeArg,
    low: Option<f64>,
    high: Option<f64>,
    dtype: Option<DTypeArg>,
) -> JsResult<NdArray> {
    let dtype = opt(dtype);
    let s = cv::shape("randomUniform", &shape)?;
    let d = cv::dtype(&dtype, DType::F32)?;
    wrap(random::uniform(
        &lead(key)?,
        &s,
        low.unwrap_or(0.0),
        high.unwrap_or(1.0),
        d,
    ))
}

/// Normal samples (`loc` default 0, `scale` default 1, `dtype` default f32).
#[wasm_bindgen(js_name = randomNormal)]
pub fn random_normal(
    key: &ArrayInput,
    shape: ShapeArg,
    loc: Option<f64>,
    scale: Option<f64>,
    dtype: Option<DTypeArg>,
) -> JsResult<NdArray> {
    let dtype = opt(dtype);
    let s = cv::shape("randomNormal", &shape)?;
    let d = cv::dtype(&dtype, DType::F32)?;
    wrap(random::normal(
        &lead(key)?,
        &s,
        loc.unwrap_or(0.0),
        scale.unwrap_or(1.0),
        d,
    ))
}

/// Integers on [low, high) (`dtype` default i32).
#[wasm_bindgen(js_name = randomRandint)]
pub fn random_randint(
    key: &ArrayInput,
    shape: ShapeArg,
    low: f64,
    high: f64,
    dtype: Option<DTypeArg>,
) -> JsResult<NdArray> {
    let dtype = opt(dtype);
    let s = cv::shape("randomRandint", &shape)?;
    let d = cv::dtype(&dtype, DType::I32)?;
    wrap(random::randint(&lead(key)?, &s, low as i64, high as i64, d))
}

/// Booleans, true with probability `p`.
#[wasm_bindgen(js_name = randomBernoulli)]
pub fn random_bernoulli(key: &ArrayInput, p: f64, shape: ShapeArg) -> JsResult<NdArray> {
    wrap(random::bernoulli(
        &lead(key)?,
        p,
        &cv::shape("randomBernoulli", &shape)?,
    ))
}

/// Class indices drawn from unnormalised log-probabilities along `axis` (the last
/// when omitted).
#[wasm_bindgen(js_name = randomCategorical)]
pub fn random_categorical(
    key: &ArrayInput,
    logits: &ArrayInput,
    axis: Option<i32>,
) -> JsResult<NdArray> {
    wrap(random::categorical(
        &lead(key)?,
        &lead(logits)?,
        axis_or(axis, -1),
    ))
}

/// A random permutation of `0..n` (u32), MLX's for the same key.
#[wasm_bindgen(js_name = randomPermutation)]
pub fn random_permutation(key: &ArrayInput, n: u32) -> JsResult<NdArray> {
    wrap(random::permutation(&lead(key)?, n as usize))
}
