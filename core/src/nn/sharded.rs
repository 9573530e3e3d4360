//! Several ranks training one model: gradient averaging for data parallelism and
//! MLX's tensor-parallel linear layers (Megatron's split of a two-layer block).

use super::{Layer, Linear, Module, Param, Params, Visitor};
use crate::distributed::{self as dist, Group};
use crate::{Array, CustomFunction, Error, Result};

/// Bytes per collective in [`average_gradients`] unless told otherwise (MLX's).
pub const GRADIENT_BUCKET_BYTES: usize = 32 << 20;

/// The mean over `group`'s ranks of every array in `grads` (data-parallel
/// training: each rank's gradients of its own batch become those of the whole
/// batch). Arrays of one dtype are flattened into buckets of at most
/// `bucket_bytes` (default [`GRADIENT_BUCKET_BYTES`]; an array larger than that is
/// a bucket of its own), one `all_sum` per bucket. A group of one returns `grads`.
pub fn average_gradients(
    grads: &Params,
    group: &Group,
    bucket_bytes: Option<usize>,
) -> Result<Params> {
    let n = group.size();
    if n == 1 {
        return Ok(grads.clone());
    }
    let limit = bucket_bytes.unwrap_or(GRADIENT_BUCKET_BYTES).max(1);
    if let Some((name, g)) = grads.iter().find(|(_, g)| !g.dtype().is_float()) {
        return Err(Error::invalid(
            "average_gradients",
            format!("{name} is {}: gradients are floating point", g.dtype()),
        ));
    }
    // Buckets in name order (the same on every rank), one dtype each.
    let mut buckets: Vec<Vec<&String>> = Vec::new();
    let mut open: Vec<(crate::DType, usize, usize)> = Vec::new(); // dtype, bucket, bytes
    for (name, g) in grads {
        let bytes = g.nbytes();
        match open
            .iter_mut()
            .find(|(d, _, b)| *d == g.dtype() && b + bytes <= limit)
        {
            Some((_, i, b)) => {
                buckets[*i].push(name);
                *b += bytes;
            }
            None => {
                open.retain(|(d, _, _)| *d != g.dtype());
                open.push((g.dtype(), buckets.len(), bytes));
                buckets.push(vec![name]);
            }
        }
    }
    let mut out = Params::new();
    for names in buckets {
        let flat = names
            .iter()
            .map(|k| grads[*k].reshape(&[-1]))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Array> = flat.iter().collect();
        let joined = if refs.len() == 1 {
            flat[0].clone()
        } else {
            crate::concatenate(&refs, 0)?
        };
        let dtype = joined.dtype();
        let mean = crate::multiply(
            &dist::all_sum(&joined, group)?,
            &crate::scalar(1.0 / n as f64, dtype)?,
        )?;
        let mut at = 0isize;
        for k in names {
            let g = &grads[k];
            let len = g.size() as isize;
            let part = mean.slice(&[crate::Slice::range(at, at + len)])?;
            let shape: Vec<isize> = g.shape().iter().map(|&d| d as isize).collect();
            out.insert(k.clone(), part.reshape(&shape)?);
            at += len;
        }
    }
    Ok(out)
}

/// `x` itself, whose gradient is summed over `group` (Megatron's `f`; MLX's
/// `sum_gradients`): the input of a layer sharded over its outputs, whose every
/// shard contributes to the gradient of the replicated input.
pub fn sum_gradients(x: &Array, group: &Group) -> Result<Array> {
    if group.size() == 1 {
        return Ok(x.clone());
    }
    let g = group.clone();
    let f = CustomFunction::new(|a: &[Array]| Ok(vec![a[0].clone()]))
        .name("sum_gradients")
        .vjp(move |_, _, ct| Ok(vec![Some(dist::all_sum(&ct[0], &g)?)]));
    Ok(f.call(std::slice::from_ref(x))?.remove(0))
}

/// The sum over `group` of each rank's `x`, whose gradient passes through
/// unchanged (Megatron's `g`): the output of a layer sharded over its inputs,
/// followed by a loss that every rank computes identically.
pub fn sum_replicated(x: &Array, group: &Group) -> Result<Array> {
    if group.size() == 1 {
        return Ok(x.clone());
    }
    let g = group.clone();
    let f = CustomFunction::new(move |a: &[Array]| Ok(vec![dist::all_sum(&a[0], &g)?]))
        .name("sum_replicated")
        .vjp(|_, _, ct| Ok(vec![Some(ct[0].clone())]));
    Ok(f.call(std::slice::from_ref(x))?.remove(0))
}

