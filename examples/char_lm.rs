//! A character-level transformer language model trained on the Book of Genesis
//! (King James Version, public domain) as Debian ships it: the packages
//! `bible-kjv-text` (the text) and `bible-kjv` (its reader), fetched and unpacked
//! without root by `examples/data/genesis.sh`, which writes
//! `target/data/genesis.txt`. It trains with `wmx::nn` (token and position
//! embeddings, pre-norm transformer blocks) and AdamW in one compiled step,
//! prints the loss falling and a sample, and saves a checkpoint (weights,
//! optimizer state, step) that a second run loads and continues from.
//!
//! ```text
//! examples/data/genesis.sh
//! cargo run --release --example char_lm -- --steps 600 --checkpoint target/char_lm
//! cargo run --release --example char_lm -- --steps 200 --checkpoint target/char_lm  # continues
//! ```
//!
//! It fails (exit 1) unless the loss falls below 85 % of its first value, and a
//! resumed run's loss on the checkpoint's probe batch equals the saving run's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use wmx::nn::{
    self, Embedding, Layer, LayerNorm, Linear, Module, ModuleExt, TransformerBlock, Visitor,
};
use wmx::optim::{self, Optimizer};
use wmx::{Array, DType, Result};

struct Args {
    text: PathBuf,
    checkpoint: Option<PathBuf>,
    steps: usize,
    dims: usize,
    layers: usize,
    context: usize,
    batch: usize,
}

fn parse() -> std::result::Result<Args, String> {
    let mut a = Args {
        text: PathBuf::from("target/data/genesis.txt"),
        checkpoint: None,
        steps: 300,
        dims: 128,
        layers: 2,
        context: 64,
        batch: 32,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let n = || {
            v.parse::<usize>()
                .map_err(|_| format!("{flag}: {v:?} is not a count"))
        };
        match flag.as_str() {
            "--text" => a.text = PathBuf::from(&v),
            "--checkpoint" => a.checkpoint = Some(PathBuf::from(&v)),
            "--steps" => a.steps = n()?,
            "--dims" => a.dims = n()?,
            "--layers" => a.layers = n()?,
            "--context" => a.context = n()?,
            "--batch" => a.batch = n()?,
            _ => {
                return Err(format!(
                    "unknown argument {flag}; usage: char_lm [--text FILE] [--checkpoint DIR] \
                     [--steps N] [--dims D] [--layers L] [--context T] [--batch B]"
                ));
            }
        }
    }
    Ok(a)
}

/// Token and position embeddings, transformer blocks, a final norm and the
/// output layer.
struct CharLm {
    embed: Embedding,
    pos: Embedding,
    blocks: Vec<TransformerBlock>,
    ln: LayerNorm,
    head: Linear,
}

impl Module for CharLm {
    fn visit(&self, v: &mut dyn Visitor) {
        v.module("embed", &self.embed);
        v.module("pos", &self.pos);
        for (i, b) in self.blocks.iter().enumerate() {
            v.module(&format!("blocks.{i}"), b);
        }
        v.module("ln", &self.ln);
        v.module("head", &self.head);
    }
}

impl CharLm {
    fn new(vocab: usize, a: &Args) -> Result<CharLm> {
        let keys = wmx::random::split(&wmx::random::key(35)?, 3 + a.layers)?;
        let k = |i: usize| {
            keys.slice(&[wmx::Slice::range(i as isize, i as isize + 1)])?
                .reshape(&[2])
        };
        Ok(CharLm {
            embed: Embedding::new(&k(0)?, vocab, a.dims)?,
            pos: Embedding::new(&k(1)?, a.context, a.dims)?,
            blocks: (0..a.layers)
                .map(|i| TransformerBlock::new(&k(3 + i)?, a.dims, 4, true))
                .collect::<Result<_>>()?,
            ln: LayerNorm::new(a.dims, 1e-5, true, true)?,
            head: Linear::new(&k(2)?, a.dims, vocab, true)?,
        })
    }

    /// Logits `[B, T, vocab]` of tokens `[B, T]`.
    fn forward(&self, x: &Array) -> Result<Array> {
        let t = x.shape()[1];
        let positions = wmx::arange(0.0, t as f64, 1.0, DType::I32)?;
        let mut h = wmx::add(&self.embed.forward(x)?, &self.pos.forward(&positions)?)?;
        for b in &self.blocks {
            h = b.forward(&h)?;
        }
        self.head.forward(&self.ln.forward(&h)?)
    }
}

fn loss(m: &CharLm, batch: &[Array]) -> Result<Array> {
    let logits = m.forward(&batch[0])?;
    let v = logits.shape()[2] as isize;
    nn::losses::cross_entropy(
        &logits.reshape(&[-1, v])?,
        &batch[1].reshape(&[-1])?,
        &nn::losses::CrossEntropy::default(),
        nn::losses::Reduction::Mean,
    )
}

/// `batch` windows of `context + 1` tokens at positions from a small LCG seeded
/// by `seed`: inputs and next-token targets, `[batch, context]` i32 each.
fn windows(ids: &[i32], batch: usize, context: usize, seed: u64) -> Result<[Array; 2]> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for _ in 0..batch {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let at = (s >> 33) as usize % (ids.len() - context - 1);
        x.extend_from_slice(&ids[at..at + context]);
        y.extend_from_slice(&ids[at + 1..at + context + 1]);
    }
    Ok([
        Array::from_slice(&x, &[batch, context])?,
        Array::from_slice(&y, &[batch, context])?,
    ])
}

