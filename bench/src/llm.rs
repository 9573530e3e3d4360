//! `--llm`: issue 38's language-model benchmark. A Llama 3.2 1B-shaped model
//! (hidden 2048, 16 layers, 32 query and 8 key/value heads, MLP 8192, vocabulary
//! 128256, tied embeddings) with random f16 weights built here, then the same
//! model quantized to 4 bits in groups of 64 (`nn::quantize`): a 512-token prompt
//! prefilled in one pass, then 256 tokens decoded greedily at batch 1 through the
//! KV cache (`models::Generation`, the loop `models::generate` runs). Per token:
//! the host's time building the step's lazy graph, its time in `eval` (encoding
//! and submitting), and the rest (waiting for the GPU, reading the token back).
//! GB/s is the weights' bytes per decoded token (the weight-streaming limit).
//! `bench/torch_llm.py` is PyTorch's side.

use super::{Res, Row, err};
use std::time::Instant;
use wmx::models::{GenerateOptions, Generation, Llama, LlamaConfig};
use wmx::{Array, DType, Device};

fn config(smoke: bool) -> LlamaConfig {
    let (d, layers, heads, kv, inter, vocab) = if smoke {
        (128, 2, 4, 2, 256, 512)
    } else {
        (2048, 16, 32, 8, 8192, 128256)
    };
    LlamaConfig {
        hidden_size: d,
        num_hidden_layers: layers,
        intermediate_size: inter,
        num_attention_heads: heads,
        num_key_value_heads: kv,
        head_dim: d / heads,
        rms_norm_eps: 1e-5,
        vocab_size: vocab,
        rope_theta: 500000.0,
        rope_scale: 1.0,
        sliding_window: None,
        tie_word_embeddings: true,
        attention_bias: false,
        mlp_bias: false,
        quantization: None,
    }
}

/// Random f16 tensors under `transformers`' names (normal, std 0.02; norms 1).
fn tensors(c: &LlamaConfig, dev: &Device) -> wmx::Result<Vec<(String, Array)>> {
    let (d, hd, i) = (c.hidden_size, c.head_dim, c.intermediate_size);
    let (q, kv) = (c.num_attention_heads * hd, c.num_key_value_heads * hd);
    let mut shapes: Vec<(String, Vec<usize>)> =
        vec![("model.embed_tokens.weight".into(), vec![c.vocab_size, d])];
    for n in 0..c.num_hidden_layers {
        let p = |s: &str| format!("model.layers.{n}.{s}");
        for (name, shape) in [
            ("self_attn.q_proj.weight", vec![q, d]),
            ("self_attn.k_proj.weight", vec![kv, d]),
            ("self_attn.v_proj.weight", vec![kv, d]),
            ("self_attn.o_proj.weight", vec![d, q]),
            ("mlp.gate_proj.weight", vec![i, d]),
            ("mlp.up_proj.weight", vec![i, d]),
            ("mlp.down_proj.weight", vec![d, i]),
            ("input_layernorm.weight", vec![d]),
            ("post_attention_layernorm.weight", vec![d]),
        ] {
            shapes.push((p(name), shape));
        }
    }
    shapes.push(("model.norm.weight".into(), vec![d]));
    wmx::with_device(dev, || {
        let keys = wmx::random::split(&wmx::random::key(38)?, shapes.len())?;
        let mut out = Vec::new();
        for (k, (name, shape)) in shapes.into_iter().enumerate() {
            let a = if shape.len() == 1 {
                wmx::ones(&shape, DType::F16)?
            } else {
                let key = keys
                    .slice(&[wmx::Slice::range(k as isize, k as isize + 1)])?
                    .reshape(&[2])?;
                wmx::random::normal(&key, &shape, 0.0, 0.02, DType::F16)?
            };
            wmx::eval(std::slice::from_ref(&a))?;
            out.push((name, a));
        }
        Ok(out)
    })
}

