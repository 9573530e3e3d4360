//! Row operations (softmax, log_softmax, layer_norm, rms_norm) against f64 host
//! rows: odd lengths, views, large values, ±inf and NaN, constant rows, 16-bit
//! rounding; derivatives against central differences of the f64 reference.

use crate::rng::Rng;
use crate::val::{Val, make_ok, read_ok, round_to};
use wmx_core::{self as wmx, Array, DType, Device, NormOp, Result, Slice};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

/// The op on one row in f64 (weight and bias per column).
fn row_ref(op: NormOp, x: &[f64], w: &[f64], b: &[f64], eps: f64) -> Vec<f64> {
    let l = x.len() as f64;
    match op {
        NormOp::Softmax | NormOp::LogSoftmax => {
            let m = x.iter().copied().fold(f64::NEG_INFINITY, |a, v| {
                if a.is_nan() || v.is_nan() {
                    f64::NAN
                } else {
                    a.max(v)
                }
            });
            let s: f64 = x.iter().map(|v| (v - m).exp()).sum();
            x.iter()
                .map(|v| {
                    if op == NormOp::Softmax {
                        (v - m).exp() / s
                    } else {
                        v - m - s.ln()
                    }
                })
                .collect()
        }
        NormOp::LayerNorm => {
            let mean = x.iter().sum::<f64>() / l;
            let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / l;
            let inv = 1.0 / (var + eps).sqrt();
            (0..x.len())
                .map(|j| (x[j] - mean) * inv * w[j] + b[j])
                .collect()
        }
        NormOp::RmsNorm => {
            let inv = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / l + eps).sqrt();
            (0..x.len()).map(|j| x[j] * inv * w[j]).collect()
        }
    }
}

fn run(op: NormOp, x: &Array, w: Option<&Array>, b: Option<&Array>, eps: f64) -> Result<Array> {
    match op {
        NormOp::Softmax => wmx::softmax(x, &[-1]),
        NormOp::LogSoftmax => wmx::log_softmax(x, &[-1]),
        NormOp::LayerNorm => wmx::layer_norm(x, w, b, eps),
        NormOp::RmsNorm => wmx::rms_norm(x, w, eps),
    }
}

fn arr(dev: &Device, dt: DType, v: &[f64], shape: &[usize]) -> Array {
    let vals: Vec<Val> = v.iter().map(|&x| Val::F(x)).collect();
    make_ok(dev, dt, &vals, shape)
}

fn close(what: &str, got: &[f64], want: &[f64], dt: DType, atol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let rel = match dt {
        DType::F32 => 2e-6,
        DType::F16 => 2f64.powi(-10),
        _ => 2f64.powi(-7),
    };
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let w = round_to(dt, w); // the exact result as the dtype holds it (may overflow)
        let same = g == w || (g - w).abs() <= atol + rel * w.abs() || (g.is_nan() && w.is_nan());
        assert!(same, "{what}: element {i}: got {g}, want {w}");
    }
}

