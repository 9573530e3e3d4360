//! The building blocks through the public API (`--blocks`): concatenate, take,
//! cumsum, sort, random uniform, scatter_add (`--ops` picks by those names:
//! concat, take, cumsum, sort, uniform, scatter_add). Each case is checked first (sampled
//! elements against the host), then timed as the product cases are (GPU timestamps
//! around `iters` evals). `bench/torch_blocks.py` measures the same cases
//! with PyTorch.

use super::{Res, Row, Stamps, err, median, sample_n};
use std::time::Instant;
use wmx::{Array, DType, Device};

/// Mean milliseconds of one eval of `run`, over `iters` evals between two GPU
/// timestamps (or the wall clock around them and a wait).
pub(crate) fn time_evals(
    dev: &Device,
    stamps: Option<&Stamps>,
    iters: usize,
    run: &dyn Fn() -> wmx::Result<Array>,
) -> Res<f64> {
    dev.synchronize().map_err(err)?;
    let gpu = wmx::webgpu::backend(dev);
    let ms = match (stamps, gpu) {
        (Some(s), Some(g)) => {
            g.write_timestamp(&s.set, 0).map_err(err)?;
            for _ in 0..iters {
                wmx::eval(&[run().map_err(err)?]).map_err(err)?;
            }
            g.write_timestamp(&s.set, 1).map_err(err)?;
            dev.synchronize().map_err(err)?;
            s.elapsed_ms()?
        }
        _ => {
            let t = Instant::now();
            for _ in 0..iters {
                wmx::eval(&[run().map_err(err)?]).map_err(err)?;
            }
            dev.synchronize().map_err(err)?;
            t.elapsed().as_secs_f64() * 1e3
        }
    };
    Ok(ms / iters as f64)
}

/// How the large cases are timed: `evals` evals per sample, `reps` samples.
struct Timed<'a> {
    dev: &'a Device,
    stamps: Option<&'a Stamps>,
    reps: usize,
    evals: usize,
}

impl Timed<'_> {
    /// Times `run`, prints it and records a row of `n` elements moving `bytes`.
    fn case(
        &self,
        name: &str,
        dtype: DType,
        n: usize,
        bytes: f64,
        run: &dyn Fn() -> wmx::Result<Array>,
        rows: &mut Vec<Row>,
    ) -> Res<()> {
        let samples = sample_n(false, self.reps, 500.0, || {
            time_evals(self.dev, self.stamps, self.evals, run)
        })?;
        let ms = median(samples);
        println!(
            "wmx      {name:<28} {:<5} {:>10.1} us {:>8.1} GB/s",
            format!("{dtype:?}").to_lowercase(),
            ms * 1e3,
            bytes / (ms * 1e6)
        );
        rows.push(Row {
            path: "wmx",
            op: name.to_string(),
            dtype,
            n,
            ms,
            gbps: bytes / (ms * 1e6),
            extra: vec![],
        });
        Ok(())
    }
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Res<()> {
    if ok { Ok(()) } else { Err(what()) }
}