/// Prefill of `prompt`, then `decode` tokens: (prefill ms, decode ms per token,
/// host ms per token building the graph, host ms per token in `eval` (encoding
/// and submitting; the read that follows waits for the GPU)).
fn run(model: &Llama, prompt: &[u32], decode: usize) -> wmx::Result<(f64, f64, f64, f64)> {
    let opts = GenerateOptions {
        max_tokens: decode + 1,
        ..GenerateOptions::default()
    };
    let t0 = Instant::now();
    let mut g = Generation::new(model, prompt, opts)?;
    let mut first = None;
    let (mut build, mut encode) = (0.0, 0.0);
    loop {
        let b = Instant::now();
        let Some(next) = g.next_token()? else { break };
        let e = Instant::now();
        wmx::eval(std::slice::from_ref(&next))?;
        if first.is_some() {
            build += (e - b).as_secs_f64();
            encode += e.elapsed().as_secs_f64();
        }
        let t = next.to_vec::<u32>()?[0];
        first.get_or_insert_with(Instant::now);
        if !g.accept(t) {
            break;
        }
    }
    let end = Instant::now();
    let first = first.expect("one token");
    let n = g.tokens().len() - 1;
    Ok((
        (first - t0).as_secs_f64() * 1e3,
        (end - first).as_secs_f64() * 1e3 / n as f64,
        build * 1e3 / n as f64,
        encode * 1e3 / n as f64,
    ))
}

pub(crate) fn bench_llm(dev: &Device, smoke: bool, rows: &mut Vec<Row>) -> Res<()> {
    let c = config(smoke);
    let (prompt_len, decode) = if smoke { (16, 8) } else { (512, 256) };
    let model =
        wmx::with_device(dev, || Llama::from_tensors(c.clone(), tensors(&c, dev)?)).map_err(err)?;
    let prompt: Vec<u32> = super::random(prompt_len, 5)
        .iter()
        .map(|x| ((x + 1.0) * 0.5 * (c.vocab_size - 1) as f32) as u32)
        .collect();
    for variant in ["f16", "q4"] {
        if variant == "q4" {
            wmx::nn::quantize(&model, 64, 4).map_err(err)?;
        }
        let bytes: f64 = wmx::nn::ModuleExt::parameters(&model)
            .values()
            .map(|a| a.nbytes() as f64)
            .sum();
        // Warm-up: pipelines compiled, pools filled.
        run(&model, &prompt, 4.min(decode)).map_err(err)?;
        let (prefill, per_token, build, encode) = run(&model, &prompt, decode).map_err(err)?;
        println!(
            "llm {variant}: prefill {prompt_len} tokens {prefill:8.2} ms ({:7.0} tokens/s); \
             decode {per_token:6.3} ms/token ({:6.1} tokens/s, {:6.1} GB/s of weights; \
             host: graph {build:5.3} ms/token, eval {encode:5.3} ms/token), weights {:.2} GB",
            prompt_len as f64 / prefill * 1e3,
            1e3 / per_token,
            bytes / per_token / 1e6,
            bytes / 1e9
        );
        if let (Some(be), true) = (
            wmx::webgpu::backend(dev),
            std::env::var_os("WMX_BENCH_PROFILE").is_some(),
        ) {
            // One decode step after a short prompt, every dispatch timed.
            let opts = GenerateOptions {
                max_tokens: 8,
                ..GenerateOptions::default()
            };
            let mut g = Generation::new(&model, &prompt, opts).map_err(err)?;
            for _ in 0..2 {
                let t = g
                    .next_token()
                    .and_then(|n| n.expect("a token").to_vec::<u32>())
                    .map_err(err)?;
                g.accept(t[0]);
            }
            let (r, p) = be
                .profile(|| {
                    g.next_token()
                        .and_then(|n| n.expect("a token").to_vec::<u32>())
                })
                .map_err(err)?;
            r.map_err(err)?;
            let table = p.table();
            let top: Vec<&str> = table.lines().take(16).collect();
            println!("profile of one {variant} decode step:\n{}", top.join("\n"));
        }
        for (op, n, ms, gbps) in [
            (format!("llm_{variant}_prefill"), prompt_len, prefill, 0.0),
            (
                format!("llm_{variant}_decode"),
                decode,
                per_token,
                bytes / per_token / 1e6,
            ),
            (
                format!("llm_{variant}_decode_host_build"),
                decode,
                build,
                0.0,
            ),
        ] {
            rows.push(Row {
                path: "wmx",
                op,
                dtype: DType::F16,
                n,
                ms,
                gbps,
                extra: vec![],
            });
        }
    }
    Ok(())
}