/// Values of every op on random rows of odd lengths, every float dtype, with and
/// without weight and bias, and on a transposed view.
pub fn norm_values(dev: &Device) {
    let mut rng = Rng::new(0x50f7);
    let eps = 1e-5;
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        if !super::supported(dev, dt) {
            continue;
        }
        for &op in NormOp::ALL {
            for shape in [
                vec![1],
                vec![3, 7],
                vec![5, 1000],
                vec![2, 3, 65],
                vec![4, 4096],
                // Several short rows per workgroup (the last one partly past the end).
                vec![37, 8],
                vec![300, 64],
                // Past the rows the vectorised kernel holds in registers.
                vec![2, 8200],
            ] {
                let (n, l) = (shape.iter().product::<usize>(), *shape.last().unwrap());
                // Rows around 0 and rows far from it (max subtraction, cancellation).
                for shift in [0.0, 300.0] {
                    let what = format!("{op} {dt} {shape:?} shift {shift}");
                    let x: Vec<f64> = (0..n)
                        .map(|_| round_to(dt, shift + rng.uniform(-4.0, 4.0)))
                        .collect();
                    let w: Vec<f64> = (0..l)
                        .map(|_| round_to(dt, rng.uniform(0.5, 2.0)))
                        .collect();
                    let b: Vec<f64> = (0..l)
                        .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
                        .collect();
                    let xa = arr(dev, dt, &x, &shape);
                    let (wa, ba) = (arr(dev, dt, &w, &[l]), arr(dev, dt, &b, &[l]));
                    let y = ok(&what, run(op, &xa, Some(&wa), Some(&ba), eps));
                    let want: Vec<f64> = x
                        .chunks(l)
                        .flat_map(|r| row_ref(op, r, &w, &b, eps))
                        .collect();
                    let got: Vec<f64> = read_ok(&y, &what).into_iter().map(Val::f).collect();
                    // log_softmax at shift 300 is -(x - max) - log s: absolute error
                    // of the inputs' size; the normalisations scale by 1/std.
                    let atol = match (op, dt) {
                        (_, DType::F64) => 1e-12,
                        (NormOp::LogSoftmax, DType::F32) => 1e-5,
                        (NormOp::LogSoftmax, _) => 2e-2,
                        // Rows near 300 hold their values to an ulp of 3e-5 in f32,
                        // so their mean, and x - mean, only to ~1e-5 of a spread of 2.3.
                        (NormOp::LayerNorm, DType::F32) => 1e-4,
                        (_, DType::F32) => 2e-5,
                        (NormOp::Softmax, _) => 1e-3,
                        _ => 5e-2,
                    };
                    close(&what, &got, &want, dt, atol);
                }
            }
        }
    }
    // Defaults (no weight, no bias), an axis other than the last, a transposed view.
    let dt = DType::F32;
    let x: Vec<f64> = (0..60)
        .map(|_| round_to(dt, rng.uniform(-3.0, 3.0)))
        .collect();
    let xa = arr(dev, dt, &x, &[6, 10]);
    let ones = vec![1.0; 10];
    let zeros = vec![0.0; 10];
    for op in [NormOp::LayerNorm, NormOp::RmsNorm] {
        let what = format!("{op} without weight and bias");
        let y = ok(&what, run(op, &xa, None, None, 1e-5));
        let want: Vec<f64> = x
            .chunks(10)
            .flat_map(|r| row_ref(op, r, &ones, &zeros, 1e-5))
            .collect();
        close(&what, &f64s(&y, &what), &want, dt, 1e-5);
    }
    // Weight and bias as views: every other element, and a slice starting one
    // element in (neither can be read a vec4 at a time), on rows that can.
    for dt in [DType::F32, DType::F16] {
        if !super::supported(dev, dt) {
            continue;
        }
        let l = 64;
        let x: Vec<f64> = (0..3 * l)
            .map(|_| round_to(dt, rng.uniform(-3.0, 3.0)))
            .collect();
        let p: Vec<f64> = (0..2 * l + 1)
            .map(|_| round_to(dt, rng.uniform(0.5, 2.0)))
            .collect();
        let xa = arr(dev, dt, &x, &[3, l]);
        let pa = arr(dev, dt, &p, &[2 * l + 1]);
        let strided = ok("strided", pa.slice(&[Slice::new(None, None, 2)]));
        let strided = ok("strided", strided.slice(&[Slice::range(0, l as isize)]));
        let shifted = ok("shifted", pa.slice(&[Slice::range(1, l as isize + 1)]));
        let ps: Vec<f64> = (0..l).map(|j| p[2 * j]).collect();
        let pu: Vec<f64> = (0..l).map(|j| p[j + 1]).collect();
        for op in [NormOp::LayerNorm, NormOp::RmsNorm] {
            for (w, b, wv, bv) in [
                (&strided, &shifted, &ps, &pu),
                (&shifted, &strided, &pu, &ps),
            ] {
                let what = format!("{op} {dt} with weight and bias views");
                let y = ok(&what, run(op, &xa, Some(w), Some(b), 1e-5));
                let want: Vec<f64> = x
                    .chunks(l)
                    .flat_map(|r| row_ref(op, r, wv, bv, 1e-5))
                    .collect();
                let atol = if dt == DType::F32 { 2e-5 } else { 5e-2 };
                close(&what, &f64s(&y, &what), &want, dt, atol);
            }
        }
    }
    for op in [NormOp::Softmax, NormOp::LogSoftmax] {
        let what = format!("{op} over axis 0 and of a transposed view");
        let f = |x: &Array, axes: &[isize]| {
            if op == NormOp::Softmax {
                wmx::softmax(x, axes)
            } else {
                wmx::log_softmax(x, axes)
            }
        };
        let y0 = ok(&what, f(&xa, &[0]));
        let yt = ok(&what, f(&ok(&what, xa.t()), &[-1]));
        let cols: Vec<Vec<f64>> = (0..10)
            .map(|j| {
                row_ref(
                    op,
                    &(0..6).map(|i| x[i * 10 + j]).collect::<Vec<_>>(),
                    &[],
                    &[],
                    0.0,
                )
            })
            .collect();
        let want0: Vec<f64> = (0..60).map(|k| cols[k % 10][k / 10]).collect();
        let want_t: Vec<f64> = (0..60).map(|k| cols[k / 6][k % 6]).collect();
        close(&what, &f64s(&y0, &what), &want0, dt, 1e-6);
        close(&what, &f64s(&yt, &what), &want_t, dt, 1e-6);
        let what = format!("{op} over both axes");
        let yall = ok(&what, f(&xa, &[0, 1]));
        close(
            &what,
            &f64s(&yall, &what),
            &row_ref(op, &x, &[], &[], 0.0),
            dt,
            1e-6,
        );
    }
}

