//! Text generation with a checkpoint from Hugging Face (Llama, Mistral, Qwen2 or
//! GPT-2; f32/f16/bf16 or MLX-quantized): the folder's `config.json`, safetensors
//! and `tokenizer.json`. It prints the text as it comes, then prompt and generation
//! tokens per second on stderr.
//!
//! ```text
//! cargo run --release --example generate -- --model DIR --prompt "Once upon a time"
//!     [--max-tokens 128] [--temp 0.7] [--top-p 0.9] [--top-k 40] [--min-p 0.05]
//!     [--repetition-penalty 1.1] [--seed 0] [--quantize 4]
//! ```
//!
//! Greedy by default (`--temp 0`). `--quantize BITS` quantizes the weights in
//! groups of 64 after loading, as mlx-lm's `convert -q` would. Generation stops at
//! the checkpoint's end-of-sequence tokens (`eos_token_id` of `config.json` and
//! `generation_config.json`). The tokenizer is the `tokenizers` crate with its
//! pure-Rust regex engine (`default-features = false, features = ["fancy-regex"]`),
//! so nothing but Rust is built. `scripts/test.sh` checks the printed text on a tiny
//! checkpoint against mlx-lm's (`tests/goldens/mlx_llama.py`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use wmx::models::{GenerateOptions, generate};

struct Args {
    model: PathBuf,
    prompt: String,
    options: GenerateOptions,
    quantize: Option<usize>,
}

const USAGE: &str = "usage: generate --model DIR --prompt TEXT [--max-tokens N] [--temp T] \
[--top-p P] [--top-k K] [--min-p P] [--repetition-penalty R] [--seed S] [--quantize BITS]";

fn parse() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut model, mut prompt, mut quantize) = (None, None, None);
    let mut options = GenerateOptions {
        max_tokens: 128,
        ..GenerateOptions::default()
    };
    let s = &mut options.sampling;
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        fn num<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String> {
            v.parse()
                .map_err(|_| format!("{flag}: {v:?} is not a number of the right kind"))
        }
        match flag.as_str() {
            "--model" => model = Some(PathBuf::from(value()?)),
            "--prompt" => prompt = Some(value()?),
            "--max-tokens" => options.max_tokens = num(&flag, value()?)?,
            "--temp" => s.temperature = num(&flag, value()?)?,
            "--top-p" => s.top_p = num(&flag, value()?)?,
            "--top-k" => s.top_k = num(&flag, value()?)?,
            "--min-p" => s.min_p = num(&flag, value()?)?,
            "--repetition-penalty" => s.repetition_penalty = Some(num(&flag, value()?)?),
            "--seed" => s.seed = num(&flag, value()?)?,
            "--quantize" => quantize = Some(num(&flag, value()?)?),
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(Args {
        model: model.ok_or(format!("--model is required\n{USAGE}"))?,
        prompt: prompt.ok_or(format!("--prompt is required\n{USAGE}"))?,
        options,
        quantize,
    })
}

/// The end-of-sequence ids of `config.json` and `generation_config.json` (a number
/// or a list in either).
fn stop_tokens(dir: &Path) -> Vec<u32> {
    let mut out = Vec::new();
    for file in ["config.json", "generation_config.json"] {
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        match v.get("eos_token_id") {
            Some(serde_json::Value::Number(n)) => out.extend(n.as_u64().map(|n| n as u32)),
            Some(serde_json::Value::Array(a)) => {
                out.extend(a.iter().filter_map(|n| n.as_u64()).map(|n| n as u32))
            }
            _ => {}
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn run(args: Args) -> Result<(), String> {
    let dir = &args.model;
    let tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json"))
        .map_err(|e| format!("{}: {e}", dir.join("tokenizer.json").display()))?;
    let model = wmx::models::load(dir).map_err(|e| e.to_string())?;
    if let Some(bits) = args.quantize {
        wmx::nn::quantize(model.as_ref(), 64, bits).map_err(|e| e.to_string())?;
    }
    let prompt: Vec<u32> = tokenizer
        .encode(args.prompt.as_str(), true)
        .map_err(|e| format!("tokenizing the prompt: {e}"))?
        .get_ids()
        .to_vec();
    let mut options = args.options;
    options.stop = stop_tokens(dir);
    let (mut ids, mut printed) = (Vec::new(), 0);
    let mut out = std::io::stdout().lock();
    let start = Instant::now();
    let mut first = None;
    let tokens = generate(model.as_ref(), &prompt, &options, |t| {
        first.get_or_insert_with(Instant::now);
        if !options.stop.contains(&t) {
            ids.push(t);
        }
        // The whole text again each time: a token may end inside a character or
        // change how the one before it reads.
        if let Ok(text) = tokenizer.decode(&ids, true)
            && !text.ends_with('\u{FFFD}')
            && text.len() > printed
            && text.is_char_boundary(printed)
        {
            let _ = out.write_all(&text.as_bytes()[printed..]);
            let _ = out.flush();
            printed = text.len();
        }
        true
    })
    .map_err(|e| e.to_string())?;
    let end = Instant::now();
    let _ = writeln!(out);
    let first = first.unwrap_or(end);
    let prefill = (first - start).as_secs_f64();
    let decode = (end - first).as_secs_f64();
    eprintln!(
        "prompt: {} tokens, {:.1} tokens/s; generation: {} tokens, {:.1} tokens/s",
        prompt.len(),
        prompt.len() as f64 / prefill.max(1e-9),
        tokens.len(),
        tokens.len().saturating_sub(1) as f64 / decode.max(1e-9),
    );
    Ok(())
}

fn main() {
    if let Err(e) = parse().and_then(run) {
        eprintln!("generate: {e}");
        std::process::exit(1);
    }
}
