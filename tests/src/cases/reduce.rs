//! Reductions: every op over every set of axes, empty inputs, NaN and inf, mean, var,
//! logsumexp, argmax and argmin.

use super::*;

fn reduce_inputs(rng: &mut Rng, name: &str, dt: DType, n: usize) -> Vec<Val> {
    match (name, dt.is_float()) {
        ("all" | "any", true) => (0..n)
            .map(|_| f(*rng.pick(&[0.0, -0.0, 0.0, f64::NAN, 1.0, 0.5, 0.0])))
            .collect(),
        ("all" | "any", false) => (0..n)
            .map(|_| {
                let v = crate::rng::value(rng, dt, Domain::Any);
                if rng.chance(0.3) { Val::I(0) } else { v }
            })
            .collect(),
        ("prod", true) => (0..n)
            .map(|_| {
                let s = if rng.chance(0.5) { -1.0 } else { 1.0 };
                f(round_to(dt, s * rng.uniform(0.7, 1.4)))
            })
            .collect(),
        ("max" | "min", true) => (0..n)
            .map(|_| {
                if rng.chance(0.03) {
                    f(*rng.pick(&[f64::INFINITY, f64::NEG_INFINITY, -0.0]))
                } else {
                    crate::rng::value(rng, dt, Domain::Any)
                }
            })
            .collect(),
        ("sum", true) => values(rng, dt, n, Domain::Range(-100.0, 100.0)),
        _ => values(rng, dt, n, Domain::Any),
    }
}

/// Every reduction (from `ReduceOp::ALL`) on every dtype over single, several,
/// all and no axes, with and without keepdims, on contiguous and transposed input.
pub fn reductions_all_ops_all_axes(dev: &Device) {
    let mut rng = Rng::new(7);
    let shape = [3usize, 4, 5];
    let axes_list: &[Option<&[isize]>] = &[
        None,
        Some(&[0]),
        Some(&[1]),
        Some(&[2]),
        Some(&[-1]),
        Some(&[0, 2]),
        Some(&[2, 0]),
        Some(&[1, -1]),
        Some(&[0, 1, 2]),
        Some(&[]),
    ];
    for &op in ReduceOp::ALL {
        let name = op.name();
        for dt in DType::REAL {
            if !supported(dev, dt) {
                continue;
            }
            let out_dt = r::reduce_dtype(name, dt);
            let xs = reduce_inputs(&mut rng, name, dt, 60);
            let host = HostArr::new(&shape, xs.clone());
            let base = make_ok(dev, dt, &xs, &shape);
            // Also through a transposed view (host: the same transpose).
            let views = [
                (base.clone(), host.clone(), "contiguous"),
                (
                    ok("transpose", base.transpose(Some(&[2, 0, 1]))),
                    host.transpose(&[2, 0, 1]),
                    "transposed",
                ),
            ];
            for (x, hx, kind) in &views {
                for axes in axes_list {
                    for keepdims in [false, true] {
                        let what = format!(
                            "{name}({dt} {kind} {:?}, axes={axes:?}, keepdims={keepdims})",
                            hx.shape
                        );
                        if !supported(dev, out_dt) {
                            expect_err(
                                &what,
                                wmx::reduce(op, x, *axes, keepdims),
                                &[out_dt.name()],
                            );
                            continue;
                        }
                        let y = ok(&what, wmx::reduce(op, x, *axes, keepdims));
                        let ax = axes_usize(*axes, 3);
                        let (_, want_t) = hx.reduce(&ax, |v| {
                            (r::reduce(name, dt, v).unwrap(), reduce_tol(name, out_dt, v))
                        });
                        let got =
                            read_checked(&what, &y, out_dt, &keep_shape(&hx.shape, &ax, keepdims));
                        let want: Vec<Val> = want_t.iter().map(|w| w.0).collect();
                        assert_close_with(&what, out_dt, &got, &want, &|k| want_t[k].1, &|k| {
                            format!("output {k}")
                        });
                    }
                }
            }
        }
    }
}