fn f64s(a: &Array, what: &str) -> Vec<f64> {
    read_ok(a, what).into_iter().map(Val::f).collect()
}

/// ±inf, NaN, huge values, constant rows, and bad arguments.
pub fn norm_special_values(dev: &Device) {
    let dt = DType::F32;
    let inf = f64::INFINITY;
    let rows = [
        vec![1.0, -inf, 2.0, -inf],
        vec![-inf, -inf, -inf, -inf],
        vec![1.0, inf, 2.0, 0.0],
        vec![1.0, f64::NAN, 2.0, 0.0],
        vec![2f64.powi(127), 2f64.powi(127), -2f64.powi(127), 0.0],
    ];
    for op in [NormOp::Softmax, NormOp::LogSoftmax] {
        for r in &rows {
            let what = format!("{op} of {r:?}");
            let y = ok(&what, run(op, &arr(dev, dt, r, &[4]), None, None, 0.0));
            close(
                &what,
                &f64s(&y, &what),
                &row_ref(op, r, &[], &[], 0.0),
                dt,
                1e-6,
            );
        }
    }
    // Constant rows normalise to exactly the bias (zero variance), any magnitude;
    // odd lengths, vectorised ones and rows past the kernel's registers.
    for c in [
        0.0,
        1000.5,
        -3e6,
        round_to(dt, 0.1),
        round_to(dt, 1.0 / 3.0),
        round_to(dt, -7.123),
    ] {
        for l in [333, 1000, 4000, 4096, 8200] {
            let what = format!("layer_norm of a constant row of {c}, length {l}");
            let x = arr(dev, dt, &vec![c; 2 * l], &[2, l]);
            let b: Vec<f64> = (0..l).map(|j| (j % 97) as f64 * 0.25 - 7.0).collect();
            let y = ok(
                &what,
                wmx::layer_norm(&x, None, Some(&arr(dev, dt, &b, &[l])), 1e-5),
            );
            let want: Vec<f64> = b.iter().chain(&b).copied().collect();
            close(&what, &f64s(&y, &what), &want, dt, 0.0);
        }
    }
    let x = arr(dev, dt, &[1.0, 2.0, 3.0], &[3]);
    let w2 = arr(dev, dt, &[1.0, 2.0], &[2]);
    super::expect_err(
        "negative eps",
        wmx::layer_norm(&x, None, None, -1.0),
        &["layer_norm", "eps"],
    );
    super::expect_err(
        "weight of the wrong length",
        wmx::rms_norm(&x, Some(&w2), 1e-5),
        &["rms_norm", "weight", "[2]", "3"],
    );
    let s = ok("scalar", wmx::with_device(dev, || wmx::scalar(1.0, dt)));
    super::expect_err("0-d softmax", wmx::softmax(&s, &[-1]), &["softmax"]);
    super::expect_err(
        "axis out of range",
        wmx::softmax(&x, &[1]),
        &["softmax", "1"],
    );
}

