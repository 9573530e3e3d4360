//! The Llama family (Llama 2/3, Mistral, Qwen2): `transformers`' `LlamaForCausalLM`
//! with its parameter names, so Hugging Face checkpoints load as they are, f32,
//! f16, bf16 or MLX-quantized.

use super::Tensors;
use crate::nn::{Embedding, KvCache, Layer, Linear, LinearGroup, Module, RmsNorm, Visitor};
use crate::{Array, AttentionMask, DType, Error, Result};

const OP: &str = "Llama";

/// A Llama model's hyperparameters: the fields of its `config.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Decoder layers.
    pub num_hidden_layers: usize,
    /// Width of the MLP's hidden layer.
    pub intermediate_size: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key and value heads (grouped-query attention when fewer than the query
    /// heads).
    pub num_key_value_heads: usize,
    /// Size of each head.
    pub head_dim: usize,
    /// The RMS norms' epsilon.
    pub rms_norm_eps: f64,
    /// Tokens.
    pub vocab_size: usize,
    /// RoPE's base.
    pub rope_theta: f64,
    /// Positions are divided by this (`rope_scaling` of type `linear`; 1 without).
    pub rope_scale: f64,
    /// Mistral's sliding window: attention sees this many positions back. wmx
    /// attends to every position, so a longer sequence is an `Err` rather than
    /// different numbers.
    pub sliding_window: Option<usize>,
    /// The output layer is the embedding's transpose.
    pub tie_word_embeddings: bool,
    /// The attention projections have biases (Qwen2).
    pub attention_bias: bool,
    /// The MLP's projections have biases.
    pub mlp_bias: bool,
    /// MLX's quantization of the checkpoint: `(group_size, bits)`.
    pub quantization: Option<(usize, usize)>,
}

impl LlamaConfig {
    /// The configuration in a `config.json` text. Absent optional fields take
    /// `transformers`' defaults (`num_key_value_heads` = heads, `head_dim` =
    /// hidden / heads, `rope_theta` 10000, untied embeddings; Qwen2's
    /// `model_type` implies biases on q, k and v). RoPE's settings come from
    /// `rope_parameters` (transformers 5) or `rope_theta` and `rope_scaling`; an
    /// unknown scaling type is an `Err` rather than wrong positions.
    pub fn from_json(text: &str) -> Result<LlamaConfig> {
        let bad = |m: String| Error::invalid("LlamaConfig", m);
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("config.json: {e}")))?;
        let uint = |k: &str| -> Result<Option<usize>> {
            match v.get(k) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(x) => x
                    .as_u64()
                    .map(|n| Some(n as usize))
                    .ok_or_else(|| bad(format!("{k} must be a whole number, got {x}"))),
            }
        };
        let need = |k: &str| uint(k)?.ok_or_else(|| bad(format!("config.json has no {k}")));
        let float = |k: &str, d: f64| -> Result<f64> {
            match v.get(k) {
                None | Some(serde_json::Value::Null) => Ok(d),
                Some(x) => x
                    .as_f64()
                    .ok_or_else(|| bad(format!("{k} must be a number, got {x}"))),
            }
        };
        let flag = |k: &str, d: bool| v.get(k).and_then(|x| x.as_bool()).unwrap_or(d);
        let model_type = v
            .get("model_type")
            .and_then(|x| x.as_str())
            .unwrap_or("llama");
        if !matches!(model_type, "llama" | "mistral" | "qwen2") {
            return Err(bad(format!(
                "model_type {model_type:?} is not of the Llama family (llama, mistral, qwen2)"
            )));
        }
        let hidden_size = need("hidden_size")?;
        let heads = need("num_attention_heads")?;
        if heads == 0 || hidden_size == 0 {
            return Err(bad(
                "hidden_size and num_attention_heads must be positive".into()
            ));
        }
        // transformers 5 writes `rope_parameters` (theta, type, factor); earlier
        // versions `rope_theta` and `rope_scaling`.
        let params = v.get("rope_parameters").filter(|p| p.is_object());
        let rope_theta = match params.and_then(|p| p.get("rope_theta")) {
            Some(t) => t.as_f64().ok_or_else(|| {
                bad(format!(
                    "rope_parameters.rope_theta must be a number, got {t}"
                ))
            })?,
            None => float("rope_theta", 10000.0)?,
        };
        let key = if params.is_some() {
            "rope_parameters"
        } else {
            "rope_scaling"
        };
        let rope_scale = match params.or_else(|| v.get("rope_scaling")) {
            None | Some(serde_json::Value::Null) => 1.0,
            Some(s) => {
                let kind = s
                    .get("rope_type")
                    .or_else(|| s.get("type"))
                    .and_then(|x| x.as_str())
                    .unwrap_or("default");
                match (kind, s.get("factor").and_then(|x| x.as_f64())) {
                    ("linear", Some(f)) if f > 0.0 => 1.0 / f,
                    ("default", _) => 1.0,
                    _ => {
                        return Err(bad(format!(
                            "{key} {s} is not supported (linear scaling is)"
                        )));
                    }
                }
            }
        };
        let sliding_window = match (flag("use_sliding_window", true), v.get("sliding_window")) {
            (true, Some(w)) if !w.is_null() => {
                Some(w.as_u64().map(|n| n as usize).ok_or_else(|| {
                    bad(format!("sliding_window must be a whole number, got {w}"))
                })?)
            }
            _ => None,
        };
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
        Ok(LlamaConfig {
            hidden_size,
            num_hidden_layers: need("num_hidden_layers")?,
            intermediate_size: need("intermediate_size")?,
            num_attention_heads: heads,
            num_key_value_heads: uint("num_key_value_heads")?.unwrap_or(heads),
            head_dim: uint("head_dim")?.unwrap_or(hidden_size / heads),
            rms_norm_eps: float("rms_norm_eps", 1e-6)?,
            vocab_size: need("vocab_size")?,
            rope_theta,
            rope_scale,
            sliding_window,
            tie_word_embeddings: flag("tie_word_embeddings", false),
            attention_bias: flag("attention_bias", model_type == "qwen2"),
            mlp_bias: flag("mlp_bias", false),
            quantization,
        })
    }
}

