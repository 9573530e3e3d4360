//! `--decomp`: issue 41's batched decompositions through `wmx::linalg`: Cholesky
//! and solve (LU, and for these SPD matrices also `cho_solve` after Cholesky) of
//! 4096 matrices of 64×64 and of 256 of 512×512, and QR of 256 of 256×128, in f32
//! and, with `--dtypes f64` (or `f32,f64`), f64. Each result is checked first (L Lᵀ = A, A x = b, Q R = A on the
//! device, relative to |A|), then timed by wall clock over `iters` evals with the
//! device synchronised at both ends. On a GPU all of them run there: Cholesky,
//! the triangular solves and LU blocked (`wmx::linalg`'s docs), QR one kernel.
//! `bench/numpy_decomp.py` times numpy (OpenBLAS) and, where CUDA is, PyTorch
//! (cuSOLVER) on the same cases.

use super::{Res, Row, err, wall_ms as time};
use wmx::linalg as la;
use wmx::{Array, DType, Device};

/// (name, batch, m, n) of each case.
// The GPU cases first, back to back: after the CPU-bound ones the GPU has idled
// and its clocks are low (run 91).
const CASES: [(&str, usize, usize, usize); 7] = [
    ("cholesky", 4096, 64, 64),
    ("cholesky", 256, 512, 512),
    ("cho_solve", 4096, 64, 64),
    ("cho_solve", 256, 512, 512),
    ("solve", 4096, 64, 64),
    ("solve", 256, 512, 512),
    ("qr", 256, 256, 128),
];

fn max_abs(x: &Array) -> wmx::Result<f64> {
    Ok(wmx::max(&wmx::abs(x)?, None, false)?.to_vec_as::<f64>()?[0])
}

pub(crate) fn bench_decomp(
    dev: &Device,
    smoke: bool,
    dtypes: &[DType],
    rows: &mut Vec<Row>,
) -> Res<()> {
    let mut dts: Vec<DType> = dtypes
        .iter()
        .copied()
        .filter(|d| matches!(d, DType::F32 | DType::F64))
        .collect();
    if dts.is_empty() {
        dts.push(DType::F32);
    }
    for dt in dts {
        bench_dtype(dev, smoke, dt, rows)?;
    }
    Ok(())
}

fn bench_dtype(dev: &Device, smoke: bool, dt: DType, rows: &mut Vec<Row>) -> Res<()> {
    for (name, batch, m, n) in CASES {
        let (batch, iters) = if smoke { (batch.min(3), 1) } else { (batch, 5) };
        let (m, n) = if smoke {
            (m.min(33), n.min(17))
        } else {
            (m, n)
        };
        let x = wmx::with_device(dev, || {
            Array::from_slice(&super::random(batch * m * n, 41), &[batch, m, n])?.astype(dt)
        })
        .map_err(err)?;
        // SPD inputs for the square cases: X Xᵀ / n + I.
        let a = if name == "qr" {
            x
        } else {
            let xxt = wmx::matmul(&x, &wmx::swapaxes(&x, -1, -2).map_err(err)?).map_err(err)?;
            let eye = wmx::with_device(dev, || wmx::eye(m, dt)).map_err(err)?;
            wmx::add(
                &wmx::multiply(&xxt, &wmx::scalar(1.0 / n as f64, dt).map_err(err)?)
                    .map_err(err)?,
                &eye,
            )
            .map_err(err)?
        };
        let b = wmx::with_device(dev, || {
            Array::from_slice(&super::random(batch * m, 42), &[batch, m, 1])?.astype(dt)
        })
        .map_err(err)?;
        wmx::eval(&[a.clone(), b.clone()]).map_err(err)?;
        let scale = max_abs(&a).map_err(err)?;
        let run = || -> wmx::Result<Vec<Array>> {
            Ok(match name {
                "cholesky" => vec![la::cholesky(&a, false)?],
                "solve" => vec![la::solve(&a, &b)?],
                "cho_solve" => vec![la::cho_solve(&la::cholesky(&a, false)?, &b)?],
                _ => {
                    let (q, r) = la::qr(&a)?;
                    vec![q, r]
                }
            })
        };
        let out = run().map_err(err)?;
        let resid = match name {
            "cholesky" => wmx::subtract(
                &wmx::matmul(&out[0], &wmx::swapaxes(&out[0], -1, -2).map_err(err)?)
                    .map_err(err)?,
                &a,
            ),
            "solve" | "cho_solve" => wmx::subtract(&wmx::matmul(&a, &out[0]).map_err(err)?, &b),
            _ => wmx::subtract(&wmx::matmul(&out[0], &out[1]).map_err(err)?, &a),
        }
        .map_err(err)?;
        let e = max_abs(&resid).map_err(err)? / scale.max(1.0);
        let tol = if dt == DType::F64 { 1e-10 } else { 1e-4 };
        if e.is_nan() || e >= tol {
            return Err(format!(
                "{name} {batch}x{m}x{n}: residual {e:e} relative to |A|"
            ));
        }
        let ms = time(dev, iters, || wmx::eval(&run().map_err(err)?).map_err(err))?;
        let cols = if name == "qr" { n } else { m };
        let label = format!("{name} {batch}x{m}x{cols} {dt}");
        println!("decomp {label:24}: {ms:10.3} ms (residual {e:.1e})");
        if let (Some(be), true) = (
            wmx::webgpu::backend(dev),
            std::env::var_os("WMX_BENCH_PROFILE").is_some(),
        ) {
            let (r, p) = be.profile(|| wmx::eval(&run()?)).map_err(err)?;
            r.map_err(err)?;
            println!("profile of {label}:\n{}", p.table());
        }
        rows.push(Row {
            path: "wmx",
            op: label,
            dtype: dt,
            n: batch,
            ms,
            gbps: 0.0,
            extra: vec![],
        });
    }
    Ok(())
}