/// Gradients of `sum(g * op(x, w, b))` against central differences of the f64
/// reference, jvp against the same differences, vmap against a loop.
pub fn grad_norm(dev: &Device) {
    let mut rng = Rng::new(0x6ad);
    let dt = DType::F32;
    let (r, l, eps) = (3usize, 5usize, 1e-3);
    for &op in NormOp::ALL {
        let what = format!("grad of {op}");
        let x: Vec<f64> = (0..r * l)
            .map(|_| round_to(dt, rng.uniform(-2.0, 2.0)))
            .collect();
        let w: Vec<f64> = (0..l)
            .map(|_| round_to(dt, rng.uniform(0.5, 2.0)))
            .collect();
        let b: Vec<f64> = (0..l)
            .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
            .collect();
        let g: Vec<f64> = (0..r * l)
            .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
            .collect();
        let loss = |x: &[f64], w: &[f64], b: &[f64]| -> f64 {
            x.chunks(l)
                .flat_map(|row| row_ref(op, row, w, b, eps))
                .zip(&g)
                .map(|(y, g)| y * g)
                .sum()
        };
        let fd = |v: &[f64], k: usize, which: usize| -> f64 {
            let h = 1e-6;
            let (mut p, mut m) = (v.to_vec(), v.to_vec());
            p[k] += h;
            m[k] -= h;
            let f = |v: &[f64]| match which {
                0 => loss(v, &w, &b),
                1 => loss(&x, v, &b),
                _ => loss(&x, &w, v),
            };
            (f(&p) - f(&m)) / (2.0 * h)
        };
        let ga = arr(dev, dt, &g, &[r, l]);
        let params = match op {
            NormOp::LayerNorm => 3,
            NormOp::RmsNorm => 2,
            _ => 1,
        };
        let f = |xs: &[Array]| -> Result<Vec<Array>> {
            let y = run(op, &xs[0], xs.get(1), xs.get(2), eps)?;
            Ok(vec![wmx::sum(&wmx::multiply(&y, &ga)?, None, false)?])
        };
        let args: Vec<Array> = [(&x, vec![r, l]), (&w, vec![l]), (&b, vec![l])][..params]
            .iter()
            .map(|(v, s)| arr(dev, dt, v, s))
            .collect();
        let argnums: Vec<usize> = (0..params).collect();
        let grads = ok(&what, wmx::grad(f, &argnums)(&args));
        for (k, (gr, v)) in grads.iter().zip([&x, &w, &b]).enumerate() {
            let got = f64s(gr, &what);
            let want: Vec<f64> = (0..v.len()).map(|i| fd(v, i, k)).collect();
            close(&format!("{what}: argument {k}"), &got, &want, dt, 2e-4);
        }
        // jvp along x's tangent t equals the differences along t.
        let t: Vec<f64> = (0..r * l)
            .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
            .collect();
        let mut tangents = vec![arr(dev, dt, &t, &[r, l])];
        for a in &args[1..] {
            tangents.push(ok(&what, wmx::zeros_like(a)));
        }
        let (_, tan) = ok(&what, wmx::jvp(f, &args, &tangents));
        let h = 1e-6;
        let shifted = |s: f64| -> Vec<f64> { x.iter().zip(&t).map(|(a, b)| a + s * b).collect() };
        let want = (loss(&shifted(h), &w, &b) - loss(&shifted(-h), &w, &b)) / (2.0 * h);
        close(
            &format!("{what}: jvp"),
            &f64s(&tan[0], &what),
            &[want],
            dt,
            2e-4,
        );
        // vmap over rows of x equals the op on the whole matrix.
        let xa = args[0].clone();
        let rest: Vec<Array> = args[1..].to_vec();
        let per_row = |xs: &[Array]| -> Result<Vec<Array>> {
            Ok(vec![run(op, &xs[0], rest.first(), rest.get(1), eps)?])
        };
        let v = ok(
            &what,
            wmx::vmap(per_row, &[Some(0)], &[0])(std::slice::from_ref(&xa)),
        );
        let want: Vec<f64> = x
            .chunks(l)
            .flat_map(|row| row_ref(op, row, &w, &b, eps))
            .collect();
        close(
            &format!("{what}: vmap"),
            &f64s(&v[0], &what),
            &want,
            dt,
            1e-5,
        );
    }
}

