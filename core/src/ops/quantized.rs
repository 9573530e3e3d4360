//! Affine quantization in MLX's format (`mx.quantize`, `mx.dequantize`,
//! `mx.quantized_matmul`): the ops and their primitives (CPU code and transform
//! rules; the GPU code is in `wmx-webgpu`'s `families.rs`).
//!
//! A matrix's last axis is cut into groups of `group_size` values. Each group has a
//! scale `s` and a bias `b`, and each value `w` is stored as the integer
//! `q = round((w - b) / s)` clipped to `0..2^bits - 1`, so that `w ≈ s q + b`. The
//! q's of a row are a little-endian bit stream in u32 words (value `i` at bits
//! `i * bits` of the stream): `K * bits / 32` words for `K` values.

use crate::cpu::CpuBuffer;
use crate::cpu::floats::{floats, store_floats};
use crate::{Array, CpuOutput, CustomFunction, CustomPrimitive, DType, Error, Result, View};
use std::sync::Arc;

/// Bits per value that quantization takes (MLX's: 2 to 8 but 7).
pub const QUANT_BITS: [usize; 6] = [2, 3, 4, 5, 6, 8];
/// Values per group that quantization takes (MLX's).
pub const QUANT_GROUP_SIZES: [usize; 3] = [32, 64, 128];
/// Rows of `x` up to which [`quantized_matmul`] runs the matrix-vector kernel
/// (decoding); more rows dequantize the matrix and take the matmul kernels.
const MATVEC_ROWS: usize = 8;

pub(crate) fn check_params(op: &'static str, group_size: usize, bits: usize) -> Result<()> {
    if !QUANT_GROUP_SIZES.contains(&group_size) {
        return Err(Error::invalid(
            op,
            format!("group_size must be one of {QUANT_GROUP_SIZES:?}, got {group_size}"),
        ));
    }
    if !QUANT_BITS.contains(&bits) {
        return Err(Error::invalid(
            op,
            format!("bits must be one of {QUANT_BITS:?}, got {bits}"),
        ));
    }
    Ok(())
}

fn quant_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16 | DType::BF16)
}

fn isize_shape(s: &[usize]) -> Vec<isize> {
    s.iter().map(|&x| x as isize).collect()
}

/// Quantizes `w` (f32, f16 or bf16, rank 2 or more) along its last axis in groups
/// of `group_size` (32, 64 or 128) with `bits` bits per value (2, 3, 4, 5, 6 or 8),
/// as MLX's `mx.quantize` (affine mode), bit for bit: returns the packed values
/// (u32, the last axis `K * bits / 32` words), the scales and the biases (`w`'s
/// dtype, the last axis `K / group_size`).
///
/// A group's scale and bias follow MLX's rule in f32: the scale spans the group's
/// range (at least 1e-7) in `2^bits - 1` steps, and is signed and adjusted so that
/// the edge of larger magnitude is an exact multiple of it, which is then the bias
/// (0 when that edge rounds to 0 steps). Values are `round((w - b) / s)` (ties to
/// even) clipped to the range. A group holding NaN or inf gets NaN as its scale and
/// bias (so it dequantizes to NaN) and zero values.
///
/// ```
/// # fn main() -> wmx_core::Result<()> {
/// use wmx_core::{Array, Device};
/// let w = Array::from_slice_on(&(0..64).map(|i| i as f32).collect::<Vec<_>>(), &[1, 64], &Device::cpu())?;
/// let (wq, scales, biases) = wmx_core::quantize(&w, 32, 4)?;
/// assert_eq!((wq.shape(), scales.shape()), (&[1usize, 8][..], &[1usize, 2][..]));
/// let back = wmx_core::dequantize(&wq, &scales, &biases, 32, 4)?;
/// let err = (back.to_vec::<f32>()?[31] - 31.0).abs();
/// assert!(err <= 31.0 / 15.0 / 2.0);
/// # Ok(()) }
/// ```
pub fn quantize(w: &Array, group_size: usize, bits: usize) -> Result<(Array, Array, Array)> {
    const OP: &str = "quantize";
    check_params(OP, group_size, bits)?;
    if !quant_float(w.dtype()) {
        return Err(Error::invalid(
            OP,
            format!("w must be f32, f16 or bf16, got {}", w.dtype()),
        ));
    }
    let shape = w.shape();
    if shape.len() < 2 {
        return Err(Error::invalid(
            OP,
            format!("w must have rank 2 or more, got shape {shape:?}"),
        ));
    }
    let k = shape[shape.len() - 1];
    if !k.is_multiple_of(group_size) {
        return Err(Error::invalid(
            OP,
            format!("w's last axis ({k}) must be a multiple of group_size {group_size}"),
        ));
    }
    let w = crate::contiguous(w)?;
    let lead = &shape[..shape.len() - 1];
    let words_shape: Vec<usize> = lead.iter().copied().chain([k * bits / 32]).collect();
    let groups_shape: Vec<usize> = lead.iter().copied().chain([k / group_size]).collect();
    let prim = |params| Quantize {
        group: group_size,
        bits,
        params,
    };
    let wq = crate::custom(
        Arc::new(prim(false)),
        std::slice::from_ref(&w),
        &words_shape,
        DType::U32,
    )?;
    let pairs_shape: Vec<usize> = groups_shape.iter().copied().chain([2]).collect();
    let pairs = crate::custom(
        Arc::new(prim(true)),
        std::slice::from_ref(&w),
        &pairs_shape,
        DType::F32,
    )?;
    let halves = crate::split(&pairs, 2, -1)?;
    let back = isize_shape(&groups_shape);
    let part = |a: &Array| crate::astype(&crate::reshape(a, &back)?, w.dtype());
    Ok((wq, part(&halves[0])?, part(&halves[1])?))
}

