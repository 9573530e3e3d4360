//! Language models on `nn`'s layers, loading Hugging Face checkpoints as they are
//! (`config.json` and safetensors, f32/f16/bf16 or MLX-quantized): the Llama
//! family ([`Llama`]); [`generate`] drives any [`LanguageModel`] with mlx-lm's
//! samplers.

mod generate;
mod llama;

pub use generate::{GenerateOptions, LanguageModel, Sampling, generate};
pub use llama::{Llama, LlamaAttention, LlamaConfig, LlamaLayer, LlamaMlp, LlamaModel};

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
