//! The seed's benchmark: the custom `axpby` against the composed
//! `alpha * x + beta * y` (and wmx's built-in `axpby`), each evaluated once per
//! iteration, on the CPU and the
//! GPU; the seed's size (256 x 512) and a large one (2^24 elements).
//!
//! `axpby_bench [--quick] [--json PATH]`

use std::time::Instant;
use wmx::{Array, DType, Device, Result};

/// `alpha * x + beta * y` from three ops, the scalars on `x`'s device.
fn composed(x: &Array, y: &Array, a: f64, b: f64) -> Result<Array> {
    let (a, b) = wmx::with_device(x.device(), || {
        Ok((wmx::scalar(a, x.dtype())?, wmx::scalar(b, x.dtype())?))
    })?;
    wmx::add(&wmx::multiply(x, &a)?, &wmx::multiply(y, &b)?)
}

/// Seconds per iteration of `f`, evaluated each time (the seed's loop).
fn bench(
    dev: &Device,
    f: &dyn Fn(&Array, &Array) -> Result<Array>,
    x: &Array,
    y: &Array,
    warm: usize,
    iters: usize,
) -> Result<f64> {
    for _ in 0..warm {
        f(x, y)?.eval()?;
    }
    dev.synchronize()?;
    let t = Instant::now();
    for _ in 0..iters {
        f(x, y)?.eval()?;
    }
    dev.synchronize()?;
    Ok(t.elapsed().as_secs_f64() / iters as f64)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let json = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1));
    let mut devices = vec![Device::cpu()];
    match Device::gpu() {
        Ok(g) => devices.push(g),
        Err(e) => eprintln!("no GPU: {e}"),
    }
    let (alpha, beta) = (4.0, 2.0);
    let mut rows = Vec::new();
    for dev in &devices {
        let mut shapes = vec![vec![256usize, 512]];
        if !quick {
            shapes.push(vec![1 << 12, 1 << 12]);
        }
        for shape in shapes {
            for dtype in [DType::F32, DType::F16] {
                if dev.check_dtype(dtype).is_err() {
                    continue;
                }
                let n: usize = shape.iter().product();
                let x = wmx::with_device(dev, || {
                    wmx::astype(
                        &wmx::random::normal(&wmx::random::key(1)?, &shape, 0.0, 1.0, DType::F32)?,
                        dtype,
                    )
                })?;
                let y = wmx::with_device(dev, || {
                    wmx::astype(
                        &wmx::random::normal(&wmx::random::key(2)?, &shape, 0.0, 1.0, DType::F32)?,
                        dtype,
                    )
                })?;
                wmx::eval(&[x.clone(), y.clone()])?;
                let iters = match (quick, n > 1 << 20) {
                    (true, _) => 5,
                    (false, false) => 5000,
                    (false, true) => 200,
                };
                let simple = bench(
                    dev,
                    &|x, y| composed(x, y, alpha, beta),
                    &x,
                    &y,
                    100.min(iters),
                    iters,
                )?;
                let custom = bench(
                    dev,
                    &|x, y| wmx_axpby::axpby(x, y, alpha, beta),
                    &x,
                    &y,
                    100.min(iters),
                    iters,
                )?;
                let builtin = bench(
                    dev,
                    &|x, y| wmx::axpby(x, y, alpha, beta),
                    &x,
                    &y,
                    100.min(iters),
                    iters,
                )?;
                let gbs = |t: f64| 3.0 * (n * dtype.size()) as f64 / t / 1e9;
                println!(
                    "{:<40} {dtype:<4} {:>9}: simple {:>9.2} us | custom {:>9.2} us ({:.2}x, {:.1} GB/s) | built-in {:>9.2} us",
                    dev.to_string(),
                    format!("{}x{}", shape[0], shape[1]),
                    simple * 1e6,
                    custom * 1e6,
                    simple / custom,
                    gbs(custom),
                    builtin * 1e6
                );
                rows.push(format!(
                    "{{\"device\": {:?}, \"dtype\": \"{dtype}\", \"shape\": {shape:?}, \"iters\": {iters}, \"simple_s\": {simple:e}, \"custom_s\": {custom:e}, \"builtin_s\": {builtin:e}}}",
                    dev.to_string()
                ));
            }
        }
    }
    if let Some(path) = json {
        std::fs::write(path, format!("[\n{}\n]\n", rows.join(",\n")))
            .map_err(|e| wmx::Error::invalid("bench", e.to_string()))?;
    }
    Ok(())
}
