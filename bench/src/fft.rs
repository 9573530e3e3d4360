//! `--fft`: issue 40's FFT cases through `wmx::fft`: a batch of 4096 transforms
//! of 1024, one of 2^24 and a 2-D 4096^2, each as c64 and as rfft of f32;
//! checked against f64 direct sums at sampled outputs first, then timed (GPU
//! timestamps around evals, median of `reps`). `bench/torch_fft.py` measures the
//! same cases with `torch.fft` (cuFFT).

use super::blocks::time_evals;
use super::{Res, Stamps, err, median, profile_once, random};
use wmx::fft::{self, Norm};
use wmx::{Array, Complex32, Device};

/// `sum_j x[j] exp(-2 pi i jk / n)` at one `k`, in f64.
fn dft_at(x: &[(f64, f64)], k: usize) -> (f64, f64) {
    let n = x.len();
    x.iter().enumerate().fold((0.0, 0.0), |s, (j, &(a, b))| {
        let t = -std::f64::consts::TAU * ((j as u128 * k as u128) % n as u128) as f64 / n as f64;
        let (c, si) = (t.cos(), t.sin());
        (s.0 + a * c - b * si, s.1 + a * si + b * c)
    })
}

/// `got` within a relative `1e-5 (1 + log2 n)` of `want`, scaled by the input's
/// L2 norm (an FFT's error bound).
fn check(what: &str, got: Complex32, want: (f64, f64), norm2: f64, n: usize) -> Res<()> {
    let e = (got.re as f64 - want.0).hypot(got.im as f64 - want.1);
    let bound = 1e-6 * (1.0 + (n as f64).log2()) * norm2;
    if e > bound {
        return Err(format!(
            "{what}: got {got}, want {want:?} (error {e:e} > {bound:e})"
        ));
    }
    Ok(())
}