/// Empty reductions: sum 0, prod 1, all true, any false, mean NaN, logsumexp −inf,
/// max/min/argmax errors (naming the shape).
pub fn reductions_empty(dev: &Device) {
    for dt in [
        DType::F32,
        DType::I32,
        DType::U8,
        DType::Bool,
        DType::F16,
        DType::I64,
        DType::U64,
        DType::F64,
    ] {
        if !supported(dev, dt) {
            continue;
        }
        for shape in [vec![0usize], vec![0, 3], vec![2, 0, 2]] {
            let x = make_ok(dev, dt, &[], &shape);
            let what = |s: &str| format!("{s} of empty {dt} {shape:?}");
            for (name, want) in [("sum", 0.0), ("prod", 1.0), ("all", 1.0), ("any", 0.0)] {
                let op = *ReduceOp::ALL.iter().find(|o| o.name() == name).unwrap();
                let y = ok(&what(name), wmx::reduce(op, &x, None, false));
                let out = r::reduce_dtype(name, dt);
                let got = read_checked(&what(name), &y, out, &[]);
                assert_same(&what(name), &got, &[cast(f(want), out)], &|_| String::new());
            }
            let m = ok(&what("mean"), wmx::mean(&x, None, false));
            assert!(read_ok(&m, "mean")[0].f().is_nan(), "{}", what("mean"));
            let l = ok(&what("logsumexp"), wmx::logsumexp(&x, None, false));
            assert_same(
                &what("logsumexp"),
                &read_ok(&l, "lse"),
                &[f(f64::NEG_INFINITY)],
                &|_| String::new(),
            );
            let l = ok(&what("logsumexp"), wmx::logsumexp(&x, Some(&[0]), true));
            let mut ks = shape.clone();
            ks[0] = 1;
            let got = read_checked(&what("logsumexp keepdims"), &l, to_float(dt), &ks);
            assert!(
                got.iter().all(|v| v.f() == f64::NEG_INFINITY),
                "{}",
                what("lse")
            );
            let shape_s = format!("{shape:?}");
            expect_err(&what("max"), wmx::max(&x, None, false), &[&shape_s]);
            let zero = shape.iter().position(|&d| d == 0).unwrap() as isize;
            expect_err(
                &what("min"),
                wmx::min(&x, Some(&[zero]), false),
                &[&shape_s],
            );
            expect_err(&what("argmax"), wmx::argmax(&x, zero, false), &[&shape_s]);
        }
        // Reducing a non-empty axis of an array with an empty other axis: empty result.
        let x = make_ok(dev, dt, &[], &[3, 0]);
        let y = ok(
            "max over the non-empty axis",
            wmx::max(&x, Some(&[0]), false),
        );
        assert_eq!(read_checked("max [3,0] axis 0", &y, dt, &[0]).len(), 0);
        let s = ok("sum axis 1 of [3, 0]", wmx::sum(&x, Some(&[1]), false));
        let out = r::reduce_dtype("sum", dt);
        let got = read_checked("sum axis 1 of [3, 0]", &s, out, &[3]);
        assert_same("sum of empty rows", &got, &[cast(f(0.0), out); 3], &|_| {
            String::new()
        });
    }
}

