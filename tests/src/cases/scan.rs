//! Scans (cumsum, cumprod, cummax, cummin) on every dtype along every axis,
//! inclusive and exclusive, forwards and reversed, against f64/i128 host loops;
//! views, empty axes, NaN, and lines long enough for the multi-pass GPU scan
//! (checked exactly on integer-valued data); derivatives against host loops.

use crate::host::{HostArr, indices};
use crate::rng::Rng;
use crate::val::{Val, make_ok, read_ok, round_to, wrap};
use wmx_core::{self as wmx, Array, DType, Device, ReduceOp, Result};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

/// Host scan of `x` along `axis` with the output dtype's rules: values, and for
/// floats the sum of magnitudes that went into each (for the tolerance).
fn reference(
    op: ReduceOp,
    x: &HostArr,
    axis: usize,
    reverse: bool,
    inclusive: bool,
    out: DType,
) -> (Vec<Val>, Vec<f64>) {
    let n = x.shape[axis];
    let all = indices(&x.shape);
    let mut vals = vec![Val::I(0); all.len()];
    let mut mags = vec![0.0; all.len()];
    for (k, idx) in all.iter().enumerate() {
        if idx[axis] != 0 {
            continue;
        }
        let (mut acc_f, mut acc_i, mut mag, mut nan) = (0.0f64, 0i128, 0.0f64, false);
        let (mut set, mut ext_f, mut ext_i) = (false, 0.0f64, 0i128);
        if op == ReduceOp::Prod {
            (acc_f, acc_i) = (1.0, 1);
        }
        for s in 0..n {
            let p = if reverse { n - 1 - s } else { s };
            let mut j = idx.clone();
            j[axis] = p;
            let at = k + p * x.shape[axis + 1..].iter().product::<usize>();
            let v = x.get(&j);
            let before = (acc_f, acc_i, set, ext_f, ext_i, nan, mag);
            match (op, v) {
                (ReduceOp::Sum, Val::F(f)) => acc_f += f,
                (ReduceOp::Sum, Val::I(i)) => acc_i = wrap(out, acc_i + i),
                (ReduceOp::Prod, Val::F(f)) => acc_f *= f,
                (ReduceOp::Prod, Val::I(i)) => acc_i = wrap(out, acc_i * i),
                (_, Val::F(f)) => {
                    nan |= f.is_nan();
                    let better = if op == ReduceOp::Max {
                        f > ext_f
                    } else {
                        f < ext_f
                    };
                    if !set || better {
                        ext_f = f;
                    }
                    set = true;
                }
                (_, Val::I(i)) => {
                    let better = if op == ReduceOp::Max {
                        i > ext_i
                    } else {
                        i < ext_i
                    };
                    if !set || better {
                        ext_i = i;
                    }
                    set = true;
                }
            }
            if let Val::F(f) = v {
                mag += f.abs();
            }
            let (af, ai, st, ef, ei, nn, mg) = if inclusive {
                (acc_f, acc_i, set, ext_f, ext_i, nan, mag)
            } else {
                before
            };
            mags[at] = mg;
            vals[at] = match (op, v) {
                (ReduceOp::Sum | ReduceOp::Prod, Val::F(_)) => Val::F(round_to(out, af)),
                (ReduceOp::Sum | ReduceOp::Prod, Val::I(_)) => Val::I(ai),
                (_, Val::F(_)) if nn => Val::F(f64::NAN),
                (_, Val::F(_)) if st => Val::F(ef),
                (_, Val::F(_)) => Val::F(if op == ReduceOp::Max {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }),
                (_, Val::I(_)) if st => Val::I(ei),
                (_, Val::I(_)) => {
                    let (lo, hi) = if out == DType::Bool {
                        (0, 1)
                    } else {
                        crate::rng::int_range(out)
                    };
                    Val::I(if op == ReduceOp::Max { lo } else { hi })
                }
            };
        }
    }
    (vals, mags)
}

fn check(what: &str, got: &Array, want: &[Val], mags: &[f64], dt: DType) {
    let g = read_ok(got, what);
    assert_eq!(g.len(), want.len(), "{what}: length");
    for (k, (a, e)) in g.iter().zip(want).enumerate() {
        let fine = match (a, e) {
            (Val::F(x), Val::F(y)) if !y.is_nan() && !x.is_nan() => {
                // f32 accumulation on a GPU: a few roundings per level of the scan,
                // plus the output's own rounding.
                let tol = 64.0 * 2f64.powi(-24) * mags[k] + crate::val::ulp(dt, *y);
                (x - y).abs() <= tol || x == y
            }
            _ => a.same(*e),
        };
        assert!(fine, "{what}: element {k} ({:?}): got {a}, want {e}", k);
    }
}

