//! Layers: `Linear`, `Embedding`, `Sequential`, `LayerNorm`, `RmsNorm`, `Dropout`.

use super::quantized::QuantSlot;
use super::{Layer, Module, Param, Visitor, init};
use crate::{Array, DType, Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// `y = x W^T + b`: weight `[out, in]` and bias `[out]`, PyTorch's and MLX's layout
/// and initialisation (uniform in ±1/√in).
pub struct Linear {
    /// `[out_features, in_features]`.
    pub weight: Param,
    /// `[out_features]`, if any.
    pub bias: Option<Param>,
    quant: QuantSlot,
}

impl Linear {
    /// A layer from `in_features` to `out_features`, f32, drawn from `key`.
    pub fn new(key: &Array, in_features: usize, out_features: usize, bias: bool) -> Result<Linear> {
        if in_features == 0 || out_features == 0 {
            return Err(Error::invalid(
                "Linear::new",
                format!("features must be positive, got {in_features} -> {out_features}"),
            ));
        }
        let keys = crate::random::split(key, 2)?;
        let k = |i: isize| keys.slice(&[crate::Slice::range(i, i + 1)])?.reshape(&[2]);
        let s = 1.0 / (in_features as f64).sqrt();
        let w = crate::random::uniform(&k(0)?, &[out_features, in_features], -s, s, DType::F32)?;
        let b = if bias {
            let b = crate::random::uniform(&k(1)?, &[out_features], -s, s, DType::F32)?;
            Some(Param::new(b))
        } else {
            None
        };
        Ok(Linear {
            weight: Param::new(w),
            bias: b,
            quant: QuantSlot::default(),
        })
    }

    /// A layer holding the given arrays (`weight` `[out, in]`, `bias` `[out]`).
    pub fn from_arrays(weight: Array, bias: Option<Array>) -> Result<Linear> {
        let out = match weight.shape() {
            [o, _] => *o,
            s => {
                return Err(Error::invalid(
                    "Linear::from_arrays",
                    format!("weight must be [out, in], got {s:?}"),
                ));
            }
        };
        if let Some(b) = &bias
            && b.shape() != [out]
        {
            return Err(Error::invalid(
                "Linear::from_arrays",
                format!("bias must be [{out}], got {:?}", b.shape()),
            ));
        }
        Ok(Linear {
            weight: Param::new(weight),
            bias: bias.map(Param::new),
            quant: QuantSlot::default(),
        })
    }

    /// Quantizes the weight in place (MLX's `QuantizedLinear`): `weight` becomes
    /// the packed values (u32 `[out, in * bits / 32]`) beside frozen `scales` and
    /// `biases`, and the forward pass is [`crate::quantized_matmul`]. An `Err`,
    /// with nothing changed, if it is quantized already or `in` is not a multiple
    /// of `group_size`.
    pub fn quantize(&self, group_size: usize, bits: usize) -> Result<()> {
        self.quant
            .quantize("Linear::quantize", &self.weight, group_size, bits)
    }

    /// Whether the layer is quantized, and how (`(group_size, bits)`).
    pub fn quantization(&self) -> Option<(usize, usize)> {
        self.quant.get().map(|q| (q.group_size, q.bits))
    }

    /// A quantized layer from its parts (an MLX-quantized checkpoint's): the packed
    /// `weight` (u32 `[out, in * bits / 32]`), `scales` and `biases` (`[out, in /
    /// group_size]`) and an optional `bias` `[out]`.
    pub fn from_quantized(
        weight: Array,
        scales: Array,
        biases: Array,
        bias: Option<Array>,
        group_size: usize,
        bits: usize,
    ) -> Result<Linear> {
        const WHAT: &str = "Linear::from_quantized";
        let out = weight.shape().first().copied().unwrap_or(0);
        if let Some(b) = &bias
            && b.shape() != [out]
        {
            return Err(Error::invalid(
                WHAT,
                format!("bias must be [{out}], got {:?}", b.shape()),
            ));
        }
        let (weight, quant) =
            QuantSlot::from_parts(WHAT, weight, scales, biases, group_size, bits)?;
        Ok(Linear {
            weight,
            bias: bias.map(Param::new),
            quant,
        })
    }
}

impl Module for Linear {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight", &self.weight);
        self.quant.visit(v);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }

    fn quantize_layer(&self, group_size: usize, bits: usize) -> Result<bool> {
        self.quant
            .quantize_layer("Linear::quantize", &self.weight, group_size, bits)
    }
}

impl Layer for Linear {
    fn forward(&self, x: &Array) -> Result<Array> {
        if let Some(q) = self.quant.get() {
            let (s, b) = (q.scales.value(), q.biases.value());
            let y = crate::quantized_matmul(
                x,
                &self.weight.value(),
                &s,
                &b,
                true,
                q.group_size,
                q.bits,
            )?;
            return match &self.bias {
                Some(bias) => crate::add(&y, &bias.value()),
                None => Ok(y),
            };
        }
        let w = self.weight.value();
        let wt = w.t()?;
        match &self.bias {
            // One kernel: the bias is the product's epilogue.
            Some(b) => crate::addmm(&b.value(), x, &wt, 1.0, 1.0),
            None => crate::matmul(x, &wt),
        }
    }
}

