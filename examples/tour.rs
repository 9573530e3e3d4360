//! A tour of wmx: real work on the best device found, with results checked against
//! the CPU backend and timings printed.
//!
//! ```text
//! cargo run --release --example tour            # best device (GPU if an adapter opens)
//! WMX_DEVICE=cpu cargo run --release --example tour
//! ```

use std::time::Instant;
use wmx::{Array, Device, Result};

/// `n` uniform f32 values in [-1, 1) from the key of `seed` (drawn on the default
/// device, read back to the host for the reference computations).
fn random(n: usize, seed: u64) -> Result<Vec<f32>> {
    let key = wmx::random::key(seed)?;
    wmx::random::uniform(&key, &[n], -1.0, 1.0, wmx::DType::F32)?.to_vec()
}

/// Runs `f` (which builds and evaluates a result) once to warm up, then `reps`
/// times; returns the result and the median wall time in ms.
fn timed(reps: usize, f: impl Fn() -> Result<Array>) -> Result<(Array, f64)> {
    let mut out = f()?;
    out.eval()?;
    let mut times = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        out = f()?;
        out.eval()?;
        // A GPU eval only submits: wait so the time covers the work.
        out.device().synchronize()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok((out, times[times.len() / 2]))
}

fn max_abs_diff(a: &Array, b: &Array) -> Result<f64> {
    let (a, b) = (a.to_vec_f64()?, b.to_vec_f64()?);
    Ok(a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max))
}

fn main() -> Result<()> {
    let device = wmx::default_device()?;
    println!("wmx tour on device: {device}");
    if device.kind() == wmx::DeviceKind::Cpu {
        if let Err(e) = Device::gpu() {
            println!("  (no GPU: {e})");
        }
    }
    let cpu = Device::cpu();
    let n: usize = std::env::var("WMX_TOUR_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1 << 22);
    let (rows, cols) = (1024, n / 1024);
    println!("arrays of {n} f32 ({rows} x {cols}), median of 5 runs\n");

    let xs = random(n, 1)?;
    let ys = random(n, 2)?;
    let x = Array::from_slice_on(&xs, &[rows, cols], &device)?;
    let y = Array::from_slice_on(&ys, &[rows, cols], &device)?;
    let xc = Array::from_slice_on(&xs, &[rows, cols], &cpu)?;
    let yc = Array::from_slice_on(&ys, &[rows, cols], &cpu)?;

    // tanh-GELU written out: 9 elementwise ops; compiled, one kernel on the GPU.
    fn gelu(x: &Array) -> Result<Array> {
        let inner = &(x + &(&(&(x * x) * x) * 0.044715)) * 0.7978845608;
        Ok(&(x * 0.5) * &(&wmx::tanh(&inner)? + 1.0))
    }
    let gelu_c = std::sync::Arc::new(wmx::compile(|a: &[Array]| Ok(vec![gelu(&a[0])?])));
    let dot_c = std::sync::Arc::new(wmx::compile(|a: &[Array]| {
        Ok(vec![wmx::sum(&wmx::multiply(&a[0], &a[1])?, None, false)?])
    }));
    let g2 = gelu_c.clone();
    let d2 = dot_c.clone();
    type Case<'a> = (&'a str, f64, Box<dyn Fn(&Array, &Array) -> Result<Array>>);
    let cases: Vec<Case> = vec![
        (
            "axpby 2x + 0.5y (fused)",
            12.0,
            Box::new(|x, y| wmx::axpby(x, y, 2.0, 0.5)),
        ),
        (
            "2x + 0.5y (composed)",
            12.0,
            Box::new(|x, y| Ok(&(x * 2.0) + &(y * 0.5))),
        ),
        ("add", 12.0, Box::new(wmx::add)),
        ("multiply", 12.0, Box::new(wmx::multiply)),
        ("maximum", 12.0, Box::new(wmx::maximum)),
        ("exp", 8.0, Box::new(|x, _| wmx::exp(x))),
        ("sum (all)", 4.0, Box::new(|x, _| wmx::sum(x, None, false))),
        (
            "sum (last axis)",
            4.0,
            Box::new(|x, _| wmx::sum(x, Some(&[-1]), false)),
        ),
        (
            "sum (first axis)",
            4.0,
            Box::new(|x, _| wmx::sum(x, Some(&[0]), false)),
        ),
        (
            "max (last axis)",
            4.0,
            Box::new(|x, _| wmx::max(x, Some(&[-1]), false)),
        ),
        (
            "argmax (last axis)",
            4.0,
            Box::new(|x, _| wmx::argmax(x, -1, false)),
        ),
        ("gelu, 9 ops", 8.0, Box::new(|x, _| gelu(x))),
        ("gelu, compiled", 8.0, Box::new(move |x, _| g2.call1(x))),
        (
            "sum(x*y), compiled",
            8.0,
            Box::new(move |x, y| Ok(d2.call(&[x.clone(), y.clone()])?.remove(0))),
        ),
        (
            "mean of x*y (transposed y)",
            8.0,
            Box::new(move |x, y| {
                let yt = wmx::transpose(&wmx::reshape(y, &[cols as isize, rows as isize])?, None)?;
                wmx::mean(&wmx::multiply(x, &yt)?, None, false)
            }),
        ),
    ];
    println!(
        "{:<28} {:>10} {:>10} {:>12}",
        "op", "ms", "GB/s", "max |err|"
    );
    for (name, bytes_per_elem, f) in &cases {
        let (out, ms) = timed(5, || f(&x, &y))?;
        let reference = f(&xc, &yc)?;
        let err = max_abs_diff(&out, &reference)?;
        let gbs = bytes_per_elem * n as f64 / (ms * 1e6);
        println!("{name:<28} {ms:>10.3} {gbs:>10.1} {err:>12.2e}");
        let tol = if name.contains("sum") || name.contains("mean") {
            1e-2
        } else {
            1e-5
        };
        if err > tol {
            return Err(wmx::Error::Backend {
                backend: device.name(),
                msg: format!("{name}: result differs from the CPU backend by {err}"),
            });
        }
    }

    let report = gelu_c.report(std::slice::from_ref(&x))?;
    println!(
        "\ncompiled gelu: {} ops traced, {} node(s) per call, {} fused kernel(s)",
        report.traced_ops,
        report.nodes,
        report.kernels.len()
    );
    let _ = dot_c;

    let small = Array::from_slice_on(&xs[..6], &[2, 3], &device)?;
    println!("\nx[:2, :3] =\n{small}");
    println!("sum over rows = {}", wmx::sum(&small, Some(&[1]), false)?);
    println!("\nall results match the CPU backend");
    Ok(())
}
