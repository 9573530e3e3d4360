//! A convolutional network on real data: scikit-learn's digits (8x8 handwritten
//! digits, the same fixed split as `digits_mlp`), as `[N, 8, 8, 1]` images
//! (channels last), through two 3x3 convolutions with max pooling, trained with
//! `wmx::nn` and AdamW on the best device (or `WMX_DEVICE=cpu`). It checks the first
//! loss against `ln 10`, that the convolution layers learned (their weights moved),
//! and fails unless the test accuracy reaches 98 % (issue 35's bar for the CNN).
//!
//! ```text
//! cargo run --release --example digits_cnn
//! ```

use std::collections::HashMap;
use wmx::nn::{self, ConvConfig, Layer, ModuleExt};
use wmx::optim::{self, Optimizer};
use wmx::{Array, DType, Result};

const EPOCHS: usize = 12;
const BATCH: usize = 64;
const TARGET_ACCURACY: f64 = 0.98;

fn main() -> Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/data/digits.npz");
    let data: HashMap<String, Array> = wmx::io::load_npz(path)?.into_iter().collect();
    // Pixels 0..16 to [0, 1] as [N, 8, 8, 1] images; labels as i32 class indices.
    let images = |k: &str| {
        let x = wmx::divide(
            &data[k].astype(DType::F32)?,
            &wmx::scalar(16.0, DType::F32)?,
        )?;
        x.reshape(&[-1, 8, 8, 1])
    };
    let (x_train, x_test) = (images("x_train")?, images("x_test")?);
    let (y_train, y_test) = (
        data["y_train"].astype(DType::I32)?,
        data["y_test"].astype(DType::I32)?,
    );
    let n = x_train.shape()[0];

    let keys = wmx::random::split(&wmx::random::key(0)?, 3)?;
    let key = |i: isize| keys.slice(&[wmx::Slice::range(i, i + 1)])?.reshape(&[2]);
    let same = ConvConfig {
        padding: [1, 1],
        ..Default::default()
    };
    let model = nn::Sequential::new()
        .push(nn::Conv2d::new(&key(0)?, 1, 16, [3, 3], same.clone())?) // 8x8x16
        .push(nn::Activation::Relu)
        .push(nn::MaxPool2d::new([2, 2])) // 4x4x16
        .push(nn::Conv2d::new(&key(1)?, 16, 32, [3, 3], same)?) // 4x4x32
        .push(nn::Activation::Relu)
        .push(nn::MaxPool2d::new([2, 2])) // 2x2x32
        .push(nn::Flatten::default())
        .push(nn::Linear::new(&key(2)?, 128, 10, true)?);
    let before = model.parameters();
    let mut opt = optim::Adam::adamw(optim::cosine_decay(5e-3, EPOCHS * n / BATCH, 5e-4), 1e-4);
    let ce = nn::losses::CrossEntropy::default();
    let step = nn::value_and_grad(&model, |a: &[Array]| {
        nn::losses::cross_entropy(
            &model.forward(&a[0])?,
            &a[1],
            &ce,
            nn::losses::Reduction::Mean,
        )
    });

    let mut first = None;
    for epoch in 0..EPOCHS {
        let ek = wmx::random::key(1000 + epoch as u64)?;
        let order = wmx::random::permutation(&ek, n)?.astype(DType::I32)?;
        let mut total = 0.0;
        let batches = n / BATCH;
        for b in 0..batches {
            let idx = order.slice(&[wmx::Slice::range(
                (b * BATCH) as isize,
                ((b + 1) * BATCH) as isize,
            )])?;
            let xb = wmx::take(&x_train, &idx, Some(0))?;
            let yb = wmx::take(&y_train, &idx, Some(0))?;
            let (loss, grads) = step(&[xb, yb])?;
            opt.update(&model, &grads)?;
            let l = loss.item::<f32>()? as f64;
            first.get_or_insert(l);
            total += l;
        }
        if epoch % 5 == 0 || epoch == EPOCHS - 1 {
            println!("epoch {epoch:2}: mean loss {:.4}", total / batches as f64);
        }
    }

    let first = first.expect("a step ran");
    assert!(
        (first - 10f64.ln()).abs() < 0.3,
        "first loss {first}, expected about ln 10 = {}",
        10f64.ln()
    );
    // The convolutions trained: their weights moved from the initial ones.
    let after = model.parameters();
    for name in ["0.weight", "3.weight"] {
        let moved = wmx::max(
            &wmx::abs(&wmx::subtract(&after[name], &before[name])?)?,
            None,
            false,
        )?;
        assert!(moved.item::<f32>()? > 1e-3, "{name} did not change");
    }
    model.train(false);
    let pred = wmx::argmax(&model.forward(&x_test)?, -1, false)?.astype(DType::I32)?;
    let right = wmx::sum(
        &wmx::equal(&pred, &y_test)?.astype(DType::F32)?,
        None,
        false,
    )?;
    let accuracy = right.item::<f32>()? as f64 / y_test.shape()[0] as f64;
    println!(
        "test accuracy: {:.1} % ({} images)",
        accuracy * 100.0,
        y_test.shape()[0]
    );
    if accuracy < TARGET_ACCURACY {
        eprintln!("below the {:.0} % target", TARGET_ACCURACY * 100.0);
        std::process::exit(1);
    }
    Ok(())
}