/// Rows `r * len / n ..` of `a` along `axis`, for rank `r` of `n`.
fn shard(what: &'static str, a: &Array, axis: usize, g: &Group) -> Result<Array> {
    let (len, n) = (a.shape()[axis], g.size());
    if !len.is_multiple_of(n) {
        return Err(Error::invalid(
            what,
            format!(
                "{len} features do not split into {n} equal shards (shape {:?})",
                a.shape()
            ),
        ));
    }
    let s = (len / n) as isize;
    let r = g.rank() as isize;
    let mut idx = vec![crate::Slice::ALL; a.ndim()];
    idx[axis] = crate::Slice::range(r * s, (r + 1) * s);
    crate::contiguous(&a.slice(&idx)?)
}

/// A linear layer whose outputs are split over `group` (MLX's
/// `AllToShardedLinear`; Megatron's column-parallel layer): every rank holds the
/// same input and rows `rank * out/n ..` of the weight and bias, and computes its
/// shard of the outputs. The input's gradient is summed over the ranks.
pub struct AllToShardedLinear {
    /// This rank's `[out/n, in]` rows of the weight and `[out/n]` of the bias.
    pub linear: Linear,
    group: Group,
}

impl AllToShardedLinear {
    /// A layer of `in_features -> out_features` (divisible by the group's size), this
    /// rank's shard drawn from `key` as [`Linear::new`] draws the whole
    /// (uniform in ±1/√in).
    pub fn new(
        key: &Array,
        in_features: usize,
        out_features: usize,
        bias: bool,
        group: &Group,
    ) -> Result<Self> {
        let whole = Linear::new(key, in_features, out_features, bias)?;
        AllToShardedLinear::from_linear(&whole, group)
    }

    /// This rank's shard of a whole layer (the same `linear` on every rank).
    pub fn from_linear(linear: &Linear, group: &Group) -> Result<Self> {
        const WHAT: &str = "AllToShardedLinear::from_linear";
        let w = shard(WHAT, &linear.weight.value(), 0, group)?;
        let b = match &linear.bias {
            Some(b) => Some(shard(WHAT, &b.value(), 0, group)?),
            None => None,
        };
        Ok(AllToShardedLinear {
            linear: Linear::from_arrays(w, b)?,
            group: group.clone(),
        })
    }
}

impl Module for AllToShardedLinear {
    fn visit(&self, v: &mut dyn Visitor) {
        self.linear.visit(v);
    }
}

impl Layer for AllToShardedLinear {
    fn forward(&self, x: &Array) -> Result<Array> {
        self.linear.forward(&sum_gradients(x, &self.group)?)
    }
}

/// A linear layer whose inputs are split over `group` (MLX's
/// `ShardedToAllLinear`; Megatron's row-parallel layer): each rank holds its
/// shard of the input features and columns `rank * in/n ..` of the weight; the
/// partial products are summed over the ranks and the (whole) bias added once, so
/// every rank gets the whole output. For a loss every rank computes identically.
pub struct ShardedToAllLinear {
    /// This rank's `[out, in/n]` columns of the weight.
    pub weight: Param,
    /// `[out]`, the same on every rank.
    pub bias: Option<Param>,
    group: Group,
}

impl ShardedToAllLinear {
    /// A layer of `in_features` (divisible by the group's size) `-> out_features`,
    /// drawn from `key` as [`Linear::new`] draws the whole.
    pub fn new(
        key: &Array,
        in_features: usize,
        out_features: usize,
        bias: bool,
        group: &Group,
    ) -> Result<Self> {
        let whole = Linear::new(key, in_features, out_features, bias)?;
        ShardedToAllLinear::from_linear(&whole, group)
    }

    /// This rank's shard of a whole layer (the same `linear` on every rank).
    pub fn from_linear(linear: &Linear, group: &Group) -> Result<Self> {
        let w = shard(
            "ShardedToAllLinear::from_linear",
            &linear.weight.value(),
            1,
            group,
        )?;
        Ok(ShardedToAllLinear {
            weight: Param::new(w),
            bias: linear.bias.as_ref().map(|b| Param::new(b.value())),
            group: group.clone(),
        })
    }
}

impl Module for ShardedToAllLinear {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight", &self.weight);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
}

impl Layer for ShardedToAllLinear {
    fn forward(&self, x: &Array) -> Result<Array> {
        let part = crate::matmul(x, &self.weight.value().t()?)?;
        let y = sum_replicated(&part, &self.group)?;
        match &self.bias {
            Some(b) => crate::add(&y, &b.value()),
            None => Ok(y),
        }
    }
}
