//! Matrix products through the public API (`--linalg`): `matmul` of square
//! matrices, matrix-vector and vector-matrix products, batches of small matrices.
//! Each case is checked first on sampled outputs against f64 dot products, then
//! timed as the element-wise cases are (GPU timestamps around `iters` evals).
//! `bench/torch_linalg.py` measures the same cases with PyTorch (cuBLAS).

use super::{Options, Res, Row, Stamps, err, host, median, random, sample_n};
use wmx::{Array, DType, Device};

/// One product: `batch` × (`m` × `k`) @ (`k` × `n`); `ta`, `tb`: `a`, `b` are
/// transposed views.
#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    dtype: DType,
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    ta: bool,
    tb: bool,
}

/// The products of one training step of issue 43's GPT (2048 tokens, d 768, MLP
/// 3072, vocabulary 8192; `nn::Linear` keeps `[out, in]` weights): forward `x @ Wᵀ`
/// (`gpt_nt`), the input gradient `dy @ W` (`gpt_nn`) and the weight gradient
/// `dyᵀ @ x` (`gpt_tn`), as `(name, m, k, n, ta, tb)`. `torch_linalg.py` lists the
/// same.
const GPT_PRODUCTS: [(&str, usize, usize, usize, bool, bool); 15] = [
    ("gpt_nt", 2048, 768, 2304, false, true),
    ("gpt_nt", 2048, 768, 768, false, true),
    ("gpt_nt", 2048, 768, 3072, false, true),
    ("gpt_nt", 2048, 3072, 768, false, true),
    ("gpt_nt", 2048, 768, 8192, false, true),
    ("gpt_nn", 2048, 2304, 768, false, false),
    ("gpt_nn", 2048, 768, 768, false, false),
    ("gpt_nn", 2048, 3072, 768, false, false),
    ("gpt_nn", 2048, 768, 3072, false, false),
    ("gpt_nn", 2048, 8192, 768, false, false),
    ("gpt_tn", 2304, 2048, 768, true, false),
    ("gpt_tn", 768, 2048, 768, true, false),
    ("gpt_tn", 3072, 2048, 768, true, false),
    ("gpt_tn", 768, 2048, 3072, true, false),
    ("gpt_tn", 8192, 2048, 768, true, false),
];

impl Case {
    fn flops(&self) -> f64 {
        2.0 * (self.batch * self.m * self.k * self.n) as f64
    }
    /// Bytes every product must move: both operands read, the output written.
    fn bytes(&self) -> f64 {
        let e = self.dtype.size() as f64;
        self.batch as f64 * (self.m * self.k + self.k * self.n + self.m * self.n) as f64 * e
    }
}

fn cases(smoke: bool, dtypes: &[DType], squares: Option<&[usize]>) -> Vec<Case> {
    let c = |name, dtype, batch, m, k, n, ta| Case {
        name,
        dtype,
        batch,
        m,
        k,
        n,
        ta,
        tb: false,
    };
    let mut v = vec![];
    let all = [DType::F32, DType::F16, DType::BF16];
    for &d in all
        .iter()
        .filter(|d| dtypes.contains(d) || **d == DType::BF16)
    {
        if let Some(sizes) = squares {
            // `--sizes`: square products only (e.g. small ones on a software driver).
            v.extend(sizes.iter().map(|&s| c("matmul", d, 1, s, s, s, false)));
            continue;
        }
        if smoke {
            v.push(c("matmul", d, 1, 130, 67, 129, false));
            v.push(c("matmul_at", d, 1, 64, 65, 63, true));
            v.push(c("gemv", d, 1, 300, 256, 1, false));
            v.push(c("gevm", d, 1, 1, 256, 300, false));
            v.push(c("bmm", d, 8, 64, 64, 64, false));
            continue;
        }
        for s in [1024, 2048, 4096] {
            v.push(c("matmul", d, 1, s, s, s, false));
        }
        if d != DType::BF16 {
            v.push(c("matmul_at", d, 1, 4096, 4096, 4096, true));
            v.push(c("gemv", d, 1, 8192, 8192, 1, false));
            v.push(c("gevm", d, 1, 1, 8192, 8192, false));
            v.push(c("bmm", d, 256, 64, 64, 64, false));
            v.extend(GPT_PRODUCTS.iter().map(|&(name, m, k, n, ta, tb)| Case {
                tb,
                ..c(name, d, 1, m, k, n, ta)
            }));
        }
    }
    v
}