/// Runs the building-block cases (2^24/2^25/2^26 elements; smoke: 2^12), one row
/// each; `bytes` counts what each must move at least.
pub(crate) fn bench_blocks(
    dev: &Device,
    stamps: Option<&Stamps>,
    smoke: bool,
    reps: usize,
    ops: Option<&[String]>,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let want = |name: &str| ops.is_none_or(|o| o.iter().any(|x| x == name));
    let big = |k: u32| if smoke { 1usize << 12 } else { 1usize << k };
    let key = wmx::with_device(dev, || wmx::random::key(1)).map_err(err)?;
    let uniform = |n: usize, seed: u64| -> Res<Array> {
        let k = wmx::random::split(&key, seed as usize + 1).map_err(err)?;
        let k = wmx::reshape(
            &k.slice(&[wmx::Slice::range(seed as isize, seed as isize + 1)])
                .map_err(err)?,
            &[2],
        )
        .map_err(err)?;
        let a = wmx::random::uniform(&k, &[n], -1.0, 1.0, DType::F32).map_err(err)?;
        a.eval().map_err(err)?;
        Ok(a)
    };
    let mut case = |name: String,
                    dtype: DType,
                    n: usize,
                    bytes: f64,
                    run: &dyn Fn() -> wmx::Result<Array>|
     -> Res<()> {
        let iters = if smoke { 2 } else { 20 };
        let samples = sample_n(smoke, reps, 500.0, || time_evals(dev, stamps, iters, run))?;
        let ms = median(samples);
        println!(
            "wmx      {name:<28} {:<5} {:>10.1} us {:>8.1} GB/s",
            super::dtype_name(dtype),
            ms * 1e3,
            bytes / (ms * 1e6)
        );
        rows.push(Row {
            path: "wmx",
            op: name,
            dtype,
            n,
            ms,
            gbps: bytes / (ms * 1e6),
            extra: vec![],
        });
        // One eval under the profiler: where the GPU time goes.
        let what = format!("one {} eval", rows[rows.len() - 1].op);
        super::profile_once(dev, &what, || wmx::eval(&[run()?]))?;
        if let Some(b) = wmx::webgpu::backend(dev) {
            b.clear_cache();
        }
        Ok(())
    };

    if want("concat") {
        // concatenate of two 2^25 arrays.
        let n = big(25);
        let (a, b) = (uniform(n, 0)?, uniform(n, 1)?);
        let run = || wmx::concatenate(&[&a, &b], 0);
        let got: Vec<f32> = run().and_then(|c| c.to_vec()).map_err(err)?;
        let (av, bv): (Vec<f32>, Vec<f32>) = (a.to_vec().map_err(err)?, b.to_vec().map_err(err)?);
        check(got[..n] == av[..] && got[n..] == bv[..], || {
            "concatenate: wrong values".into()
        })?;
        case(
            format!("concat_2x{n}"),
            DType::F32,
            2 * n,
            16.0 * n as f64,
            &run,
        )?;
    }

    if want("take") {
        // take of 2^24 random indices from 2^24 values.
        let n = big(24);
        let x = uniform(n, 2)?;
        let idx = wmx::random::randint(&key, &[n], 0, n as i64, DType::I32).map_err(err)?;
        idx.eval().map_err(err)?;
        let run = || wmx::take(&x, &idx, Some(0));
        let got: Vec<f32> = run().and_then(|c| c.to_vec()).map_err(err)?;
        let (xv, iv): (Vec<f32>, Vec<i32>) = (x.to_vec().map_err(err)?, idx.to_vec().map_err(err)?);
        check(
            (0..n).step_by(997).all(|i| got[i] == xv[iv[i] as usize]),
            || "take: wrong values".into(),
        )?;
        case(format!("take_{n}"), DType::F32, n, 12.0 * n as f64, &run)?;
    }

    if want("cumsum") {
        // cumsum of 2^26.
        let n = big(26);
        let x = uniform(n, 3)?;
        let run = || wmx::cumsum(&x, None, false, true);
        let got: Vec<f32> = run().and_then(|c| c.to_vec()).map_err(err)?;
        let xv: Vec<f32> = x.to_vec().map_err(err)?;
        let (mut s, mut mag) = (0f64, 0f64);
        for (i, &v) in xv.iter().enumerate() {
            s += v as f64;
            mag += v.abs() as f64;
            if i % 4099 == 0 || i == n - 1 {
                check((got[i] as f64 - s).abs() <= 1e-6 * mag + 1e-6, || {
                    format!("cumsum: element {i} is {}, want {s}", got[i])
                })?;
            }
        }
        case(format!("cumsum_{n}"), DType::F32, n, 8.0 * n as f64, &run)?;
    }

    if want("sort") {
        // sort of 2^24.
        let n = big(24);
        let x = uniform(n, 4)?;
        let run = || wmx::sort(&x, None);
        let got: Vec<f32> = run().and_then(|c| c.to_vec()).map_err(err)?;
        check(got.windows(2).all(|w| w[0] <= w[1]), || {
            "sort: not sorted".into()
        })?;
        case(format!("sort_{n}"), DType::F32, n, 8.0 * n as f64, &run)?;
        // f16 (16-bit keys: two 8-bit radix passes with subgroups, four 4-bit without).
        let h = wmx::astype(&x, DType::F16).map_err(err)?;
        h.eval().map_err(err)?;
        let run = || wmx::sort(&h, None);
        let got: Vec<f32> = run()
            .and_then(|c| c.astype(DType::F32)?.to_vec())
            .map_err(err)?;
        check(got.windows(2).all(|w| w[0] <= w[1]), || {
            "sort f16: not sorted".into()
        })?;
        case(format!("sort_{n}"), DType::F16, n, 4.0 * n as f64, &run)?;
    }

    if want("uniform") {
        // uniform of 2^26.
        let n = big(26);
        let run = || wmx::random::uniform(&key, &[n], 0.0, 1.0, DType::F32);
        let got: Vec<f32> = run().and_then(|c| c.to_vec()).map_err(err)?;
        let mean = got.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        check(
            got.iter().all(|v| (0.0..1.0).contains(v)) && (mean - 0.5).abs() < 0.05,
            || format!("uniform: mean {mean}"),
        )?;
        case(format!("uniform_{n}"), DType::F32, n, 4.0 * n as f64, &run)?;
    }

    if want("scatter_add") {
        // scatter_add of 2^24 updates into 2^20 bins.
        let (n, bins) = (big(24), big(20));
        let upd = uniform(n, 5)?;
        let idx = wmx::random::randint(&key, &[n], 0, bins as i64, DType::I32).map_err(err)?;
        let zeros = wmx::with_device(dev, || wmx::zeros(&[bins], DType::F32)).map_err(err)?;
        idx.eval().map_err(err)?;
        let run = || wmx::scatter_add(&zeros, &idx, &upd, 0);
        let got: Vec<f32> = run().and_then(|c| c.to_vec()).map_err(err)?;
        let total: f64 = got.iter().map(|&v| v as f64).sum();
        let want: f64 = upd
            .to_vec::<f32>()
            .map_err(err)?
            .iter()
            .map(|&v| v as f64)
            .sum();
        check((total - want).abs() < 1e-3 * n as f64, || {
            format!("scatter_add: total {total}, want {want}")
        })?;
        case(
            format!("scatter_add_{n}_into_{bins}"),
            DType::F32,
            n,
            12.0 * n as f64,
            &run,
        )?;
    }
    Ok(())
}

