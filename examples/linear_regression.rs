//! Least squares by gradient descent: `w` minimising `mean((X w - y)^2)` for
//! synthetic data, with `matmul` and `grad`. Checked against the normal equations
//! solved in f64 on the host; fails unless training reaches them.
//!
//! ```text
//! cargo run --release --example linear_regression
//! ```

use wmx::prelude::*;

const N: usize = 2000;
const D: usize = 5;
const STEPS: usize = 400;
const LR: f64 = 0.3;

fn loss(w: &Array, x: &Array, y: &Array) -> Result<Array> {
    let r = x.matmul(w)? - y;
    r.square()?.mean(None, false)
}

/// Solves `a z = b` (D x D) by Gaussian elimination with partial pivoting.
fn solve(mut a: Vec<f64>, mut b: Vec<f64>) -> Vec<f64> {
    for k in 0..D {
        let p = (k..D)
            .max_by(|&i, &j| a[i * D + k].abs().total_cmp(&a[j * D + k].abs()))
            .unwrap();
        for c in 0..D {
            a.swap(k * D + c, p * D + c);
        }
        b.swap(k, p);
        for i in k + 1..D {
            let f = a[i * D + k] / a[k * D + k];
            for c in k..D {
                a[i * D + c] -= f * a[k * D + c];
            }
            b[i] -= f * b[k];
        }
    }
    let mut z = vec![0.0; D];
    for k in (0..D).rev() {
        let s: f64 = (k + 1..D).map(|c| a[k * D + c] * z[c]).sum();
        z[k] = (b[k] - s) / a[k * D + k];
    }
    z
}

fn main() -> Result<()> {
    let (k1, k2) = random::split2(&random::key(3)?)?;
    let x = random::uniform(&k1, &[N, D], -1.0, 1.0, DType::F32)?;
    let w_true = wmx::array(&[[1.5f32], [-2.0], [0.5], [3.0], [-0.75]])?;
    let y = x.matmul(&w_true)? + random::normal(&k2, &[N, 1], 0.0, 0.1, DType::F32)?;
    println!("least squares, {N} x {D}, on {}", x.device());
    let (xc, yc) = (x.clone(), y.clone());
    let step = compile(move |a: &[Array]| {
        let g = grad(|p: &[Array]| Ok(vec![loss(&p[0], &xc, &yc)?]), &[0])(a)?;
        Ok(vec![&a[0] - LR * &g[0]])
    });
    let mut w = wmx::zeros(&[D, 1], DType::F32)?;
    for _ in 0..STEPS {
        w = step.call1(&w)?;
        eval(&[w.clone()])?;
    }
    let final_loss = loss(&w, &x, &y)?.item_as::<f64>()?;

    // Normal equations in f64: (X^T X) w = X^T y.
    let (xv, yv) = (x.to_vec_as::<f64>()?, y.to_vec_as::<f64>()?);
    let mut xtx = vec![0.0; D * D];
    let mut xty = vec![0.0; D];
    for r in 0..N {
        for i in 0..D {
            xty[i] += xv[r * D + i] * yv[r];
            for j in 0..D {
                xtx[i * D + j] += xv[r * D + i] * xv[r * D + j];
            }
        }
    }
    let w_ls = solve(xtx, xty);
    let got = w.to_vec_as::<f64>()?;
    let err = got
        .iter()
        .zip(&w_ls)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!("w = {got:.4?}\nnormal equations (f64): {w_ls:.4?}");
    println!("loss {final_loss:.5}, max |w - w_ls| {err:.2e}");
    if err > 1e-3 {
        return Err(Error::invalid(
            "linear_regression",
            format!("off the solution by {err}"),
        ));
    }
    Ok(())
}
