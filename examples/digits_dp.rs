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
mod digits;

use wmx::Result;
use wmx::distributed;
use wmx::nn::{self, ModuleExt};

const EPOCHS: usize = 4;

fn model() -> Result<nn::Sequential> {
    let keys = wmx::random::split(&wmx::random::key(0)?, 2)?;
    let key = |i: isize| keys.slice(&[wmx::Slice::range(i, i + 1)])?.reshape(&[2]);
    Ok(nn::Sequential::new()
        .push(nn::Linear::new(&key(0)?, 64, 128, true)?)
        .push(nn::Activation::Relu)
        .push(nn::Linear::new(&key(1)?, 128, 10, true)?))
}

fn main() -> Result<()> {
    let world = distributed::init()?;
    if !digits::BATCH.is_multiple_of(world.size()) {
        eprintln!(
            "{} ranks do not split a batch of {}",
            world.size(),
            digits::BATCH
        );
        std::process::exit(2);
    }
    let data = digits::load(&[64])?;
    let shared = model()?;
    let r = world.rank();
    println!("rank {r} of {} on {}", world.size(), wmx::default_device()?);
    digits::train(&shared, &data, EPOCHS, &world, r == 0)?;
    // The same training on this rank alone, whole batches.
    let alone = model()?;
    let one = world.split(world.rank() as u32, 0)?;
    digits::train(&alone, &data, EPOCHS, &one, r == 0)?;
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