pub(crate) fn bench_fft(dev: &Device, stamps: Option<&Stamps>, reps: usize) -> Res<()> {
    type Case<'a> = (&'a str, Vec<usize>, bool);
    let cases: Vec<Case> = vec![
        ("batch 4096 x 1024", vec![4096, 1024], false),
        ("one of 2^24", vec![1 << 24], false),
        ("2-D 4096^2", vec![4096, 4096], true),
    ];
    for (name, shape, two_d) in cases {
        let n: usize = shape.iter().product();
        let re = random(n, 1);
        let im = random(n, 2);
        let z: Vec<Complex32> = re
            .iter()
            .zip(&im)
            .map(|(&a, &b)| Complex32::new(a, b))
            .collect();
        let x = Array::from_slice_on(&z, &shape, dev).map_err(err)?;
        let xr = Array::from_slice_on(&re, &shape, dev).map_err(err)?;
        wmx::eval(&[x.clone(), xr.clone()]).map_err(err)?;
        let c2c = || {
            if two_d {
                fft::fft2(&x, None, None, Norm::Backward)
            } else {
                fft::fft(&x, None, -1, Norm::Backward)
            }
        };
        let r2c = || {
            if two_d {
                fft::rfft2(&xr, None, None, Norm::Backward)
            } else {
                fft::rfft(&xr, None, -1, Norm::Backward)
            }
        };
        // Sampled outputs against direct sums of the same f32 inputs (skipped with
        // WMX_BENCH_NOCHECK=1, for timing experimental kernels).
        let last = *shape.last().unwrap();
        let check_outputs = std::env::var("WMX_BENCH_NOCHECK").is_err();
        let y = c2c().map_err(err)?.to_vec::<Complex32>().map_err(err)?;
        let yr = r2c().map_err(err)?.to_vec::<Complex32>().map_err(err)?;
        let m = last / 2 + 1;
        let zs: Vec<(f64, f64)> = z.iter().map(|c| (c.re as f64, c.im as f64)).collect();
        let rs: Vec<(f64, f64)> = re.iter().map(|&a| (a as f64, 0.0)).collect();
        let ks = if check_outputs {
            vec![0usize, 1, 777, last / 2]
        } else {
            vec![]
        };
        for k in ks {
            if two_d {
                // X[k1, k2] of the 2-D transform: rows' transforms, then columns'.
                let (k1, k2) = (k % 4096, (k * 31 + 5) % last);
                for (src, out, cols, what) in [(&zs, &y, last, "fft2"), (&rs, &yr, m, "rfft2")] {
                    if what == "rfft2" && k2 >= m {
                        continue;
                    }
                    let col: Vec<(f64, f64)> = (0..shape[0])
                        .map(|r| dft_at(&src[r * last..(r + 1) * last], k2))
                        .collect();
                    let want = dft_at(&col, k1);
                    let l2 = src
                        .iter()
                        .map(|c| c.0 * c.0 + c.1 * c.1)
                        .sum::<f64>()
                        .sqrt();
                    check(
                        &format!("{name} {what} [{k1}, {k2}]"),
                        out[k1 * cols + k2],
                        want,
                        l2,
                        n,
                    )?;
                }
            } else {
                let rows = n / last;
                for row in [0, rows - 1] {
                    let s = row * last..(row + 1) * last;
                    let l2 = |v: &[(f64, f64)]| {
                        v.iter().map(|c| c.0 * c.0 + c.1 * c.1).sum::<f64>().sqrt()
                    };
                    check(
                        &format!("{name} fft row {row} [{k}]"),
                        y[row * last + k],
                        dft_at(&zs[s.clone()], k),
                        l2(&zs[s.clone()]),
                        last,
                    )?;
                    if k < m {
                        check(
                            &format!("{name} rfft row {row} [{k}]"),
                            yr[row * m + k],
                            dft_at(&rs[s.clone()], k),
                            l2(&rs[s]),
                            last,
                        )?;
                    }
                }
            }
        }
        for (what, run) in [
            ("c64", &c2c as &dyn Fn() -> wmx::Result<Array>),
            ("rfft f32", &r2c),
        ] {
            // A second of rounds first: after the host-side checks above left it
            // idle, the GPU runs 3-5x slower for a while, steadily (runs 103-106).
            let warm = std::time::Instant::now();
            while warm.elapsed().as_secs_f64() < 1.0 {
                time_evals(dev, stamps, 10, run)?;
            }
            let stats = || wmx::webgpu::backend(dev).map(|g| g.stats());
            let before = stats();
            let samples = (0..reps)
                .map(|_| time_evals(dev, stamps, 10, run))
                .collect::<Res<Vec<f64>>>()?;
            let ms = median(samples.clone());
            // What each eval costs the pool and the queue (the first case's
            // slowness at a new size, runs 103-104).
            let per = match (before, stats()) {
                (Some(a), Some(b)) => {
                    let evals = (10 * reps) as f64;
                    format!(
                        " (per eval: {:.1} buffers created, {:.1} KiB uploaded, {:.1} dispatches, {:.1} submits; samples {samples:.3?})",
                        (b.buffers_created - a.buffers_created) as f64 / evals,
                        (b.bytes_uploaded - a.bytes_uploaded) as f64 / evals / 1024.0,
                        (b.dispatches - a.dispatches) as f64 / evals,
                        (b.submits - a.submits) as f64 / evals,
                    )
                }
                _ => String::new(),
            };
            println!("fft {name:18} {what:9}: {ms:8.3} ms{per}");
            // The host's share: the CPU time of an eval's graph and recording (the
            // GPU runs behind), against the GPU time of the dispatches under the
            // profiler (`WMX_BENCH_PROFILE=1`).
            let t = std::time::Instant::now();
            for _ in 0..20 {
                wmx::eval(&[run().map_err(err)?]).map_err(err)?;
            }
            let host = t.elapsed().as_secs_f64() * 1e3 / 20.0;
            dev.synchronize().map_err(err)?;
            println!("fft {name:18} {what:9}: host {host:.3} ms an eval");
            profile_once(dev, &format!("one {name} {what} eval"), || {
                wmx::eval(&[run()?])
            })?;
        }
    }
    Ok(())
}
