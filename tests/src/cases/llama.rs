//! The Llama model (`wmx::models::Llama`) against MLX's implementation (mlx-lm,
//! goldens from `tests/goldens/mlx_llama.py`): a tiny random checkpoint in Hugging
//! Face's layout, f32 and MLX-quantized to 4 bits, and a Qwen2 one (biases,
//! tied embeddings); the logits of a prompt, and 32 greedy tokens through the KV
//! cache token for token; the same logits with and
//! without the cache; a bad checkpoint's errors.

use super::expect_err;
use super::goldens::Goldens;
use wmx_core::models::{GenerateOptions, Llama, LlamaConfig, Sampling, generate};
use wmx_core::{self as wmx, Array, Device};

static MLX: Goldens = Goldens::new(include_str!("../../goldens/mlx_llama.txt"));
use super::hf::{PROMPT, check_model, golden_dir as dir};

fn load(dev: &Device, name: &str) -> Llama {
    super::ok(name, wmx::with_device(dev, || Llama::load(dir(name))))
}

/// Logits and greedy tokens of both checkpoints against MLX's.
pub fn llama_mlx(dev: &Device) {
    for name in ["llama_tiny", "llama_tiny_q4", "qwen2_tiny"] {
        let m = load(dev, name);
        let ids: Vec<i32> = PROMPT.iter().map(|&t| t as i32).collect();
        let l = check_model(&MLX, "mlx-lm", name, &m, dev);
        // The cache: the prompt in two pieces gives the one-pass logits.
        let mut caches = m.new_cache();
        let a = super::ok("a", Array::from_slice_on(&ids[..5], &[1, 5], dev));
        let b = super::ok("b", Array::from_slice_on(&ids[5..], &[1, 4], dev));
        super::ok("first piece", m.forward(&a, Some(&mut caches)));
        let second = super::ok("second piece", m.forward(&b, Some(&mut caches)));
        let got = super::ok("read", second.to_vec_as::<f64>());
        let all = super::ok("read", l.to_vec_as::<f64>());
        let v = got.len() / 4;
        for (i, (g, w)) in got.iter().zip(&all[5 * v..]).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "{name}: cached logits {i}: {g} vs {w}"
            );
        }
    }
}

