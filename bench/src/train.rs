//! `--train`: one training step (forward, backward, AdamW) of issue 35's models:
//! an MLP 784-1024-1024-10 (ReLU, cross-entropy, batch 256, f32), and issue 43's
//! GPT (`bench_gpt`):
//! wmx lazy (`nn::value_and_grad` + `Optimizer::update`, the new parameters
//! evaluated each step) and wmx compiled (`optim::compile_step`); and a small CNN
//! (`bench_cnn`). Wall clock over
//! `STEPS` steps after warm-up, the device synchronised at both ends; host time is
//! the CPU time of the steps' calls. `bench/torch_train.py` is the PyTorch side.

use super::{Res, Row, err};
use std::sync::Arc;
use std::time::Instant;
use wmx::nn::{self, Layer, ModuleExt};
use wmx::optim::{self, Optimizer};
use wmx::{Array, DType, Device};

const BATCH: usize = 256;
const STEPS: usize = 50;
const WARMUP: usize = 5;

fn mlp(dev: &Device) -> wmx::Result<nn::Sequential> {
    wmx::with_device(dev, || {
        let keys = wmx::random::split(&wmx::random::key(0)?, 3)?;
        let k = |i: isize| keys.slice(&[wmx::Slice::range(i, i + 1)])?.reshape(&[2]);
        Ok(nn::Sequential::new()
            .push(nn::Linear::new(&k(0)?, 784, 1024, true)?)
            .push(nn::Activation::Relu)
            .push(nn::Linear::new(&k(1)?, 1024, 1024, true)?)
            .push(nn::Activation::Relu)
            .push(nn::Linear::new(&k(2)?, 1024, 10, true)?))
    })
}

fn loss(m: &nn::Sequential, a: &[Array]) -> wmx::Result<Array> {
    let ce = nn::losses::CrossEntropy::default();
    nn::losses::cross_entropy(&m.forward(&a[0])?, &a[1], &ce, nn::losses::Reduction::Mean)
}

/// Evaluates a step's results: the model's new parameters and the loss.
fn settle(model: &dyn nn::Module, loss: &Array) -> wmx::Result<()> {
    let mut outs: Vec<Array> = model.parameters().into_values().collect();
    outs.push(loss.clone());
    wmx::eval(&outs)
}

/// A timed step: wall ms per step, host ms per step (the CPU time of the step's
/// calls), and on a WebGPU device the host ms of encoding and submitting its
/// batches (within `host`) and its dispatches.
#[derive(Clone, Copy)]
struct Timed {
    ms: f64,
    host: f64,
    gpu: Option<(f64, f64)>,
}

impl std::fmt::Display for Timed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "host {:.3} ms", self.host)?;
        if let Some((encode, dispatches)) = self.gpu {
            write!(
                f,
                ", encode+submit {encode:.3} ms, {dispatches:.0} dispatches"
            )?;
        }
        Ok(())
    }
}

/// Times `step` (which must leave its results evaluated).
fn time(dev: &Device, steps: usize, mut step: impl FnMut() -> Res<()>) -> Res<Timed> {
    for _ in 0..WARMUP {
        step()?;
    }
    dev.synchronize().map_err(err)?;
    let stats = || wmx::webgpu::backend(dev).map(|b| b.stats());
    let before = stats();
    let t = Instant::now();
    let mut host = 0.0;
    for _ in 0..steps {
        let h = Instant::now();
        step()?;
        host += h.elapsed().as_secs_f64();
    }
    dev.synchronize().map_err(err)?;
    let total = t.elapsed().as_secs_f64();
    let n = steps as f64;
    let gpu = before.zip(stats()).map(|(a, b)| {
        let encode = (b.submit_ns - a.submit_ns) as f64 / 1e6 / n;
        (encode, (b.dispatches - a.dispatches) as f64 / n)
    });
    Ok(Timed {
        ms: total * 1e3 / n,
        host: host * 1e3 / n,
        gpu,
    })
}

