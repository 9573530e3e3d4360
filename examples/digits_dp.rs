//! Data-parallel training with `wmx::distributed`: the digits MLP (see
//! `digits_mlp.rs`), each batch of 64 split among the ranks, the gradients averaged
//! with `nn::average_gradients`, the same AdamW step on every rank. Every rank then
//! trains the same model alone on the whole batches and checks that both runs end
//! with the same weights (f32 rounding apart), and prints the test accuracy.
//!
//! ```text
//! mpirun -n 2 target/release/examples/digits_dp   # cargo build --release --example digits_dp --features mpi
//! ```
//! Without `mpirun` it runs as one rank.

#[path = "common/digits.rs"]
#[allow(dead_code)] // its single-process `train`: this example splits the batches
mod digits;

use wmx::distributed::{self, Group};
use wmx::nn::{self, Layer, ModuleExt};
use wmx::optim::{self, Optimizer};
use wmx::{Array, DType, Result};

const BATCH: usize = 64;
const EPOCHS: usize = 4;

fn model() -> Result<nn::Sequential> {
    let keys = wmx::random::split(&wmx::random::key(0)?, 2)?;
    let key = |i: isize| keys.slice(&[wmx::Slice::range(i, i + 1)])?.reshape(&[2]);
    Ok(nn::Sequential::new()
        .push(nn::Linear::new(&key(0)?, 64, 128, true)?)
        .push(nn::Activation::Relu)
        .push(nn::Linear::new(&key(1)?, 128, 10, true)?))
}

/// Trains `model` over the same batches on every rank; this rank takes its share
/// of each (`group` of one: the whole batch). Returns the last epoch's mean loss,
/// printing each epoch's if `print`.
fn train(model: &nn::Sequential, d: &digits::Digits, group: &Group, print: bool) -> Result<f64> {
    let n = d.x_train.shape()[0];
    let share = BATCH / group.size();
    let mut opt = optim::Adam::adamw(optim::cosine_decay(5e-3, EPOCHS * n / BATCH, 5e-4), 1e-4);
    let ce = nn::losses::CrossEntropy::default();
    let step = nn::value_and_grad(model, |a: &[Array]| {
        nn::losses::cross_entropy(
            &model.forward(&a[0])?,
            &a[1],
            &ce,
            nn::losses::Reduction::Mean,
        )
    });
    let mut mean = 0.0;
    for epoch in 0..EPOCHS {
        let order = wmx::random::permutation(&wmx::random::key(1000 + epoch as u64)?, n)?
            .astype(DType::I32)?;
        let mut total = 0.0;
        for b in 0..n / BATCH {
            let start = (b * BATCH + group.rank() * share) as isize;
            let idx = order.slice(&[wmx::Slice::range(start, start + share as isize)])?;
            let xb = wmx::take(&d.x_train, &idx, Some(0))?;
            let yb = wmx::take(&d.y_train, &idx, Some(0))?;
            let (loss, grads) = step(&[xb, yb])?;
            let grads = nn::average_gradients(&grads, group, None)?;
            opt.update(model, &grads)?;
            total +=
                distributed::all_sum(&loss, group)?.item::<f32>()? as f64 / group.size() as f64;
        }
        mean = total / (n / BATCH) as f64;
        if print {
            println!(
                "epoch {epoch}: mean loss {mean:.4} ({} ranks)",
                group.size()
            );
        }
    }
    Ok(mean)
}

fn main() -> Result<()> {
    let world = distributed::init()?;
    if !BATCH.is_multiple_of(world.size()) {
        eprintln!("{} ranks do not split a batch of {BATCH}", world.size());
        std::process::exit(2);
    }
    let data = digits::load(&[64])?;
    let shared = model()?;
    let r = world.rank();
    println!("rank {r} of {} on {}", world.size(), wmx::default_device()?);
    train(&shared, &data, &world, r == 0)?;
    // The same training on this rank alone, whole batches.
    let alone = model()?;
    let one = world.split(world.rank() as u32, 0)?;
    train(&alone, &data, &one, r == 0)?;
    let (a, b) = (shared.parameters(), alone.parameters());
    let mut worst = 0.0f64;
    for (name, w) in &a {
        let (x, y) = (w.to_vec_f64()?, b[name].to_vec_f64()?);
        for (p, q) in x.iter().zip(&y) {
            worst = worst.max((p - q).abs() / q.abs().max(0.1));
        }
    }
    println!(
        "rank {r}: weights after {} ranks vs one: largest difference {worst:.2e} (relative)",
        world.size()
    );
    if worst > 1e-4 {
        eprintln!("rank {r}: the data-parallel run drifted from the single-process one");
        std::process::exit(1);
    }
    if r == 0 {
        digits::test(&shared, &data, 0.9)?;
    }
    Ok(())
}