/// The values of a quantized matrix, as MLX's `mx.dequantize`: `scales * q +
/// biases` per group, in the scales' dtype. `wq` holds the packed values (u32),
/// `scales` and `biases` one per group (the same shape and float dtype); all have
/// the same leading axes, and the result's last axis is `wq`'s times `32 / bits`.
/// In f16 and bf16 (as in MLX) `s * q` is rounded to the dtype before the bias is
/// added. Differentiable in `scales` and `biases`.
pub fn dequantize(
    wq: &Array,
    scales: &Array,
    biases: &Array,
    group_size: usize,
    bits: usize,
) -> Result<Array> {
    let out_shape = dequantized_shape("dequantize", wq, scales, biases, group_size, bits)?;
    let prim = Dequantize {
        group: group_size,
        bits,
    };
    prim.apply(wq, scales, biases, &out_shape)
}

/// Checks the packed matrix's parts; returns the dequantized shape.
pub(crate) fn dequantized_shape(
    op: &'static str,
    wq: &Array,
    scales: &Array,
    biases: &Array,
    group_size: usize,
    bits: usize,
) -> Result<Vec<usize>> {
    check_params(op, group_size, bits)?;
    if wq.dtype() != DType::U32 {
        return Err(Error::invalid(
            op,
            format!("the packed values must be u32, got {}", wq.dtype()),
        ));
    }
    if !quant_float(scales.dtype()) || biases.dtype() != scales.dtype() {
        return Err(Error::invalid(
            op,
            format!(
                "scales and biases must share one float dtype (f32, f16 or bf16), got {} and {}",
                scales.dtype(),
                biases.dtype()
            ),
        ));
    }
    let (ws, ss) = (wq.shape(), scales.shape());
    let lead = |s: &[usize]| s[..s.len().saturating_sub(1)].to_vec();
    let fits = !ws.is_empty()
        && ss == biases.shape()
        && ws.len() == ss.len()
        && lead(ws) == lead(ss)
        && ws[ws.len() - 1] * 32 == ss[ss.len() - 1] * group_size * bits;
    if !fits {
        return Err(Error::invalid(
            op,
            format!(
                "packed values {ws:?}, scales {ss:?} and biases {:?} do not fit together for group_size {group_size} and bits {bits} (the values' last axis times 32 / bits must be the scales' times group_size, the other axes equal)",
                biases.shape()
            ),
        ));
    }
    let mut out = ws.to_vec();
    *out.last_mut().expect("rank") = ws[ws.len() - 1] * 32 / bits;
    Ok(out)
}