impl Linear {
    /// `self.forward(x) + residual` (`residual` of the output's shape), as one
    /// product with `residual` its addend where the layer has no bias: a residual
    /// connection without a pass of its own. The sum is rounded once, in the
    /// product's epilogue (a quantized layer's where its matrix-vector kernel runs).
    pub(crate) fn forward_plus(&self, x: &Array, residual: &Array) -> Result<Array> {
        let w = self.weight.value();
        match (self.quant.get(), &self.bias) {
            (Some(q), None) => crate::ops::quantized::quantized_matmul_plus(
                x,
                &w,
                &q.scales.value(),
                &q.biases.value(),
                true,
                q.group_size,
                q.bits,
                Some(residual),
            ),
            (None, None) => {
                let mut out = x.shape().to_vec();
                if let (Some(last), [rows, _]) = (out.last_mut(), w.shape()) {
                    *last = *rows;
                }
                let alike = x.dtype() == w.dtype() && residual.dtype() == w.dtype();
                if alike && x.ndim() >= 1 && residual.shape() == out {
                    crate::addmm(residual, x, &w.t()?, 1.0, 1.0)
                } else {
                    crate::add(&self.forward(x)?, residual)
                }
            }
            _ => crate::add(&self.forward(x)?, residual),
        }
    }
}

/// Linear layers reading one input, computed as one product where their weights
/// are rows of one array: attention's q/k/v projections and a Llama's gate/up (one
/// matrix-vector kernel a generated token where there were three; one wider
/// product a training step where there were three, and one for each gradient).
/// Outside a transform the first [`LinearGroup::forward`] joins them: each layer's
/// parameters become its rows of the joined arrays (views: nothing is copied
/// twice), so they save, load and run alone as before. A layer whose arrays were
/// replaced since (loaded, quantized, trained) is joined again, up to
/// [`LinearGroup::JOINS`] times; a group whose layers keep changing then runs
/// layer by layer. Under a transform (a training step) the parameters stay as they
/// are and their concatenation is part of the graph.
#[derive(Default)]
pub(crate) struct LinearGroup(std::sync::Mutex<Group>);

#[derive(Default)]
struct Group {
    joined: Option<Joined>,
    joins: usize,
}

/// Arrays of the layers as one.
struct Joined {
    /// What each layer held when joined (its rows of the arrays below), in order.
    held: Vec<Array>,
    weight: Array,
    /// Scales, biases, group size and bits of a quantized group.
    quant: Option<(Array, Array, usize, usize)>,
    bias: Option<Array>,
}

/// A layer's arrays: weight, then scales and biases when quantized, then bias.
fn held(l: &Linear) -> Vec<Array> {
    let mut v = vec![l.weight.value()];
    if let Some(q) = l.quant.get() {
        v.extend([q.scales.value(), q.biases.value()]);
    }
    if let Some(b) = &l.bias {
        v.push(b.value());
    }
    v
}

impl LinearGroup {
    /// How many times a group joins its layers before it stays layer by layer.
    pub(crate) const JOINS: usize = 3;

    /// `layers` on `x` as one product (`[..., sum of their out_features]`, each
    /// layer's output its columns in order), or `None` (run them one by one): when
    /// they differ in input width, dtype, quantization or bias, or are quantized
    /// under a transform.
    pub(crate) fn forward(&self, layers: &[&Linear], x: &Array) -> Result<Option<Array>> {
        if crate::transforms::tracing() {
            return traced(layers, x);
        }
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now: Vec<Array> = layers.iter().flat_map(|l| held(l)).collect();
        let same = |j: &Joined| {
            j.held.len() == now.len() && j.held.iter().zip(&now).all(|(a, b)| a.same_node(b))
        };
        if !g.joined.as_ref().is_some_and(same) {
            g.joined = None;
            if g.joins >= Self::JOINS {
                return Ok(None);
            }
            g.joins += 1;
            g.joined = join(layers)?;
        }
        let Some(j) = &g.joined else {
            return Ok(None);
        };
        let y = match &j.quant {
            Some((s, b, group, bits)) => {
                let y = crate::quantized_matmul(x, &j.weight, s, b, true, *group, *bits)?;
                match &j.bias {
                    Some(bias) => crate::add(&y, bias)?,
                    None => y,
                }
            }
            None => match &j.bias {
                Some(bias) => crate::addmm(bias, x, &j.weight.t()?, 1.0, 1.0)?,
                None => crate::matmul(x, &j.weight.t()?)?,
            },
        };
        Ok(Some(y))
    }
}

