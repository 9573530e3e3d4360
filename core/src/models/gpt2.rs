//! GPT-2: `transformers`' `GPT2LMHeadModel` with its parameter names, loading
//! Hugging Face checkpoints as they are (`Conv1D` weights `[in, out]`, with or
//! without the `transformer.` prefix) or as mlx-lm saves them (`model.` names,
//! `[out, in]` weights, MLX-quantized or not).

use super::Tensors;
use crate::nn::{Embedding, KvCache, Layer, LayerNorm, Linear, Module, Visitor};
use crate::{Array, AttentionMask, DType, Error, Result, Slice};

const OP: &str = "Gpt2";

/// GPT-2's hyperparameters: the fields of its `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct Gpt2Config {
    /// Width of the residual stream (`n_embd`).
    pub n_embd: usize,
    /// Blocks (`n_layer`).
    pub n_layer: usize,
    /// Heads (`n_head`).
    pub n_head: usize,
    /// Width of the MLP's hidden layer (`n_inner`; 4 `n_embd` when absent).
    pub n_inner: usize,
    /// Positions the learned position embedding has (`n_positions`).
    pub n_positions: usize,
    /// Tokens.
    pub vocab_size: usize,
    /// The layer norms' epsilon.
    pub layer_norm_epsilon: f64,
    /// The MLP's GELU is the tanh approximation (`gelu_new`,
    /// `gelu_pytorch_tanh`) rather than the exact one (`gelu`).
    pub gelu_tanh: bool,
    /// MLX's quantization of the checkpoint: `(group_size, bits)`.
    pub quantization: Option<(usize, usize)>,
}

impl Gpt2Config {
    /// The configuration in a `config.json` text, with `transformers`' defaults
    /// for absent fields. Settings the model does not implement (another
    /// activation, unscaled or layer-scaled attention weights) are an `Err`.
    pub fn from_json(text: &str) -> Result<Gpt2Config> {
        let bad = |m: String| Error::invalid("Gpt2Config", m);
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("config.json: {e}")))?;
        let uint = |k: &str, d: Option<usize>| -> Result<usize> {
            match v.get(k) {
                None | Some(serde_json::Value::Null) => {
                    d.ok_or_else(|| bad(format!("config.json has no {k}")))
                }
                Some(x) => x
                    .as_u64()
                    .filter(|&n| n > 0)
                    .map(|n| n as usize)
                    .ok_or_else(|| bad(format!("{k} must be a positive whole number, got {x}"))),
            }
        };
        let model_type = v.get("model_type").and_then(|x| x.as_str()).unwrap_or("");
        if model_type != "gpt2" {
            return Err(bad(format!("model_type {model_type:?} is not gpt2")));
        }
        let gelu_tanh = match v
            .get("activation_function")
            .and_then(|x| x.as_str())
            .unwrap_or("gelu_new")
        {
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => true,
            "gelu" => false,
            other => return Err(bad(format!("activation_function {other:?} is not a GELU"))),
        };
        let flag = |k: &str, d: bool| v.get(k).and_then(|x| x.as_bool()).unwrap_or(d);
        if !flag("scale_attn_weights", true)
            || flag("scale_attn_by_inverse_layer_idx", false)
            || flag("reorder_and_upcast_attn", false)
        {
            return Err(bad(
                "only attention scaled by 1/sqrt(head size) is supported \
                 (scale_attn_weights, scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn)"
                    .into(),
            ));
        }
        let n_embd = uint("n_embd", None)?;
        let n_head = uint("n_head", None)?;
        if !n_embd.is_multiple_of(n_head) {
            return Err(bad(format!(
                "n_embd ({n_embd}) must be a multiple of n_head ({n_head})"
            )));
        }
        let quantization = match v.get("quantization") {
            None | Some(serde_json::Value::Null) => None,
            Some(q) => {
                let field = |k: &str| q.get(k).and_then(|x| x.as_u64()).map(|n| n as usize);
                match (field("group_size"), field("bits")) {
                    (Some(g), Some(b)) => Some((g, b)),
                    _ => return Err(bad(format!("quantization {q} needs group_size and bits"))),
                }
            }
        };
        Ok(Gpt2Config {
            n_embd,
            n_layer: uint("n_layer", None)?,
            n_head,
            n_inner: uint("n_inner", Some(4 * n_embd))?,
            n_positions: uint("n_positions", None).or_else(|_| uint("n_ctx", None))?,
            vocab_size: uint("vocab_size", None)?,
            layer_norm_epsilon: v
                .get("layer_norm_epsilon")
                .and_then(|x| x.as_f64())
                .unwrap_or(1e-5),
            gelu_tanh,
            quantization,
        })
    }
}