/// `x @ dequantize(w).T` (`transpose`, MLX's default: `w` is `[.., N, K]`, the
/// layout of a linear layer's weight) or `x @ dequantize(w)` (`w` is `[.., K, N]`,
/// quantized along N), as MLX's `mx.quantized_matmul`, accumulated in f32 and
/// returned in x's dtype, which must be the scales' dtype. `x` is `[.., M, K]` (or
/// `[K]`); leading axes broadcast as in [`crate::matmul`].
///
/// Up to 8 rows of `x` (decoding) against a 2-D transposed matrix run one kernel
/// that reads the packed values once; other shapes dequantize the matrix and
/// multiply (prefill, where the product dominates). Differentiable in `x`,
/// `scales` and `biases` (through the dequantized matrix).
pub fn quantized_matmul(
    x: &Array,
    wq: &Array,
    scales: &Array,
    biases: &Array,
    transpose: bool,
    group_size: usize,
    bits: usize,
) -> Result<Array> {
    quantized_matmul_plus(x, wq, scales, biases, transpose, group_size, bits, None)
}

/// [`quantized_matmul`] plus `addend` (of the product's shape and dtype), added
/// by the matrix-vector kernel before it rounds its output where that kernel
/// runs (a residual connection without a pass of its own), else by an add.
#[allow(clippy::too_many_arguments)]
pub(crate) fn quantized_matmul_plus(
    x: &Array,
    wq: &Array,
    scales: &Array,
    biases: &Array,
    transpose: bool,
    group_size: usize,
    bits: usize,
    addend: Option<&Array>,
) -> Result<Array> {
    const OP: &str = "quantized_matmul";
    let wshape = dequantized_shape(OP, wq, scales, biases, group_size, bits)?;
    if x.dtype() != scales.dtype() {
        return Err(Error::invalid(
            OP,
            format!(
                "x ({}) must have the scales' dtype ({})",
                x.dtype(),
                scales.dtype()
            ),
        ));
    }
    if wshape.len() < 2 || x.ndim() == 0 {
        return Err(Error::invalid(
            OP,
            format!(
                "x must have rank 1 or more and the matrix rank 2 or more, got x {:?} and matrix {wshape:?}",
                x.shape()
            ),
        ));
    }
    let r = wshape.len();
    let (k, n) = if transpose {
        (wshape[r - 1], wshape[r - 2])
    } else {
        (wshape[r - 2], wshape[r - 1])
    };
    let xk = x.shape()[x.ndim() - 1];
    if xk != k {
        return Err(Error::invalid(
            OP,
            format!(
                "x's last axis ({xk}) must match the matrix's inner length {k} (matrix {wshape:?}, transpose {transpose})"
            ),
        ));
    }
    let rows: usize = x.shape()[..x.ndim() - 1].iter().product();
    // 16-bit outputs are written two columns to a word.
    let matvec = transpose
        && r == 2
        && (1..=MATVEC_ROWS).contains(&rows)
        && n.is_multiple_of(4 / x.dtype().size());
    let mut out = x.shape().to_vec();
    *out.last_mut().expect("rank checked") = n;
    let fits = addend.is_none_or(|c| c.shape() == out && c.dtype() == x.dtype());
    if !matvec || !fits {
        let y = composed(x, wq, scales, biases, transpose, group_size, bits)?;
        return match addend {
            Some(c) => crate::add(&y, c),
            None => Ok(y),
        };
    }
    let prim = QuantizedMatvec {
        group: group_size,
        bits,
    };
    let fwd = move |a: &[Array]| -> Result<Vec<Array>> {
        let c = |a: &Array| crate::stop_gradient(a);
        let add = a.get(4).map(c).transpose()?;
        Ok(vec![prim.run(
            &c(&a[0])?,
            &a[1],
            &c(&a[2])?,
            &c(&a[3])?,
            add.as_ref(),
        )?])
    };
    // Derivatives differentiate the composed form (x, scales, biases and the
    // addend; the packed values are integers).
    let reference = move |wq: Array| {
        move |a: &[Array]| -> Result<Vec<Array>> {
            let y = composed(&a[0], &wq, &a[1], &a[2], true, group_size, bits)?;
            Ok(vec![match a.get(3) {
                Some(c) => crate::add(&y, c)?,
                None => y,
            }])
        }
    };
    // The differentiable inputs' positions among the call's.
    let floats: &'static [usize] = match addend {
        Some(_) => &[0, 2, 3, 4],
        None => &[0, 2, 3],
    };
    let floats_of = move |a: &[Array]| floats.iter().map(|&i| a[i].clone()).collect::<Vec<_>>();
    let f = CustomFunction::new(fwd)
        .name(OP)
        .vjp(move |a, _, ct| {
            let (_, g) = crate::vjp(reference(a[1].clone()), &floats_of(a), ct)?;
            let mut g = g.into_iter();
            let mut out = vec![g.next(), None];
            out.extend(g.map(Some));
            Ok(out)
        })
        .jvp(move |a, t| {
            let t: Vec<Array> = floats
                .iter()
                .map(|&i| t[i].clone().map_or_else(|| crate::zeros_like(&a[i]), Ok))
                .collect::<Result<_>>()?;
            Ok(crate::jvp(reference(a[1].clone()), &floats_of(a), &t)?.1)
        });
    let mut args = vec![x.clone(), wq.clone(), scales.clone(), biases.clone()];
    args.extend(addend.cloned());
    Ok(f.call(&args)?.remove(0))
}