/// Self-attention with grouped-query heads and RoPE (`self_attn`).
pub struct LlamaAttention {
    /// `[heads * head_dim, hidden]`.
    pub q_proj: Linear,
    /// `[kv_heads * head_dim, hidden]`.
    pub k_proj: Linear,
    /// `[kv_heads * head_dim, hidden]`.
    pub v_proj: Linear,
    /// `[hidden, heads * head_dim]`.
    pub o_proj: Linear,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    rope_theta: f64,
    rope_scale: f64,
    /// q, k and v as one product.
    qkv: LinearGroup,
}

impl LlamaAttention {
    /// `x` `[B, L, hidden]` at positions `cache.offset()..` (0.. without a cache).
    pub fn forward(&self, x: &Array, cache: Option<&mut KvCache>) -> Result<Array> {
        let offset = cache.as_ref().map_or(0, |c| c.offset());
        let off = crate::with_device(x.device(), || crate::scalar(offset as f64, DType::I32))?;
        self.forward_at(x, cache, &off)
    }

    /// [`LlamaAttention::forward`] with the first position given as an i32 scalar
    /// (one array for every layer of a step).
    fn forward_at(&self, x: &Array, cache: Option<&mut KvCache>, off: &Array) -> Result<Array> {
        self.forward_plus(x, cache, off, None)
    }