/// The vjp of layer_norm / rms_norm (`x`, `w`, `b` row-major, `g` the output's
/// cotangent) in f64: dx, dw, db.
fn norm_vjp_ref(
    op: NormOp,
    x: &[f64],
    w: &[f64],
    g: &[f64],
    eps: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let l = w.len();
    let (mut dx, mut dw, mut db) = (vec![0.0; x.len()], vec![0.0; l], vec![0.0; l]);
    for (r, row) in x.chunks(l).enumerate() {
        let gy = &g[r * l..(r + 1) * l];
        let n = l as f64;
        let mean = if op == NormOp::LayerNorm {
            row.iter().sum::<f64>() / n
        } else {
            0.0
        };
        let inv = 1.0 / (row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n + eps).sqrt();
        let xh: Vec<f64> = row.iter().map(|v| (v - mean) * inv).collect();
        let gw: Vec<f64> = (0..l).map(|j| gy[j] * w[j]).collect();
        let a = if op == NormOp::LayerNorm {
            gw.iter().sum::<f64>() / n
        } else {
            0.0
        };
        let c = (0..l).map(|j| gw[j] * xh[j]).sum::<f64>() / n;
        for j in 0..l {
            dx[r * l + j] = inv * (gw[j] - a - xh[j] * c);
            dw[j] += gy[j] * xh[j];
            db[j] += gy[j];
        }
    }
    (dx, dw, db)
}