/// [`quantized_matmul`] with the matrices (and optionally the rows of `x`)
/// gathered by index, MLX's `mx.gather_qmm`: a mixture-of-experts layer's
/// product. `wq`, `scales` and `biases` hold a stack of matrices (`[E, ..]`:
/// their leading axes flattened are the experts); `x` is `[.., M, K]`, its leading
/// axes flattened its batches. Output batch `i` multiplies `x`'s batch
/// `lhs_indices[i]` (or `i` itself) by matrix `rhs_indices[i]` (or `i`): the
/// index arrays (integers, broadcast together) give the output's leading shape,
/// `[.., M, N]`. Out-of-range indices are an `Err` when evaluated, as in
/// [`crate::take`]. Differentiable in `x`, `scales` and `biases`.
#[allow(clippy::too_many_arguments)]
pub fn gather_qmm(
    x: &Array,
    wq: &Array,
    scales: &Array,
    biases: &Array,
    lhs_indices: Option<&Array>,
    rhs_indices: Option<&Array>,
    transpose: bool,
    group_size: usize,
    bits: usize,
) -> Result<Array> {
    const OP: &str = "gather_qmm";
    dequantized_shape(OP, wq, scales, biases, group_size, bits)?;
    if wq.ndim() < 3 || x.ndim() < 2 {
        return Err(Error::invalid(
            OP,
            format!(
                "x must be [.., M, K] and the matrices a stack [E, .., rows, cols], got x {:?} and packed values {:?}",
                x.shape(),
                wq.shape()
            ),
        ));
    }
    for ix in [lhs_indices, rhs_indices].into_iter().flatten() {
        if !ix.dtype().is_int() {
            return Err(Error::invalid(
                OP,
                format!("indices must be integers, got {}", ix.dtype()),
            ));
        }
    }
    // Stacks as [batches, rows, cols], then the gathered batches.
    let stack = |a: &Array| -> Result<Array> {
        let s = a.shape();
        let tail = isize_shape(&s[s.len() - 2..]);
        crate::reshape(a, &[[-1isize].as_slice(), &tail].concat())
    };
    let pick = |a: &Array, ix: Option<&Array>| -> Result<Array> {
        match ix {
            Some(ix) => crate::take(&stack(a)?, ix, Some(0)),
            None => Ok(a.clone()),
        }
    };
    let xs = pick(x, lhs_indices)?;
    let (w, s, b) = (
        pick(wq, rhs_indices)?,
        pick(scales, rhs_indices)?,
        pick(biases, rhs_indices)?,
    );
    quantized_matmul(&xs, &w, &s, &b, transpose, group_size, bits)
}

/// The product through the dequantized matrix.
fn composed(
    x: &Array,
    wq: &Array,
    scales: &Array,
    biases: &Array,
    transpose: bool,
    group_size: usize,
    bits: usize,
) -> Result<Array> {
    let w = dequantize(wq, scales, biases, group_size, bits)?;
    let w = if transpose {
        crate::swapaxes(&w, -1, -2)?
    } else {
        w
    };
    crate::matmul(x, &w)
}

/// The quantize primitive (input: row-major f32, f16 or bf16 `w`): with `params`,
/// each group's f32 scale and bias (`[.., groups, 2]`), else the packed values
/// (u32). Public for the GPU backends, which run it through
/// `wmx_kernels::Kernels::quantize`.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantize {
    /// Values per group.
    pub group: usize,
    /// Bits per value.
    pub bits: usize,
    /// Scales and biases instead of the packed values.
    pub params: bool,
}