/// `n` characters after `prompt`, each drawn at temperature 0.8 from the last
/// `context` characters' logits.
fn sample(m: &CharLm, chars: &[char], prompt: &str, n: usize, context: usize) -> Result<String> {
    let index = |c: char| chars.iter().position(|&d| d == c).unwrap_or(0) as i32;
    let mut ids: Vec<i32> = prompt.chars().map(index).collect();
    let mut key = wmx::random::key(7)?;
    for _ in 0..n {
        let window = &ids[ids.len().saturating_sub(context)..];
        let x = Array::from_slice(window, &[1, window.len()])?;
        let logits = m.forward(&x)?;
        let t = window.len() as isize;
        let last = logits
            .slice(&[wmx::Slice::ALL, wmx::Slice::range(t - 1, t)])?
            .reshape(&[-1])?;
        let (next, draw) = wmx::random::split2(&key)?;
        key = next;
        let scaled = wmx::multiply(&last, &wmx::scalar(1.0 / 0.8, DType::F32)?)?;
        ids.push(wmx::random::categorical(&draw, &scaled, -1)?.item::<u32>()? as i32);
    }
    Ok(ids.iter().map(|&i| chars[i as usize]).collect())
}

fn main() {
    if let Err(e) = parse().and_then(|a| run(a).map_err(|e| e.to_string())) {
        eprintln!("char_lm: {e}");
        std::process::exit(1);
    }
}

fn run(a: Args) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(&a.text).map_err(|e| {
        format!(
            "{}: {e} (examples/data/genesis.sh writes it)",
            a.text.display()
        )
    })?;
    let mut chars: Vec<char> = text.chars().collect();
    chars.sort_unstable();
    chars.dedup();
    let ids: Vec<i32> = text
        .chars()
        .map(|c| chars.binary_search(&c).unwrap() as i32)
        .collect();
    if ids.len() < a.context + 2 || a.steps == 0 || a.batch == 0 || a.context == 0 {
        return Err(
            "the text must be longer than the context, and steps, batch and context positive"
                .into(),
        );
    }
    let split = ids.len() * 9 / 10;
    let (train, val) = (&ids[..split], &ids[split..]);
    println!(
        "{}: {} characters, vocabulary {}; {} on {}",
        a.text.display(),
        ids.len(),
        chars.len(),
        format_args!(
            "{} layers of {} dims, context {}",
            a.layers, a.dims, a.context
        ),
        wmx::default_device()?
    );
    let model = Arc::new(CharLm::new(chars.len(), &a)?);
    let mut opt = optim::Adam::adamw(3e-3, 0.01);
    let mut first_step = 0;
    // The probe: a fixed validation batch whose loss the checkpoint records.
    let probe = windows(val, 16, a.context.min(val.len() - 2), 99)?;
    if let Some(dir) = a
        .checkpoint
        .as_ref()
        .filter(|d| d.join("weights.safetensors").exists())
    {
        model.load_weights(dir.join("weights.safetensors"))?;
        let state: nn::Params = wmx::io::load_safetensors(dir.join("optimizer.safetensors"))?
            .into_iter()
            .collect();
        opt.set_state(&state)?;
        first_step = opt.opt_state().step;
        let meta = std::fs::read_to_string(dir.join("probe_loss.txt"))?;
        let saved: f64 = meta.trim().parse()?;
        let now = loss(&model, &probe)?.item::<f32>()? as f64;
        println!(
            "resumed from {} at step {first_step}: probe loss {now:.5} (saved {saved:.5})",
            dir.display()
        );
        if (now - saved).abs() > 1e-4 * (1.0 + saved.abs()) {
            return Err(
                format!("the checkpoint's probe loss {now} is not the saved {saved}").into(),
            );
        }
    }
    let mut step_fn = optim::compile_step(model.clone(), opt, loss)?;
    let mut losses = Vec::new();
    let t0 = std::time::Instant::now();
    for s in first_step..first_step + a.steps {
        let l = step_fn.call(&windows(train, a.batch, a.context, s as u64)?)?;
        if (s - first_step) % 20 == 0 || s + 1 == first_step + a.steps {
            let v = l.item::<f32>()? as f64;
            losses.push(v);
            println!("step {s:5}: loss {v:.4}");
        }
    }
    let per_step = t0.elapsed().as_secs_f64() * 1e3 / a.steps as f64;
    let val_loss = loss(&model, &probe)?.item::<f32>()? as f64;
    println!("validation loss {val_loss:.4} ({per_step:.1} ms a step)");
    println!(
        "sample: {:?}",
        sample(&model, &chars, "In the beginning", 120, a.context)?
    );
    if let Some(dir) = &a.checkpoint {
        save(dir, &model, step_fn.optimizer(), val_loss)?;
        println!(
            "checkpoint: {} (step {})",
            dir.display(),
            first_step + a.steps
        );
    }
    let (start, end) = (losses[0], *losses.last().unwrap());
    if first_step == 0 && end >= 0.85 * start {
        return Err(format!("the loss did not fall: {start:.4} -> {end:.4}").into());
    }
    Ok(())
}

/// Weights, optimizer state and the probe loss, each file written whole (a
/// failed save leaves the old checkpoint's files as they were).
fn save(dir: &Path, model: &CharLm, opt: &optim::Adam, probe: f64) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| wmx::Error::invalid("save", e.to_string()))?;
    model.save_weights(dir.join("weights.safetensors"))?;
    let state = opt.state();
    let list: Vec<(&str, &Array)> = state.iter().map(|(n, a)| (n.as_str(), a)).collect();
    wmx::io::save_safetensors(dir.join("optimizer.safetensors"), &list)?;
    std::fs::write(dir.join("probe_loss.txt"), format!("{probe}\n"))
        .map_err(|e| wmx::Error::invalid("save", e.to_string()))
}