/// A row operation over rows of 4096 (`softmax`, `layer_norm`, `rms_norm`), 2^26
/// elements (smoke: 2^12); bytes: the input read and the output written once.
fn bench_norm(
    dev: &Device,
    stamps: Option<&Stamps>,
    smoke: bool,
    reps: usize,
    name: &'static str,
    dtype: DType,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let (r, l) = if smoke { (3, 1365) } else { (1 << 14, 4096) };
    let h = host(&random(r * l, 7 + l as u64), dtype);
    let x = Array::from_bytes_on(h.bytes.clone(), &[r, l], dtype, dev).map_err(err)?;
    let eps = 1e-5;
    // `layer_norm_wb`: with a weight and a bias (exact in every dtype), as
    // `torch_linalg.py`'s.
    let wv: Vec<f64> = (0..l).map(|j| 0.5 + (j % 7) as f64 * 0.25).collect();
    let bv: Vec<f64> = (0..l).map(|j| (j % 5) as f64 * 0.5 - 1.0).collect();
    let param = |v: &[f64]| {
        let v32: Vec<f32> = v.iter().map(|&x| x as f32).collect();
        let a = wmx::astype(&Array::from_slice_on(&v32, &[l], dev)?, dtype)?;
        a.eval()?;
        Ok::<_, wmx::Error>(a)
    };
    let (w, b) = (param(&wv).map_err(err)?, param(&bv).map_err(err)?);
    let run = || -> wmx::Result<Array> {
        match name {
            "softmax" => wmx::softmax(&x, &[-1]),
            "layer_norm" => wmx::layer_norm(&x, None, None, eps),
            "layer_norm_wb" => wmx::layer_norm(&x, Some(&w), Some(&b), eps),
            _ => wmx::rms_norm(&x, None, eps),
        }
    };
    let got = run().and_then(|y| y.to_vec_f64()).map_err(err)?;
    for i in [0, r / 2, r - 1] {
        let row = &h.vals[i * l..(i + 1) * l];
        let n = l as f64;
        let want: Vec<f64> = match name {
            "softmax" => {
                let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
                row.iter().map(|v| (v - m).exp() / s).collect()
            }
            "layer_norm" | "layer_norm_wb" => {
                let mean = row.iter().sum::<f64>() / n;
                let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
                let wb = name == "layer_norm_wb";
                (0..l)
                    .map(|j| {
                        let y = (row[j] - mean) / (var + eps).sqrt();
                        if wb { y * wv[j] + bv[j] } else { y }
                    })
                    .collect()
            }
            _ => {
                let ms = row.iter().map(|v| v * v).sum::<f64>() / n;
                row.iter().map(|v| v / (ms + eps).sqrt()).collect()
            }
        };
        let tol = if dtype == DType::F32 { 1e-5 } else { 1e-2 };
        for (j, w) in want.iter().enumerate() {
            let g = got[i * l + j];
            if (g - w).abs() > tol * (1.0 + w.abs()) {
                return Err(format!(
                    "{name} {}: row {i} element {j} is {g}, want {w}",
                    super::dtype_name(dtype)
                ));
            }
        }
    }
    let iters = if smoke { 2 } else { 50 };
    let measure = || super::blocks::time_evals(dev, stamps, iters, &run);
    let samples = sample_n(smoke, reps, 1000.0, measure)?;
    let ms = median(samples);
    let bytes = 2.0 * (r * l * dtype.size()) as f64;
    let row = Row {
        path: "wmx",
        op: format!("{name}_{r}x{l}"),
        dtype,
        n: r * l,
        ms,
        gbps: bytes / (ms * 1e6),
        extra: vec![],
    };
    println!(
        "wmx      {:<28} {:<5} {:>10.1} us {:>8.1} GB/s",
        row.op,
        super::dtype_name(dtype),
        ms * 1e3,
        row.gbps
    );
    rows.push(row);
    Ok(())
}

/// Runs the product cases on `dev`, pushing one row each.
pub(crate) fn bench_linalg(
    dev: &Device,
    stamps: Option<&Stamps>,
    o: &Options,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let (smoke, reps, dtypes) = (o.smoke, o.reps, &o.dtypes[..]);
    let squares = o.sizes_given.then_some(&o.sizes[..]);
    let ops = o.ops.as_deref();
    // `--ops` picks cases by name (matmul, matmul_at, gemv, gevm, bmm, softmax, ...).
    let wanted = |name: &str| ops.is_none_or(|o| o.iter().any(|x| x == name));
    for case in cases(smoke, dtypes, squares) {
        if dev.check_dtype(case.dtype).is_err() || !wanted(case.name) {
            continue;
        }
        bench_case(dev, stamps, smoke, reps, case, rows)?;
        if let Some(b) = wmx::webgpu::backend(dev) {
            b.clear_cache();
        }
    }
    for dtype in [DType::F32, DType::F16] {
        if dev.check_dtype(dtype).is_err() || !dtypes.contains(&dtype) || squares.is_some() {
            continue;
        }
        for name in ["softmax", "layer_norm", "layer_norm_wb", "rms_norm"] {
            if !wanted(name) {
                continue;
            }
            bench_norm(dev, stamps, smoke, reps, name, dtype, rows)?;
        }
    }
    Ok(())
}