/// A group's scale and bias: MLX's rule (`mlx/backend/cpu/quantized.cpp`) in f32.
fn group_params(w: &[f32], bits: usize) -> (f32, f32) {
    if w.iter().any(|v| !v.is_finite()) {
        return (f32::NAN, f32::NAN);
    }
    let n_bins = ((1u32 << bits) - 1) as f32;
    let (lo, hi) = w
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    let mask = lo.abs() > hi.abs();
    let mut scale = ((hi - lo) / n_bins).max(1e-7);
    if !mask {
        scale = -scale;
    }
    let edge = if mask { lo } else { hi };
    let q0 = (edge / scale).round_ties_even();
    if q0 != 0.0 {
        (edge / q0, edge)
    } else {
        (scale, 0.0)
    }
}

impl CustomPrimitive for Quantize {
    fn name(&self) -> &str {
        "quantize"
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let w: Vec<f32> = floats("quantize", &inputs[0])?
            .into_iter()
            .map(|v| v as f32)
            .collect();
        let n_bins = ((1u32 << self.bits) - 1) as f32;
        let words = self.group * self.bits / 32;
        let buf = &mut *out.buffer;
        if self.params {
            let o = buf.as_mut_slice::<f32>();
            for (g, vals) in w.chunks(self.group).enumerate() {
                let (s, b) = group_params(vals, self.bits);
                o[2 * g] = s;
                o[2 * g + 1] = b;
            }
            return Ok(());
        }
        let o = buf.as_mut_slice::<u32>();
        for (g, vals) in w.chunks(self.group).enumerate() {
            let (s, b) = group_params(vals, self.bits);
            let stream = &mut o[g * words..(g + 1) * words];
            if s.is_nan() {
                continue;
            }
            for (i, &v) in vals.iter().enumerate() {
                let q = ((v - b) / s).round_ties_even().clamp(0.0, n_bins) as u64;
                let bit = i * self.bits;
                let (at, sh) = (bit / 32, bit % 32);
                let wide = q << sh;
                stream[at] |= wide as u32;
                if sh + self.bits > 32 {
                    stream[at + 1] |= (wide >> 32) as u32;
                }
            }
        }
        Ok(())
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<Quantize>()
            .is_some_and(|o| o == self)
    }

    fn jvp(&self, _: &[Array], _: &Array, _: &[Option<Array>]) -> Result<Option<Array>> {
        Err(not_differentiable())
    }

    fn vjp(&self, _: &[Array], _: &Array, _: &Array) -> Result<Vec<Option<Array>>> {
        Err(not_differentiable())
    }

    fn vmap(&self, inputs: &[Array], _: &[bool]) -> Result<Array> {
        // Groups lie along the last axis: a leading batch axis is one more row axis.
        let w = crate::contiguous(&inputs[0])?;
        let mut shape = w.shape().to_vec();
        let k = shape.pop().expect("rank");
        shape.push(k / self.group);
        let dtype = if self.params {
            shape.push(2);
            DType::F32
        } else {
            *shape.last_mut().expect("rank") = k * self.bits / 32;
            DType::U32
        };
        crate::custom(Arc::new(self.clone()), &[w], &shape, dtype)
    }
}

/// The inputs of a vmapped primitive, each with the batch axis in front (the
/// unbatched ones broadcast along it).
fn batch_all(inputs: &[Array], batched: &[bool]) -> Result<Vec<Array>> {
    let v = inputs
        .iter()
        .zip(batched)
        .find(|(_, b)| **b)
        .map_or(1, |(a, _)| a.shape()[0]);
    inputs
        .iter()
        .zip(batched)
        .map(|(a, &b)| {
            if b {
                return Ok(a.clone());
            }
            let mut s = vec![v];
            s.extend(a.shape());
            crate::broadcast_to(a, &s)
        })
        .collect()
}

fn not_differentiable() -> Error {
    Error::invalid(
        "quantize",
        "quantization is not differentiable (its values are rounded integers)",
    )
}

/// Value `i` of the bit stream `words`.
fn unpack(words: &[u32], i: usize, bits: usize) -> u32 {
    let bit = i * bits;
    let (at, sh) = (bit / 32, bit % 32);
    let mut v = (words[at] as u64) >> sh;
    if sh + bits > 32 {
        v |= (words[at + 1] as u64) << (32 - sh);
    }
    (v as u32) & ((1u32 << bits) - 1)
}