/// 3 GiB arrays (`--large`): past NVIDIA's 2 GiB binding limit, or past 2^30
/// elements per piece for 16-bit ones, so computed in pieces. Elementwise add,
/// the full sum, row sums and column sums of f32, and an f16 add.
pub(crate) fn bench_large(
    dev: &Device,
    stamps: Option<&Stamps>,
    reps: usize,
    rows: &mut Vec<Row>,
) -> Res<()> {
    if let Some(b) = wmx::webgpu::backend(dev) {
        println!(
            "binding limit {} bytes, buffer limit {} bytes",
            b.kernels().caps().max_storage_binding,
            b.kernels().caps().max_buffer
        );
    }
    let n = 3usize << 28; // 3 GiB of f32
    let cols = 4096;
    // Made by ops that compute in pieces (random draws compute in one).
    let x = wmx::with_device(dev, || {
        let i = wmx::arange(0.0, n as f64, 1.0, DType::F32)?;
        let x = wmx::sin(&wmx::multiply(&i, &wmx::scalar(0.001, DType::F32)?)?)?;
        wmx::reshape(&x, &[(n / cols) as isize, cols as isize])
    })
    .map_err(err)?;
    x.eval().map_err(err)?;
    // 60 evals per sample: measured when the pool kept no buffer over a fixed 1 GiB
    // cache limit, so each sample's first eval allocated its 3 GiB output (~16 ms
    // on the H200: 5 evals read 5600 us per add, 20 read 3131, 60 read 2291).
    let mut case = |name: &str, dtype: DType, bytes: f64, run: &dyn Fn() -> wmx::Result<Array>| {
        let t = Timed {
            dev,
            stamps,
            reps,
            evals: 60,
        };
        t.case(name, dtype, n, bytes, run, rows)
    };
    // Checked on samples first: a wrong answer is never timed.
    let probe = |a: &Array, idx: &[usize]| -> Res<Vec<f32>> {
        idx.iter()
            .map(|&i| {
                let (r, c) = ((i / cols) as isize, (i % cols) as isize);
                let s = a
                    .slice(&[wmx::Slice::range(r, r + 1), wmx::Slice::range(c, c + 1)])
                    .map_err(err)?;
                wmx::astype(&s, DType::F32)
                    .and_then(|s| s.item::<f32>())
                    .map_err(err)
            })
            .collect()
    };
    let idx = [0, 1, n / 3 + 5, 2 * n / 3 - 1, n - 1];
    let xs = probe(&x, &idx)?;
    let add = || wmx::add(&x, &x);
    let ys = probe(&add().map_err(err)?, &idx)?;
    check(xs.iter().zip(&ys).all(|(a, b)| 2.0 * a == *b), || {
        format!("add: {xs:?} -> {ys:?}")
    })?;
    if let Some(b) = wmx::webgpu::backend(dev) {
        let before = b.stats().dispatches;
        wmx::eval(&[add().map_err(err)?]).map_err(err)?;
        dev.synchronize().map_err(err)?;
        println!("large add: {} dispatches", b.stats().dispatches - before);
    }
    case("large_add_3GiB", DType::F32, 12.0 * n as f64, &add)?;
    let sum = || wmx::sum(&x, None, false);
    let total = sum().and_then(|s| s.item::<f32>()).map_err(err)?;
    let rsum = || wmx::sum(&x, Some(&[1]), false);
    let rs: Vec<f32> = rsum().and_then(|s| s.to_vec()).map_err(err)?;
    let csum = || wmx::sum(&x, Some(&[0]), false);
    let cs: Vec<f32> = csum().and_then(|s| s.to_vec()).map_err(err)?;
    let (rt, ct): (f64, f64) = (
        rs.iter().map(|&v| v as f64).sum(),
        cs.iter().map(|&v| v as f64).sum(),
    );
    // sin of a slow ramp: the total is small against n; each path must agree to
    // f32 rounding of partial sums.
    check(
        (total as f64 - rt).abs() < 1e-4 * n as f64 && (rt - ct).abs() < 1e-4 * n as f64,
        || format!("sums disagree: {total}, rows {rt}, cols {ct}"),
    )?;
    case("large_sum_3GiB", DType::F32, 4.0 * n as f64, &sum)?;
    case("large_rowsum_3GiB", DType::F32, 4.0 * n as f64, &rsum)?;
    case("large_colsum_3GiB", DType::F32, 4.0 * n as f64, &csum)?;
    drop(x);
    if let Some(b) = wmx::webgpu::backend(dev) {
        b.clear_cache();
    }
    if dev.check_dtype(DType::F16).is_ok() {
        // 3 GiB of f16: 1.6e9 elements, more than one piece may count.
        let m = 2 * n;
        let h = wmx::with_device(dev, || {
            let row = wmx::sin(&wmx::arange(0.0, cols as f64, 1.0, DType::F32)?)?;
            wmx::astype(&wmx::broadcast_to(&row, &[m / cols, cols])?, DType::F16)
        })
        .map_err(err)?;
        h.eval().map_err(err)?;
        let hs = probe(&h, &[0, m / 2 + 3, m - 1])?;
        let add = || wmx::add(&h, &h);
        let ys = probe(&add().map_err(err)?, &[0, m / 2 + 3, m - 1])?;
        check(hs.iter().zip(&ys).all(|(a, b)| 2.0 * a == *b), || {
            format!("f16 add: {hs:?} -> {ys:?}")
        })?;
        case("large_add_3GiB", DType::F16, 6.0 * m as f64, &add)?;
        drop(h);
    }
    bench_huge(dev, stamps, reps, rows)
}

