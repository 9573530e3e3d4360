//! Softmax cross-entropy of a batch of logits and integer labels, and its gradient
//! by `grad`, compiled: `log_softmax` picks each row's label with
//! `take_along_axis` (no one-hot mask). Checked against the closed form in f64 on
//! the host (loss = mean(logsumexp - logit[label]), gradient = (softmax -
//! one_hot) / batch).
//!
//! ```text
//! cargo run --release --example cross_entropy
//! ```

use wmx::prelude::*;

const B: usize = 256; // batch
const C: usize = 10; // classes

/// Mean cross-entropy of `logits` [B, C] against `labels` [B] (i32).
fn loss(logits: &Array, labels: &Array) -> Result<Array> {
    let lp = wmx::log_softmax(logits, &[-1])?;
    let picked = wmx::take_along_axis(&lp, &labels.expand_dims(-1)?, Some(-1))?;
    Ok(-picked.mean(None, false)?)
}

fn main() -> Result<()> {
    let (k1, k2) = random::split2(&random::key(7)?)?;
    let logits = random::normal(&k1, &[B, C], 0.0, 3.0, DType::F32)?;
    let labels = random::randint(&k2, &[B], 0, C as i64, DType::I32)?;
    println!("cross-entropy of {B} x {C} logits on {}", logits.device());
    let labels_c = labels.clone();
    let step = compile(move |a: &[Array]| {
        let f = |p: &[Array]| Ok(vec![loss(&p[0], &labels_c)?]);
        let (l, g) = wmx::value_and_grad(f, &[0])(a)?;
        Ok(vec![l[0].clone(), g[0].clone()])
    });
    let out = step.call(std::slice::from_ref(&logits))?;
    let (l, g) = (out[0].item_as::<f64>()?, out[1].to_vec_as::<f64>()?);

    // f64 on the host.
    let x = logits.to_vec_as::<f64>()?;
    let y = labels.to_vec::<i32>()?;
    let (mut want_l, mut want_g) = (0.0, vec![0.0; B * C]);
    for r in 0..B {
        let row = &x[r * C..(r + 1) * C];
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = row.iter().map(|v| (v - m).exp()).sum();
        want_l += (m + z.ln() - row[y[r] as usize]) / B as f64;
        for c in 0..C {
            let p = (row[c] - m).exp() / z;
            want_g[r * C + c] = (p - if c == y[r] as usize { 1.0 } else { 0.0 }) / B as f64;
        }
    }
    let gerr = g
        .iter()
        .zip(&want_g)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!("loss {l:.6} (f64 {want_l:.6}), max |gradient error| {gerr:.2e}");
    if (l - want_l).abs() > 1e-5 * want_l.abs().max(1.0) || gerr > 1e-6 {
        return Err(Error::invalid(
            "cross_entropy",
            "differs from the f64 reference",
        ));
    }
    Ok(())
}