/// The dequantize primitive (inputs: row-major u32 words, scales and biases of
/// one float dtype). Public for the GPU backends, which run it through
/// `wmx_kernels::Kernels::dequantize`.
#[derive(Debug, Clone, PartialEq)]
pub struct Dequantize {
    /// Values per group.
    pub group: usize,
    /// Bits per value.
    pub bits: usize,
}

impl Dequantize {
    fn apply(&self, wq: &Array, scales: &Array, biases: &Array, shape: &[usize]) -> Result<Array> {
        let inputs = [
            crate::contiguous(wq)?,
            crate::contiguous(scales)?,
            crate::contiguous(biases)?,
        ];
        crate::custom(Arc::new(self.clone()), &inputs, shape, scales.dtype())
    }

    /// The integers q of `wq` in `like`'s dtype and shape (scale 1, bias 0).
    fn levels(&self, wq: &Array, like: &Array, shape: &[usize]) -> Result<Array> {
        self.apply(
            wq,
            &crate::ones_like(like)?,
            &crate::zeros_like(like)?,
            shape,
        )
    }

    /// `x` ([.., K]) as [.., K / group, group].
    fn grouped(&self, x: &Array) -> Result<Array> {
        let mut s = isize_shape(x.shape());
        let k = s.pop().expect("rank");
        s.extend([k / self.group as isize, self.group as isize]);
        crate::reshape(x, &s)
    }
}

impl CustomPrimitive for Dequantize {
    fn name(&self) -> &str {
        "dequantize"
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let wv = &inputs[0];
        let words =
            &wv.buffer.as_slice::<u32>()[wv.layout.offset..wv.layout.offset + wv.layout.numel()];
        let (s, b) = (
            floats("dequantize", &inputs[1])?,
            floats("dequantize", &inputs[2])?,
        );
        // MLX's arithmetic: s * q rounded to the dtype, then + b rounded (f16 and
        // bf16 operations are f32 ones rounded back).
        let round: fn(f32) -> f32 = match out.dtype {
            DType::F16 => |v| half::f16::from_f32(v).to_f32(),
            DType::BF16 => |v| half::bf16::from_f32(v).to_f32(),
            _ => |v| v,
        };
        let gw = self.group * self.bits / 32;
        let n: usize = out.shape.iter().product();
        let res: Vec<f64> = (0..n)
            .map(|e| {
                let g = e / self.group;
                let q = unpack(&words[g * gw..(g + 1) * gw], e % self.group, self.bits);
                let sq = round(s[g] as f32 * q as f32);
                round(sq + b[g] as f32) as f64
            })
            .collect();
        store_floats("dequantize", out, &res)
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<Dequantize>()
            .is_some_and(|o| o == self)
    }

    fn jvp(
        &self,
        primals: &[Array],
        out: &Array,
        tangents: &[Option<Array>],
    ) -> Result<Option<Array>> {
        let q = self.grouped(&self.levels(&primals[0], &primals[1], out.shape())?)?;
        let mut t: Option<Array> = None;
        if let Some(ts) = &tangents[1] {
            t = Some(crate::multiply(&q, &crate::expand_dims(ts, -1)?)?);
        }
        if let Some(tb) = &tangents[2] {
            let tb = crate::broadcast_to(&crate::expand_dims(tb, -1)?, q.shape())?;
            t = Some(match t {
                Some(t) => crate::add(&t, &tb)?,
                None => tb,
            });
        }
        t.map(|t| crate::reshape(&t, &isize_shape(out.shape())))
            .transpose()
    }

    fn vjp(&self, primals: &[Array], out: &Array, ct: &Array) -> Result<Vec<Option<Array>>> {
        let q = self.grouped(&self.levels(&primals[0], &primals[1], out.shape())?)?;
        let ct = self.grouped(ct)?;
        let ds = crate::sum(&crate::multiply(&ct, &q)?, Some(&[-1]), false)?;
        let db = crate::sum(&ct, Some(&[-1]), false)?;
        Ok(vec![None, Some(ds), Some(db)])
    }

