//! Logistic regression trained with `value_and_grad` on synthetic data, on the best
//! device (or `WMX_DEVICE=cpu`). The first gradient is checked against the closed
//! form computed on the host in f64, and the run fails unless training reaches the
//! stated loss and accuracy.
//!
//! ```text
//! cargo run --release --example logistic_regression
//! ```

use wmx::{Array, DType, Result};

const N: usize = 2048; // examples
const D: usize = 8; // features
const STEPS: usize = 300;
const LR: f64 = 2.0;
/// What training must reach (5 % of the labels are flipped: the loss levels off near 0.31).
const TARGET_LOSS: f64 = 0.33;
const TARGET_ACCURACY: f64 = 0.93;

/// `n` uniform f32 values in [-1, 1) from the key of `seed` (drawn on the default
/// device, read back to the host for the reference computations).
fn random(n: usize, seed: u64) -> Result<Vec<f32>> {
    let key = wmx::random::key(seed)?;
    wmx::random::uniform(&key, &[n], -1.0, 1.0, wmx::DType::F32)?.to_vec()
}

/// Mean binary cross-entropy of labels `y` for logits `x @ w + b`, in the stable
/// form `softplus(z) - y z` with `softplus(z) = max(z, 0) + log1p(exp(-|z|))`.
fn loss(params: &[Array], x: &Array, y: &Array) -> Result<Array> {
    let (w, b) = (&params[0], &params[1]);
    let z = wmx::add(&wmx::sum(&wmx::multiply(x, w)?, Some(&[1]), false)?, b)?;
    let zero = wmx::scalar_like(&z, 0.0)?;
    let softplus = wmx::add(
        &wmx::maximum(&z, &zero)?,
        &wmx::log1p(&wmx::exp(&wmx::negative(&wmx::abs(&z)?)?)?)?,
    )?;
    wmx::mean(
        &wmx::subtract(&softplus, &wmx::multiply(y, &z)?)?,
        None,
        false,
    )
}

fn main() -> Result<()> {
    // Synthetic data: labels from a known linear rule, 5 % of them flipped.
    let w_true: Vec<f32> = random(D, 1)?.iter().map(|v| 3.0 * v).collect();
    let xs = random(N * D, 2)?;
    let flips = random(N, 3)?;
    let ys: Vec<f32> = (0..N)
        .map(|i| {
            let z: f32 = (0..D).map(|j| xs[i * D + j] * w_true[j]).sum::<f32>() + 0.3;
            let label = (z > 0.0) as u8 as f32;
            if flips[i] > 0.9 { 1.0 - label } else { label }
        })
        .collect();
    let x = Array::from_slice(&xs, &[N, D])?;
    let y = Array::from_slice(&ys, &[N])?;
    println!(
        "logistic regression on {}: {N} examples, {D} features",
        x.device()
    );

    let step = wmx::value_and_grad(|p: &[Array]| Ok(vec![loss(p, &x, &y)?]), &[0, 1]);
    let mut params = vec![wmx::zeros(&[D], DType::F32)?, wmx::zeros(&[], DType::F32)?];

    // The first gradient against the closed form X^T (p - y) / N in f64.
    let (_, g) = step(&params)?;
    let (gw, gb) = (g[0].to_vec::<f32>()?, g[1].item::<f32>()?);
    let mut want_w = vec![0f64; D];
    let mut want_b = 0f64;
    for i in 0..N {
        let r = 0.5 - ys[i] as f64; // sigmoid(0) - y
        for j in 0..D {
            want_w[j] += r * xs[i * D + j] as f64 / N as f64;
        }
        want_b += r / N as f64;
    }
    let err = gw
        .iter()
        .zip(&want_w)
        .map(|(g, w)| (*g as f64 - w).abs())
        .fold((gb as f64 - want_b).abs(), f64::max);
    println!("first gradient vs closed form (f64): max |error| {err:.2e}");
    if err > 1e-5 {
        return Err(wmx::Error::Invalid {
            op: "example",
            msg: format!("gradient off by {err}"),
        });
    }

    for k in 0..STEPS {
        let (l, g) = step(&params)?;
        params = params
            .iter()
            .zip(&g)
            .map(|(p, g)| wmx::axpby(p, g, 1.0, -LR))
            .collect::<Result<_>>()?;
        wmx::eval(&params)?; // one eval per step keeps the graph short
        if k % 50 == 0 {
            println!("step {k:4}: loss {:.4}", l[0].item::<f32>()?);
        }
    }
    let last = loss(&params, &x, &y)?.item::<f32>()? as f64;
    let z = wmx::add(
        &wmx::sum(&wmx::multiply(&x, &params[0])?, Some(&[1]), false)?,
        &params[1],
    )?;
    let pred = wmx::astype(&wmx::greater(&z, &wmx::scalar_like(&z, 0.0)?)?, DType::F32)?;
    let acc = wmx::mean(&wmx::equal(&pred, &y)?, None, false)?.item::<f32>()? as f64;
    println!(
        "final loss {last:.4} (target < {TARGET_LOSS}), accuracy {acc:.3} (target > {TARGET_ACCURACY})"
    );
    if !(last < TARGET_LOSS && acc > TARGET_ACCURACY) {
        return Err(wmx::Error::Invalid {
            op: "example",
            msg: "training did not reach its targets".into(),
        });
    }
    Ok(())
}