/// NaN propagation in max/min/sum, ±inf in sums and logsumexp, first NaN wins in argmax.
pub fn reductions_nan_and_inf(dev: &Device) {
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        if !supported(dev, dt) {
            continue;
        }
        let rows: &[[f64; 4]] = &[
            [1.0, nan, 3.0, 2.0],
            [nan, 5.0, nan, 1.0],
            [-inf, 2.0, inf, 0.0],
            [-inf, -inf, -inf, -inf],
            [4.0, 4.0, -1.0, 4.0],
            [-0.0, -0.0, -0.0, -0.0],
        ];
        let xs: Vec<Val> = rows.iter().flatten().map(|&v| f(v)).collect();
        let x = make_ok(dev, dt, &xs, &[rows.len(), 4]);
        let host = HostArr::new(&[rows.len(), 4], xs.clone());
        for name in ["max", "min", "sum", "prod", "all", "any"] {
            let op = *ReduceOp::ALL.iter().find(|o| o.name() == name).unwrap();
            let y = ok(name, wmx::reduce(op, &x, Some(&[1]), false));
            let got = read_ok(&y, name);
            let (_, want) = host.reduce(&[1], |v| r::reduce(name, dt, v).unwrap());
            assert_close(
                &format!("{name} rows in {dt}"),
                y.dtype(),
                &got,
                &want,
                Tol::EXACT,
                &|k| format!("{:?}", rows[k]),
            );
        }
        for name in ["argmax", "argmin"] {
            let y = if name == "argmax" {
                wmx::argmax(&x, 1, false)
            } else {
                wmx::argmin(&x, 1, false)
            };
            let y = ok(name, y);
            let got = read_checked(name, &y, DType::U32, &[rows.len()]);
            let (_, want) = host.reduce(&[1], |v| Val::I(r::arg_reduce(name, v).unwrap() as i128));
            assert_same(&format!("{name} rows in {dt}"), &got, &want, &|k| {
                format!("{:?}", rows[k])
            });
        }
        let l = ok("logsumexp", wmx::logsumexp(&x, Some(&[1]), false));
        let got = read_ok(&l, "logsumexp");
        let want = [
            f(nan),
            f(nan),
            f(inf),
            f(-inf),
            f(4.0 + (3.0 + (-5f64).exp()).ln()),
            f(-0.0 + 4f64.ln()),
        ];
        assert_close(
            &format!("logsumexp rows in {dt}"),
            dt,
            &got,
            &want,
            Tol::of(Class::Composite, dt, 4.0),
            &|k| format!("{:?}", rows[k]),
        );
    }
}

/// mean, var (ddof 0, 1, 2) and logsumexp against f64 references, every dtype.
pub fn mean_var_logsumexp(dev: &Device) {
    let mut rng = Rng::new(8);
    let shape = [4usize, 6, 5];
    for dt in DType::REAL {
        if !supported(dev, dt) {
            continue;
        }
        let out = to_float(dt);
        if !supported(dev, out) {
            continue;
        }
        let dom = if dt.is_float() {
            Domain::Range(-8.0, 12.0)
        } else {
            Domain::SmallInt(100)
        };
        let xs = values(&mut rng, dt, 120, dom);
        let host = HostArr::new(&shape, xs.clone());
        let x = make_ok(dev, dt, &xs, &shape);
        for axes in [
            None,
            Some(&[1isize][..]),
            Some(&[0, 2][..]),
            Some(&[-1][..]),
        ] {
            for keepdims in [false, true] {
                let ax = axes_usize(axes, 3);
                let ks = keep_shape(&shape, &ax, keepdims);
                let ctx = format!("{dt} axes={axes:?} keepdims={keepdims}");
                let scale = |v: &[Val]| v.iter().map(|x| x.f().abs()).fold(0.0, f64::max);
                // mean
                let y = ok("mean", wmx::mean(&x, axes, keepdims));
                let got = read_checked(&format!("mean {ctx}"), &y, out, &ks);
                let (_, want) = host.reduce(&ax, |v| {
                    let m = v.iter().map(|x| x.f()).sum::<f64>() / v.len() as f64;
                    (f(m), Tol::of(Class::Composite, out, scale(v)))
                });
                let w: Vec<Val> = want.iter().map(|p| p.0).collect();
                assert_close_with(
                    &format!("mean {ctx}"),
                    out,
                    &got,
                    &w,
                    &|k| want[k].1,
                    &|k| format!("output {k}"),
                );
                // var
                for ddof in [0usize, 1, 2] {
                    let y = ok("var", wmx::var(&x, axes, keepdims, ddof));
                    let got = read_checked(&format!("var ddof={ddof} {ctx}"), &y, out, &ks);
                    let (_, want) = host.reduce(&ax, |v| {
                        let n = v.len() as f64;
                        let m = v.iter().map(|x| x.f()).sum::<f64>() / n;
                        let ss: f64 = v.iter().map(|x| (x.f() - m).powi(2)).sum();
                        let sq = v.iter().map(|x| x.f() * x.f()).sum::<f64>() / n;
                        (
                            f(ss / (n - ddof as f64)),
                            Tol::of(Class::Composite, out, 4.0 * sq),
                        )
                    });
                    let w: Vec<Val> = want.iter().map(|p| p.0).collect();
                    assert_close_with(
                        &format!("var ddof={ddof} {ctx}"),
                        out,
                        &got,
                        &w,
                        &|k| want[k].1,
                        &|k| format!("output {k}"),
                    );
                }
                // logsumexp
                let y = ok("logsumexp", wmx::logsumexp(&x, axes, keepdims));
                let got = read_checked(&format!("logsumexp {ctx}"), &y, out, &ks);
                let (_, want) = host.reduce(&ax, |v| {
                    let m = v.iter().map(|x| x.f()).fold(f64::NEG_INFINITY, f64::max);
                    let s: f64 = v.iter().map(|x| (x.f() - m).exp()).sum();
                    (f(m + s.ln()), Tol::of(Class::Composite, out, scale(v)))
                });
                let w: Vec<Val> = want.iter().map(|p| p.0).collect();
                assert_close_with(
                    &format!("logsumexp {ctx}"),
                    out,
                    &got,
                    &w,
                    &|k| want[k].1,
                    &|k| format!("output {k}"),
                );
            }
        }
    }
}