/// Under a transform: the layers' weights and biases concatenated in the graph
/// (a copy of the weights a call, where separate layers would run two more
/// products forward and four backward), so gradients reach each layer's own
/// parameters. `None` for quantized or unlike layers.
fn traced(layers: &[&Linear], x: &Array) -> Result<Option<Array>> {
    if !alike(layers) || layers.iter().any(|l| l.quant.get().is_some()) {
        return Ok(None);
    }
    let cat = |get: &dyn Fn(&Linear) -> Option<Array>| -> Result<Option<Array>> {
        let parts: Option<Vec<Array>> = layers.iter().map(|l| get(l)).collect();
        parts
            .map(|p| crate::concatenate(&p.iter().collect::<Vec<_>>(), 0))
            .transpose()
    };
    let w = cat(&|l| Some(l.weight.value()))?.expect("every layer has a weight");
    let y = match cat(&|l| l.bias.as_ref().map(Param::value))? {
        Some(b) => crate::addmm(&b, x, &w.t()?, 1.0, 1.0)?,
        None => crate::matmul(x, &w.t()?)?,
    };
    Ok(Some(y))
}

/// Whether `layers` (at least two) can be one product: 2-D weights of one input
/// width and dtype, all biased or none, quantized alike or not at all.
fn alike(layers: &[&Linear]) -> bool {
    let Some(first) = layers.first() else {
        return false;
    };
    let (w0, q0) = (first.weight.value(), first.quant.get());
    layers.len() >= 2
        && layers.iter().all(|l| {
            let w = l.weight.value();
            let q = l.quant.get();
            w.ndim() == 2
                && w.shape()[1] == w0.shape()[1]
                && w.dtype() == w0.dtype()
                && l.bias.is_some() == first.bias.is_some()
                && match (&q, &q0) {
                    (None, None) => true,
                    (Some(a), Some(b)) => {
                        (a.group_size, a.bits) == (b.group_size, b.bits)
                            && a.scales.value().dtype() == b.scales.value().dtype()
                            && a.biases.value().dtype() == b.biases.value().dtype()
                    }
                    _ => false,
                }
        })
}

/// The layers' arrays joined by rows, each layer's parameters set to its rows;
/// `None` if they are not alike.
fn join(layers: &[&Linear]) -> Result<Option<Joined>> {
    if !alike(layers) {
        return Ok(None);
    }
    let (first, q0) = (layers[0], layers[0].quant.get());
    let rows: Vec<usize> = layers.iter().map(|l| l.weight.value().shape()[0]).collect();
    // Joins one array of each layer and sets each layer's to its rows.
    let joined = |get: &dyn Fn(&Linear) -> Param| -> Result<Array> {
        let parts: Vec<Array> = layers.iter().map(|l| get(l).value()).collect();
        let all = crate::concatenate(&parts.iter().collect::<Vec<_>>(), 0)?;
        let mut at = 0;
        for (l, &r) in layers.iter().zip(&rows) {
            let rows = all.slice(&[crate::Slice::range(at as isize, (at + r) as isize)])?;
            get(l).set(rows)?;
            at += r;
        }
        Ok(all)
    };
    let quant_param = |l: &Linear, scales: bool| {
        let q = l.quant.get().expect("alike: quantized");
        if scales { q.scales } else { q.biases }
    };
    let weight = joined(&|l| l.weight.clone())?;
    let quant = match &q0 {
        Some(q) => Some((
            joined(&|l| quant_param(l, true))?,
            joined(&|l| quant_param(l, false))?,
            q.group_size,
            q.bits,
        )),
        None => None,
    };
    let bias = match first.bias {
        Some(_) => Some(joined(&|l| l.bias.clone().expect("alike: a bias"))?),
        None => None,
    };
    Ok(Some(Joined {
        held: layers.iter().flat_map(|l| held(l)).collect(),
        weight,
        quant,
        bias,
    }))
}

/// A lookup table: row `i` of `weight` (`[num, dim]`) for index `i`.
pub struct Embedding {
    /// `[num_embeddings, dim]`.
    pub weight: Param,
    quant: QuantSlot,
}

impl Embedding {
    /// `num` rows of `dim`, standard normal (PyTorch's initialisation), f32.
    pub fn new(key: &Array, num: usize, dim: usize) -> Result<Embedding> {
        Ok(Embedding {
            weight: Param::new(init::normal(key, &[num, dim], 0.0, 1.0)?),
            quant: QuantSlot::default(),
        })
    }

    /// A table holding `weight` (`[num, dim]`).
    pub fn from_array(weight: Array) -> Result<Embedding> {
        if weight.ndim() != 2 {
            return Err(Error::invalid(
                "Embedding::from_array",
                format!("weight must be [num, dim], got {:?}", weight.shape()),
            ));
        }
        Ok(Embedding {
            weight: Param::new(weight),
            quant: QuantSlot::default(),
        })
    }

    /// Quantizes the table in place (MLX's `QuantizedEmbedding`): rows are
    /// dequantized as they are looked up, and [`Embedding::as_linear`] is a
    /// [`crate::quantized_matmul`]. The same parameters and errors as
    /// [`Linear::quantize`].
    pub fn quantize(&self, group_size: usize, bits: usize) -> Result<()> {
        self.quant
            .quantize("Embedding::quantize", &self.weight, group_size, bits)
    }

    /// Whether the table is quantized, and how (`(group_size, bits)`).
    pub fn quantization(&self) -> Option<(usize, usize)> {
        self.quant.get().map(|q| (q.group_size, q.bits))
    }

