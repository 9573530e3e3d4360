//! What the digits examples share: the data (scikit-learn's digits, 1,797 8x8
//! handwritten digits, UCI; exported once by `examples/data/digits.py`, a fixed
//! split of 1,437 training and 360 test images), the training loop (AdamW with a
//! cosine schedule, cross-entropy, a fresh order each epoch, data-parallel over a
//! `wmx::distributed` group) and the test.

use std::collections::HashMap;
use wmx::distributed::{self, Group};
use wmx::nn::{self, Layer, ModuleExt};
use wmx::optim::{self, Optimizer};
use wmx::{Array, DType, Result};

/// Images per step (split among the ranks of a group).
pub const BATCH: usize = 64;

/// The split: pixels scaled to [0, 1], labels as i32 class indices.
pub struct Digits {
    pub x_train: Array,
    pub y_train: Array,
    pub x_test: Array,
    pub y_test: Array,
}

/// The data, each image as `shape` (`[64]` for an MLP, `[8, 8, 1]` for a CNN).
pub fn load(shape: &[isize]) -> Result<Digits> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/data/digits.npz");
    let data: HashMap<String, Array> = wmx::io::load_npz(path)?.into_iter().collect();
    let images = |k: &str| {
        let x = wmx::divide(
            &data[k].astype(DType::F32)?,
            &wmx::scalar(16.0, DType::F32)?,
        )?;
        let mut s = vec![-1];
        s.extend(shape);
        x.reshape(&s)
    };
    Ok(Digits {
        x_train: images("x_train")?,
        y_train: data["y_train"].astype(DType::I32)?,
        x_test: images("x_test")?,
        y_test: data["y_test"].astype(DType::I32)?,
    })
}

/// Trains `model` for `epochs` with AdamW over the same batches on every rank of
/// `group`, each rank taking its share of a batch and the gradients averaged (a
/// group of one: the whole batch). With `print`, the mean loss every 5 epochs;
/// the first loss is checked against `ln 10` (an untrained model's expected
/// cross-entropy). Returns the last epoch's mean loss.
pub fn train(
    model: &nn::Sequential,
    d: &Digits,
    epochs: usize,
    group: &Group,
    print: bool,
) -> Result<f64> {
    let n = d.x_train.shape()[0];
    let share = BATCH / group.size();
    let mut opt = optim::Adam::adamw(optim::cosine_decay(5e-3, epochs * n / BATCH, 5e-4), 1e-4);
    let ce = nn::losses::CrossEntropy::default();
    let step = nn::value_and_grad(model, |a: &[Array]| {
        nn::losses::cross_entropy(
            &model.forward(&a[0])?,
            &a[1],
            &ce,
            nn::losses::Reduction::Mean,
        )
    });
    let (mut first, mut mean) = (None, 0.0);
    let batches = n / BATCH;
    for epoch in 0..epochs {
        // A fresh order each epoch, from the epoch's key.
        let ek = wmx::random::key(1000 + epoch as u64)?;
        let order = wmx::random::permutation(&ek, n)?.astype(DType::I32)?;
        let mut total = 0.0;
        for b in 0..batches {
            let start = (b * BATCH + group.rank() * share) as isize;
            let idx = order.slice(&[wmx::Slice::range(start, start + share as isize)])?;
            let xb = wmx::take(&d.x_train, &idx, Some(0))?;
            let yb = wmx::take(&d.y_train, &idx, Some(0))?;
            let (loss, grads) = step(&[xb, yb])?;
            let grads = nn::average_gradients(&grads, group, None)?;
            opt.update(model, &grads)?;
            let l = distributed::all_sum(&loss, group)?.item::<f32>()? as f64 / group.size() as f64;
            first.get_or_insert(l);
            total += l;
        }
        mean = total / batches as f64;
        if print && (epoch % 5 == 0 || epoch == epochs - 1) {
            println!(
                "epoch {epoch:2}: mean loss {mean:.4} ({} ranks)",
                group.size()
            );
        }
    }
    let first = first.expect("a step ran");
    assert!(
        (first - 10f64.ln()).abs() < 0.3,
        "first loss {first}, expected about ln 10 = {}",
        10f64.ln()
    );
    Ok(mean)
}

/// The test accuracy, printed; the process fails below `target`.
pub fn test(model: &nn::Sequential, d: &Digits, target: f64) -> Result<()> {
    model.train(false);
    let pred = wmx::argmax(&model.forward(&d.x_test)?, -1, false)?.astype(DType::I32)?;
    let right = wmx::sum(
        &wmx::equal(&pred, &d.y_test)?.astype(DType::F32)?,
        None,
        false,
    )?;
    let accuracy = right.item::<f32>()? as f64 / d.y_test.shape()[0] as f64;
    println!(
        "test accuracy: {:.1} % ({} images)",
        accuracy * 100.0,
        d.y_test.shape()[0]
    );
    if accuracy < target {
        eprintln!("below the {:.0} % target", target * 100.0);
        std::process::exit(1);
    }
    Ok(())
}
