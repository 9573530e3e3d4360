//! Language models on `nn`'s layers, loading Hugging Face checkpoints as they are
//! (`config.json` and safetensors, f32/f16/bf16 or MLX-quantized): the Llama
//! family ([`Llama`]) and GPT-2 ([`Gpt2`]), either through [`load`] (or
//! [`from_config`] where there are no files, as in the browser); [`generate`]
//! drives any [`LanguageModel`] with mlx-lm's samplers.

mod generate;
mod gpt2;
mod llama;

use crate::nn::{Embedding, KvCache, LayerNorm, Linear, RmsNorm};
use crate::{Array, Error, Result};

pub use generate::{GenerateOptions, Generation, LanguageModel, Sampling, generate};
pub use gpt2::{Gpt2, Gpt2Attention, Gpt2Block, Gpt2Config, Gpt2Mlp, Gpt2Model};
pub use llama::{Llama, LlamaAttention, LlamaConfig, LlamaLayer, LlamaMlp, LlamaModel};

/// Loads the Hugging Face checkpoint folder `dir` as the model its `config.json`
/// names onto the default device, as mlx-lm's `load` ([`from_config`] on the
/// folder's files).
#[cfg(all(feature = "io", not(target_arch = "wasm32")))]
pub fn load(dir: impl AsRef<std::path::Path>) -> Result<Box<dyn LanguageModel>> {
    let dir = dir.as_ref();
    let file = dir.join("config.json");
    let text = std::fs::read_to_string(&file)
        .map_err(|e| Error::invalid("models::load", format!("{}: {e}", file.display())))?;
    model_type(&text)?;
    from_config(&text, checkpoint_tensors(dir)?)
}

/// The `model_type` of a `config.json` text, if wmx has it (absent: llama).
fn model_type(config_json: &str) -> Result<&'static str> {
    let v: serde_json::Value = serde_json::from_str(config_json)
        .map_err(|e| Error::invalid("models::from_config", format!("config.json: {e}")))?;
    match v.get("model_type").and_then(|t| t.as_str()) {
        Some("gpt2") => Ok("gpt2"),
        Some("llama" | "mistral" | "qwen2") | None => Ok("llama"),
        Some(other) => Err(Error::invalid(
            "models::from_config",
            format!("model_type {other:?} is not one wmx has (llama, mistral, qwen2, gpt2)"),
        )),
    }
}

/// The model a `config.json` text names (`model_type` llama, mistral, qwen2:
/// [`Llama`]; gpt2: [`Gpt2`]) holding a checkpoint's named `tensors`. Another
/// `model_type` is an `Err`.
pub fn from_config(
    config_json: &str,
    tensors: Vec<(String, Array)>,
) -> Result<Box<dyn LanguageModel>> {
    if model_type(config_json)? == "gpt2" {
        Ok(Box::new(Gpt2::from_tensors(
            Gpt2Config::from_json(config_json)?,
            tensors,
        )?))
    } else {
        Ok(Box::new(Llama::from_tensors(
            LlamaConfig::from_json(config_json)?,
            tensors,
        )?))
    }
}

/// The tensors of a checkpoint folder: `model.safetensors`, or every shard that
/// `model.safetensors.index.json` maps names to.
#[cfg(all(feature = "io", not(target_arch = "wasm32")))]
pub(crate) fn checkpoint_tensors(
    dir: &std::path::Path,
) -> crate::Result<Vec<(String, crate::Array)>> {
    let bad = |m: String| crate::Error::invalid("load", m);
    let single = dir.join("model.safetensors");
    if single.exists() {
        return crate::io::load_safetensors(&single);
    }
    let index = dir.join("model.safetensors.index.json");
    let text = std::fs::read_to_string(&index).map_err(|e| {
        bad(format!(
            "{}: neither model.safetensors nor its index ({e})",
            dir.display()
        ))
    })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("{}: {e}", index.display())))?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| bad(format!("{} has no weight_map", index.display())))?;
    let mut files: Vec<&str> = map.values().filter_map(|f| f.as_str()).collect();
    files.sort_unstable();
    files.dedup();
    let mut out = Vec::new();
    for f in files {
        out.extend(crate::io::load_safetensors(dir.join(f))?);
    }
    Ok(out)
}

/// Checks that `tokens` are `[batch, length]` integers and returns the first
/// position: the positions the caches hold (0 without caches).
pub(crate) fn first_position(
    op: &'static str,
    tokens: &Array,
    caches: &Option<&mut [KvCache]>,
) -> Result<usize> {
    if tokens.ndim() != 2 || !tokens.dtype().is_int() {
        return Err(Error::invalid(
            op,
            format!(
                "tokens must be [batch, length] integers, got {} {:?}",
                tokens.dtype(),
                tokens.shape()
            ),
        ));
    }
    Ok(caches
        .as_ref()
        .and_then(|c| c.first())
        .map_or(0, |c| c.offset()))
}