    /// A quantized table from its parts (as [`Linear::from_quantized`]).
    pub fn from_quantized(
        weight: Array,
        scales: Array,
        biases: Array,
        group_size: usize,
        bits: usize,
    ) -> Result<Embedding> {
        let (weight, quant) = QuantSlot::from_parts(
            "Embedding::from_quantized",
            weight,
            scales,
            biases,
            group_size,
            bits,
        )?;
        Ok(Embedding { weight, quant })
    }

    /// The rows for integer `indices` (any shape): `indices.shape + [dim]`.
    pub fn forward(&self, indices: &Array) -> Result<Array> {
        if !indices.dtype().is_int() {
            return Err(Error::invalid(
                "Embedding",
                format!("indices must be integers, got {}", indices.dtype()),
            ));
        }
        let rows = |a: &Array| crate::take(a, indices, Some(0));
        match self.quant.get() {
            Some(q) => crate::dequantize(
                &rows(&self.weight.value())?,
                &rows(&q.scales.value())?,
                &rows(&q.biases.value())?,
                q.group_size,
                q.bits,
            ),
            None => rows(&self.weight.value()),
        }
    }

    /// `x @ weight^T`: scores against every row (a tied output layer).
    pub fn as_linear(&self, x: &Array) -> Result<Array> {
        match self.quant.get() {
            Some(q) => crate::quantized_matmul(
                x,
                &self.weight.value(),
                &q.scales.value(),
                &q.biases.value(),
                true,
                q.group_size,
                q.bits,
            ),
            None => crate::matmul(x, &self.weight.value().t()?),
        }
    }
}

impl Module for Embedding {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight", &self.weight);
        self.quant.visit(v);
    }

    fn quantize_layer(&self, group_size: usize, bits: usize) -> Result<bool> {
        self.quant
            .quantize_layer("Embedding::quantize", &self.weight, group_size, bits)
    }
}

impl Layer for Embedding {
    fn forward(&self, x: &Array) -> Result<Array> {
        Embedding::forward(self, x)
    }
}

/// Layers applied in order; parameters named by position (`0.weight`, ...).
#[derive(Default)]
pub struct Sequential {
    layers: Vec<Box<dyn Layer>>,
}

impl Sequential {
    /// An empty chain.
    pub fn new() -> Sequential {
        Sequential::default()
    }

    /// The chain with `layer` appended.
    pub fn push(mut self, layer: impl Layer + 'static) -> Sequential {
        self.layers.push(Box::new(layer));
        self
    }

    /// The layers.
    pub fn layers(&self) -> &[Box<dyn Layer>] {
        &self.layers
    }
}

impl Module for Sequential {
    fn visit(&self, v: &mut dyn Visitor) {
        for (i, l) in self.layers.iter().enumerate() {
            v.module(&i.to_string(), l.as_ref());
        }
    }
}

impl Layer for Sequential {
    fn forward(&self, x: &Array) -> Result<Array> {
        let mut y = x.clone();
        for l in &self.layers {
            y = l.forward(&y)?;
        }
        Ok(y)
    }
}

/// A norm layer's per-channel parameter, every element `v` (1: weight, 0: bias).
fn channel_param(channels: usize, v: f64) -> Result<Param> {
    Ok(Param::new(crate::full(&[channels], v, DType::F32)?))
}

/// Visits a norm layer's optional weight and bias.
fn visit_affine(v: &mut dyn Visitor, weight: &Option<Param>, bias: &Option<Param>) {
    if let Some(w) = weight {
        v.param("weight", w);
    }
    if let Some(b) = bias {
        v.param("bias", b);
    }
}

/// `y * weight + bias`, each where present.
fn apply_affine(mut y: Array, weight: &Option<Param>, bias: &Option<Param>) -> Result<Array> {
    if let Some(w) = weight {
        y = crate::multiply(&y, &w.value())?;
    }
    if let Some(b) = bias {
        y = crate::add(&y, &b.value())?;
    }
    Ok(y)
}

/// Layer normalisation over the last axis, with an optional affine weight and
/// bias (ones and zeros).
pub struct LayerNorm {
    /// `[dims]`, if affine.
    pub weight: Option<Param>,
    /// `[dims]`, if affine and biased.
    pub bias: Option<Param>,
    /// Added to the variance.
    pub eps: f64,
}

impl LayerNorm {
    /// Over a last axis of `dims` (PyTorch's defaults: affine, eps 1e-5).
    pub fn new(dims: usize, eps: f64, affine: bool, bias: bool) -> Result<LayerNorm> {
        let p = |v: f64| channel_param(dims, v);
        Ok(LayerNorm {
            weight: if affine { Some(p(1.0)?) } else { None },
            bias: if affine && bias { Some(p(0.0)?) } else { None },
            eps,
        })
    }
}

impl Module for LayerNorm {
    fn visit(&self, v: &mut dyn Visitor) {
        visit_affine(v, &self.weight, &self.bias);
    }
}

impl Layer for LayerNorm {
    fn forward(&self, x: &Array) -> Result<Array> {
        let w = self.weight.as_ref().map(Param::value);
        let b = self.bias.as_ref().map(Param::value);
        crate::layer_norm(x, w.as_ref(), b.as_ref(), self.eps)
    }
}

