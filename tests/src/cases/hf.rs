//! The models against Hugging Face `transformers` (goldens from
//! `tests/goldens/hf_models.py`, transformers and PyTorch on the CPU): tiny random
//! checkpoints as `save_pretrained` writes them (Llama with linear RoPE scaling,
//! Qwen2, Mistral, GPT-2; transformers 5's `rope_parameters`), loaded by
//! `models::load`; the logits of a prompt and `generate`'s 32 greedy tokens.

use super::goldens::Goldens;
use wmx_core::models::{self, GenerateOptions, generate};
use wmx_core::{self as wmx, Array, Device};

static HF: Goldens = Goldens::new(include_str!("../../goldens/hf_models.txt"));
const PROMPT: [u32; 9] = [1, 17, 42, 99, 5, 63, 120, 7, 33];

/// Each architecture's logits and greedy tokens equal transformers'.
pub fn transformers_models(dev: &Device) {
    let ids: Vec<i32> = PROMPT.iter().map(|&t| t as i32).collect();
    let x = super::ok("ids", Array::from_slice_on(&ids, &[1, ids.len()], dev));
    for name in ["hf_llama", "hf_qwen2", "hf_mistral", "hf_gpt2"] {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("goldens")
            .join(name);
        let m = super::ok(name, wmx::with_device(dev, || models::load(&dir)));
        let logits = super::ok(name, m.forward(&x, None));
        let l = super::ok(
            "reshape",
            wmx::reshape(&logits, &[PROMPT.len() as isize, -1]),
        );
        HF.check(
            &format!("{name} logits on {dev}"),
            &l,
            &format!("{name}.logits"),
            1e-4,
            1e-4,
        );
        let opts = GenerateOptions {
            max_tokens: 32,
            ..GenerateOptions::default()
        };
        let toks = super::ok(name, generate(m.as_ref(), &PROMPT, &opts, |_| true));
        let want: Vec<u32> = HF
            .get(&format!("{name}.tokens"))
            .1
            .iter()
            .map(|&t| t as u32)
            .collect();
        assert_eq!(
            toks, want,
            "{name} on {dev}: greedy tokens against transformers'"
        );
    }
}