/// The one-kernel vjp of layer_norm and rms_norm: dx, dw and db against f64 on
/// rows longer than a workgroup, odd lengths, batch dims, a transposed x, a
/// broadcast weight (none given, so only dx is asked for), f16 and bf16; its
/// second derivative against f64's (which differentiates the composed op); its
/// vmap (one weight, and a weight per index) against a loop.
pub fn norm_vjp_kernel(dev: &Device) {
    let mut rng = Rng::new(0x7a1);
    let eps = 1e-5;
    for op in [NormOp::LayerNorm, NormOp::RmsNorm] {
        for (dt, shape) in [
            (DType::F32, vec![3usize, 5]),
            (DType::F32, vec![2, 3, 300]),
            (DType::F32, vec![4, 768]),
            (DType::F16, vec![6, 40]),
            (DType::F16, vec![3, 7]),
            (DType::BF16, vec![5, 64]),
        ] {
            if !super::supported(dev, dt) {
                continue;
            }
            let what = format!("vjp of {op} {dt} {shape:?}");
            let l = *shape.last().unwrap();
            let n: usize = shape.iter().product();
            let v = |rng: &mut Rng, n: usize, lo: f64, hi: f64| -> Vec<f64> {
                (0..n).map(|_| round_to(dt, rng.uniform(lo, hi))).collect()
            };
            let (x, w, b, g) = (
                v(&mut rng, n, -2.0, 2.0),
                v(&mut rng, l, 0.5, 2.0),
                v(&mut rng, l, -1.0, 1.0),
                v(&mut rng, n, -1.0, 1.0),
            );
            let (xa, wa, ba, ga) = (
                arr(dev, dt, &x, &shape),
                arr(dev, dt, &w, &[l]),
                arr(dev, dt, &b, &[l]),
                arr(dev, dt, &g, &shape),
            );
            let f = |a: &[Array]| -> Result<Vec<Array>> {
                let y = run(op, &a[0], Some(&a[1]), Some(&a[2]), eps)?;
                Ok(vec![y])
            };
            let (_, grads) = ok(
                &what,
                wmx::vjp(f, &[xa.clone(), wa.clone(), ba.clone()], std::slice::from_ref(&ga)),
            );
            let (dx, dw, db) = norm_vjp_ref(op, &x, &w, &g, eps);
            // Sums over rows round once per element in f32: the tolerance grows with them.
            let rows = (n / l) as f64;
            let tol = match dt {
                DType::F32 => 2e-5,
                DType::F16 => 4e-3,
                _ => 3e-2,
            };
            close(&format!("{what}: dx"), &f64s(&grads[0], &what), &dx, dt, tol);
            close(&format!("{what}: dw"), &f64s(&grads[1], &what), &dw, dt, tol * rows);
            if op == NormOp::LayerNorm {
                close(&format!("{what}: db"), &f64s(&grads[2], &what), &db, dt, tol * rows);
            }
            // Only dx asked for (no weight given); x a transposed view.
            let xt = ok(&what, wmx::transpose(&arr(dev, dt, &x, &[l, n / l]), None));
            let xs: Vec<f64> = (0..n / l)
                .flat_map(|r| (0..l).map(move |j| (r, j)))
                .map(|(r, j)| x[j * (n / l) + r])
                .collect();
            let g2 = arr(dev, dt, &g, &[n / l, l]);
            let h = |a: &[Array]| -> Result<Vec<Array>> { Ok(vec![run(op, &a[0], None, None, eps)?]) };
            let (_, gx) = ok(&what, wmx::vjp(h, &[xt], &[g2]));
            let ones = vec![1.0; l];
            let (dxt, _, _) = norm_vjp_ref(op, &xs, &ones, &g, eps);
            close(&format!("{what}: dx of a transposed x, no weight"), &f64s(&gx[0], &what), &dxt, dt, tol);
        }
        // Second order: the gradient of <dx, u> with respect to x and w, against f64's.
        let what = format!("second derivative of {op}");
        let (r, l) = (3usize, 6usize);
        let x: Vec<f64> = (0..r * l).map(|_| round_to(DType::F32, rng.uniform(-2.0, 2.0))).collect();
        let w: Vec<f64> = (0..l).map(|_| round_to(DType::F32, rng.uniform(0.5, 2.0))).collect();
        let g: Vec<f64> = (0..r * l).map(|_| round_to(DType::F32, rng.uniform(-1.0, 1.0))).collect();
        let u: Vec<f64> = (0..r * l).map(|_| round_to(DType::F32, rng.uniform(-1.0, 1.0))).collect();
        let second = |dt: DType| -> Vec<Vec<f64>> {
            let (ga, ua) = (arr(dev, dt, &g, &[r, l]), arr(dev, dt, &u, &[r, l]));
            let inner = |a: &[Array]| -> Result<Vec<Array>> {
                let f = |b: &[Array]| -> Result<Vec<Array>> { Ok(vec![run(op, &b[0], Some(&b[1]), None, eps)?]) };
                let (_, d) = wmx::vjp(f, a, std::slice::from_ref(&ga))?;
                Ok(vec![wmx::sum(&wmx::multiply(&d[0], &ua)?, None, false)?])
            };
            let args = [arr(dev, dt, &x, &[r, l]), arr(dev, dt, &w, &[l])];
            let d = ok(&what, wmx::grad(inner, &[0, 1])(&args));
            d.iter().map(|a| f64s(a, &what)).collect()
        };
        if super::supported(dev, DType::F64) {
            let (got, want) = (second(DType::F32), second(DType::F64));
            close(&format!("{what}: x"), &got[0], &want[0], DType::F32, 1e-4);
            close(&format!("{what}: w"), &got[1], &want[1], DType::F32, 1e-4);
        }
        // vmap of the vjp over a batch of rows: one weight, then a weight per index.
        let what = format!("vmap of the vjp of {op}");
        let (m, l) = (3usize, 8usize);
        let x: Vec<f64> = (0..m * 2 * l).map(|_| round_to(DType::F32, rng.uniform(-2.0, 2.0))).collect();
        let ws: Vec<f64> = (0..m * l).map(|_| round_to(DType::F32, rng.uniform(0.5, 2.0))).collect();
        let g: Vec<f64> = (0..m * 2 * l).map(|_| round_to(DType::F32, rng.uniform(-1.0, 1.0))).collect();
        let ga = arr(dev, DType::F32, &g, &[m, 2, l]);
        let per = |a: &[Array]| -> Result<Vec<Array>> {
            let f = |b: &[Array]| -> Result<Vec<Array>> { Ok(vec![run(op, &b[0], Some(&b[1]), None, eps)?]) };
            let (_, d) = wmx::vjp(f, &a[..2], &a[2..])?;
            Ok(d)
        };
        for per_index in [false, true] {
            let wa = if per_index {
                arr(dev, DType::F32, &ws, &[m, l])
            } else {
                arr(dev, DType::F32, &ws[..l], &[l])
            };
            let axes = [Some(0), if per_index { Some(0) } else { None }, Some(0)];
            let args = [arr(dev, DType::F32, &x, &[m, 2, l]), wa, ga.clone()];
            let out = ok(&what, wmx::vmap(per, &axes, &[0, 0])(&args));
            let (gx, gw) = (f64s(&out[0], &what), f64s(&out[1], &what));
            for k in 0..m {
                let wk = if per_index { &ws[k * l..(k + 1) * l] } else { &ws[..l] };
                let (dx, dw, _) = norm_vjp_ref(op, &x[k * 2 * l..(k + 1) * 2 * l], wk, &g[k * 2 * l..(k + 1) * 2 * l], eps);
                let label = format!("{what}: index {k}, weight per index {per_index}");
                close(&format!("{label}: dx"), &gx[k * 2 * l..(k + 1) * 2 * l], &dx, DType::F32, 2e-5);
                close(&format!("{label}: dw"), &gw[k * l..(k + 1) * l], &dw, DType::F32, 4e-5);
            }
        }
    }
}