/// Root-mean-square normalisation over the last axis, with a weight (ones).
pub struct RmsNorm {
    /// `[dims]`.
    pub weight: Param,
    /// Added to the mean square.
    pub eps: f64,
}

impl RmsNorm {
    /// Over a last axis of `dims`.
    pub fn new(dims: usize, eps: f64) -> Result<RmsNorm> {
        Ok(RmsNorm {
            weight: channel_param(dims, 1.0)?,
            eps,
        })
    }
}

impl Module for RmsNorm {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight", &self.weight);
    }
}

impl Layer for RmsNorm {
    fn forward(&self, x: &Array) -> Result<Array> {
        crate::rms_norm(x, Some(&self.weight.value()), self.eps)
    }
}

/// Flattens axes `start..=end` into one (PyTorch's `nn.Flatten`; the default
/// keeps the batch axis: `[N, H, W, C]` to `[N, H * W * C]`).
#[derive(Debug, Clone, Copy)]
pub struct Flatten {
    /// First axis flattened (default 1).
    pub start: isize,
    /// Last axis flattened, negative from the end (default -1).
    pub end: isize,
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten { start: 1, end: -1 }
    }
}

impl Module for Flatten {
    fn visit(&self, _: &mut dyn Visitor) {}
}

impl Layer for Flatten {
    fn forward(&self, x: &Array) -> Result<Array> {
        crate::flatten(x, self.start, self.end)
    }
}

/// Zeroes each element with probability `p` in training mode and scales the
/// rest by `1 / (1 - p)`; the identity in evaluation mode. Each call draws a fresh
/// mask from its key (split per call), so a run is reproducible from the seed.
pub struct Dropout {
    p: f64,
    training: AtomicBool,
    key: Array,
    calls: AtomicU64,
}

impl Dropout {
    /// Drops with probability `p` in `[0, 1)`, masks drawn from `key`.
    pub fn new(key: &Array, p: f64) -> Result<Dropout> {
        if !(0.0..1.0).contains(&p) {
            return Err(Error::invalid(
                "Dropout::new",
                format!("p must be in [0, 1), got {p}"),
            ));
        }
        Ok(Dropout {
            p,
            training: AtomicBool::new(true),
            key: key.clone(),
            calls: AtomicU64::new(0),
        })
    }
}

impl Module for Dropout {
    fn visit(&self, _: &mut dyn Visitor) {}

    fn set_training(&self, training: bool) {
        self.training.store(training, Ordering::Relaxed);
    }
}

impl Layer for Dropout {
    fn forward(&self, x: &Array) -> Result<Array> {
        if !self.training.load(Ordering::Relaxed) || self.p == 0.0 {
            return Ok(x.clone());
        }
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        // The key for this call: the key folded with the call count.
        let salt = crate::with_device(self.key.device(), || {
            Array::from_slice(&[(call >> 32) as u32, call as u32], &[2])
        })?;
        let key = crate::bitwise_xor(&self.key, &salt)?;
        let keep = crate::random::bernoulli(&key, 1.0 - self.p, x.shape())?;
        let scale = crate::scalar_like(x, 1.0 / (1.0 - self.p))?;
        crate::where_(&keep, &crate::multiply(x, &scale)?, &crate::zeros_like(x)?)
    }
}

/// Multi-head attention (MLX's `nn.MultiHeadAttention`: separate query, key,
/// value and output projections, named `query_proj`, `key_proj`, `value_proj`,
/// `out_proj`), over [`crate::scaled_dot_product_attention`]; grouped-query when
/// `kv_heads < heads`. Self-attention (one array as queries, keys and values)
/// computes the three projections as one product, forward and backward; the
/// parameters stay the three layers' own.
pub struct MultiHeadAttention {
    /// `[heads * head_dim, dims]`.
    pub query_proj: Linear,
    /// `[kv_heads * head_dim, dims]`.
    pub key_proj: Linear,
    /// `[kv_heads * head_dim, dims]`.
    pub value_proj: Linear,
    /// `[dims, heads * head_dim]`.
    pub out_proj: Linear,
    heads: usize,
    kv_heads: usize,
    /// q, k and v as one product where all three read one input.
    qkv: LinearGroup,
}

impl MultiHeadAttention {
    /// `heads` heads of `dims / heads` over inputs of `dims`, `kv_heads` key and
    /// value heads (`heads` for plain attention), biased projections.
    pub fn new(
        key: &Array,
        dims: usize,
        heads: usize,
        kv_heads: usize,
        bias: bool,
    ) -> Result<Self> {
        if heads == 0
            || !dims.is_multiple_of(heads)
            || kv_heads == 0
            || !heads.is_multiple_of(kv_heads)
        {
            return Err(Error::invalid(
                "MultiHeadAttention::new",
                format!(
                    "dims ({dims}) must divide into heads ({heads}), a multiple of kv_heads ({kv_heads})"
                ),
            ));
        }
        let keys = crate::random::split(key, 4)?;
        let k = |i: isize| keys.slice(&[crate::Slice::range(i, i + 1)])?.reshape(&[2]);
        let hd = dims / heads;
        Ok(MultiHeadAttention {
            query_proj: Linear::new(&k(0)?, dims, heads * hd, bias)?,
            key_proj: Linear::new(&k(1)?, dims, kv_heads * hd, bias)?,
            value_proj: Linear::new(&k(2)?, dims, kv_heads * hd, bias)?,
            out_proj: Linear::new(&k(3)?, heads * hd, dims, bias)?,
            heads,
            kv_heads,
            qkv: LinearGroup::default(),
        })
    }