    /// [`LlamaAttention::forward_at`] plus `residual` (added by the output
    /// projection's product).
    fn forward_plus(
        &self,
        x: &Array,
        cache: Option<&mut KvCache>,
        off: &Array,
        residual: Option<&Array>,
    ) -> Result<Array> {
        let (b, l) = (x.shape()[0] as isize, x.shape()[1] as isize);
        let heads = |y: &Array| -> Result<Array> {
            crate::swapaxes(
                &crate::reshape(y, &[b, l, -1, self.head_dim as isize])?,
                1,
                2,
            )
        };
        let rope = |t: &Array| {
            crate::rope(
                t,
                self.head_dim,
                false,
                Some(self.rope_theta),
                self.rope_scale,
                off,
                None,
            )
        };
        let projs = [&self.q_proj, &self.k_proj, &self.v_proj];
        // One product for q, k and v, and one RoPE for q and k.
        let joined = self.qkv.forward(&projs, x)?;
        let (q, k, v) = match joined {
            Some(y) => {
                let (h, kv) = (self.heads as isize, self.kv_heads as isize);
                let t = heads(&y)?;
                let heads_in =
                    |a: isize, z: isize| t.slice(&[crate::Slice::ALL, crate::Slice::range(a, z)]);
                let qk = rope(&heads_in(0, h + kv)?)?;
                let q = qk.slice(&[crate::Slice::ALL, crate::Slice::range(0, h)])?;
                let k = qk.slice(&[crate::Slice::ALL, crate::Slice::range(h, h + kv)])?;
                (q, k, heads_in(h + kv, h + 2 * kv)?)
            }
            None => (
                rope(&heads(&self.q_proj.forward(x)?)?)?,
                rope(&heads(&self.k_proj.forward(x)?)?)?,
                heads(&self.v_proj.forward(x)?)?,
            ),
        };
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
        let o = crate::reshape(&crate::swapaxes(&o, 1, 2)?, &[b, l, -1])?;
        match residual {
            Some(r) => self.o_proj.forward_plus(&o, r),
            None => self.o_proj.forward(&o),
        }
    }
}

impl Module for LlamaAttention {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("q_proj", &self.q_proj);
        v.module("k_proj", &self.k_proj);
        v.module("v_proj", &self.v_proj);
        v.module("o_proj", &self.o_proj);
    }
}

/// The SwiGLU MLP (`mlp`): `down(silu(gate(x)) * up(x))`.
pub struct LlamaMlp {
    /// `[intermediate, hidden]`.
    pub gate_proj: Linear,
    /// `[intermediate, hidden]`.
    pub up_proj: Linear,
    /// `[hidden, intermediate]`.
    pub down_proj: Linear,
    /// gate and up as one product.
    gate_up: LinearGroup,
}

impl Module for LlamaMlp {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("gate_proj", &self.gate_proj);
        v.module("up_proj", &self.up_proj);
        v.module("down_proj", &self.down_proj);
    }
}

impl Layer for LlamaMlp {
    fn forward(&self, x: &Array) -> Result<Array> {
        self.forward_plus(x, None)
    }
}

impl LlamaMlp {
    /// [`Layer::forward`] plus `residual` (added by the down projection's
    /// product); gate and up as one product.
    fn forward_plus(&self, x: &Array, residual: Option<&Array>) -> Result<Array> {
        let joined = self.gate_up.forward(&[&self.gate_proj, &self.up_proj], x)?;
        let (g, u) = match joined {
            Some(y) => {
                let i = self.gate_proj.weight.value().shape()[0] as isize;
                let cols = |a: isize, z: isize| {
                    let mut s = vec![crate::Slice::ALL; y.ndim() - 1];
                    s.push(crate::Slice::range(a, z));
                    y.slice(&s)
                };
                (cols(0, i)?, cols(i, 2 * i)?)
            }
            None => (self.gate_proj.forward(x)?, self.up_proj.forward(x)?),
        };
        let act = crate::multiply(&crate::nn::silu(&g)?, &u)?;
        match residual {
            Some(r) => self.down_proj.forward_plus(&act, r),
            None => self.down_proj.forward(&act),
        }
    }
}

/// One decoder layer (`model.layers.N`): pre-norm attention and MLP, each added to
/// the residual stream.
pub struct LlamaLayer {
    /// The attention.
    pub self_attn: LlamaAttention,
    /// The MLP.
    pub mlp: LlamaMlp,
    /// The norm before the attention.
    pub input_layernorm: RmsNorm,
    /// The norm before the MLP.
    pub post_attention_layernorm: RmsNorm,
}