/// Causal self-attention (`attn`): one projection to queries, keys and values.
pub struct Gpt2Attention {
    /// `[3 n_embd, n_embd]` (queries, keys, values).
    pub c_attn: Linear,
    /// `[n_embd, n_embd]`.
    pub c_proj: Linear,
    heads: usize,
}

impl Gpt2Attention {
    fn forward(&self, x: &Array, cache: Option<&mut KvCache>) -> Result<Array> {
        let (b, l) = (x.shape()[0] as isize, x.shape()[1] as isize);
        let qkv = self.c_attn.forward(x)?;
        let d = qkv.shape()[2] as isize / 3;
        let part = |i: isize| -> Result<Array> {
            let p = qkv.slice(&[Slice::ALL, Slice::ALL, Slice::range(i * d, (i + 1) * d)])?;
            crate::swapaxes(&crate::reshape(&p, &[b, l, self.heads as isize, -1])?, 1, 2)
        };
        let (q, k, v) = (part(0)?, part(1)?, part(2)?);
        let (k, v) = match cache {
            Some(c) => c.update(&k, &v)?,
            None => (k, v),
        };
        let mask = if l > 1 {
            AttentionMask::Causal
        } else {
            AttentionMask::None
        };
        let o = crate::scaled_dot_product_attention(&q, &k, &v, None, mask)?;
        self.c_proj
            .forward(&crate::reshape(&crate::swapaxes(&o, 1, 2)?, &[b, l, -1])?)
    }
}

impl Module for Gpt2Attention {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("c_attn", &self.c_attn);
        v.module("c_proj", &self.c_proj);
    }
}

/// The MLP (`mlp`): `c_proj(gelu(c_fc(x)))`.
pub struct Gpt2Mlp {
    /// `[n_inner, n_embd]`.
    pub c_fc: Linear,
    /// `[n_embd, n_inner]`.
    pub c_proj: Linear,
    gelu_tanh: bool,
}

impl Module for Gpt2Mlp {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("c_fc", &self.c_fc);
        v.module("c_proj", &self.c_proj);
    }
}

impl Layer for Gpt2Mlp {
    fn forward(&self, x: &Array) -> Result<Array> {
        let h = self.c_fc.forward(x)?;
        let h = if self.gelu_tanh {
            crate::nn::gelu_approx(&h)?
        } else {
            crate::nn::gelu(&h)?
        };
        self.c_proj.forward(&h)
    }
}

/// One block (`transformer.h.N`): pre-norm attention and MLP on the residual
/// stream.
pub struct Gpt2Block {
    /// The norm before the attention.
    pub ln_1: LayerNorm,
    /// The attention.
    pub attn: Gpt2Attention,
    /// The norm before the MLP.
    pub ln_2: LayerNorm,
    /// The MLP.
    pub mlp: Gpt2Mlp,
}

impl Module for Gpt2Block {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("ln_1", &self.ln_1);
        v.module("attn", &self.attn);
        v.module("ln_2", &self.ln_2);
        v.module("mlp", &self.mlp);
    }
}

/// The decoder (`transformer`): token and position embeddings, blocks, final norm.
pub struct Gpt2Model {
    /// `[vocab, n_embd]`; also the output layer.
    pub wte: Embedding,
    /// `[n_positions, n_embd]`.
    pub wpe: Embedding,
    /// The blocks.
    pub h: Vec<Gpt2Block>,
    /// The final norm.
    pub ln_f: LayerNorm,
}

impl Module for Gpt2Model {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("wte", &self.wte);
        v.module("wpe", &self.wpe);
        for (i, b) in self.h.iter().enumerate() {
            v.module(&format!("h.{i}"), b);
        }
        v.module("ln_f", &self.ln_f);
    }
}

/// GPT-2 (`GPT2LMHeadModel`), its output layer tied to the token embedding.
///
/// Parameters carry `transformers`' names (`transformer.h.0.attn.c_attn.weight`,
/// ...) with [`Linear`]'s `[out, in]` weights, as MLX keeps them; [`Gpt2::load`]
/// and [`Gpt2::from_tensors`] also take `transformers`' `[in, out]` layout.
pub struct Gpt2 {
    /// The hyperparameters.
    pub config: Gpt2Config,
    /// The decoder.
    pub transformer: Gpt2Model,
}

impl Module for Gpt2 {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("transformer", &self.transformer);
    }
}