    /// Attention of `queries` `[B, Lq, dims]` over `keys` and `values` `[B, Lk,
    /// dims]`, with `mask`: `[B, Lq, dims]`.
    pub fn attend(
        &self,
        queries: &Array,
        keys: &Array,
        values: &Array,
        mask: crate::AttentionMask<'_>,
    ) -> Result<Array> {
        let (q, k, v) = if queries.same_node(keys) && keys.same_node(values) {
            self.project(queries)?
        } else {
            self.project_apart(queries, keys, values)?
        };
        let o = crate::scaled_dot_product_attention(&q, &k, &v, None, mask)?;
        self.merge(&o)
    }

    /// The query, key and value heads of self-attention on `x`, from one product
    /// where the projections are alike.
    fn project(&self, x: &Array) -> Result<(Array, Array, Array)> {
        let projs = [&self.query_proj, &self.key_proj, &self.value_proj];
        let Some(y) = self.qkv.forward(&projs, x)? else {
            return self.project_apart(x, x, x);
        };
        let t = self.split(&y, self.heads + 2 * self.kv_heads)?;
        let (h, kv) = (self.heads as isize, self.kv_heads as isize);
        let part = |a: isize, z: isize| t.slice(&[crate::Slice::ALL, crate::Slice::range(a, z)]);
        Ok((part(0, h)?, part(h, h + kv)?, part(h + kv, h + 2 * kv)?))
    }

    /// The query, key and value heads, each projection its own product.
    fn project_apart(&self, q: &Array, k: &Array, v: &Array) -> Result<(Array, Array, Array)> {
        Ok((
            self.split(&self.query_proj.forward(q)?, self.heads)?,
            self.split(&self.key_proj.forward(k)?, self.kv_heads)?,
            self.split(&self.value_proj.forward(v)?, self.kv_heads)?,
        ))
    }

    /// Self-attention of `x` `[B, L, dims]` (the next `L` positions) over every
    /// position in `cache` and these: their keys and values are appended to the
    /// cache first. A causal `mask` aligns to the end, so a prompt (`L > 1`) and
    /// each decoded token (`L = 1`) attend the positions up to their own.
    pub fn attend_cached(
        &self,
        x: &Array,
        cache: &mut super::KvCache,
        mask: crate::AttentionMask<'_>,
    ) -> Result<Array> {
        let (q, k, v) = self.project(x)?;
        let (k, v) = cache.update(&k, &v)?;
        let o = crate::scaled_dot_product_attention(&q, &k, &v, None, mask)?;
        self.merge(&o)
    }

    /// `[B, L, h * d]` as `[B, h, L, d]`.
    fn split(&self, x: &Array, h: usize) -> Result<Array> {
        let s = x.shape();
        if s.len() != 3 {
            return Err(Error::invalid(
                "MultiHeadAttention",
                format!("inputs must be [B, L, dims], got {s:?}"),
            ));
        }
        let r = x.reshape(&[s[0] as isize, s[1] as isize, h as isize, -1])?;
        crate::swapaxes(&r, 1, 2)
    }

    /// The heads `[B, h, L, d]` joined and projected out.
    fn merge(&self, o: &Array) -> Result<Array> {
        let o = crate::swapaxes(o, 1, 2)?;
        let s = o.shape();
        let o = o.reshape(&[s[0] as isize, s[1] as isize, -1])?;
        self.out_proj.forward(&o)
    }
}

impl Module for MultiHeadAttention {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("query_proj", &self.query_proj);
        v.module("key_proj", &self.key_proj);
        v.module("value_proj", &self.value_proj);
        v.module("out_proj", &self.out_proj);
    }
}

/// A pre-norm transformer block (GPT-2's): `x + attn(ln1(x))`, then
/// `x + mlp(ln2(x))` with a `4 · dims` hidden layer and tanh GELU; causal
/// self-attention when `causal`. Parameters `ln1`, `attn`, `ln2`, `mlp.0`, `mlp.2`.
pub struct TransformerBlock {
    /// Before attention.
    pub ln1: LayerNorm,
    /// Self-attention.
    pub attn: MultiHeadAttention,
    /// Before the MLP.
    pub ln2: LayerNorm,
    /// Linear, GELU, Linear.
    pub mlp: Sequential,
    /// Causal self-attention.
    pub causal: bool,
}