impl Module for LlamaLayer {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("self_attn", &self.self_attn);
        v.module("mlp", &self.mlp);
        v.module("input_layernorm", &self.input_layernorm);
        v.module("post_attention_layernorm", &self.post_attention_layernorm);
    }
}

impl LlamaLayer {
    fn forward(&self, h: &Array, cache: Option<&mut KvCache>, off: &Array) -> Result<Array> {
        // Each residual connection is its product's addend.
        let x = self.input_layernorm.forward(h)?;
        let h = self.self_attn.forward_plus(&x, cache, off, Some(h))?;
        let x = self.post_attention_layernorm.forward(&h)?;
        self.mlp.forward_plus(&x, Some(&h))
    }
}

/// The decoder (`model`): embedding, layers, final norm.
pub struct LlamaModel {
    /// `[vocab, hidden]`.
    pub embed_tokens: Embedding,
    /// The decoder layers.
    pub layers: Vec<LlamaLayer>,
    /// The final norm.
    pub norm: RmsNorm,
}

impl Module for LlamaModel {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("embed_tokens", &self.embed_tokens);
        for (i, l) in self.layers.iter().enumerate() {
            v.module(&format!("layers.{i}"), l);
        }
        v.module("norm", &self.norm);
    }
}

/// A Llama-family causal language model (`LlamaForCausalLM`).
///
/// Its parameters carry `transformers`' names (`model.layers.0.self_attn.q_proj.
/// weight`, ...), so [`crate::nn::ModuleExt::load_weights`] and
/// [`Llama::from_tensors`] take Hugging Face checkpoints as they are.
pub struct Llama {
    /// The hyperparameters.
    pub config: LlamaConfig,
    /// The decoder.
    pub model: LlamaModel,
    /// The output layer (`None` when tied to the embedding).
    pub lm_head: Option<Linear>,
}

impl Module for Llama {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("model", &self.model);
        if let Some(h) = &self.lm_head {
            v.module("lm_head", h);
        }
    }
}

impl Llama {
    /// The model of `config` holding a checkpoint's `tensors` (name, array), in
    /// their dtype (MLX-quantized when `config.quantization` is set). Missing,
    /// misshapen or unused tensors are an `Err` naming them.
    pub fn from_tensors(config: LlamaConfig, tensors: Vec<(String, Array)>) -> Result<Llama> {
        let c = &config;
        if c.num_key_value_heads == 0
            || !c.num_attention_heads.is_multiple_of(c.num_key_value_heads)
        {
            return Err(Error::invalid(
                OP,
                format!(
                    "num_attention_heads ({}) must be a positive multiple of num_key_value_heads ({})",
                    c.num_attention_heads, c.num_key_value_heads
                ),
            ));
        }
        let mut t = Tensors::new(OP, tensors, c.quantization, "");
        let (d, hd, i) = (c.hidden_size, c.head_dim, c.intermediate_size);
        let (qd, kvd) = (c.num_attention_heads * hd, c.num_key_value_heads * hd);
        let embed_tokens = t.embedding("model.embed_tokens", [c.vocab_size, d])?;
        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for n in 0..c.num_hidden_layers {
            let p = |s: &str| format!("model.layers.{n}.{s}");
            let ab = c.attention_bias;
            let self_attn = LlamaAttention {
                q_proj: t.linear(&p("self_attn.q_proj"), ab, [qd, d])?,
                k_proj: t.linear(&p("self_attn.k_proj"), ab, [kvd, d])?,
                v_proj: t.linear(&p("self_attn.v_proj"), ab, [kvd, d])?,
                // transformers' Qwen2 has no bias on the output projection.
                o_proj: t.linear(
                    &p("self_attn.o_proj"),
                    ab && t.has(&p("self_attn.o_proj.bias")),
                    [d, qd],
                )?,
                heads: c.num_attention_heads,
                kv_heads: c.num_key_value_heads,
                head_dim: hd,
                rope_theta: c.rope_theta,
                rope_scale: c.rope_scale,
                qkv: LinearGroup::default(),
            };
            let mlp = LlamaMlp {
                gate_proj: t.linear(&p("mlp.gate_proj"), c.mlp_bias, [i, d])?,
                up_proj: t.linear(&p("mlp.up_proj"), c.mlp_bias, [i, d])?,
                down_proj: t.linear(&p("mlp.down_proj"), c.mlp_bias, [d, i])?,
                gate_up: LinearGroup::default(),
            };
            layers.push(LlamaLayer {
                self_attn,
                mlp,
                input_layernorm: t.rms_norm(&p("input_layernorm"), d, c.rms_norm_eps)?,
                post_attention_layernorm: t.rms_norm(
                    &p("post_attention_layernorm"),
                    d,
                    c.rms_norm_eps,
                )?,
            });
        }
        let norm = t.rms_norm("model.norm", d, c.rms_norm_eps)?;
        let lm_head = if c.tie_word_embeddings {
            None
        } else {
            Some(t.linear("lm_head", false, [c.vocab_size, d])?)
        };
        // A tied output layer that an exporter also wrote is the embedding again.
        let tied: &[&str] = if c.tie_word_embeddings {
            &["rotary_emb.inv_freq", "lm_head.weight"]
        } else {
            &["rotary_emb.inv_freq"]
        };
        t.finish(tied)?;
        Ok(Llama {
            config,
            model: LlamaModel {
                embed_tokens,
                layers,
                norm,
            },
            lm_head,
        })
    }