pub(crate) fn bench_train(dev: &Device, smoke: bool, rows: &mut Vec<Row>) -> Res<()> {
    let steps = if smoke { 2 } else { STEPS };
    let (x, y) = wmx::with_device(dev, || {
        let k = wmx::random::key(1)?;
        let x = wmx::random::normal(&k, &[BATCH, 784], 0.0, 1.0, DType::F32)?;
        let y = wmx::random::randint(&k, &[BATCH], 0, 10, DType::I32)?;
        Ok::<_, wmx::Error>((x, y))
    })
    .map_err(err)?;
    // Lazy: gradients, then the update, every parameter evaluated each step.
    let model = mlp(dev).map_err(err)?;
    let mut opt = optim::Adam::adamw(1e-3, 0.01);
    let vg = nn::value_and_grad(&model, |a: &[Array]| loss(&model, a));
    let mut first = None;
    let t = time(dev, steps, || {
        let (l, g) = vg(&[x.clone(), y.clone()]).map_err(err)?;
        opt.update(&model, &g).map_err(err)?;
        settle(&model, &l).map_err(err)?;
        if first.is_none() {
            first = Some(l.item::<f32>().map_err(err)?);
        }
        Ok(())
    })?;
    let lazy_first = first.unwrap();
    println!(
        "train mlp lazy     f32 batch {BATCH}: {ms:8.3} ms/step ({t})",
        ms = t.ms
    );
    rows.push(row("train_mlp_lazy", t));
    // Compiled: one traced step.
    let model = Arc::new(mlp(dev).map_err(err)?);
    let mut step =
        optim::compile_step(model.clone(), optim::Adam::adamw(1e-3, 0.01), loss).map_err(err)?;
    let mut first = None;
    let t = time(dev, steps, || {
        let l = step.call(&[x.clone(), y.clone()]).map_err(err)?;
        settle(&*model, &l).map_err(err)?;
        if first.is_none() {
            first = Some(l.item::<f32>().map_err(err)?);
        }
        Ok(())
    })?;
    println!(
        "train mlp compiled f32 batch {BATCH}: {:8.3} ms/step ({t}, {} trace)",
        t.ms,
        step.traces()
    );
    if step.traces() != 1 {
        return Err(format!("the compiled step traced {} times", step.traces()));
    }
    // Both start from the same model and batch: the same first loss.
    let c = first.unwrap();
    if (c - lazy_first).abs() > 1e-4 * lazy_first.abs().max(1.0) {
        return Err(format!("first loss: lazy {lazy_first}, compiled {c}"));
    }
    rows.push(row("train_mlp_compiled", t));
    Ok(())
}