/// argmax / argmin: ties give the first index, every axis, negative axis, keepdims.
pub fn argmax_argmin(dev: &Device) {
    let mut rng = Rng::new(9);
    let shape = [3usize, 4, 5];
    for dt in DType::REAL {
        if !supported(dev, dt) {
            continue;
        }
        let xs = values(&mut rng, dt, 60, Domain::SmallInt(3));
        let host = HostArr::new(&shape, xs.clone());
        let x = make_ok(dev, dt, &xs, &shape);
        let xt = ok("transpose", x.transpose(Some(&[1, 2, 0])));
        let ht = host.transpose(&[1, 2, 0]);
        for (arr, h, kind) in [(&x, &host, "contiguous"), (&xt, &ht, "transposed")] {
            for axis in [0isize, 1, 2, -1, -3] {
                for keepdims in [false, true] {
                    for name in ["argmax", "argmin"] {
                        let what = format!("{name}({dt} {kind}, axis={axis}, keepdims={keepdims})");
                        let y = if name == "argmax" {
                            wmx::argmax(arr, axis, keepdims)
                        } else {
                            wmx::argmin(arr, axis, keepdims)
                        };
                        let y = ok(&what, y);
                        let ax = axes_usize(Some(&[axis]), 3);
                        let (_, want) =
                            h.reduce(&ax, |v| Val::I(r::arg_reduce(name, v).unwrap() as i128));
                        let got = read_checked(
                            &what,
                            &y,
                            DType::U32,
                            &keep_shape(&h.shape, &ax, keepdims),
                        );
                        assert_same(&what, &got, &want, &|k| format!("output {k}"));
                    }
                }
            }
        }
        // 1-D with the extreme at the end and ties.
        let v = make_ok(dev, dt, &xs[..7], &[7]);
        let got = read_ok(&ok("argmax", wmx::argmax(&v, 0, false)), "argmax");
        assert_same(
            "argmax 1-D",
            &got,
            &[Val::I(r::arg_reduce("argmax", &xs[..7]).unwrap() as i128)],
            &|_| format!("{:?}", &xs[..7]),
        );
    }
}