fn data(rng: &mut Rng, op: ReduceOp, dt: DType, n: usize) -> Vec<Val> {
    (0..n)
        .map(|_| match (op, dt) {
            (_, DType::Bool) => Val::I(rng.int_in(0, 1)),
            (ReduceOp::Prod, d) if d.is_float() => Val::F(round_to(d, rng.uniform(0.6, 1.5))),
            (ReduceOp::Prod, _) => Val::I(rng.int_in(if dt.is_signed_int() { -3 } else { 0 }, 3)),
            (_, d) if d.is_float() => Val::F(round_to(d, rng.uniform(-2.0, 2.0))),
            (_, d) => {
                let (lo, hi) = crate::rng::int_range(d);
                Val::I(rng.int_in(lo, hi))
            }
        })
        .collect()
}

/// Every op, dtype, axis and flag combination on a [5, 7, 3] array and its
/// transpose; a NaN in max/min; empty axes; long lines (exact on integer data).
pub fn scan_values(dev: &Device) {
    let mut rng = Rng::new(0x5ca);
    let ops = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];
    for dt in DType::REAL {
        if !super::supported(dev, dt) {
            continue;
        }
        for op in ops {
            let out = op.out_dtype(dt);
            let v = data(&mut rng, op, dt, 105);
            let x = make_ok(dev, dt, &v, &[5, 7, 3]);
            let hx = HostArr::new(&[5, 7, 3], v);
            for axis in 0..3 {
                for (reverse, inclusive) in
                    [(false, true), (true, true), (false, false), (true, false)]
                {
                    let what = format!(
                        "{op} scan of {dt} along {axis} (reverse {reverse}, inclusive {inclusive})"
                    );
                    let got = ok(
                        &what,
                        wmx::scan(op, &x, Some(axis as isize), reverse, inclusive),
                    );
                    assert_eq!(got.dtype(), out, "{what}: dtype");
                    let (want, mags) = reference(op, &hx, axis, reverse, inclusive, out);
                    check(&what, &got, &want, &mags, out);
                }
            }
            // A transposed view, scanned along its last axis.
            let what = format!("{op} scan of transposed {dt}");
            let xt = ok(&what, wmx::transpose(&x, None));
            let got = ok(&what, wmx::scan(op, &xt, Some(-1), false, true));
            let (want, mags) = reference(op, &hx.transpose(&[2, 1, 0]), 2, false, true, out);
            check(&what, &got, &want, &mags, out);
        }
    }
    // Lines longer than the serial kernel takes (moved last and scanned in blocks;
    // lavapipe cut the serial loop at 65 535), along the first axis, both ways.
    let dt = DType::F32;
    for op in [ReduceOp::Sum, ReduceOp::Max] {
        let v = data(&mut rng, op, dt, 70_001 * 3);
        let x = make_ok(dev, dt, &v, &[70_001, 3]);
        let hx = HostArr::new(&[70_001, 3], v);
        for (reverse, inclusive) in [(false, true), (true, false)] {
            let what = format!("{op} scan of {dt} [70001, 3] along 0 (reverse {reverse})");
            let got = ok(&what, wmx::scan(op, &x, Some(0), reverse, inclusive));
            let (want, mags) = reference(op, &hx, 0, reverse, inclusive, dt);
            check(&what, &got, &want, &mags, dt);
        }
    }
    // NaN propagates through max and min from where it appears.
    let what = "cummax with NaN";
    let x = ok(
        what,
        Array::from_slice_on(&[1.0f32, f32::NAN, 3.0, 0.5], &[4], dev),
    );
    let g: Vec<f32> = ok(what, ok(what, wmx::cummax(&x, None, false, true)).to_vec());
    assert!(
        g[0] == 1.0 && g[1..].iter().all(|v| v.is_nan()),
        "{what}: {g:?}"
    );
    let g: Vec<f32> = ok(what, ok(what, wmx::cummin(&x, None, true, true)).to_vec());
    assert!(
        g[..2].iter().all(|v| v.is_nan()) && g[2] == 0.5 && g[3] == 0.5,
        "cummin reversed with NaN: {g:?}"
    );
    // Empty axes.
    let e = ok(
        "empty",
        wmx::with_device(dev, || wmx::zeros(&[3, 0], DType::F32)),
    );
    assert_eq!(
        ok("empty", wmx::cumsum(&e, Some(1), false, true)).shape(),
        &[3, 0]
    );
    ok(
        "empty",
        ok("empty", wmx::cumsum(&e, Some(0), true, false)).eval(),
    );
    // Long lines: 100_003 (one extra pass) and 4_300_001 (two levels of block
    // carries on the GPU), integer-valued f32 and i32 data: exact.
    for n in [100_003usize, 4_300_001] {
        let xs: Vec<i32> = (0..n).map(|_| rng.int_in(-2, 2) as i32).collect();
        let xf: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
        for (reverse, inclusive) in [(false, true), (true, false)] {
            let mut want = vec![0i64; n];
            let mut acc = 0i64;
            for s in 0..n {
                let p = if reverse { n - 1 - s } else { s };
                let before = acc;
                acc += xs[p] as i64;
                want[p] = if inclusive { acc } else { before };
            }
            let what = format!("cumsum of {n} f32 (reverse {reverse}, inclusive {inclusive})");
            let a = ok(&what, Array::from_slice_on(&xf, &[n], dev));
            let g: Vec<f32> = ok(
                &what,
                ok(&what, wmx::cumsum(&a, None, reverse, inclusive)).to_vec(),
            );
            for (k, (&gv, &w)) in g.iter().zip(&want).enumerate() {
                assert_eq!(gv as i64, w, "{what}: element {k}");
            }
            let what = format!("cumsum of {n} i32 rows (reverse {reverse})");
            let a = ok(&what, Array::from_slice_on(&xs, &[1, n], dev));
            let g: Vec<i32> = ok(
                &what,
                ok(&what, wmx::cumsum(&a, Some(1), reverse, inclusive)).to_vec(),
            );
            for (k, (&gv, &w)) in g.iter().zip(&want).enumerate() {
                assert_eq!(gv as i64, w, "{what}: element {k}");
            }
        }
    }
    // Views at offsets 4 (rows on a vec4: the vec4 kernel) and 1 (not) of one line,
    // integer-valued: exact.
    let n = 20_004usize;
    let xs: Vec<i32> = (0..n).map(|_| rng.int_in(-2, 2) as i32).collect();
    let xf: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
    let whole = ok("offsets", Array::from_slice_on(&xf, &[n], dev));
    for off in [4usize, 1] {
        let what = format!("cumsum of f32 [{off}..{n}]");
        let a = ok(
            &what,
            whole.slice(&[wmx::Slice::range(off as isize, n as isize)]),
        );
        for reverse in [false, true] {
            let g: Vec<f32> = ok(&what, ok(&what, wmx::cumsum(&a, None, reverse, true)).to_vec());
            let mut acc = 0i64;
            for s in 0..n - off {
                let p = if reverse { n - off - 1 - s } else { s };
                acc += xs[off + p] as i64;
                assert_eq!(g[p] as i64, acc, "{what} (reverse {reverse}): element {p}");
            }
        }
    }
    // Rows of several blocks (the GPU's one-pass float scan) for every op and
    // dtype, both directions, against the tolerances of the small cases.
    for dt in DType::REAL {
        if !super::supported(dev, dt) {
            continue;
        }
        for op in ops {
            let out = op.out_dtype(dt);
            let mut v = data(&mut rng, op, dt, 27003);
            if op == ReduceOp::Prod && dt.is_float() {
                // Powers of two whose running product stays in [1/2, 2]: exact, and
                // far from overflow (where 9001 factors in [0.6, 1.5] would go).
                let mut e = 0;
                for x in v.iter_mut() {
                    let step = if rng.int_in(0, 1) == 0 {
                        0
                    } else if e > 0 {
                        -1
                    } else {
                        1
                    };
                    e += step;
                    *x = Val::F(2f64.powi(step));
                }
            }
            // Rows of 9001 and of 9000 (32-bit rows on a vec4: the vec4 kernel,
            // three blocks of 4096), and one row of 27003 (the vec4 kernel
            // forwards, with a partial last vec4).
            for (shape, len) in [([3, 9001], 9001), ([3, 9000], 9000), ([1, 27003], 27003)] {
                let v = v[..3 * len.min(9001)].to_vec();
                let (x, hx) = (make_ok(dev, dt, &v, &shape), HostArr::new(&shape, v));
                for (reverse, inclusive) in
                    [(false, true), (true, false), (false, false), (true, true)]
                {
                    let what = format!(
                        "{op} scan of {shape:?} {dt} (reverse {reverse}, inclusive {inclusive})"
                    );
                    let got = ok(&what, wmx::scan(op, &x, Some(1), reverse, inclusive));
                    let (want, mags) = reference(op, &hx, 1, reverse, inclusive, out);
                    check(&what, &got, &want, &mags, out);
                }
            }
        }
    }
    super::expect_err(
        "cumulative all",
        wmx::scan(ReduceOp::All, &e, Some(0), false, true),
        &["scan", "all"],
    );
    let s = ok("s", wmx::with_device(dev, || wmx::zeros(&[], DType::F32)));
    super::expect_err(
        "scan of a scalar on an axis",
        wmx::cumsum(&s, Some(0), false, true),
        &["sum", "zero-dimensional"],
    );
    super::expect_err(
        "scan axis",
        wmx::cumsum(&e, Some(2), false, true),
        &["sum", "axis 2"],
    );
}