/// Issue 43's GPT: `BLOCKS` pre-norm blocks of d 768 with 12 heads over
/// sequences of 256, batch 8, token and position embeddings, a final LayerNorm and
/// a head to a vocabulary of 8192 (35 M parameters); cross-entropy on random
/// tokens, AdamW. f32, and f16 with f32 master weights (`nn::autocast`, the
/// logits' loss in f32); lazy and compiled. With `WMX_BENCH_GPT_DIR` it also
/// writes the initial weights, the tokens and the first `AGREE_STEPS` losses of a
/// compiled run there, which `torch_train.py --gpt-dir` trains the same way and
/// compares.
pub(crate) fn bench_gpt(
    dev: &Device,
    smoke: bool,
    dtypes: &[DType],
    rows: &mut Vec<Row>,
) -> Res<()> {
    // `WMX_BENCH_GPT=host`: the full model's structure (4 blocks, so its
    // dispatches) at tiny sizes, where a step's time is the host's.
    let s = match std::env::var("WMX_BENCH_GPT").as_deref() {
        Ok("host") => GptSize::HOST,
        _ if smoke => GptSize::SMOKE,
        _ => GptSize::FULL,
    };
    // `WMX_BENCH_STEPS`: more steps (e.g. to profile the host side of small ones).
    let steps = std::env::var("WMX_BENCH_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke { 2 } else { 20 });
    let (tokens, targets) = wmx::with_device(dev, || {
        let k = wmx::random::split(&wmx::random::key(4)?, 2)?;
        let k = |i: isize| k.slice(&[wmx::Slice::range(i, i + 1)])?.reshape(&[2]);
        let shape = [s.batch, s.seq];
        let x = wmx::random::randint(&k(0)?, &shape, 0, s.vocab as i64, DType::I32)?;
        let y = wmx::random::randint(&k(1)?, &shape, 0, s.vocab as i64, DType::I32)?;
        Ok::<_, wmx::Error>((x, y))
    })
    .map_err(err)?;
    let data = [tokens, targets];
    let tag = format!("b{} l{} d{}", s.batch, s.seq, s.dims);
    if let Ok(dir) = std::env::var("WMX_BENCH_GPT_DIR") {
        agree(dev, s, &data, std::path::Path::new(&dir))?;
    }
    for &dtype in dtypes {
        if dev.check_dtype(dtype).is_err() {
            continue;
        }
        let name = super::dtype_name(dtype);
        let model = Gpt::new(dev, s).map_err(err)?;
        let mut opt = optim::Adam::adamw(1e-3, 0.01);
        let vg = nn::value_and_grad(&model, |a: &[Array]| gpt_loss(&model, dtype, a));
        let t = time(dev, steps, || {
            let (l, g) = vg(&data).map_err(err)?;
            opt.update(&model, &g).map_err(err)?;
            settle(&model, &l).map_err(err)
        })?;
        println!(
            "train gpt lazy     {name} {tag}: {ms:8.3} ms/step ({t})",
            ms = t.ms
        );
        rows.push(Row {
            dtype,
            ..row("train_gpt_lazy", t)
        });
        let (model, mut step) = compiled_gpt(dev, s, dtype)?;
        let t = time(dev, steps, || {
            let l = step.call(&data).map_err(err)?;
            settle(&*model, &l).map_err(err)
        })?;
        println!(
            "train gpt compiled {name} {tag}: {:8.3} ms/step ({t}, {} trace)",
            t.ms,
            step.traces()
        );
        rows.push(Row {
            dtype,
            ..row("train_gpt_compiled", t)
        });
        // One compiled step under the profiler: where the GPU time goes.
        if let (Some(be), true) = (
            wmx::webgpu::backend(dev),
            std::env::var_os("WMX_BENCH_PROFILE").is_some(),
        ) {
            let (r, p) = be
                .profile(|| -> wmx::Result<()> {
                    let l = step.call(&data)?;
                    settle(&*model, &l)
                })
                .map_err(err)?;
            r.map_err(err)?;
            println!("profile of one compiled {name} gpt step:\n{}", p.table());
            if let Ok(path) = std::env::var("WMX_BENCH_TRACE") {
                std::fs::write(format!("{path}.{name}.json"), p.chrome_trace()).map_err(err)?;
            }
        }
    }
    Ok(())
}

/// A fresh GPT and its compiled AdamW step, the parameters read as `dtype`.
fn compiled_gpt(
    dev: &Device,
    s: GptSize,
    dtype: DType,
) -> Res<(Arc<Gpt>, optim::CompiledStep<Gpt, optim::Adam>)> {
    let model = Arc::new(Gpt::new(dev, s).map_err(err)?);
    let step = optim::compile_step(
        model.clone(),
        optim::Adam::adamw(1e-3, 0.01),
        move |m: &Gpt, a: &[Array]| gpt_loss(m, dtype, a),
    )
    .map_err(err)?;
    Ok((model, step))
}

/// Steps whose losses `torch_train.py` compares.
const AGREE_STEPS: usize = 10;

/// Writes the initial weights, the tokens and the losses of `AGREE_STEPS`
/// compiled steps in f32 and in f16 into `dir`, for `torch_train.py --gpt-dir`.
fn agree(dev: &Device, s: GptSize, data: &[Array; 2], dir: &std::path::Path) -> Res<()> {
    std::fs::create_dir_all(dir).map_err(err)?;
    Gpt::new(dev, s)
        .and_then(|m| m.save_weights(dir.join("gpt_init.safetensors")))
        .map_err(err)?;
    wmx::io::save_npy(dir.join("gpt_tokens.npy"), &data[0]).map_err(err)?;
    wmx::io::save_npy(dir.join("gpt_targets.npy"), &data[1]).map_err(err)?;
    let mut out = String::from("{");
    for dtype in [DType::F32, DType::F16] {
        if dev.check_dtype(dtype).is_err() {
            continue;
        }
        let (_, mut step) = compiled_gpt(dev, s, dtype)?;
        let losses = (0..AGREE_STEPS)
            .map(|_| step.call(data)?.item::<f32>())
            .collect::<wmx::Result<Vec<f32>>>()
            .map_err(err)?;
        println!("gpt losses {}: {losses:?}", super::dtype_name(dtype));
        if out.len() > 1 {
            out.push_str(", ");
        }
        out.push_str(&format!("\"{}\": {losses:?}", super::dtype_name(dtype)));
    }
    out.push('}');
    std::fs::write(dir.join("gpt_losses.json"), out).map_err(err)
}

/// The GPT's sizes.
#[derive(Clone, Copy)]
struct GptSize {
    batch: usize,
    seq: usize,
    dims: usize,
    heads: usize,
    blocks: usize,
    vocab: usize,
}

impl GptSize {
    const FULL: GptSize = GptSize {
        batch: 8,
        seq: 256,
        dims: 768,
        heads: 12,
        blocks: 4,
        vocab: 8192,
    };
    const HOST: GptSize = GptSize {
        batch: 2,
        seq: 16,
        dims: 64,
        heads: 4,
        blocks: 4,
        vocab: 128,
    };
    const SMOKE: GptSize = GptSize {
        batch: 2,
        seq: 8,
        dims: 64,
        heads: 4,
        blocks: 1,
        vocab: 96,
    };
}

/// Issue 43's GPT (names as `torch_train.py`'s twin: `tok`, `pos`, `blocks.i`,
/// `ln_f`, `head`).
struct Gpt {
    tok: nn::Embedding,
    pos: nn::Embedding,
    blocks: Vec<nn::TransformerBlock>,
    ln_f: nn::LayerNorm,
    head: nn::Linear,
}

impl Gpt {
    fn new(dev: &Device, s: GptSize) -> wmx::Result<Gpt> {
        wmx::with_device(dev, || {
            let keys = wmx::random::split(&wmx::random::key(3)?, s.blocks + 3)?;
            let k = |i: usize| {
                keys.slice(&[wmx::Slice::range(i as isize, i as isize + 1)])?
                    .reshape(&[2])
            };
            Ok(Gpt {
                tok: nn::Embedding::new(&k(0)?, s.vocab, s.dims)?,
                pos: nn::Embedding::new(&k(1)?, s.seq, s.dims)?,
                blocks: (0..s.blocks)
                    .map(|i| nn::TransformerBlock::new(&k(3 + i)?, s.dims, s.heads, true))
                    .collect::<wmx::Result<_>>()?,
                ln_f: nn::LayerNorm::new(s.dims, 1e-5, true, true)?,
                head: nn::Linear::new(&k(2)?, s.dims, s.vocab, false)?,
            })
        })
    }
}

impl nn::Module for Gpt {
    fn visit(&self, v: &mut dyn nn::Visitor) {
        v.module("tok", &self.tok);
        v.module("pos", &self.pos);
        for (i, b) in self.blocks.iter().enumerate() {
            v.module(&format!("blocks.{i}"), b);
        }
        v.module("ln_f", &self.ln_f);
        v.module("head", &self.head);
    }
}

/// The mean cross-entropy of the next-token logits of `a[0]` against `a[1]`,
/// the parameters read as `dtype`.
fn gpt_loss(m: &Gpt, dtype: DType, a: &[Array]) -> wmx::Result<Array> {
    let run = || {
        let (b, l) = (a[0].shape()[0], a[0].shape()[1]);
        let pos = wmx::arange(0.0, l as f64, 1.0, DType::I32)?;
        let mut h = wmx::add(&m.tok.forward(&a[0])?, &m.pos.forward(&pos)?)?;
        for blk in &m.blocks {
            h = blk.forward(&h)?;
        }
        let logits = m.head.forward(&m.ln_f.forward(&h)?)?;
        let v = logits.shape()[2];
        let logits = wmx::astype(
            &logits.reshape(&[(b * l) as isize, v as isize])?,
            DType::F32,
        )?;
        let ce = nn::losses::CrossEntropy::default();
        nn::losses::cross_entropy(
            &logits,
            &a[1].reshape(&[(b * l) as isize])?,
            &ce,
            nn::losses::Reduction::Mean,
        )
    };
    if dtype == DType::F32 {
        run()
    } else {
        nn::autocast(m, dtype, run)
    }
}

/// A small CNN's step, lazy and compiled: 32x32x3 images, batch 128, three 3x3
/// convolutions (32, 64, 128 channels; ReLU; max pooling after the first two),
/// global average pooling, a linear layer to 10 classes, cross-entropy, AdamW.
pub(crate) fn bench_cnn(dev: &Device, smoke: bool, rows: &mut Vec<Row>) -> Res<()> {
    let (b, side) = if smoke { (4, 8) } else { (128, 32) };
    let steps = if smoke { 2 } else { 20 };
    let make = || -> wmx::Result<nn::Sequential> {
        wmx::with_device(dev, || {
            let keys = wmx::random::split(&wmx::random::key(5)?, 4)?;
            let k = |i: isize| keys.slice(&[wmx::Slice::range(i, i + 1)])?.reshape(&[2]);
            let same = nn::ConvConfig {
                padding: [1, 1],
                ..Default::default()
            };
            Ok(nn::Sequential::new()
                .push(nn::Conv2d::new(&k(0)?, 3, 32, [3, 3], same.clone())?)
                .push(nn::Activation::Relu)
                .push(nn::MaxPool2d::new([2, 2]))
                .push(nn::Conv2d::new(&k(1)?, 32, 64, [3, 3], same.clone())?)
                .push(nn::Activation::Relu)
                .push(nn::MaxPool2d::new([2, 2]))
                .push(nn::Conv2d::new(&k(2)?, 64, 128, [3, 3], same)?)
                .push(nn::Activation::Relu)
                .push(nn::AdaptiveAvgPool2d::new([1, 1]))
                .push(nn::Flatten::default())
                .push(nn::Linear::new(&k(3)?, 128, 10, true)?))
        })
    };
    let (x, y) = wmx::with_device(dev, || {
        let k = wmx::random::key(6)?;
        let x = wmx::random::normal(&k, &[b, side, side, 3], 0.0, 1.0, DType::F32)?;
        let y = wmx::random::randint(&k, &[b], 0, 10, DType::I32)?;
        Ok::<_, wmx::Error>((x, y))
    })
    .map_err(err)?;
    let model = make().map_err(err)?;
    let mut opt = optim::Adam::adamw(1e-3, 0.01);
    let vg = nn::value_and_grad(&model, |a: &[Array]| loss(&model, a));
    let t = time(dev, steps, || {
        let (l, g) = vg(&[x.clone(), y.clone()]).map_err(err)?;
        opt.update(&model, &g).map_err(err)?;
        settle(&model, &l).map_err(err)
    })?;
    println!(
        "train cnn lazy     f32 batch {b}: {ms:8.3} ms/step ({t})",
        ms = t.ms
    );
    rows.push(row("train_cnn_lazy", t));
    let model = Arc::new(make().map_err(err)?);
    let mut step =
        optim::compile_step(model.clone(), optim::Adam::adamw(1e-3, 0.01), loss).map_err(err)?;
    let t = time(dev, steps, || {
        let l = step.call(&[x.clone(), y.clone()]).map_err(err)?;
        settle(&*model, &l).map_err(err)
    })?;
    println!(
        "train cnn compiled f32 batch {b}: {:8.3} ms/step ({t}, {} trace)",
        t.ms,
        step.traces()
    );
    if step.traces() != 1 {
        return Err(format!(
            "the compiled CNN step traced {} times",
            step.traces()
        ));
    }
    rows.push(row("train_cnn_compiled", t));
    if let (Some(be), true) = (
        wmx::webgpu::backend(dev),
        std::env::var_os("WMX_BENCH_PROFILE").is_some(),
    ) {
        let (r, p) = be
            .profile(|| -> wmx::Result<()> {
                let l = step.call(&[x.clone(), y.clone()])?;
                settle(&*model, &l)
            })
            .map_err(err)?;
        r.map_err(err)?;
        println!("profile of one compiled cnn step:\n{}", p.table());
    }
    Ok(())
}

fn row(op: &str, t: Timed) -> Row {
    let mut extra = vec![("host_ms", t.host)];
    if let Some((encode, dispatches)) = t.gpu {
        extra.extend([("encode_ms", encode), ("dispatches", dispatches)]);
    }
    Row {
        path: "wmx",
        op: op.to_string(),
        dtype: DType::F32,
        n: BATCH,
        ms: t.ms,
        gbps: 0.0,
        extra,
    }
}

/// `--dist --train`: the compiled GPT step data-parallel over the launched ranks,
/// f32: each rank its own batch of `s.batch` sequences, the gradients averaged
/// inside the compiled step (`optim::compile_step_with`). Run once without
/// `mpirun` (one rank) and once with `mpirun -n 2`: throughput is ranks x batch
/// per step time.
#[cfg(feature = "mpi")]
pub(crate) fn bench_gpt_dp(dev: &Device, smoke: bool, rows: &mut Vec<Row>) -> Res<()> {
    let world = wmx::distributed::init().map_err(err)?;
    let s = if smoke { GptSize::SMOKE } else { GptSize::FULL };
    let steps = if smoke { 2 } else { 20 };
    let r = world.rank() as u64;
    let data = wmx::with_device(dev, || {
        let k = wmx::random::split(&wmx::random::key(40 + r)?, 2)?;
        let k = |i: isize| k.slice(&[wmx::Slice::range(i, i + 1)])?.reshape(&[2]);
        let shape = [s.batch, s.seq];
        let x = wmx::random::randint(&k(0)?, &shape, 0, s.vocab as i64, DType::I32)?;
        let y = wmx::random::randint(&k(1)?, &shape, 0, s.vocab as i64, DType::I32)?;
        Ok::<_, wmx::Error>([x, y])
    })
    .map_err(err)?;
    let model = Arc::new(Gpt::new(dev, s).map_err(err)?);
    let g = world.clone();
    let mut step = optim::compile_step_with(
        model.clone(),
        optim::Adam::adamw(1e-3, 0.01),
        move |m: &Gpt, a: &[Array]| gpt_loss(m, DType::F32, a),
        move |grads| nn::average_gradients(&grads, &g, None),
    )
    .map_err(err)?;
    let t = time(dev, steps, || {
        let l = step.call(&data).map_err(err)?;
        settle(&*model, &l).map_err(err)
    })?;
    let tokens = (world.size() * s.batch * s.seq) as f64;
    if world.rank() == 0 {
        println!(
            "train gpt data-parallel float32 b{} l{} d{} on {} ranks: {:8.3} ms/step ({t}), {:.0} tokens/s",
            s.batch,
            s.seq,
            s.dims,
            world.size(),
            t.ms,
            tokens / t.ms * 1e3
        );
    }
    rows.push(Row {
        dtype: DType::F32,
        n: world.size(),
        ..row("train_gpt_dp", t)
    });
    Ok(())
}
