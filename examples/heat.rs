//! The heat equation on a 2-D grid, explicit steps of the 5-point stencil with zero
//! boundaries, as a compiled function: the padded grid's four shifted views and the
//! update fuse into one kernel on the GPU. Checked against the same steps in f64 on
//! the host; fails if they differ by more than f32 rounding allows.
//!
//! ```text
//! cargo run --release --example heat
//! ```

use wmx::ops::{PadMode, Slice};
use wmx::prelude::*;

const N: usize = 96; // grid points per side
const STEPS: usize = 200;
const R: f64 = 0.2; // alpha * dt / dx^2, stable below 0.25

/// One explicit step: u + R (u_up + u_down + u_left + u_right - 4u), zero outside.
fn step(u: &Array) -> Result<Array> {
    let p = wmx::pad(u, &[(1, 1), (1, 1)], PadMode::Constant(0.0))?;
    let n = N as isize;
    let shifted = |di: isize, dj: isize| {
        p.slice(&[
            Slice::range(1 + di, n + 1 + di),
            Slice::range(1 + dj, n + 1 + dj),
        ])
    };
    let sum = shifted(-1, 0)? + shifted(1, 0)? + shifted(0, -1)? + shifted(0, 1)?;
    Ok(u + R * (sum - 4.0 * u))
}

fn main() -> Result<()> {
    // A hot square in the middle.
    let mut host = vec![0f64; N * N];
    for i in N / 3..2 * N / 3 {
        for j in N / 3..2 * N / 3 {
            host[i * N + j] = 1.0;
        }
    }
    let init: Vec<f32> = host.iter().map(|&v| v as f32).collect();
    let mut u = Array::from_slice(&init, &[N, N])?;
    println!("heat equation on {N}x{N}, {STEPS} steps, on {}", u.device());
    let compiled = compile(|a: &[Array]| Ok(vec![step(&a[0])?]));
    for _ in 0..STEPS {
        u = compiled.call1(&u)?;
        eval(&[u.clone()])?;
    }
    let report = compiled.report(&[u.clone()])?;
    println!(
        "compiled step: {} ops traced, {} node(s) per call, {} fused kernel(s)",
        report.traced_ops,
        report.nodes,
        report.kernels.len()
    );
    // The same steps in f64.
    for _ in 0..STEPS {
        let mut next = host.clone();
        for i in 0..N {
            for j in 0..N {
                let at = |a: isize, b: isize| -> f64 {
                    if a < 0 || b < 0 || a >= N as isize || b >= N as isize {
                        0.0
                    } else {
                        host[a as usize * N + b as usize]
                    }
                };
                let (ii, jj) = (i as isize, j as isize);
                let lap = at(ii - 1, jj) + at(ii + 1, jj) + at(ii, jj - 1) + at(ii, jj + 1)
                    - 4.0 * at(ii, jj);
                next[i * N + j] = host[i * N + j] + R * lap;
            }
        }
        host = next;
    }
    let got = u.to_vec_as::<f64>()?;
    let err = got
        .iter()
        .zip(&host)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0, f64::max);
    let heat: f64 = got.iter().sum();
    println!(
        "total heat {heat:.4} (started at {}), max |error| vs f64 {err:.2e}",
        (N / 3) * (N / 3)
    );
    if err > 1e-4 {
        return Err(Error::invalid("heat", format!("differs from f64 by {err}")));
    }
    Ok(())
}
