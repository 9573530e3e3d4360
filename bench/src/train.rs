//! `--train`: one training step (forward, backward, AdamW) of issue 35's models:
//! an MLP 784-1024-1024-10 (ReLU, cross-entropy, batch 256, f32), and a stack of
//! 4 GPT-2-small blocks (d 768, 12 heads, causal, sequence 256, batch 8, f32; loss
//! the mean square of the output):
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

/// Times `step` (which must leave its results evaluated): ms per step and host ms.
fn time(dev: &Device, steps: usize, mut step: impl FnMut() -> Res<()>) -> Res<(f64, f64)> {
    for _ in 0..WARMUP {
        step()?;
    }
    dev.synchronize().map_err(err)?;
    let t = Instant::now();
    let mut host = 0.0;
    for _ in 0..steps {
        let h = Instant::now();
        step()?;
        host += h.elapsed().as_secs_f64();
    }
    dev.synchronize().map_err(err)?;
    let total = t.elapsed().as_secs_f64();
    Ok((total * 1e3 / steps as f64, host * 1e3 / steps as f64))
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
    let (ms, host) = time(dev, steps, || {
        let (l, g) = vg(&[x.clone(), y.clone()]).map_err(err)?;
        opt.update(&model, &g).map_err(err)?;
        settle(&model, &l).map_err(err)?;
        if first.is_none() {
            first = Some(l.item::<f32>().map_err(err)?);
        }
        Ok(())
    })?;
    let lazy_first = first.unwrap();
    println!("train mlp lazy     f32 batch {BATCH}: {ms:8.3} ms/step (host {host:.3} ms)");
    rows.push(row("train_mlp_lazy", ms, host));
    // Compiled: one traced step.
    let model = Arc::new(mlp(dev).map_err(err)?);
    let mut step =
        optim::compile_step(model.clone(), optim::Adam::adamw(1e-3, 0.01), loss).map_err(err)?;
    let mut first = None;
    let (ms, host) = time(dev, steps, || {
        let l = step.call(&[x.clone(), y.clone()]).map_err(err)?;
        settle(&*model, &l).map_err(err)?;
        if first.is_none() {
            first = Some(l.item::<f32>().map_err(err)?);
        }
        Ok(())
    })?;
    println!(
        "train mlp compiled f32 batch {BATCH}: {ms:8.3} ms/step (host {host:.3} ms, {} trace)",
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
    rows.push(row("train_mlp_compiled", ms, host));
    Ok(())
}

/// The GPT-2 blocks' step, lazy and compiled.
pub(crate) fn bench_gpt(dev: &Device, smoke: bool, rows: &mut Vec<Row>) -> Res<()> {
    let (b, l, d, depth) = if smoke {
        (1, 8, 64, 1)
    } else {
        (8, 256, 768, 4)
    };
    let steps = if smoke { 2 } else { 20 };
    let make = || -> wmx::Result<Blocks> {
        wmx::with_device(dev, || {
            let keys = wmx::random::split(&wmx::random::key(3)?, depth)?;
            let blocks = (0..depth)
                .map(|i| {
                    let k = keys.slice(&[wmx::Slice::range(i as isize, i as isize + 1)])?;
                    nn::TransformerBlock::new(
                        &k.reshape(&[2])?,
                        d,
                        if smoke { 4 } else { 12 },
                        true,
                    )
                })
                .collect::<wmx::Result<Vec<_>>>()?;
            Ok(Blocks(blocks))
        })
    };
    let x = wmx::with_device(dev, || {
        wmx::random::normal(&wmx::random::key(4)?, &[b, l, d], 0.0, 1.0, DType::F32)
    })
    .map_err(err)?;
    let model = make().map_err(err)?;
    let mut opt = optim::Adam::adamw(1e-4, 0.01);
    let vg = nn::value_and_grad(&model, |a: &[Array]| gpt_loss(&model, a));
    let (ms, host) = time(dev, steps, || {
        let (l, g) = vg(std::slice::from_ref(&x)).map_err(err)?;
        opt.update(&model, &g).map_err(err)?;
        settle(&model, &l).map_err(err)
    })?;
    println!("train gpt{depth} lazy     f32 b{b} l{l} d{d}: {ms:8.3} ms/step (host {host:.3} ms)");
    rows.push(row("train_gpt_lazy", ms, host));
    let model = Arc::new(make().map_err(err)?);
    let mut step = optim::compile_step(model.clone(), optim::Adam::adamw(1e-4, 0.01), gpt_loss)
        .map_err(err)?;
    let (ms, host) = time(dev, steps, || {
        let l = step.call(std::slice::from_ref(&x)).map_err(err)?;
        settle(&*model, &l).map_err(err)
    })?;
    println!(
        "train gpt{depth} compiled f32 b{b} l{l} d{d}: {ms:8.3} ms/step (host {host:.3} ms, {} trace)",
        step.traces()
    );
    rows.push(row("train_gpt_compiled", ms, host));
    // One compiled step under the profiler: where the GPU time goes.
    if let (Some(be), true) = (
        wmx::webgpu::backend(dev),
        std::env::var_os("WMX_BENCH_PROFILE").is_some(),
    ) {
        let (r, p) = be
            .profile(|| -> wmx::Result<()> {
                let l = step.call(std::slice::from_ref(&x))?;
                settle(&*model, &l)
            })
            .map_err(err)?;
        r.map_err(err)?;
        println!("profile of one compiled gpt{depth} step:\n{}", p.table());
        if let Ok(path) = std::env::var("WMX_BENCH_TRACE") {
            std::fs::write(&path, p.chrome_trace()).map_err(err)?;
        }
    }
    Ok(())
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
    let (ms, host) = time(dev, steps, || {
        let (l, g) = vg(&[x.clone(), y.clone()]).map_err(err)?;
        opt.update(&model, &g).map_err(err)?;
        settle(&model, &l).map_err(err)
    })?;
    println!("train cnn lazy     f32 batch {b}: {ms:8.3} ms/step (host {host:.3} ms)");
    rows.push(row("train_cnn_lazy", ms, host));
    let model = Arc::new(make().map_err(err)?);
    let mut step =
        optim::compile_step(model.clone(), optim::Adam::adamw(1e-3, 0.01), loss).map_err(err)?;
    let (ms, host) = time(dev, steps, || {
        let l = step.call(&[x.clone(), y.clone()]).map_err(err)?;
        settle(&*model, &l).map_err(err)
    })?;
    println!(
        "train cnn compiled f32 batch {b}: {ms:8.3} ms/step (host {host:.3} ms, {} trace)",
        step.traces()
    );
    if step.traces() != 1 {
        return Err(format!(
            "the compiled CNN step traced {} times",
            step.traces()
        ));
    }
    rows.push(row("train_cnn_compiled", ms, host));
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

/// Transformer blocks in a row.
struct Blocks(Vec<nn::TransformerBlock>);

impl nn::Module for Blocks {
    fn visit(&self, v: &mut dyn nn::Visitor) {
        for (i, b) in self.0.iter().enumerate() {
            v.module(&i.to_string(), b);
        }
    }
}

fn gpt_loss(m: &Blocks, a: &[Array]) -> wmx::Result<Array> {
    let mut h = a[0].clone();
    for b in &m.0 {
        h = b.forward(&h)?;
    }
    wmx::mean(&wmx::multiply(&h, &h)?, None, false)
}

fn row(op: &str, ms: f64, host: f64) -> Row {
    Row {
        path: "wmx",
        op: op.to_string(),
        dtype: DType::F32,
        n: BATCH,
        ms,
        gbps: 0.0,
        extra: vec![("host_ms", host)],
    }
}