    /// Loads a Hugging Face checkpoint folder: `config.json` and `model.safetensors`
    /// or the shards that `model.safetensors.index.json` lists, onto the default
    /// device.
    #[cfg(all(feature = "io", not(target_arch = "wasm32")))]
    pub fn load(dir: impl AsRef<std::path::Path>) -> Result<Llama> {
        let dir = dir.as_ref();
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f))
                .map_err(|e| Error::invalid(OP, format!("{}: {e}", dir.join(f).display())))
        };
        let config = LlamaConfig::from_json(&read("config.json")?)?;
        Llama::from_tensors(config, super::checkpoint_tensors(dir)?)
    }

    /// One KV cache per layer, for [`Llama::forward`].
    pub fn new_cache(&self) -> Vec<KvCache> {
        (0..self.model.layers.len())
            .map(|_| KvCache::new())
            .collect()
    }

    /// The logits `[B, L, vocab]` of `tokens` (`[B, L]` integers) at the positions
    /// after those the caches hold (from 0 without caches); the caches take the
    /// new keys and values.
    pub fn forward(&self, tokens: &Array, caches: Option<&mut [KvCache]>) -> Result<Array> {
        let offset = super::first_position(OP, tokens, &caches)?;
        if let Some(w) = self.config.sliding_window
            && offset + tokens.shape()[1] > w
        {
            return Err(Error::invalid(
                OP,
                format!(
                    "positions {offset}..{} pass the sliding window of {w}, which wmx does not apply",
                    offset + tokens.shape()[1]
                ),
            ));
        }
        let h = self.model.embed_tokens.forward(tokens)?;
        let off = crate::with_device(h.device(), || crate::scalar(offset as f64, DType::I32))?;
        let h = super::through_layers(OP, &self.model.layers, h, caches, |l, h, c| {
            l.forward(h, c, &off)
        })?;
        let h = self.model.norm.forward(&h)?;
        match &self.lm_head {
            Some(head) => head.forward(&h),
            None => self.model.embed_tokens.as_linear(&h),
        }
    }
}

impl super::LanguageModel for Llama {
    fn forward(&self, tokens: &Array, caches: Option<&mut [KvCache]>) -> Result<Array> {
        Llama::forward(self, tokens, caches)
    }

    fn new_cache(&self) -> Vec<KvCache> {
        Llama::new_cache(self)
    }

    fn device(&self) -> crate::Device {
        self.model.norm.weight.value().device().clone()
    }
}