/// 6 GiB f32 arrays: past one buffer of the H200 (4 GiB through Vulkan), so held in
/// segments of 2 GiB (`backend-webgpu/src/segments.rs`). Add, the full sum, row and
/// column sums. The pool may keep 16 GiB here (as its default, which grows with the
/// bytes held, would; PyTorch's caching allocator keeps them too).
fn bench_huge(dev: &Device, stamps: Option<&Stamps>, reps: usize, rows: &mut Vec<Row>) -> Res<()> {
    let n = 3usize << 29; // 6 GiB of f32
    let cols = 4096;
    let Some(b) = wmx::webgpu::backend(dev) else {
        return Ok(());
    };
    if (n as u64) * 4 <= b.kernels().caps().max_buffer {
        println!("huge cases skipped: 6 GiB fits one buffer of this device");
        return Ok(());
    }
    b.clear_cache();
    b.set_cache_limit(16 << 30);
    let x = wmx::with_device(dev, || {
        let i = wmx::arange(0.0, n as f64, 1.0, DType::F32)?;
        let x = wmx::sin(&wmx::multiply(&i, &wmx::scalar(0.001, DType::F32)?)?)?;
        wmx::reshape(&x, &[(n / cols) as isize, cols as isize])
    })
    .map_err(err)?;
    x.eval().map_err(err)?;
    let mut case = |name: &str, bytes: f64, run: &dyn Fn() -> wmx::Result<Array>| {
        let t = Timed {
            dev,
            stamps,
            reps,
            evals: 30,
        };
        t.case(name, DType::F32, n, bytes, run, rows)
    };
    // Checked first against f64 sums of the same values read back, a wrong answer
    // is never timed.
    let xs: Vec<f32> = x.to_vec().map_err(err)?;
    let add = || wmx::add(&x, &x);
    let ys: Vec<f32> = add().and_then(|y| y.to_vec()).map_err(err)?;
    check(xs.iter().zip(&ys).all(|(a, b)| 2.0 * a == *b), || {
        "huge add: a wrong element".to_string()
    })?;
    drop(ys);
    let sum = || wmx::sum(&x, None, false);
    let rsum = || wmx::sum(&x, Some(&[1]), false);
    let csum = || wmx::sum(&x, Some(&[0]), false);
    let total = sum().and_then(|s| s.item::<f32>()).map_err(err)?;
    let rs: Vec<f32> = rsum().and_then(|s| s.to_vec()).map_err(err)?;
    let cs: Vec<f32> = csum().and_then(|s| s.to_vec()).map_err(err)?;
    let want: f64 = xs.iter().map(|&v| v as f64).sum();
    let row0: f64 = xs[..cols].iter().map(|&v| v as f64).sum();
    let col0: f64 = xs.iter().step_by(cols).map(|&v| v as f64).sum();
    drop(xs);
    check(
        (total as f64 - want).abs() < 1e-5 * n as f64
            && (rs[0] as f64 - row0).abs() < 1e-3
            && (cs[0] as f64 - col0).abs() < 1e-5 * (n / cols) as f64,
        || {
            format!(
                "huge sums: {total} vs {want}, row 0 {} vs {row0}, col 0 {} vs {col0}",
                rs[0], cs[0]
            )
        },
    )?;
    let before = b.stats().dispatches;
    wmx::eval(&[add().map_err(err)?]).map_err(err)?;
    dev.synchronize().map_err(err)?;
    println!("huge add: {} dispatches", b.stats().dispatches - before);
    case("huge_add_6GiB", 12.0 * n as f64, &add)?;
    case("huge_sum_6GiB", 4.0 * n as f64, &sum)?;
    case("huge_rowsum_6GiB", 4.0 * n as f64, &rsum)?;
    case("huge_colsum_6GiB", 4.0 * n as f64, &csum)?;
    drop(x);
    b.set_cache_limit(1 << 30);
    b.clear_cache();
    Ok(())
}
