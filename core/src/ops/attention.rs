//! Scaled dot-product attention: a fused flash-attention primitive for the masks
//! it takes (none, causal, sliding window) and head dimensions that are multiples
//! of 4 up to 256 in f32, f16 and bf16; the composed form (matmuls and a softmax)
//! for every other call, and as the rule of the fused path's derivatives.

use crate::cpu::CpuBuffer;
use crate::cpu::floats::{floats, store_floats};
use crate::{Array, CpuOutput, CustomFunction, CustomPrimitive, DType, Error, Result, View};
use std::sync::Arc;

/// Which keys each query attends to in [`scaled_dot_product_attention`].
#[derive(Clone, Copy, Debug)]
pub enum AttentionMask<'a> {
    /// Every key.
    None,
    /// Keys up to the query's position, aligned to the end when there are fewer
    /// queries than keys (a decode step with a KV cache): query `i` attends key
    /// `j` when `j <= i + Lk - Lq`.
    Causal,
    /// Causal, and only the last `window` keys up to the query's position
    /// (`i + Lk - Lq - window < j <= i + Lk - Lq`).
    SlidingWindow(usize),
    /// A boolean array broadcastable to `[B, Hq, Lq, Lk]`: true where the query
    /// attends the key.
    Bool(&'a Array),
    /// An array broadcastable to `[B, Hq, Lq, Lk]` added to the scaled scores
    /// (`-inf` excludes a key).
    Additive(&'a Array),
}

/// `softmax(q kᵀ · scale + mask) v` over keys, for `q` `[B, Hq, Lq, D]` and `k`,
/// `v` `[B, Hkv, Lk, D]` / `[B, Hkv, Lk, Dv]` with `Hq` a multiple of `Hkv`
/// (grouped-query and multi-query attention: query head `h` reads key head
/// `h / (Hq / Hkv)`); `scale` defaults to `1/√D`. Float inputs of one dtype; the
/// scores and the softmax are computed in f32 for f16 and bf16 inputs.
///
/// A query whose keys are all masked gets zeros (PyTorch gives NaN there, MLX
/// leaves it unspecified), and no gradient.
///
/// **Paths.** With no mask, a causal mask or a sliding window, `D == Dv` a
/// multiple of 4 up to 256, and f32, f16 or bf16 inputs, one fused kernel computes
/// the output (flash attention: an online softmax over key tiles, no `Lq x Lk`
/// array in memory; grouped query heads share their key tiles; with few query
/// rows and many keys, the keys are cut into chunks whose partial results are
/// combined: split-KV decoding; on a GPU with subgroups, f16 and bf16 calls of at
/// most four rows per key head, head dimensions 32, 64 or 128 and key/value rows
/// on 16 bytes take a kernel that streams the keys from memory with no tiles in
/// workgroup memory). On a GPU with cooperative matrices (tensor
/// cores), f16 calls of at least 64 rows per key head (query positions times
/// grouped heads), 16 keys or more, head dimensions that are multiples of 16 up to
/// 128 and key/value rows on 16 bytes take a kernel on them; its weights are
/// rounded to f16 before they multiply v, as FlashAttention's are. Its derivatives
/// (vjp, jvp) recompute the composed form, which holds the `Lq x Lk` scores; inside a reverse-mode transform (`grad`,
/// `vjp`, a training step) a call whose f32 scores take at most 256 MiB runs the
/// composed form in the forward instead, and its backward reuses the scores and
/// weights rather than recomputing them ([`with_attention_recompute`] keeps the
/// flash forward and the recomputation). Every other call (boolean and additive
/// masks, f64, other head dimensions) is composed of ops: matmuls and a softmax.
pub fn scaled_dot_product_attention(
    q: &Array,
    k: &Array,
    v: &Array,
    scale: Option<f64>,
    mask: AttentionMask<'_>,
) -> Result<Array> {
    let fused = match mask {
        AttentionMask::None => Some((0, 0)),
        AttentionMask::Causal => Some((1, 0)),
        AttentionMask::SlidingWindow(w) if w > 0 => Some((2, w)),
        _ => None,
    };
    let (qs, vs) = (q.shape(), v.shape());
    let takes = qs.len() == 4
        && vs.len() == 4
        && qs[3] == vs[3]
        && qs[3].is_multiple_of(4)
        && qs[3] <= 256
        && matches!(q.dtype(), DType::F32 | DType::F16 | DType::BF16);
    // Differentiated, the composed form's scores and weights are what the backward
    // reads: made in the forward (where they fit a budget), the backward reuses
    // them, where the flash forward would be followed by their recomputation.
    let (b, hq, lq, lk) = (qs.first(), qs.get(1), qs.get(2), k.shape().get(2));
    let scores = [b, hq, lq, lk]
        .iter()
        .map(|d| d.copied().unwrap_or(0) as u64)
        .product::<u64>()
        * 4;
    let saved = crate::transforms::differentiating()
        && !RECOMPUTE.with(std::cell::Cell::get)
        && [q, k, v].iter().any(|x| x.is_traced())
        && scores <= SAVED_SCORES;
    match (fused, takes.then(|| check(q, k, v, scale))) {
        (Some((kind, window)), Some(Ok(scale))) if !saved => flash(q, k, v, scale, kind, window),
        _ => composed(q, k, v, scale, mask),
    }
}

/// The most bytes of f32 scores a differentiated call keeps from its forward for
/// its backward (more: the flash forward, the backward recomputes them).
const SAVED_SCORES: u64 = 256 << 20;

thread_local! {
    /// Set by [`with_attention_recompute`].
    static RECOMPUTE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with differentiated [`scaled_dot_product_attention`] calls on this
/// thread taking the flash forward and recomputing their scores in the backward,
/// whatever their size: less memory between the forward and the backward (no
/// `Lq x Lk` array per call), more work.
pub fn with_attention_recompute<R>(f: impl FnOnce() -> R) -> R {
    crate::scoped::with_cell(&RECOMPUTE, true, f)
}

fn mask_of(kind: u8, window: usize) -> AttentionMask<'static> {
    match kind {
        0 => AttentionMask::None,
        1 => AttentionMask::Causal,
        _ => AttentionMask::SlidingWindow(window),
    }
}

/// The fused path (checked inputs): the flash primitive (and, with key chunks,
/// the one that combines them), with the composed form's derivatives as its
/// rules; vmap batches it as written (the primitives fold the mapped axis into
/// the batch).
fn flash(q: &Array, k: &Array, v: &Array, scale: f64, kind: u8, window: usize) -> Result<Array> {
    // The rules below give every derivative: the primitive's inputs are constants
    // to the transforms (it has no rules of its own).
    let fwd = move |x: &[Array]| -> Result<Vec<Array>> {
        let c = |a: &Array| crate::stop_gradient(a);
        Ok(vec![Flash::run(
            &c(&x[0])?,
            &c(&x[1])?,
            &c(&x[2])?,
            scale,
            kind,
            window,
        )?])
    };
    // The derivatives differentiate the composed form (it holds the Lq x Lk scores).
    let reference = move |x: &[Array]| -> Result<Vec<Array>> {
        let mask = mask_of(kind, window);
        Ok(vec![composed(&x[0], &x[1], &x[2], Some(scale), mask)?])
    };
    let f = CustomFunction::new(fwd)
        .name("scaled_dot_product_attention")
        .rules_from(reference);
    Ok(f.call(&[q.clone(), k.clone(), v.clone()])?.remove(0))
}

/// The fused attention primitive (inputs q, k, v with their last axis contiguous):
/// the normalised output, or with `splits > 1` f32 partial results per chunk of
/// `chunk` keys (`[splits, B, Hq, Lq, D + 2]`: the unnormalised sum, the maximum
/// score in natural-log units, the sum of weights). Public for the GPU backends,
/// which run it through `wmx_kernels::Kernels::flash_attention`.
#[derive(Debug, Clone, PartialEq)]
pub struct Flash {
    /// Multiplies the scores.
    pub scale: f32,
    /// 0: no mask; 1: causal; 2: sliding window.
    pub mask: u8,
    /// The sliding window's keys.
    pub window: usize,
    /// Chunks of the keys (1: the normalised output).
    pub splits: usize,
    /// Keys per chunk.
    pub chunk: usize,
}

/// Workgroups the split-KV path aims for: enough to fill a large GPU, few
/// enough that combining the chunks stays cheap (run 71).
const SPLIT_TARGET: usize = 512;
/// The split-KV path's fewest keys per chunk.
const SPLIT_MIN: usize = 64;
/// Calls with fewer workgroups than this (about one per compute unit of a large
/// GPU) split their keys.
const SPLIT_BELOW: usize = 128;
/// The maximum score of a chunk with no key (the kernels' value: finite, so
/// differences of it never make NaN).
const NO_KEY: f64 = -3.0e38;
/// The name the CPU code's errors give.
const OP: &str = "scaled_dot_product_attention";

impl Flash {
    /// The output of the fused path: one primitive, then (with key chunks)
    /// [`FlashCombine`].
    fn run(q: &Array, k: &Array, v: &Array, scale: f64, mask: u8, window: usize) -> Result<Array> {
        let (qs, ks) = (q.shape(), k.shape());
        let (b, hq, lq, d) = (qs[0], qs[1], qs[2], qs[3]);
        let (hkv, lk) = (ks[1], ks[2]);
        // Few workgroups (decoding: few rows per key head) and many keys: chunks of
        // at least SPLIT_MIN keys until about SPLIT_TARGET workgroups run.
        let blocks = b * hkv * (hq / hkv * lq).div_ceil(64);
        let splits = if blocks < SPLIT_BELOW {
            (SPLIT_TARGET / blocks.max(1)).min(lk / SPLIT_MIN).max(1)
        } else {
            1
        };
        let chunk = lk.div_ceil(splits).max(1);
        let splits = lk.div_ceil(chunk).max(1);
        let prim = Flash {
            scale: scale as f32,
            mask,
            window,
            splits,
            chunk,
        };
        let inputs = [
            last_contiguous(q)?,
            last_contiguous(k)?,
            last_contiguous(v)?,
        ];
        if splits == 1 {
            return crate::custom(Arc::new(prim), &inputs, qs, q.dtype());
        }
        let parts = crate::custom(
            Arc::new(prim),
            &inputs,
            &[splits, b, hq, lq, d + 2],
            DType::F32,
        )?;
        let combine = FlashCombine { dtype: q.dtype() };
        crate::custom(Arc::new(combine), &[parts], qs, q.dtype())
    }
}

/// The split-KV combine: [`Flash`]'s partial results (`[splits, B, Hq, Lq, D + 2]`
/// f32, row-major) into the normalised output `[B, Hq, Lq, D]` of `dtype`. Public
/// for the GPU backends, which run it through `wmx_kernels::Kernels::flash_combine`.
#[derive(Debug, Clone, PartialEq)]
pub struct FlashCombine {
    /// The output's dtype (q's).
    pub dtype: DType,
}

impl CustomPrimitive for FlashCombine {
    fn name(&self) -> &str {
        "flash_combine"
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let parts = floats(OP, &inputs[0])?;
        let d = *out.shape.last().unwrap_or(&0);
        let splits = inputs[0].layout.shape[0];
        let rows: usize = out.shape[..out.shape.len() - 1].iter().product();
        let w = d + 2;
        let mut res = vec![0.0f64; rows * d];
        for r in 0..rows {
            let at = |s: usize| (s * rows + r) * w;
            let top = (0..splits).map(|s| parts[at(s) + d]).fold(NO_KEY, f64::max);
            let mut total = 0.0;
            let o = &mut res[r * d..(r + 1) * d];
            for s in 0..splits {
                let m = parts[at(s) + d];
                let f = if m <= NO_KEY { 0.0 } else { (m - top).exp() };
                total += f * parts[at(s) + d + 1];
                for (t, o) in o.iter_mut().enumerate() {
                    *o += f * parts[at(s) + t];
                }
            }
            let inv = if total > 0.0 { 1.0 / total } else { 0.0 };
            o.iter_mut().for_each(|x| *x *= inv);
        }
        store_floats(OP, out, &res)
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<FlashCombine>()
            .is_some_and(|o| o == self)
    }

    fn vmap(&self, inputs: &[Array], _: &[bool]) -> Result<Array> {
        // [V, S, rows..., D + 2] -> [S, V * rows[0], rows[1..]..., D + 2].
        let p = crate::moveaxis(&inputs[0], 0, 1)?;
        let s = p.shape().to_vec();
        let mut merged: Vec<isize> = vec![s[0] as isize, (s[1] * s[2]) as isize];
        merged.extend(s[3..].iter().map(|&x| x as isize));
        let p = crate::contiguous(&crate::reshape(&p, &merged)?)?;
        let mut out: Vec<usize> = p.shape()[1..].to_vec();
        *out.last_mut().expect("rank") -= 2;
        let o = crate::custom(Arc::new(self.clone()), &[p], &out, self.dtype)?;
        let mut back: Vec<isize> = vec![s[1] as isize, s[2] as isize];
        back.extend(out[1..].iter().map(|&x| x as isize));
        crate::reshape(&o, &back)
    }
}

/// `x`, or a row-major copy where its last axis is not contiguous or a stride is
/// negative (the kernel reads rows in place).
fn last_contiguous(x: &Array) -> Result<Array> {
    let st = &x.layout().strides;
    if st.last().is_none_or(|&s| s == 1) && st.iter().all(|&s| s >= 0) {
        return Ok(x.clone());
    }
    crate::contiguous(x)
}

impl Flash {
    /// One row's output: its keys' softmax-weighted values over the keys in
    /// `range`, in f64; returns (unnormalised sum, max score, sum of weights).
    #[allow(clippy::too_many_arguments)]
    fn row(
        &self,
        q: &[f64],
        keys: &[f64],
        vals: &[f64],
        d: usize,
        range: std::ops::Range<usize>,
        band: (i64, i64),
        out: &mut [f64],
    ) -> (f64, f64) {
        let mut scores = Vec::with_capacity(range.len());
        let mut top = f64::NEG_INFINITY;
        for j in range.clone() {
            let jj = j as i64;
            if jj < band.0 || jj > band.1 {
                scores.push(f64::NEG_INFINITY);
                continue;
            }
            let kr = &keys[j * d..(j + 1) * d];
            let s: f64 = q.iter().zip(kr).map(|(a, b)| a * b).sum::<f64>() * self.scale as f64;
            top = top.max(s);
            scores.push(s);
        }
        out.iter_mut().for_each(|o| *o = 0.0);
        if top == f64::NEG_INFINITY {
            return (top, 0.0);
        }
        let mut l = 0.0;
        for (s, j) in scores.iter().zip(range) {
            if *s == f64::NEG_INFINITY {
                continue;
            }
            let p = (s - top).exp();
            l += p;
            for (o, x) in out.iter_mut().zip(&vals[j * d..(j + 1) * d]) {
                *o += p * x;
            }
        }
        (top, l)
    }
}

impl CustomPrimitive for Flash {
    fn name(&self) -> &str {
        "flash_attention"
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let (q, k, v) = (
            floats(OP, &inputs[0])?,
            floats(OP, &inputs[1])?,
            floats(OP, &inputs[2])?,
        );
        let (qs, ks) = (&inputs[0].layout.shape, &inputs[1].layout.shape);
        let (b, hq, lq, d) = (qs[0], qs[1], qs[2], qs[3]);
        let (hkv, lk) = (ks[1], ks[2]);
        let g = hq / hkv;
        let rows = b * hq * lq;
        let width = if self.splits > 1 { d + 2 } else { d };
        let mut res = vec![0.0f64; self.splits * rows * width];
        let mut acc = vec![0.0f64; d];
        for s in 0..self.splits {
            let range = s * self.chunk..((s + 1) * self.chunk).min(lk);
            for r in 0..rows {
                let (bh, pos) = (r / lq, r % lq);
                let (bi, h) = (bh / hq, bh % hq);
                let kv = (bi * hkv + h / g) * lk * d;
                let end = pos as i64 + lk as i64 - lq as i64;
                let band = match self.mask {
                    0 => (0, lk as i64),
                    1 => (0, end),
                    _ => (end - self.window as i64 + 1, end),
                };
                let qr = &q[r * d..(r + 1) * d];
                let (top, l) = self.row(
                    qr,
                    &k[kv..kv + lk * d],
                    &v[kv..kv + lk * d],
                    d,
                    range.clone(),
                    band,
                    &mut acc,
                );
                let o = &mut res[(s * rows + r) * width..(s * rows + r + 1) * width];
                if self.splits > 1 {
                    o[..d].copy_from_slice(&acc);
                    o[d] = top.max(NO_KEY);
                    o[d + 1] = l;
                } else {
                    let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
                    o.iter_mut().zip(&acc).for_each(|(o, a)| *o = a * inv);
                }
            }
        }
        store_floats(OP, out, &res)
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<Flash>()
            .is_some_and(|o| o == self)
    }

    fn vmap(&self, inputs: &[Array], batched: &[bool]) -> Result<Array> {
        let n = inputs
            .iter()
            .zip(batched)
            .find(|(_, b)| **b)
            .map_or(1, |(a, _)| a.shape()[0]);
        // The mapped axis folded into the batch axis.
        let merged: Vec<Array> = inputs
            .iter()
            .zip(batched)
            .map(|(a, &b)| {
                let a = if b {
                    a.clone()
                } else {
                    let mut s = vec![n];
                    s.extend(a.shape());
                    crate::broadcast_to(a, &s)?
                };
                let s = a.shape();
                let mut m = vec![(s[0] * s[1]) as isize];
                m.extend(s[2..].iter().map(|&d| d as isize));
                last_contiguous(&crate::reshape(&a, &m)?)
            })
            .collect::<Result<_>>()?;
        let (qs, b) = (merged[0].shape(), inputs[0].shape()[batched[0] as usize]);
        let split = |s: &[usize], at: usize| -> Vec<isize> {
            let mut r: Vec<isize> = s.iter().map(|&d| d as isize).collect();
            r.splice(at..=at, [n as isize, b as isize]);
            r
        };
        if self.splits == 1 {
            let o = crate::custom(Arc::new(self.clone()), &merged, qs, inputs[0].dtype())?;
            return crate::reshape(&o, &split(qs, 0));
        }
        let shape = [self.splits, qs[0], qs[1], qs[2], qs[3] + 2];
        let o = crate::custom(Arc::new(self.clone()), &merged, &shape, DType::F32)?;
        crate::moveaxis(&crate::reshape(&o, &split(&shape, 1))?, 1, 0)
    }
}

fn composed(
    q: &Array,
    k: &Array,
    v: &Array,
    scale: Option<f64>,
    mask: AttentionMask<'_>,
) -> Result<Array> {
    let op = "scaled_dot_product_attention";
    let bad = |msg: String| Err(Error::invalid(op, msg));
    let scale = check(q, k, v, scale)?;
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    let (b, hq, lq, d) = (qs[0], qs[1], qs[2], qs[3]);
    let (hkv, lk) = (ks[1], ks[2]);
    let dt = q.dtype();
    let g = hq / hkv;
    let i = |x: usize| x as isize;
    // Query heads grouped by their key head: one product per key head, no copy of
    // the keys.
    let qg = crate::reshape(q, &[i(b), i(hkv), i(g * lq), i(d)])?;
    let scores = crate::matmul(&qg, &crate::swapaxes(k, -1, -2)?)?;
    let work = if dt == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let scores = crate::multiply(
        &crate::astype(&scores, work)?,
        &crate::with_device(q.device(), || crate::scalar(scale, work))?,
    )?;
    let full = [b, hkv, g, lq, lk];
    let on = |f: &dyn Fn() -> Result<Array>| crate::with_device(q.device(), f);
    // Positions: the queries are the last Lq of the Lk.
    let band = |window: Option<usize>| -> Result<Array> {
        let qi = on(&|| crate::arange(0.0, lq as f64, 1.0, DType::I32))?.reshape(&[i(lq), 1])?;
        let kj = on(&|| crate::arange(0.0, lk as f64, 1.0, DType::I32))?.reshape(&[1, i(lk)])?;
        let end = crate::add(
            &qi,
            &on(&|| crate::scalar(lk as f64 - lq as f64, DType::I32))?,
        )?;
        let mut keep = crate::less_equal(&kj, &end)?;
        if let Some(w) = window {
            let start = crate::subtract(&end, &on(&|| crate::scalar(w as f64, DType::I32))?)?;
            keep = crate::logical_and(&keep, &crate::greater(&kj, &start)?)?;
        }
        Ok(keep)
    };
    let to_groups = |m: &Array, what: &str| -> Result<Array> {
        let m = crate::broadcast_to(m, &[b, hq, lq, lk]).map_err(|_| {
            Error::invalid(
                op,
                format!(
                    "the {what} mask {:?} does not broadcast to [B, Hq, Lq, Lk] = {:?}",
                    m.shape(),
                    [b, hq, lq, lk]
                ),
            )
        })?;
        crate::reshape(&m, &full.map(i))
    };
    let ninf = on(&|| crate::scalar(f64::NEG_INFINITY, work))?;
    // Positional masks are added as 0 / -inf biases of `[Lq, Lk]` (computed once
    // under compile): their gradient passes the add unchanged, where a select
    // costs a kernel over the scores on each side. They leave every row a key
    // when Lq <= Lk, so only other masks need the empty-row guard below.
    let bias = |keep: Array| -> Result<Array> {
        let zero = on(&|| crate::scalar(0.0, work))?;
        crate::where_(&keep, &zero, &ninf)
    };
    // A positional bias is added before the scores are split by group where a
    // key head has one query head: the add is then the product's addend when
    // compiled (no pass over the scores).
    let positional = match mask {
        AttentionMask::Causal => Some(band(None)?),
        AttentionMask::SlidingWindow(0) => return bad("a sliding window of 0 keys".into()),
        AttentionMask::SlidingWindow(w) => Some(band(Some(w))?),
        _ => None,
    };
    let scores = match &positional {
        Some(keep) if g == 1 => crate::add(&scores, &bias(keep.clone())?)?,
        _ => scores,
    };
    let mut s = crate::reshape(&scores, &full.map(i))?;
    let keep = match mask {
        AttentionMask::None => None,
        AttentionMask::Causal | AttentionMask::SlidingWindow(_) => {
            if let (Some(keep), true) = (positional, g > 1) {
                s = crate::add(&s, &bias(keep)?)?;
            }
            None
        }
        AttentionMask::Bool(m) => {
            if m.dtype() != DType::Bool {
                return bad(format!("a boolean mask must be bool, got {}", m.dtype()));
            }
            Some(to_groups(m, "boolean")?)
        }
        AttentionMask::Additive(m) => {
            if !m.dtype().is_float() {
                return bad(format!("an additive mask must be float, got {}", m.dtype()));
            }
            s = crate::add(&s, &to_groups(&crate::astype(m, work)?, "additive")?)?;
            None
        }
    };
    if let Some(keep) = &keep {
        s = crate::where_(keep, &s, &ninf)?;
    }
    let guard = match mask {
        AttentionMask::None => false,
        AttentionMask::Causal | AttentionMask::SlidingWindow(_) => lq > lk,
        AttentionMask::Bool(_) | AttentionMask::Additive(_) => true,
    };
    let p = if guard {
        // Rows with no key left: finite scores for the softmax, zero weights after.
        let empty = crate::equal(&crate::max(&s, Some(&[-1]), true)?, &ninf)?;
        let zero = crate::zeros_like(&ninf)?;
        let s = crate::where_(&empty, &zero, &s)?;
        crate::where_(&empty, &zero, &crate::softmax(&s, &[-1])?)?
    } else {
        crate::softmax(&s, &[-1])?
    };
    let p = crate::reshape(&crate::astype(&p, dt)?, &[i(b), i(hkv), i(g * lq), i(lk)])?;
    let out = crate::matmul(&p, v)?;
    crate::reshape(&out, &[i(b), i(hq), i(lq), i(vs[3])])
}

/// The shape, dtype and scale checks of every path; returns the scale.
fn check(q: &Array, k: &Array, v: &Array, scale: Option<f64>) -> Result<f64> {
    let op = "scaled_dot_product_attention";
    let bad = |msg: String| Err(Error::invalid(op, msg));
    let (qs, ks, vs) = (q.shape(), k.shape(), v.shape());
    if qs.len() != 4 || ks.len() != 4 || vs.len() != 4 {
        return bad(format!(
            "q, k and v must be [B, H, L, D], got {qs:?}, {ks:?}, {vs:?}"
        ));
    }
    let (b, hq, d) = (qs[0], qs[1], qs[3]);
    let (hkv, lk) = (ks[1], ks[2]);
    if ks[0] != b || vs[0] != b || vs[1] != hkv || vs[2] != lk || ks[3] != d {
        return bad(format!(
            "k must be [B, Hkv, Lk, D] and v [B, Hkv, Lk, Dv] for q {qs:?}, got {ks:?} and {vs:?}"
        ));
    }
    if hkv == 0 || hq % hkv != 0 {
        return bad(format!(
            "the query heads ({hq}) must be a multiple of the key heads ({hkv})"
        ));
    }
    let dt = q.dtype();
    if !dt.is_float() || k.dtype() != dt || v.dtype() != dt {
        return bad(format!(
            "q, k and v must be float of one dtype, got {}, {} and {}",
            dt,
            k.dtype(),
            v.dtype()
        ));
    }
    let scale = scale.unwrap_or(1.0 / (d as f64).sqrt());
    if !scale.is_finite() {
        return bad(format!("scale must be finite, got {scale}"));
    }
    Ok(scale)
}