impl Gpt2 {
    /// The model of `config` holding a checkpoint's `tensors`: `transformers`'
    /// names with or without the `transformer.` prefix and `Conv1D` weights `[in,
    /// out]`, or mlx-lm's `model.` names with `[out, in]` weights (the only form
    /// MLX-quantized checkpoints take). Attention-mask buffers and a tied
    /// `lm_head.weight` are dropped; missing, misshapen or unused tensors are an
    /// `Err` naming them.
    pub fn from_tensors(config: Gpt2Config, tensors: Vec<(String, Array)>) -> Result<Gpt2> {
        let c = &config;
        let any = |p: &str| tensors.iter().any(|(n, _)| n.starts_with(p));
        let (prefix, hf) = if any("model.") {
            ("model.", false)
        } else if any("transformer.") {
            ("transformer.", true)
        } else {
            ("", true)
        };
        if hf && c.quantization.is_some() {
            return Err(Error::invalid(
                OP,
                "an MLX-quantized GPT-2 has mlx-lm's `model.` names",
            ));
        }
        let mut t = Tensors::new(OP, tensors, c.quantization, prefix);
        let (d, inner) = (c.n_embd, c.n_inner);
        let wte = t.embedding("wte", [c.vocab_size, d])?;
        let wpe = t.embedding("wpe", [c.n_positions, d])?;
        let mut h = Vec::with_capacity(c.n_layer);
        for n in 0..c.n_layer {
            let p = |s: &str| format!("h.{n}.{s}");
            let eps = c.layer_norm_epsilon;
            h.push(Gpt2Block {
                ln_1: t.layer_norm(&p("ln_1"), d, eps)?,
                attn: Gpt2Attention {
                    c_attn: t.linear_as(&p("attn.c_attn"), true, [3 * d, d], hf)?,
                    c_proj: t.linear_as(&p("attn.c_proj"), true, [d, d], hf)?,
                    heads: c.n_head,
                },
                ln_2: t.layer_norm(&p("ln_2"), d, eps)?,
                mlp: Gpt2Mlp {
                    c_fc: t.linear_as(&p("mlp.c_fc"), true, [inner, d], hf)?,
                    c_proj: t.linear_as(&p("mlp.c_proj"), true, [d, inner], hf)?,
                    gelu_tanh: c.gelu_tanh,
                },
            });
        }
        let ln_f = t.layer_norm("ln_f", d, c.layer_norm_epsilon)?;
        t.finish(&[".attn.bias", ".attn.masked_bias", "lm_head.weight"])?;
        Ok(Gpt2 {
            config,
            transformer: Gpt2Model { wte, wpe, h, ln_f },
        })
    }

    /// Loads a Hugging Face checkpoint folder (`config.json` and
    /// `model.safetensors` or its shards) onto the default device.
    #[cfg(all(feature = "io", not(target_arch = "wasm32")))]
    pub fn load(dir: impl AsRef<std::path::Path>) -> Result<Gpt2> {
        let dir = dir.as_ref();
        let text = std::fs::read_to_string(dir.join("config.json")).map_err(|e| {
            Error::invalid(OP, format!("{}: {e}", dir.join("config.json").display()))
        })?;
        Gpt2::from_tensors(
            Gpt2Config::from_json(&text)?,
            super::checkpoint_tensors(dir)?,
        )
    }

    /// The logits `[B, L, vocab]` of `tokens` (`[B, L]` integers) at the positions
    /// after those the caches hold (from 0 without caches); the caches take the
    /// new keys and values. Positions past `n_positions` are an `Err`.
    pub fn forward(&self, tokens: &Array, caches: Option<&mut [KvCache]>) -> Result<Array> {
        let m = &self.transformer;
        let offset = super::first_position(OP, tokens, &caches)?;
        let l = tokens.shape()[1];
        if offset + l > self.config.n_positions {
            return Err(Error::invalid(
                OP,
                format!(
                    "positions {offset}..{} past the {} GPT-2 has",
                    offset + l,
                    self.config.n_positions
                ),
            ));
        }
        let positions = crate::with_device(tokens.device(), || {
            crate::arange(offset as f64, (offset + l) as f64, 1.0, DType::I32)
        })?;
        let x = crate::add(&m.wte.forward(tokens)?, &m.wpe.forward(&positions)?)?;
        let x = super::through_layers(OP, &m.h, x, caches, |b, x, c| b.forward(x, c))?;
        m.wte.as_linear(&m.ln_f.forward(&x)?)
    }
}

impl Gpt2Block {
    fn forward(&self, x: &Array, cache: Option<&mut KvCache>) -> Result<Array> {
        let x = crate::add(x, &self.attn.forward(&self.ln_1.forward(x)?, cache)?)?;
        crate::add(&x, &self.mlp.forward(&self.ln_2.forward(&x)?)?)
    }
}

impl super::LanguageModel for Gpt2 {
    fn forward(&self, tokens: &Array, caches: Option<&mut [KvCache]>) -> Result<Array> {
        Gpt2::forward(self, tokens, caches)
    }

    fn new_cache(&self) -> Vec<KvCache> {
        (0..self.transformer.h.len())
            .map(|_| KvCache::new())
            .collect()
    }

    fn device(&self) -> crate::Device {
        self.transformer.wte.weight.value().device().clone()
    }
}