impl TransformerBlock {
    /// A block of `dims` with `heads` heads.
    pub fn new(key: &Array, dims: usize, heads: usize, causal: bool) -> Result<Self> {
        let keys = crate::random::split(key, 3)?;
        let k = |i: isize| keys.slice(&[crate::Slice::range(i, i + 1)])?.reshape(&[2]);
        Ok(TransformerBlock {
            ln1: LayerNorm::new(dims, 1e-5, true, true)?,
            attn: MultiHeadAttention::new(&k(0)?, dims, heads, heads, true)?,
            ln2: LayerNorm::new(dims, 1e-5, true, true)?,
            mlp: Sequential::new()
                .push(Linear::new(&k(1)?, dims, 4 * dims, true)?)
                .push(super::Activation::Gelu(super::Gelu::Tanh))
                .push(Linear::new(&k(2)?, 4 * dims, dims, true)?),
            causal,
        })
    }
}

impl Module for TransformerBlock {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("ln1", &self.ln1);
        v.module("attn", &self.attn);
        v.module("ln2", &self.ln2);
        v.module("mlp", &self.mlp);
    }
}

impl Layer for TransformerBlock {
    fn forward(&self, x: &Array) -> Result<Array> {
        let mask = if self.causal {
            crate::AttentionMask::Causal
        } else {
            crate::AttentionMask::None
        };
        let h = self.ln1.forward(x)?;
        let x = crate::add(x, &self.attn.attend(&h, &h, &h, mask)?)?;
        let h = self.ln2.forward(&x)?;
        crate::add(&x, &self.mlp.forward(&h)?)
    }
}

/// Group normalisation over channels-last inputs `[N, ..., C]` (MLX's layout):
/// the `C` channels in `groups` groups, each normalised over its channels and every
/// position of a sample, with a per-channel affine weight and bias.
pub struct GroupNorm {
    /// `[C]`, if affine.
    pub weight: Option<Param>,
    /// `[C]`, if affine.
    pub bias: Option<Param>,
    /// Number of groups (dividing the channels).
    pub groups: usize,
    /// Added to the variance.
    pub eps: f64,
}

impl GroupNorm {
    /// `groups` groups over `channels` channels (eps 1e-5, affine).
    pub fn new(groups: usize, channels: usize, eps: f64, affine: bool) -> Result<GroupNorm> {
        if groups == 0 || !channels.is_multiple_of(groups) {
            return Err(Error::invalid(
                "GroupNorm::new",
                format!("{groups} groups must divide {channels} channels"),
            ));
        }
        let p = |v: f64| channel_param(channels, v);
        Ok(GroupNorm {
            weight: if affine { Some(p(1.0)?) } else { None },
            bias: if affine { Some(p(0.0)?) } else { None },
            groups,
            eps,
        })
    }
}

impl Module for GroupNorm {
    fn visit(&self, v: &mut dyn Visitor) {
        visit_affine(v, &self.weight, &self.bias);
    }
}

impl Layer for GroupNorm {
    fn forward(&self, x: &Array) -> Result<Array> {
        let s = x.shape().to_vec();
        let c = *s.last().unwrap_or(&0);
        if s.len() < 2 || !c.is_multiple_of(self.groups) {
            return Err(Error::invalid(
                "GroupNorm",
                format!(
                    "input must be [N, ..., C] with C divisible by {}, got {s:?}",
                    self.groups
                ),
            ));
        }
        let n = s[0] as isize;
        let g = self.groups as isize;
        // [N, positions, G, C/G] -> statistics over positions and C/G per (N, G).
        let r = x.reshape(&[n, -1, g, (c / self.groups) as isize])?;
        let mean = crate::mean(&r, Some(&[1, 3]), true)?;
        let d = crate::subtract(&r, &mean)?;
        let var = crate::mean(&crate::multiply(&d, &d)?, Some(&[1, 3]), true)?;
        let inv = crate::rsqrt(&crate::add(&var, &crate::scalar_like(&var, self.eps)?)?)?;
        let y = crate::multiply(&d, &inv)?
            .reshape(&s.iter().map(|&v| v as isize).collect::<Vec<_>>())?;
        apply_affine(y, &self.weight, &self.bias)
    }
}

/// Batch normalisation over channels-last inputs `[N, ..., C]` (MLX's layout):
/// in training, each channel normalised by its batch statistics, which also update
/// the running mean and (unbiased) variance with `momentum`; in evaluation, by the
/// running statistics (PyTorch's rule). Running statistics are parameters named
/// `running_mean` and `running_var`, frozen (they are saved, not trained).
pub struct BatchNorm {
    /// `[C]`, if affine.
    pub weight: Option<Param>,
    /// `[C]`, if affine.
    pub bias: Option<Param>,
    /// `[C]`.
    pub running_mean: Param,
    /// `[C]`.
    pub running_var: Param,
    /// Added to the variance.
    pub eps: f64,
    /// Weight of the newest batch in the running statistics.
    pub momentum: f64,
    training: AtomicBool,
}

impl BatchNorm {
    /// Over `channels` channels (PyTorch's defaults: eps 1e-5, momentum 0.1).
    pub fn new(channels: usize, eps: f64, momentum: f64, affine: bool) -> Result<BatchNorm> {
        let p = |v: f64| channel_param(channels, v);
        let (rm, rv) = (p(0.0)?, p(1.0)?);
        rm.set_trainable(false);
        rv.set_trainable(false);
        Ok(BatchNorm {
            weight: if affine { Some(p(1.0)?) } else { None },
            bias: if affine { Some(p(0.0)?) } else { None },
            running_mean: rm,
            running_var: rv,
            eps,
            momentum,
            training: AtomicBool::new(true),
        })
    }
}