fn bench_case(
    dev: &Device,
    stamps: Option<&Stamps>,
    smoke: bool,
    reps: usize,
    c: Case,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let Case {
        dtype,
        batch,
        m,
        k,
        n,
        ..
    } = c;
    let label = format!("{} {}x{}x{}x{}", c.name, batch, m, k, n);
    let seed = (m * 31 + k * 7 + n) as u64;
    let ha = host(&random(batch * m * k, seed), dtype);
    let hb = host(&random(batch * k * n, seed + 1), dtype);
    let lead: Vec<usize> = if batch > 1 { vec![batch] } else { vec![] };
    let shape = |r: usize, s: usize| -> Vec<usize> {
        let mut v = lead.clone();
        v.extend([r, s]);
        v
    };
    // `a` stored transposed for `ta` (its view `.t()` is the operand); vectors 1-D.
    let a_store = if c.ta { shape(k, m) } else { shape(m, k) };
    let a = Array::from_bytes_on(ha.bytes.clone(), &a_store, dtype, dev).map_err(err)?;
    let b_store = if c.tb { shape(n, k) } else { shape(k, n) };
    let b = Array::from_bytes_on(hb.bytes.clone(), &b_store, dtype, dev).map_err(err)?;
    let a = if c.ta { a.t().map_err(err)? } else { a };
    let b = if c.tb { b.t().map_err(err)? } else { b };
    let (a, b) = match c.name {
        "gemv" => (a, b.reshape(&[k as isize]).map_err(err)?),
        "gevm" => (a.reshape(&[k as isize]).map_err(err)?, b),
        _ => (a, b),
    };
    let y = wmx::matmul(&a, &b).map_err(err)?;
    let got = y.to_vec_f64().map_err(err)?;
    drop(y);
    // Sampled outputs against f64 dot products of the rounded inputs.
    let at = |bi: usize, i: usize, kk: usize| {
        if c.ta {
            ha.vals[bi * m * k + kk * m + i]
        } else {
            ha.vals[bi * m * k + i * k + kk]
        }
    };
    let mut state = seed;
    for _ in 0..64 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let idx = (state >> 33) as usize % got.len();
        let (bi, r) = (idx / (m * n), idx % (m * n));
        let (i, j) = (r / n, r % n);
        let (mut s, mut mag) = (0.0, 0.0);
        let bt = |kk: usize| {
            if c.tb {
                hb.vals[bi * k * n + j * k + kk]
            } else {
                hb.vals[bi * k * n + kk * n + j]
            }
        };
        for kk in 0..k {
            let t = at(bi, i, kk) * bt(kk);
            s += t;
            mag += t.abs();
        }
        let eps = match dtype {
            DType::F32 => 0.0,
            DType::F16 => 2f64.powi(-11),
            _ => 2f64.powi(-8),
        };
        let tol = (k as f64 + 4.0) * 2f64.powi(-24) * mag + eps * s.abs() + 1e-30;
        if (got[idx] - s).abs() > tol {
            return Err(format!(
                "{label} {}: element {idx} is {}, want {s} (tol {tol:e})",
                super::dtype_name(dtype),
                got[idx]
            ));
        }
    }
    let iters = if smoke {
        2
    } else {
        ((2e11 / c.flops().max(c.bytes() * 50.0)) as usize).clamp(5, 200)
    };
    let measure = || super::blocks::time_evals(dev, stamps, iters, &|| wmx::matmul(&a, &b));
    let samples = sample_n(smoke, reps, 1000.0, measure)?;
    let ms = median(samples.clone());
    let row = Row {
        path: "wmx",
        op: format!("{}_{}x{}x{}x{}", c.name, batch, m, k, n),
        dtype,
        n: batch * m * k * n,
        ms,
        gbps: c.bytes() / (ms * 1e6),
        extra: vec![
            ("tflops", c.flops() / (ms * 1e9)),
            (
                "ms_min",
                samples.iter().copied().fold(f64::INFINITY, f64::min),
            ),
        ],
    };
    println!(
        "wmx      {:<28} {:<5} {:>10.1} us {:>8.1} GB/s {:>7.2} TFLOP/s",
        row.op,
        super::dtype_name(dtype),
        ms * 1e3,
        row.gbps,
        c.flops() / (ms * 1e9)
    );
    rows.push(row);
    Ok(())
}