    fn vmap(&self, inputs: &[Array], batched: &[bool]) -> Result<Array> {
        // Every input gets the batch axis in front; the op maps over leading axes.
        let [wq, s, b] = &batch_all(inputs, batched)?[..] else {
            unreachable!("three inputs")
        };
        let mut shape = wq.shape().to_vec();
        *shape.last_mut().expect("rank") = shape[shape.len() - 1] * 32 / self.bits;
        self.apply(wq, s, b, &shape)
    }
}

/// The quantized matrix-vector primitive (inputs: row-major x `[M, K]` with M at
/// most 8, and the transposed quantized matrix `[N, K]`: words, scales, biases,
/// row-major; a fifth input `[M, N]` is added to the product). Public for the GPU
/// backends, which run it through
/// `wmx_kernels::Kernels::qmv`.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedMatvec {
    /// Values per group.
    pub group: usize,
    /// Bits per value.
    pub bits: usize,
}

impl QuantizedMatvec {
    /// `x` (`[.., K]`) times the matrix's transpose, shaped `[.., N]`, plus
    /// `addend` (of that shape) if any: a fifth input.
    fn run(
        &self,
        x: &Array,
        wq: &Array,
        scales: &Array,
        biases: &Array,
        addend: Option<&Array>,
    ) -> Result<Array> {
        let k = x.shape()[x.ndim() - 1];
        let n = scales.shape()[0];
        let x2 = crate::contiguous(&crate::reshape(x, &[-1, k as isize])?)?;
        let mut inputs = vec![
            x2.clone(),
            crate::contiguous(wq)?,
            crate::contiguous(scales)?,
            crate::contiguous(biases)?,
        ];
        if let Some(c) = addend {
            inputs.push(crate::contiguous(&crate::reshape(c, &[-1, n as isize])?)?);
        }
        let y = crate::custom(
            Arc::new(self.clone()),
            &inputs,
            &[x2.shape()[0], n],
            x.dtype(),
        )?;
        let mut shape = isize_shape(&x.shape()[..x.ndim() - 1]);
        shape.push(n as isize);
        crate::reshape(&y, &shape)
    }
}

impl CustomPrimitive for QuantizedMatvec {
    fn name(&self) -> &str {
        "quantized_matvec"
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        const OP: &str = "quantized_matmul";
        let x = floats(OP, &inputs[0])?;
        let wv = &inputs[1];
        let words =
            &wv.buffer.as_slice::<u32>()[wv.layout.offset..wv.layout.offset + wv.layout.numel()];
        let (s, b) = (floats(OP, &inputs[2])?, floats(OP, &inputs[3])?);
        let (m, k) = (inputs[0].layout.shape[0], inputs[0].layout.shape[1]);
        let n = out.shape[1];
        let (gk, rw) = (k / self.group, k * self.bits / 32);
        let mut res = match inputs.get(4) {
            Some(c) => floats(OP, c)?,
            None => vec![0.0f64; m * n],
        };
        for j in 0..n {
            let row = &words[j * rw..(j + 1) * rw];
            for kk in 0..k {
                let g = j * gk + kk / self.group;
                let w = s[g] * unpack(row, kk, self.bits) as f64 + b[g];
                for i in 0..m {
                    res[i * n + j] += x[i * k + kk] * w;
                }
            }
        }
        store_floats(OP, out, &res)
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<QuantizedMatvec>()
            .is_some_and(|o| o == self)
    }

    fn vmap(&self, inputs: &[Array], batched: &[bool]) -> Result<Array> {
        if inputs.len() == 5 {
            // With an addend: the composed product plus the addend, batched.
            let a = batch_all(inputs, batched)?;
            let y = composed(&a[0], &a[1], &a[2], &a[3], true, self.group, self.bits)?;
            return crate::add(&y, &a[4]);
        }
        if batched[1..].iter().any(|&b| b) {
            // A batch of matrices: through the dequantized matrices.
            let a = batch_all(inputs, batched)?;
            return composed(&a[0], &a[1], &a[2], &a[3], true, self.group, self.bits);
        }
        // A batch of x's: more rows, which may take the other path.
        let x = &inputs[0];
        let (v, m, k) = (x.shape()[0], x.shape()[1], x.shape()[2]);
        let x = crate::reshape(x, &[(v * m) as isize, k as isize])?;
        let (wq, s, b) = (&inputs[1], &inputs[2], &inputs[3]);
        let y = quantized_matmul(&x, wq, s, b, true, self.group, self.bits)?;
        crate::reshape(&y, &[v as isize, m as isize, -1])
    }
}
