//! Signals with `wmx::fft`: the strongest frequency of a noisy tone (rfft), and a
//! long convolution computed as a product of spectra (rfft, complex multiply,
//! irfft) — differentiated too: the gradient of a loss of the convolution with
//! respect to the filter. Checked against direct sums in f64 on the host; fails if
//! they differ by more than f32 rounding allows.
//!
//! ```text
//! cargo run --release --example spectrum
//! ```

use wmx::fft::{self, Norm};
use wmx::prelude::*;

const N: usize = 3000; // samples (not a power of two: mixed radix / Bluestein)
const TAPS: usize = 257;

fn main() -> Result<()> {
    // A tone at 211 cycles per N samples, plus deterministic noise.
    let mut s = 12345u64;
    let mut noise = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 40) as f64 / (1u64 << 24) as f64 - 0.5
    };
    let x: Vec<f64> = (0..N)
        .map(|t| (std::f64::consts::TAU * 211.0 * t as f64 / N as f64).sin() + 0.8 * noise())
        .collect();
    let xa = Array::from_slice(&x.iter().map(|&v| v as f32).collect::<Vec<_>>(), &[N])?;
    println!("spectrum of {N} samples on {}", xa.device());
    let power = wmx::square(&wmx::abs(&fft::rfft(&xa, None, 0, Norm::Backward)?)?)?;
    let peak = wmx::argmax(&power, 0, false)?.item_as::<f64>()? as usize;
    println!("strongest frequency: {peak} cycles per {N} samples");
    if peak != 211 {
        return Err(Error::invalid(
            "spectrum",
            format!("found {peak}, the tone is 211"),
        ));
    }

    // y = x * h (full linear convolution, N + TAPS - 1 points), by spectra.
    let h: Vec<f64> = (0..TAPS)
        .map(|k| (-(k as f64) / 40.0).exp() / 40.0)
        .collect();
    let ha = Array::from_slice(&h.iter().map(|&v| v as f32).collect::<Vec<_>>(), &[TAPS])?;
    let len = N + TAPS - 1;
    let convolve = |x: &Array, h: &Array| -> Result<Array> {
        let spec = wmx::multiply(
            &fft::rfft(x, Some(len), 0, Norm::Backward)?,
            &fft::rfft(h, Some(len), 0, Norm::Backward)?,
        )?;
        fft::irfft(&spec, Some(len), 0, Norm::Backward)
    };
    let y = convolve(&xa, &ha)?.to_vec_as::<f64>()?;
    let direct: Vec<f64> = (0..len)
        .map(|t| {
            (t.saturating_sub(N - 1)..=t.min(TAPS - 1))
                .map(|k| h[k] * x[t - k])
                .sum()
        })
        .collect();
    let err = y
        .iter()
        .zip(&direct)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!("convolution of {N} by {TAPS} taps via FFT: max error {err:.2e} against direct sums");
    if err > 1e-4 {
        return Err(Error::invalid(
            "spectrum",
            format!("convolution error {err}"),
        ));
    }

    // d/dh of sum(y^2) / 2 is the correlation of x with y: sum_t y[t] x[t - k].
    let g = wmx::grad(
        |a: &[Array]| {
            let y = convolve(&a[0], &a[1])?;
            Ok(vec![wmx::square(&y)?.sum(None, false)? * 0.5])
        },
        &[1],
    )(&[xa.clone(), ha.clone()])?;
    let got = g[0].to_vec_as::<f64>()?;
    let want: Vec<f64> = (0..TAPS)
        .map(|k| (k..k + N).map(|t| direct[t] * x[t - k]).sum())
        .collect();
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let gerr = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!(
        "gradient with respect to the filter: max error {:.2e} of {scale:.2e}",
        gerr
    );
    if gerr > 1e-4 * scale {
        return Err(Error::invalid("spectrum", format!("gradient error {gerr}")));
    }
    Ok(())
}