/// Configurations and checkpoints that do not fit are errors naming the problem.
pub fn llama_errors(dev: &Device) {
    let text = std::fs::read_to_string(dir("llama_tiny").join("config.json")).unwrap();
    let c = super::ok("config", LlamaConfig::from_json(&text));
    assert_eq!(
        (c.num_key_value_heads, c.head_dim, c.tie_word_embeddings),
        (2, 16, false)
    );
    expect_err("not json", LlamaConfig::from_json("{"), &["config.json"]);
    expect_err(
        "no layers",
        LlamaConfig::from_json(r#"{"hidden_size": 8, "num_attention_heads": 2}"#),
        &["num_hidden_layers"],
    );
    let yarn = text.replacen(
        '{',
        r#"{"rope_scaling": {"rope_type": "yarn", "factor": 4.0},"#,
        1,
    );
    expect_err("yarn", LlamaConfig::from_json(&yarn), &["rope_scaling"]);
    let params = text.replacen(
        '{',
        r#"{"rope_parameters": {"rope_theta": 500000.0, "rope_type": "linear", "factor": 4.0},"#,
        1,
    );
    let p = super::ok("rope_parameters", LlamaConfig::from_json(&params));
    assert_eq!((p.rope_theta, p.rope_scale), (500000.0, 0.25));
    let gpt2 = text.replace("\"llama\"", "\"gpt2\"");
    expect_err("gpt2", LlamaConfig::from_json(&gpt2), &["gpt2"]);
    let tensors = super::ok(
        "load",
        wmx::with_device(dev, || {
            wmx::io::load_safetensors(dir("llama_tiny").join("model.safetensors"))
        }),
    );
    let mut missing = tensors.clone();
    missing.retain(|(n, _)| n != "model.layers.1.mlp.up_proj.weight");
    expect_err(
        "missing",
        Llama::from_tensors(c.clone(), missing).map(|_| ()),
        &["model.layers.1.mlp.up_proj.weight"],
    );
    let mut extra = tensors.clone();
    extra.push((
        "model.layers.2.mlp.up_proj.weight".into(),
        tensors[0].1.clone(),
    ));
    expect_err(
        "extra",
        Llama::from_tensors(c.clone(), extra).map(|_| ()),
        &["model.layers.2"],
    );
    let wider = LlamaConfig {
        intermediate_size: 64,
        ..c.clone()
    };
    expect_err(
        "shape",
        Llama::from_tensors(wider, tensors).map(|_| ()),
        &["gate_proj", "64"],
    );
    let m = super::ok(
        "from_tensors",
        Llama::from_tensors(
            c.clone(),
            super::ok(
                "load",
                wmx::with_device(dev, || {
                    wmx::io::load_safetensors(dir("llama_tiny").join("model.safetensors"))
                }),
            ),
        ),
    );
    let windowed = LlamaConfig {
        sliding_window: Some(8),
        ..c
    };
    let tensors = super::ok(
        "load",
        wmx::with_device(dev, || {
            wmx::io::load_safetensors(dir("llama_tiny").join("model.safetensors"))
        }),
    );
    let w = super::ok("windowed", Llama::from_tensors(windowed, tensors));
    let nine = super::ok("nine", Array::from_slice_on(&[1i32; 9], &[1, 9], dev));
    expect_err(
        "sliding window",
        w.forward(&nine, None),
        &["sliding window", "8"],
    );
    let floats = super::ok("floats", Array::from_slice_on(&[1.0f32, 2.0], &[1, 2], dev));
    expect_err("float tokens", m.forward(&floats, None), &["integers"]);
    let opts = |sampling: Sampling| GenerateOptions {
        max_tokens: 4,
        stop: vec![],
        sampling,
    };
    let any = |_| true;
    expect_err(
        "empty prompt",
        generate(&m, &[], &opts(Sampling::greedy()), any),
        &["empty"],
    );
    for (bad, words) in [
        (Sampling::temperature(-1.0), &["temperature"][..]),
        (Sampling::temperature(f64::NAN), &["temperature"]),
        (
            Sampling {
                top_k: 128,
                ..Sampling::temperature(1.0)
            },
            &["top_k", "128"],
        ),
        (
            Sampling {
                min_p: 1.5,
                ..Sampling::temperature(1.0)
            },
            &["min_p"],
        ),
        (
            Sampling {
                min_tokens_to_keep: 0,
                ..Sampling::temperature(1.0)
            },
            &["min_tokens_to_keep"],
        ),
        (
            Sampling {
                repetition_penalty: Some(-2.0),
                ..Sampling::default()
            },
            &["repetition_penalty"],
        ),
    ] {
        expect_err("sampling", generate(&m, &PROMPT, &opts(bad), any), words);
    }
}

/// mlx-lm's samplers and repetition penalty: with the same seed, the same 24
/// tokens as its `generate_step`; stop tokens and the callback end generation.
pub fn llama_sampling(dev: &Device) {
    let m = load(dev, "llama_tiny");
    let t = Sampling::temperature;
    let settings = [
        ("temp", Sampling { seed: 7, ..t(1.0) }),
        (
            "top_p",
            Sampling {
                top_p: 0.9,
                seed: 11,
                ..t(0.8)
            },
        ),
        (
            "top_k",
            Sampling {
                top_k: 5,
                seed: 3,
                ..t(1.0)
            },
        ),
        (
            "min_p",
            Sampling {
                min_p: 0.1,
                min_tokens_to_keep: 3,
                seed: 5,
                ..t(1.0)
            },
        ),
        (
            "penalty",
            Sampling {
                repetition_penalty: Some(1.5),
                ..Sampling::greedy()
            },
        ),
        (
            "all",
            Sampling {
                top_p: 0.95,
                min_p: 0.05,
                top_k: 20,
                repetition_penalty: Some(1.3),
                repetition_context: 10,
                seed: 9,
                ..t(0.7)
            },
        ),
    ];
    for (name, sampling) in settings {
        let want: Vec<u32> = MLX
            .get(&format!("sample.{name}"))
            .1
            .iter()
            .map(|&t| t as u32)
            .collect();
        let opts = GenerateOptions {
            max_tokens: 24,
            stop: vec![],
            sampling,
        };
        let mut streamed = Vec::new();
        let got = super::ok(
            name,
            generate(&m, &PROMPT, &opts, |t| {
                streamed.push(t);
                true
            }),
        );
        assert_eq!(
            got, want,
            "{name} on {dev}: sampled tokens against mlx-lm's"
        );
        assert_eq!(streamed, got, "{name}: streamed tokens");
        if name == "all" {
            // A stop token ends generation after it; so does the callback.
            let stop = GenerateOptions {
                stop: vec![want[5]],
                ..opts.clone()
            };
            let first = want.iter().position(|&t| t == want[5]).unwrap();
            let got = super::ok("stop", generate(&m, &PROMPT, &stop, |_| true));
            assert_eq!(got, want[..=first], "{name}: stop token");
            let mut n = 0;
            let got = super::ok(
                "callback",
                generate(&m, &PROMPT, &opts, |_| {
                    n += 1;
                    n < 3
                }),
            );
            assert_eq!(got, want[..3], "{name}: the callback stops");
        }
    }
}

/// Generating (a forward with caches) runs q/k/v and gate/up as one product each,
/// the layers' weights becoming rows of one array: the weights read back as the
/// checkpoint's, and a weight replaced afterwards (set, quantized; more often than
/// the projections re-join, too) gives the logits of a forward without caches (layer
/// by layer) of the same weights.
pub fn llama_joined_projections(dev: &Device) {
    let m = load(dev, "llama_tiny");
    let x = super::hf::prompt_on(dev);
    let check = |what: &str, m: &Llama| {
        let plain = super::ok(what, m.forward(&x, None));
        let mut caches = m.new_cache();
        let cached = super::ok(what, m.forward(&x, Some(&mut caches)));
        let (p, c) = (
            super::ok("read", plain.to_vec_as::<f64>()),
            super::ok("read", cached.to_vec_as::<f64>()),
        );
        for (i, (a, b)) in c.iter().zip(&p).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                "{what} on {dev}: logit {i} with caches {a}, without {b}"
            );
        }
    };
    check("joined", &m);
    // The weights as loaded, each its own [out, in].
    let tensors = super::ok(
        "tensors",
        wmx::with_device(dev, || {
            wmx::io::load_safetensors(dir("llama_tiny").join("model.safetensors"))
        }),
    );
    let attn = &m.model.layers[0].self_attn;
    let mlp = &m.model.layers[1].mlp;
    for (name, p) in [
        ("model.layers.0.self_attn.k_proj.weight", &attn.k_proj.weight),
        ("model.layers.0.self_attn.v_proj.weight", &attn.v_proj.weight),
        ("model.layers.1.mlp.up_proj.weight", &mlp.up_proj.weight),
    ] {
        let want = &tensors.iter().find(|(n, _)| n == name).expect(name).1;
        let got = p.value();
        assert_eq!(got.shape(), want.shape(), "{name}");
        let (g, w) = (
            super::ok("read", got.to_vec_as::<f32>()),
            super::ok("read", want.to_vec_as::<f32>()),
        );
        assert_eq!(g, w, "{name} after joining");
    }
    // Replaced weights are joined again (and after three joins, run alone).
    for round in 0..4 {
        let w = attn.k_proj.weight.value();
        super::ok("set", attn.k_proj.weight.set(&w * 0.5));
        let g = mlp.gate_proj.weight.value();
        super::ok("set", mlp.gate_proj.weight.set(&g * -1.0));
        check(&format!("replaced weights, round {round}"), &m);
    }
    let q = load(dev, "llama_tiny");
    check("joined before quantizing", &q);
    super::ok("quantize", wmx::nn::quantize(&q, 32, 4));
    check("quantized after joining", &q);
}