/// `h` through `layers` in turn (`layer(l, h, cache)`), each with its own cache
/// when there are caches: one per layer, or an `Err`.
pub(crate) fn through_layers<L>(
    op: &'static str,
    layers: &[L],
    mut h: Array,
    caches: Option<&mut [KvCache]>,
    layer: impl Fn(&L, &Array, Option<&mut KvCache>) -> Result<Array>,
) -> Result<Array> {
    match caches {
        Some(c) => {
            if c.len() != layers.len() {
                return Err(Error::invalid(
                    op,
                    format!("{} caches for {} layers", c.len(), layers.len()),
                ));
            }
            for (l, cache) in layers.iter().zip(c.iter_mut()) {
                h = layer(l, &h, Some(cache))?;
            }
        }
        None => {
            for l in layers {
                h = layer(l, &h, None)?;
            }
        }
    }
    Ok(h)
}

/// Takes the named tensors of a checkpoint as layers are built: `prefix` goes
/// before each name, and MLX-quantized weights come with their scales and biases.
pub(crate) struct Tensors {
    op: &'static str,
    map: std::collections::BTreeMap<String, Array>,
    quant: Option<(usize, usize)>,
    prefix: String,
}

impl Tensors {
    pub(crate) fn new(
        op: &'static str,
        tensors: Vec<(String, Array)>,
        quant: Option<(usize, usize)>,
        prefix: &str,
    ) -> Tensors {
        Tensors {
            op,
            map: tensors.into_iter().collect(),
            quant,
            prefix: prefix.into(),
        }
    }

    fn has(&self, name: &str) -> bool {
        self.map.contains_key(&format!("{}{name}", self.prefix))
    }

    fn take(&mut self, name: &str) -> Result<Array> {
        let full = format!("{}{name}", self.prefix);
        self.map
            .remove(&full)
            .ok_or_else(|| Error::invalid(self.op, format!("the checkpoint has no {full}")))
    }

    fn check_shape(&self, name: &str, a: &Array, want: &[usize]) -> Result<()> {
        if a.shape() != want {
            return Err(Error::invalid(
                self.op,
                format!(
                    "{}{name} is {:?} in the checkpoint, the configuration makes it {want:?}",
                    self.prefix,
                    a.shape()
                ),
            ));
        }
        Ok(())
    }

    /// A linear layer `[out, in]`; with `transposed`, a float weight is stored
    /// `[in, out]` (`transformers`' `Conv1D`, GPT-2's) and is transposed here.
    fn linear_as(
        &mut self,
        name: &str,
        bias: bool,
        [out, inp]: [usize; 2],
        transposed: bool,
    ) -> Result<Linear> {
        let b = if bias {
            Some(self.take(&format!("{name}.bias"))?)
        } else {
            None
        };
        let w = self.take(&format!("{name}.weight"))?;
        match self.quant {
            Some((g, bits)) => Linear::from_quantized(
                w,
                self.take(&format!("{name}.scales"))?,
                self.take(&format!("{name}.biases"))?,
                b,
                g,
                bits,
            ),
            None if transposed => {
                self.check_shape(name, &w, &[inp, out])?;
                Linear::from_arrays(crate::contiguous(&crate::swapaxes(&w, 0, 1)?)?, b)
            }
            None => {
                self.check_shape(name, &w, &[out, inp])?;
                Linear::from_arrays(w, b)
            }
        }
    }

    fn linear(&mut self, name: &str, bias: bool, shape: [usize; 2]) -> Result<Linear> {
        self.linear_as(name, bias, shape, false)
    }

    fn embedding(&mut self, name: &str, shape: [usize; 2]) -> Result<Embedding> {
        let w = self.take(&format!("{name}.weight"))?;
        match self.quant {
            Some((g, bits)) => Embedding::from_quantized(
                w,
                self.take(&format!("{name}.scales"))?,
                self.take(&format!("{name}.biases"))?,
                g,
                bits,
            ),
            None => {
                self.check_shape(name, &w, &shape)?;
                Embedding::from_array(w)
            }
        }
    }

    fn rms_norm(&mut self, name: &str, dims: usize, eps: f64) -> Result<RmsNorm> {
        let w = self.take(&format!("{name}.weight"))?;
        self.check_shape(name, &w, &[dims])?;
        let n = RmsNorm::new(dims, eps)?;
        n.weight.replace(w);
        Ok(n)
    }

    fn layer_norm(&mut self, name: &str, dims: usize, eps: f64) -> Result<LayerNorm> {
        let n = LayerNorm::new(dims, eps, true, true)?;
        for (p, part) in [(&n.weight, "weight"), (&n.bias, "bias")] {
            let a = self.take(&format!("{name}.{part}"))?;
            self.check_shape(name, &a, &[dims])?;
            p.as_ref().expect("an affine norm").replace(a);
        }
        Ok(n)
    }

    /// An `Err` naming tensors no layer took, but for buffers that exporters
    /// save beside the weights: RoPE's inverse frequencies, GPT-2's causal masks,
    /// and a tied output layer.
    fn finish(self, ignored: &[&str]) -> Result<()> {
        let left: Vec<&String> = self
            .map
            .keys()
            .filter(|k| !ignored.iter().any(|s| k.ends_with(s)))
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(Error::invalid(
                self.op,
                format!("the checkpoint has tensors the model does not: {left:?}"),
            ))
        }
    }
}
