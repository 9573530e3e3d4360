//! The models against Hugging Face `transformers` (goldens from
//! `tests/goldens/hf_models.py`, transformers and PyTorch on the CPU): tiny random
//! checkpoints as `save_pretrained` writes them (Llama with linear RoPE scaling,
//! Qwen2, Mistral, GPT-2; transformers 5's `rope_parameters`), loaded by
//! `models::load`; the logits of a prompt and `generate`'s 32 greedy tokens.

use super::goldens::Goldens;
use wmx_core::models::{self, GenerateOptions, LanguageModel, generate};
use wmx_core::{self as wmx, Array, Device};

static HF: Goldens = Goldens::new(include_str!("../../goldens/hf_models.txt"));
/// The prompt every model golden uses (token ids).
pub(super) const PROMPT: [u32; 9] = [1, 17, 42, 99, 5, 63, 120, 7, 33];

/// `tests/goldens/<name>`.
pub(super) fn golden_dir(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("goldens")
        .join(name)
}

/// The prompt as `[1, 9]` i32 on `dev`.
pub(super) fn prompt_on(dev: &Device) -> Array {
    let ids: Vec<i32> = PROMPT.iter().map(|&t| t as i32).collect();
    super::ok("ids", Array::from_slice_on(&ids, &[1, ids.len()], dev))
}

/// `m`'s logits of the prompt against `{name}.logits` in `goldens` (within
/// 1e-4) and 32 greedy tokens against `{name}.tokens` (equal); returns the
/// logits as `[9, vocab]`.
pub(super) fn check_model(
    goldens: &Goldens,
    source: &str,
    name: &str,
    m: &dyn LanguageModel,
    dev: &Device,
) -> Array {
    let logits = super::ok(name, m.forward(&prompt_on(dev), None));
    let l = super::ok(
        "reshape",
        wmx::reshape(&logits, &[PROMPT.len() as isize, -1]),
    );
    let what = format!("{name} logits on {dev} against {source}'s");
    goldens.check(&what, &l, &format!("{name}.logits"), 1e-4, 1e-4);
    let opts = GenerateOptions {
        max_tokens: 32,
        ..GenerateOptions::default()
    };
    let toks = super::ok(name, generate(m, &PROMPT, &opts, |_| true));
    let want: Vec<u32> = goldens
        .get(&format!("{name}.tokens"))
        .1
        .iter()
        .map(|&t| t as u32)
        .collect();
    assert_eq!(
        toks, want,
        "{name} on {dev}: greedy tokens against {source}'s"
    );
    l
}

/// Each architecture's logits and greedy tokens equal transformers'.
pub fn transformers_models(dev: &Device) {
    for name in ["hf_llama", "hf_qwen2", "hf_mistral", "hf_gpt2"] {
        let m = super::ok(
            name,
            wmx::with_device(dev, || models::load(golden_dir(name))),
        );
        check_model(&HF, "transformers", name, m.as_ref(), dev);
    }
}

/// The same checkpoints in f16 (weights cast as `torch_dtype=float16` would load
/// them): logits within 0.02 + 0.005 |x| of transformers' f32 logits (the
/// errors seen on the CPU and lavapipe reach about 0.7 of that).
pub fn transformers_models_f16(dev: &Device) {
    let x = prompt_on(dev);
    for name in ["hf_llama", "hf_qwen2", "hf_mistral", "hf_gpt2"] {
        let dir = golden_dir(name);
        let config = std::fs::read_to_string(dir.join("config.json")).unwrap();
        let tensors = super::ok(
            name,
            wmx::with_device(dev, || {
                wmx::io::load_safetensors(dir.join("model.safetensors"))
            }),
        );
        let half: Vec<(String, Array)> = tensors
            .into_iter()
            .map(|(n, a)| (n, super::ok("astype", a.astype(wmx::DType::F16))))
            .collect();
        let m = super::ok(name, models::from_config(&config, half));
        let logits = super::ok(name, m.forward(&x, None));
        assert_eq!(logits.dtype(), wmx::DType::F16, "{name}: f16 logits");
        let got = super::ok("read", logits.to_vec_as::<f64>());
        let want = &HF.get(&format!("{name}.logits")).1;
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= 0.02 + 0.005 * w.abs(),
                "{name} f16 on {dev}: logit {i} {g} vs transformers' {w}"
            );
        }
    }
}