/// Column sums of tall matrices (few columns, many rows: a bias gradient) are
/// computed in chunks of rows: plain (odd widths, and vec4 rows of 768 and 64
/// columns), of a strided view, and fused after elementwise work under
/// `compile`; against f64 host sums. And f16 rows of 768 columns.
pub fn tall_column_reductions(dev: &Device) {
    if super::supported(dev, DType::F16) {
        let (r, c) = (2048usize, 768usize);
        let v: Vec<f32> = (0..r * c)
            .map(|i| ((i * 29) % 61) as f32 / 8.0 - 3.5)
            .collect();
        let x = ok("x", Array::from_slice_on(&v, &[r, c], dev));
        let x16 = ok("f16", wmx::astype(&x, DType::F16));
        let got: Vec<f64> = ok(
            "f16 sum",
            wmx::sum(&x16, Some(&[0]), false).and_then(|s| s.to_vec_f64()),
        );
        for (j, g) in got.iter().enumerate() {
            // Exact inputs (multiples of 1/8), an f32 sum, one rounding to f16.
            let w: f64 = (0..r).map(|i| v[i * c + j] as f64).sum();
            assert!(
                (g - w).abs() <= w.abs() * 2f64.powi(-11) + 1e-9,
                "f16 column {j}: {g} vs {w}"
            );
        }
    }
    for (r, c) in [
        (2048usize, 39usize),
        (4099, 5),
        (300, 7),
        (2048, 768),
        (1030, 64),
    ] {
        let v: Vec<f32> = (0..r * c)
            .map(|i| ((i * 37) % 101) as f32 / 7.0 - 5.0)
            .collect();
        let x = ok("x", Array::from_slice_on(&v, &[r, c], dev));
        let want: Vec<f64> = (0..c)
            .map(|j| (0..r).map(|i| v[i * c + j] as f64).sum())
            .collect();
        let close = |what: &str, got: Vec<f32>, want: &[f64]| {
            for (j, (&g, &w)) in got.iter().zip(want).enumerate() {
                assert!(
                    (g as f64 - w).abs() <= 1e-4 * (r as f64).sqrt() * 5.0,
                    "{what}: column {j}: {g} vs {w}"
                );
            }
        };
        let what = format!("sum over rows of [{r}, {c}]");
        close(
            &what,
            ok(
                &what,
                wmx::sum(&x, Some(&[0]), false).and_then(|s| s.to_vec()),
            ),
            &want,
        );
        let f = wmx::compile(|a: &[Array]| {
            let y = wmx::add(
                &wmx::multiply(&a[0], &wmx::scalar_like(&a[0], 2.0)?)?,
                &wmx::scalar_like(&a[0], 1.0)?,
            )?;
            Ok(vec![wmx::sum(&y, Some(&[0]), false)?])
        });
        let got = ok(
            &what,
            f.call(std::slice::from_ref(&x)).and_then(|o| o[0].to_vec()),
        );
        let want2: Vec<f64> = want.iter().map(|w| 2.0 * w + r as f64).collect();
        close(&format!("compiled 2x + 1, {what}"), got, &want2);
    }
}

/// Reductions of millions of 64-bit elements (the 64-bit kernels reduce in
/// chunks: one workgroup an output once summed 2^23 f64 wrongly on lavapipe, whose
/// loops stop after 65 535 iterations): a broadcast view of 9 million elements
/// over all axes and along the long one, against exact sums; an arg reduction
/// along an axis of 2^23 is right or an error naming the loop budget.
pub fn long_64bit_reductions(dev: &Device) {
    let (rows, cols) = (1000usize, 9000usize);
    for dt in [DType::I64, DType::U64, DType::F64] {
        if !supported(dev, dt) {
            continue;
        }
        let what = |s: &str| format!("{s} of {dt} [{rows}, {cols}] (broadcast)");
        let col = ok(
            "arange",
            wmx::with_device(dev, || wmx::arange(0.0, rows as f64, 1.0, dt)),
        );
        let x = ok(
            "broadcast",
            col.reshape(&[rows as isize, 1])
                .and_then(|c| wmx::broadcast_to(&c, &[rows, cols])),
        );
        let total = (cols * rows * (rows - 1) / 2) as f64;
        for (name, axes, want) in [
            ("sum", None, vec![total]),
            ("max", None, vec![(rows - 1) as f64]),
            ("min", None, vec![0.0]),
            (
                "sum",
                Some(&[1isize][..]),
                (0..rows).map(|i| (i * cols) as f64).collect(),
            ),
        ] {
            let op = *ReduceOp::ALL.iter().find(|o| o.name() == name).unwrap();
            let got: Vec<f64> = ok(
                &what(name),
                wmx::reduce(op, &x, axes, false).and_then(|y| y.to_vec_f64()),
            );
            assert_eq!(got, want, "{} over {axes:?}", what(name));
        }
        let n = 1usize << 23;
        let long = ok(
            "arange 2^23",
            wmx::with_device(dev, || wmx::arange(0.0, n as f64, 1.0, dt)),
        );
        match wmx::argmax(&long, 0, false).and_then(|i| i.to_vec_f64()) {
            Ok(v) => assert_eq!(v, vec![(n - 1) as f64], "argmax of {dt} [2^23]"),
            Err(e) => assert!(
                e.to_string().contains("loops"),
                "argmax of {dt} [2^23]: {e}"
            ),
        }
    }
}