impl Module for BatchNorm {
    fn visit(&self, v: &mut dyn Visitor) {
        visit_affine(v, &self.weight, &self.bias);
        v.param("running_mean", &self.running_mean);
        v.param("running_var", &self.running_var);
    }

    fn set_training(&self, training: bool) {
        self.training.store(training, Ordering::Relaxed);
    }
}

impl Layer for BatchNorm {
    fn forward(&self, x: &Array) -> Result<Array> {
        let s = x.shape();
        let c = self.running_mean.value().shape()[0];
        if s.len() < 2 || s[s.len() - 1] != c {
            return Err(Error::invalid(
                "BatchNorm",
                format!("input must be [N, ..., {c}], got {s:?}"),
            ));
        }
        let axes: Vec<isize> = (0..s.len() as isize - 1).collect();
        let (mean, var) = if self.training.load(Ordering::Relaxed) {
            let mean = crate::mean(x, Some(&axes), false)?;
            let d = crate::subtract(x, &mean)?;
            let var = crate::mean(&crate::multiply(&d, &d)?, Some(&axes), false)?;
            // The running statistics take the batch's (unbiased variance), outside
            // the gradient.
            let count = (x.size() / c) as f64;
            let m = self.momentum;
            let upd = |run: &Param, batch: &Array, scale: f64| -> Result<()> {
                let b = crate::stop_gradient(&crate::multiply(
                    batch,
                    &crate::scalar_like(batch, m * scale)?,
                )?)?;
                let r = run.value();
                run.set(crate::add(
                    &crate::multiply(&r, &crate::scalar_like(&r, 1.0 - m)?)?,
                    &b,
                )?)
            };
            upd(&self.running_mean, &mean, 1.0)?;
            upd(&self.running_var, &var, count / (count - 1.0).max(1.0))?;
            (mean, var)
        } else {
            (self.running_mean.value(), self.running_var.value())
        };
        let inv = crate::rsqrt(&crate::add(&var, &crate::scalar_like(&var, self.eps)?)?)?;
        let y = crate::multiply(&crate::subtract(x, &mean)?, &inv)?;
        apply_affine(y, &self.weight, &self.bias)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Device;

    /// A quantized layer's product with its residual as the matrix-vector
    /// kernel's addend equals the product plus the residual, in value, gradient
    /// (x and the residual) and vmap; on the CPU (the GPU kernel runs in the
    /// Llama conformance cases).
    #[test]
    fn quantized_forward_plus() -> Result<()> {
        crate::with_device(&Device::cpu(), || {
            let key = crate::random::key(35)?;
            let l = Linear::new(&key, 64, 6, false)?;
            l.quantize(32, 4)?;
            let keys = crate::random::split(&key, 3)?;
            let k = |i: isize| keys.slice(&[crate::Slice::range(i, i + 1)])?.reshape(&[2]);
            let x = crate::random::normal(&k(1)?, &[3, 64], 0.0, 1.0, DType::F32)?;
            let r = crate::random::normal(&k(2)?, &[3, 6], 0.0, 1.0, DType::F32)?;
            let close = |a: &Array, b: &Array, what: &str| -> Result<()> {
                let (a, b) = (a.to_vec_as::<f64>()?, b.to_vec_as::<f64>()?);
                assert_eq!(a.len(), b.len(), "{what}");
                for (p, q) in a.iter().zip(&b) {
                    assert!(
                        (p - q).abs() <= 1e-5 * (1.0 + q.abs()),
                        "{what}: {p} vs {q}"
                    );
                }
                Ok(())
            };
            let fused = |a: &[Array]| Ok(vec![l.forward_plus(&a[0], &a[1])?]);
            let plain = |a: &[Array]| Ok(vec![crate::add(&l.forward(&a[0])?, &a[1])?]);
            let args = [x.clone(), r.clone()];
            close(&fused(&args)?[0], &plain(&args)?[0], "value")?;
            fn sum_sq(y: Vec<Array>) -> Result<Vec<Array>> {
                Ok(vec![crate::sum(
                    &crate::multiply(&y[0], &y[0])?,
                    None,
                    false,
                )?])
            }
            let gf = crate::grad(|a: &[Array]| sum_sq(fused(a)?), &[0, 1])(&args)?;
            let gp = crate::grad(|a: &[Array]| sum_sq(plain(a)?), &[0, 1])(&args)?;
            close(&gf[0], &gp[0], "gradient of x")?;
            close(&gf[1], &gp[1], "gradient of the residual")?;
            // A batch of 2 of each (more rows than the kernel's 8 take the other path).
            let xb = crate::stack(&[&x, &x], 0)?;
            let rb = crate::stack(&[&r, &crate::negative(&r)?], 0)?;
            let vf = crate::vmap(fused, &[Some(0), Some(0)], &[0])(&[xb.clone(), rb.clone()])?;
            let vp = crate::vmap(plain, &[Some(0), Some(0)], &[0])(&[xb, rb])?;
            close(&vf[0], &vp[0], "vmap")
        })
    }
}
