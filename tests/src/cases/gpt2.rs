//! GPT-2 (`wmx::models::Gpt2`) against MLX's implementation (mlx-lm, goldens from
//! `tests/goldens/mlx_gpt2.py`): a tiny random checkpoint in Hugging Face's layout
//! (`Conv1D` weights, no prefix, mask buffers) and mlx-lm's 4-bit version; logits,
//! 32 greedy tokens through the KV cache, the `transformer.` names; errors.

use super::expect_err;
use super::goldens::Goldens;
use wmx_core::models::{self, GenerateOptions, Gpt2, Gpt2Config, generate};
use wmx_core::{self as wmx, Array, Device};

static MLX: Goldens = Goldens::new(include_str!("../../goldens/mlx_gpt2.txt"));
use super::hf::{PROMPT, check_model, golden_dir as dir, prompt_on};

fn tensors(dev: &Device, name: &str) -> Vec<(String, Array)> {
    super::ok(
        name,
        wmx::with_device(dev, || {
            wmx::io::load_safetensors(dir(name).join("model.safetensors"))
        }),
    )
}

fn config(name: &str) -> Gpt2Config {
    let text = std::fs::read_to_string(dir(name).join("config.json")).unwrap();
    super::ok("config", Gpt2Config::from_json(&text))
}

/// Logits and greedy tokens of both checkpoints against mlx-lm's.
pub fn gpt2_mlx(dev: &Device) {
    let x = prompt_on(dev);
    for name in ["gpt2_tiny", "gpt2_tiny_q4"] {
        // models::load picks the architecture from config.json.
        let m = super::ok(name, wmx::with_device(dev, || models::load(dir(name))));
        check_model(&MLX, "mlx-lm", name, m.as_ref(), dev);
    }
    // transformers' own names (`transformer.` prefix, no mask buffers) load too.
    let renamed: Vec<(String, Array)> = tensors(dev, "gpt2_tiny")
        .into_iter()
        .filter(|(n, _)| !n.ends_with(".attn.bias"))
        .map(|(n, a)| (format!("transformer.{n}"), a))
        .collect();
    let m = super::ok("prefixed", Gpt2::from_tensors(config("gpt2_tiny"), renamed));
    let got = super::ok("prefixed", m.forward(&x, None));
    let got = super::ok("reshape", wmx::reshape(&got, &[PROMPT.len() as isize, -1]));
    MLX.check("transformer. names", &got, "gpt2_tiny.logits", 1e-4, 1e-4);
}

/// Configurations and checkpoints that do not fit are errors naming the problem.
pub fn gpt2_errors(dev: &Device) {
    let text = std::fs::read_to_string(dir("gpt2_tiny").join("config.json")).unwrap();
    let c = config("gpt2_tiny");
    assert_eq!((c.n_inner, c.n_positions, c.gelu_tanh), (256, 128, true));
    expect_err("not json", Gpt2Config::from_json("["), &["config.json"]);
    let llama = text.replace("\"gpt2\"", "\"llama\"");
    expect_err("llama", Gpt2Config::from_json(&llama), &["llama"]);
    let relu = text.replace("gelu_new", "relu");
    expect_err("relu", Gpt2Config::from_json(&relu), &["relu"]);
    let heads = text.replace("\"n_head\": 4", "\"n_head\": 5");
    expect_err("heads", Gpt2Config::from_json(&heads), &["n_head", "5"]);
    let t = tensors(dev, "gpt2_tiny");
    let mut missing = t.clone();
    missing.retain(|(n, _)| n != "h.1.mlp.c_fc.bias");
    expect_err(
        "missing",
        Gpt2::from_tensors(c.clone(), missing).map(|_| ()),
        &["h.1.mlp.c_fc.bias"],
    );
    let wide = Gpt2Config {
        n_inner: 128,
        ..c.clone()
    };
    expect_err(
        "shape",
        Gpt2::from_tensors(wide, t.clone()).map(|_| ()),
        &["c_fc", "128"],
    );
    let q = Gpt2Config {
        quantization: Some((32, 4)),
        ..c.clone()
    };
    expect_err(
        "hf quantized",
        Gpt2::from_tensors(q, t.clone()).map(|_| ()),
        &["model."],
    );
    let other = std::env::temp_dir().join(format!("wmx-bert-{}", std::process::id()));
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("config.json"), r#"{"model_type": "bert"}"#).unwrap();
    expect_err("bert", models::load(&other).map(|_| ()), &["bert", "gpt2"]);
    let _ = std::fs::remove_dir_all(&other);
    let m = super::ok("model", Gpt2::from_tensors(c, t));
    let long = super::ok(
        "long",
        wmx::with_device(dev, || wmx::zeros(&[1, 129], wmx::DType::I32)),
    );
    expect_err("positions", m.forward(&long, None), &["129", "128"]);
    let mut one = vec![wmx_core::nn::KvCache::new()];
    let two = super::ok(
        "two",
        wmx::with_device(dev, || wmx::zeros(&[1, 2], wmx::DType::I32)),
    );
    expect_err(
        "caches",
        m.forward(&two, Some(&mut one)),
        &["1 caches for 2 layers"],
    );
    let opts = GenerateOptions {
        max_tokens: 200,
        ..GenerateOptions::default()
    };
    expect_err(
        "generation past the positions",
        generate(&m, &PROMPT, &opts, |_| true),
        &["positions", "128"],
    );
}