/// Derivatives of cumsum, cummax and cummin (inclusive and exclusive, both
/// directions) against host loops; cumprod's against f64 sums of products (zeros
/// included); vmap against a loop.
pub fn grad_scan(dev: &Device) {
    let mut rng = Rng::new(0x5cb);
    let n = 9;
    let xs: Vec<f32> = (0..2 * n).map(|_| rng.uniform(-2.0, 2.0) as f32).collect();
    let ws: Vec<f32> = (0..2 * n).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
    let x = ok("x", Array::from_slice_on(&xs, &[2, n], dev));
    let w = ok("w", Array::from_slice_on(&ws, &[2, n], dev));
    let one = ok("one", wmx::with_device(dev, || wmx::ones(&[], DType::F32)));
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
        for (reverse, inclusive) in [(false, true), (true, true), (false, false), (true, false)] {
            let what = format!("grad of {op} scan (reverse {reverse}, inclusive {inclusive})");
            let f = |a: &[Array]| -> Result<Vec<Array>> {
                let s = wmx::scan(op, &a[0], Some(1), reverse, inclusive)?;
                // Exclusive max/min start from -inf/inf: leave those out.
                let s = wmx::where_(&wmx::isinf(&s)?, &wmx::zeros_like(&s)?, &s)?;
                Ok(vec![wmx::sum(&wmx::multiply(&s, &w)?, None, false)?])
            };
            let (_, g) = ok(
                &what,
                wmx::vjp(f, std::slice::from_ref(&x), std::slice::from_ref(&one)),
            );
            let g: Vec<f32> = ok(&what, g[0].to_vec());
            // Host: each output's weight goes to the input it came from.
            let mut want = vec![0f64; 2 * n];
            for r in 0..2 {
                let (mut acc, mut src): (f64, Option<usize>) = (0.0, None);
                let mut sum_srcs: Vec<usize> = vec![];
                for s in 0..n {
                    let p = if reverse { n - 1 - s } else { s };
                    let v = xs[r * n + p] as f64;
                    let prev = (src, sum_srcs.clone());
                    match op {
                        ReduceOp::Sum => sum_srcs.push(p),
                        _ => {
                            let better = src.is_none_or(|q| {
                                let cur = xs[r * n + q] as f64;
                                if op == ReduceOp::Max {
                                    v >= cur
                                } else {
                                    v <= cur
                                }
                            });
                            if better {
                                src = Some(p);
                            }
                        }
                    }
                    acc += v;
                    let (sv, ss) = if inclusive {
                        (src, sum_srcs.clone())
                    } else {
                        prev
                    };
                    let wv = ws[r * n + p] as f64;
                    match op {
                        ReduceOp::Sum => ss.iter().for_each(|&q| want[r * n + q] += wv),
                        _ => {
                            if let Some(q) = sv {
                                want[r * n + q] += wv;
                            }
                        }
                    }
                }
                let _ = acc;
            }
            for (k, (&gv, &wv)) in g.iter().zip(&want).enumerate() {
                assert!(
                    (gv as f64 - wv).abs() < 1e-5 * (1.0 + wv.abs()),
                    "{what}: element {k}: got {gv}, want {wv}"
                );
            }
            // jvp: the scan of the tangent's sources equals the vjp's transpose.
            let (_, t) = ok(
                &what,
                wmx::jvp(
                    |a: &[Array]| Ok(vec![wmx::scan(op, &a[0], Some(1), reverse, true)?]),
                    std::slice::from_ref(&x),
                    std::slice::from_ref(&w),
                ),
            );
            let tv: Vec<f32> = ok(&what, t[0].to_vec());
            let ys: Vec<f32> = ok(
                &what,
                ok(&what, wmx::scan(op, &x, Some(1), reverse, true)).to_vec(),
            );
            for r in 0..2 {
                for p in 0..n {
                    let want = match op {
                        ReduceOp::Sum => {
                            let range: Vec<usize> = if reverse {
                                (p..n).collect()
                            } else {
                                (0..=p).collect()
                            };
                            range.iter().map(|&q| ws[r * n + q] as f64).sum::<f64>()
                        }
                        _ => {
                            // The latest input equal to the running extreme.
                            let range: Vec<usize> = if reverse {
                                (p..n).collect()
                            } else {
                                (0..=p).collect()
                            };
                            let q = if reverse {
                                *range
                                    .iter()
                                    .filter(|&&q| xs[r * n + q] == ys[r * n + p])
                                    .min()
                                    .unwrap()
                            } else {
                                *range
                                    .iter()
                                    .filter(|&&q| xs[r * n + q] == ys[r * n + p])
                                    .max()
                                    .unwrap()
                            };
                            ws[r * n + q] as f64
                        }
                    };
                    let got = tv[r * n + p] as f64;
                    assert!(
                        (got - want).abs() < 1e-5 * (1.0 + want.abs()),
                        "jvp of {op} scan (reverse {reverse}): [{r}, {p}]: got {got}, want {want}"
                    );
                }
            }
        }
    }
    // vmap over rows equals a loop.
    let what = "vmap of cumsum";
    let v = ok(
        what,
        wmx::vmap(
            |a: &[Array]| Ok(vec![wmx::cumsum(&a[0], Some(0), true, false)?]),
            &[Some(1)],
            &[1],
        )(std::slice::from_ref(&x)),
    );
    let got: Vec<f32> = ok(what, v[0].to_vec());
    let direct: Vec<f32> = ok(
        what,
        ok(what, wmx::cumsum(&x, Some(0), true, false)).to_vec(),
    );
    assert_eq!(got, direct, "{what}");
    // cumprod: vjp and jvp against f64 host sums of products, with zeros (one and
    // two in a row) where a rule dividing by x would fail.
    let mut ps = xs.clone();
    ps[3] = 0.0;
    ps[n + 5] = 0.0;
    ps[n + 6] = 0.0;
    let px = ok("px", Array::from_slice_on(&ps, &[2, n], dev));
    for (reverse, inclusive) in [(false, true), (true, true), (false, false), (true, false)] {
        let what = format!("cumprod derivatives (reverse {reverse}, inclusive {inclusive})");
        // The inputs whose product makes output p (row-local positions).
        let window = |p: usize| -> Vec<usize> {
            match (reverse, inclusive) {
                (false, true) => (0..=p).collect(),
                (false, false) => (0..p).collect(),
                (true, true) => (p..n).collect(),
                (true, false) => (p + 1..n).collect(),
            }
        };
        // d y[r, p] / d x[r, q].
        let dy = |r: usize, p: usize, q: usize| -> f64 {
            let w = window(p);
            if !w.contains(&q) {
                return 0.0;
            }
            w.iter()
                .filter(|&&k| k != q)
                .map(|&k| ps[r * n + k] as f64)
                .product()
        };
        let f = |a: &[Array]| -> Result<Vec<Array>> {
            let c = wmx::cumprod(&a[0], Some(1), reverse, inclusive)?;
            Ok(vec![wmx::sum(&wmx::multiply(&c, &w)?, None, false)?])
        };
        let (_, g) = ok(
            &what,
            wmx::vjp(f, std::slice::from_ref(&px), std::slice::from_ref(&one)),
        );
        let g: Vec<f32> = ok(&what, g[0].to_vec());
        let (_, t) = ok(
            &what,
            wmx::jvp(
                |a: &[Array]| Ok(vec![wmx::cumprod(&a[0], Some(1), reverse, inclusive)?]),
                std::slice::from_ref(&px),
                std::slice::from_ref(&w),
            ),
        );
        let t: Vec<f32> = ok(&what, t[0].to_vec());
        for r in 0..2 {
            for q in 0..n {
                let want: f64 = (0..n).map(|p| ws[r * n + p] as f64 * dy(r, p, q)).sum();
                let got = g[r * n + q] as f64;
                assert!(
                    (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                    "vjp {what}: [{r}, {q}]: got {got}, want {want}"
                );
                let p = q;
                let want: f64 = (0..n).map(|q| ws[r * n + q] as f64 * dy(r, p, q)).sum();
                let got = t[r * n + p] as f64;
                assert!(
                    (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                    "jvp {what}: [{r}, {p}]: got {got}, want {want}"
                );
            }
        }
    }
}
