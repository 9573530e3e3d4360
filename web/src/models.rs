//! Language models in the browser: a checkpoint's `config.json` and safetensors
//! bytes (fetched by the page) as a `LanguageModel`, its logits, and generation
//! with mlx-lm's samplers, each token read without blocking.

use crate::api::{JsResult, NdArray, field, lead, wrap};
use crate::convert::{err, js_err};
use crate::types::*;
use std::rc::Rc;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wmx_core::models::{self, GenerateOptions, Generation, Sampling};
use wmx_core::{self as wc, Array, DType};

/// safetensors' dtypes and wmx's.
const DTYPES: [(safetensors::Dtype, DType); 10] = [
    (safetensors::Dtype::BOOL, DType::Bool),
    (safetensors::Dtype::U8, DType::U8),
    (safetensors::Dtype::I32, DType::I32),
    (safetensors::Dtype::U32, DType::U32),
    (safetensors::Dtype::I64, DType::I64),
    (safetensors::Dtype::U64, DType::U64),
    (safetensors::Dtype::F16, DType::F16),
    (safetensors::Dtype::BF16, DType::BF16),
    (safetensors::Dtype::F32, DType::F32),
    (safetensors::Dtype::F64, DType::F64),
];

fn tensors(bytes: &[u8], out: &mut Vec<(String, Array)>) -> JsResult<()> {
    let st = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| js_err(format!("LanguageModel: safetensors: {e}")))?;
    let device = wc::default_device().map_err(err)?;
    for (name, v) in st.tensors() {
        let Some(&(_, dtype)) = DTYPES.iter().find(|p| p.0 == v.dtype()) else {
            return Err(js_err(format!(
                "LanguageModel: tensor {name} is {:?}, which wmx does not load in the browser",
                v.dtype()
            )));
        };
        let a = Array::from_bytes_on(v.data().to_vec(), v.shape(), dtype, &device)
            .map_err(|e| js_err(format!("LanguageModel: tensor {name}: {e}")))?;
        out.push((name, a));
    }
    Ok(())
}

/// A causal language model (Llama, Mistral, Qwen2 or GPT-2) on the current device.
#[wasm_bindgen(js_name = "LanguageModel")]
pub struct LanguageModelJs {
    inner: Rc<dyn models::LanguageModel>,
}

#[wasm_bindgen(js_class = "LanguageModel")]
impl LanguageModelJs {
    /// The model of a Hugging Face checkpoint: its `config.json` text and the
    /// bytes of `model.safetensors` (or of every shard), f32/f16/bf16 or
    /// MLX-quantized. The weights go to the current device.
    #[wasm_bindgen(js_name = "fromSafetensors")]
    pub fn from_safetensors(config: &str, weights: &SafetensorsArg) -> JsResult<LanguageModelJs> {
        let w: &JsValue = weights.as_ref();
        let shards: Vec<js_sys::Uint8Array> = if js_sys::Array::is_array(w) {
            js_sys::Array::from(w)
                .iter()
                .map(|s| s.dyn_into::<js_sys::Uint8Array>())
                .collect::<Result<_, _>>()
                .map_err(|_| js_err("LanguageModel: every shard must be a Uint8Array"))?
        } else {
            vec![w.clone().dyn_into::<js_sys::Uint8Array>().map_err(|_| {
                js_err("LanguageModel: weights must be a Uint8Array or an array of them")
            })?]
        };
        let mut all = Vec::new();
        for s in shards {
            tensors(&s.to_vec(), &mut all)?;
        }
        let inner = models::from_config(config, all).map_err(err)?;
        Ok(LanguageModelJs {
            inner: Rc::from(inner),
        })
    }

    /// The logits `[B, L, vocab]` of token ids `[B, L]` (integers) from position 0.
    pub fn logits(&self, tokens: &ArrayInput) -> JsResult<NdArray> {
        let t = lead(tokens)?;
        let t = if t.dtype().is_int() {
            t
        } else {
            t.astype(DType::I32).map_err(err)?
        };
        wrap(self.inner.forward(&t, None))
    }

    /// Generates tokens after `prompt` (token ids): the prompt in one pass, then a
    /// token at a time through a KV cache, each read without blocking and passed
    /// to `options.onToken` (which may return `false` to stop). Options are
    /// mlx-lm's: `maxTokens` (default 64), `temperature` (0: greedy), `topP`,
    /// `topK`, `minP`, `minTokensToKeep`, `repetitionPenalty`,
    /// `repetitionContext`, `seed`, `stop` (token ids). Resolves to the tokens.
    pub fn generate(
        &self,
        prompt: &TokensArg,
        options: Option<GenerateOptionsArg>,
    ) -> JsResult<TokensPromise> {
        let prompt: Vec<u32> = tokens_of(prompt.as_ref())?;
        let o: JsValue = options.map(Into::into).unwrap_or(JsValue::UNDEFINED);
        let num = |k: &str| field(&o, k).as_f64();
        let count = |k: &str, d: usize| -> JsResult<usize> {
            match num(k) {
                None => Ok(d),
                Some(v) if v >= 0.0 && v.fract() == 0.0 => Ok(v as usize),
                Some(v) => Err(js_err(format!(
                    "generate: {k} must be a whole number, got {v}"
                ))),
            }
        };
        let d = Sampling::default();
        let opts = GenerateOptions {
            max_tokens: count("maxTokens", 64)?,
            stop: if field(&o, "stop").is_undefined() {
                vec![]
            } else {
                tokens_of(&field(&o, "stop"))?
            },
            sampling: Sampling {
                temperature: num("temperature").unwrap_or(d.temperature),
                top_k: count("topK", d.top_k)?,
                top_p: num("topP").unwrap_or(d.top_p),
                min_p: num("minP").unwrap_or(d.min_p),
                min_tokens_to_keep: count("minTokensToKeep", d.min_tokens_to_keep)?,
                repetition_penalty: num("repetitionPenalty"),
                repetition_context: count("repetitionContext", d.repetition_context)?,
                seed: count("seed", 0)? as u64,
            },
        };
        let on_token = field(&o, "onToken").dyn_into::<js_sys::Function>().ok();
        let model = self.inner.clone();
        Ok(wasm_bindgen_futures::future_to_promise(async move {
            let mut g = Generation::new(model.as_ref(), &prompt, opts).map_err(err)?;
            while let Some(next) = g.next_token().map_err(err)? {
                let t = next.to_vec_async::<u32>().await.map_err(err)?[0];
                let go = g.accept(t);
                let keep = match &on_token {
                    Some(f) => f.call1(&JsValue::NULL, &JsValue::from(t))?.as_bool() != Some(false),
                    None => true,
                };
                if !go || !keep {
                    break;
                }
            }
            Ok(js_sys::Uint32Array::from(g.tokens()).into())
        })
        .unchecked_into())
    }
}

fn tokens_of(v: &JsValue) -> JsResult<Vec<u32>> {
    let bad =
        || js_err("generate: token ids must be a Uint32Array or an array of whole numbers >= 0");
    if let Some(a) = v.dyn_ref::<js_sys::Uint32Array>() {
        return Ok(a.to_vec());
    }
    if !js_sys::Array::is_array(v) {
        return Err(bad());
    }
    js_sys::Array::from(v)
        .iter()
        .map(|x| match x.as_f64() {
            Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= u32::MAX as f64 => Ok(n as u32),
            _ => Err(bad()),
        })
        .collect()
}
