//! Transforms (vjp, jvp, grad, vmap) and the slice update they rely on.
//!
//! References are independent of wmx: central finite differences in f64 of the
//! reference's value of each op (`wmx_reference::reference`) and of f64 host
//! functions (`HostArr`), and for vmap an explicit loop over the mapped axis. Each
//! op table is iterated, so an op without a reference fails these cases.

use crate::host::HostArr;
use crate::reference;
use crate::rng::Rng;
use crate::val::{Val, make_ok, read_ok, round_to};
use wmx_core::{self as wmx, Array, BinaryOp, DType, Device, ReduceOp, Result, Slice, UnaryOp};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

/// An array of `dt` holding `xs` rounded to `dt`; returns it and the rounded values.
fn arr(dev: &Device, dt: DType, xs: &[f64], shape: &[usize]) -> (Array, Vec<f64>) {
    let r: Vec<f64> = xs.iter().map(|&x| round_to(dt, x)).collect();
    let vals: Vec<Val> = r.iter().map(|&x| Val::F(x)).collect();
    (make_ok(dev, dt, &vals, shape), r)
}

fn f64s(a: &Array, what: &str) -> Vec<f64> {
    read_ok(a, what).into_iter().map(Val::f).collect()
}

fn uniform(rng: &mut Rng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| rng.uniform(lo, hi)).collect()
}

/// Asserts `|got - want| <= atol + rtol * |want|` elementwise.
fn close(what: &str, got: &[f64], want: &[f64], rtol: f64, atol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= atol + rtol * w.abs() || (g.is_nan() && w.is_nan());
        assert!(
            ok,
            "{what}: element {i}: got {g}, want {w} (rtol {rtol}, atol {atol})"
        );
    }
}

/// Relative tolerance of a derivative computed in `dt` from a few rounded ops.
fn rtol(dt: DType) -> f64 {
    match dt {
        DType::F32 => 2e-5,
        DType::F16 => 8e-3,
        _ => 6e-2,
    }
}

/// A point of the op's domain where its reference is smooth (its central
/// difference exists there).
fn unary_sample(op: UnaryOp, rng: &mut Rng) -> f64 {
    let f = |x: f64| reference::unary(op.name(), DType::F64, Val::F(x)).f();
    let (lo, hi) = reference::unary_domain(op.name());
    for _ in 0..1000 {
        let x = rng.uniform(lo, hi);
        if reference::derivative(f, x).is_some() {
            return x;
        }
    }
    panic!("{op}: no smooth point in its domain");
}

/// Every unary op: vjp and jvp against central differences of the reference, on f32 and
/// (a few ops) f16/bf16; ops with bool outputs have zero derivative through a cast.
pub fn grad_unary_ops(dev: &Device) {
    let mut rng = Rng::new(0x9a1);
    let n = 37;
    for &op in UnaryOp::ALL {
        let dts: &[DType] = match op {
            UnaryOp::Exp | UnaryOp::Sin | UnaryOp::Tanh | UnaryOp::Square => {
                &[DType::F32, DType::F16, DType::BF16]
            }
            _ => &[DType::F32],
        };
        for &dt in dts {
            if !super::supported(dev, dt) {
                continue;
            }
            let what = format!("{op} on {dt}");
            // Points rounded to `dt` first, then the reference at the rounded points.
            let xs: Vec<f64> = (0..n)
                .map(|_| round_to(dt, unary_sample(op, &mut rng)))
                .collect();
            let (x, xr) = arr(dev, dt, &xs, &[n]);
            let r = |x: f64| reference::unary(op.name(), DType::F64, Val::F(x)).f();
            let (w, wr) = arr(dev, dt, &uniform(&mut rng, n, -2.0, 2.0), &[n]);
            let bool_out = matches!(op, UnaryOp::LogicalNot | UnaryOp::IsNan | UnaryOp::IsInf);
            let f = move |a: &[Array]| -> Result<Vec<Array>> {
                let y = wmx::unary(op, &a[0])?;
                Ok(vec![if bool_out { wmx::astype(&y, dt)? } else { y }])
            };
            let (outs, g) = ok(
                &what,
                wmx::vjp(f, std::slice::from_ref(&x), std::slice::from_ref(&w)),
            );
            let (_, t) = ok(&what, wmx::jvp(f, std::slice::from_ref(&x), &[w]));
            let d: Vec<f64> = xr
                .iter()
                .map(|&x| reference::derivative(r, x).expect("a smooth point, rounded"))
                .collect();
            let want: Vec<f64> = d.iter().zip(&wr).map(|(d, w)| d * w).collect();
            let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let atol = rtol(dt) * scale.max(1.0) * 0.1;
            close(
                &format!("vjp of {what}"),
                &f64s(&g[0], &what),
                &want,
                rtol(dt),
                atol,
            );
            close(
                &format!("jvp of {what}"),
                &f64s(&t[0], &what),
                &want,
                rtol(dt),
                atol,
            );
            if !bool_out {
                let v: Vec<f64> = xr.iter().map(|&x| r(x)).collect();
                close(
                    &format!("value of {what}"),
                    &f64s(&outs[0], &what),
                    &v,
                    rtol(dt),
                    1e-6,
                );
            }
        }
    }
}

/// Value and partial derivatives of a binary op in f64: the reference's value
/// and its central differences (`None` where it is not smooth at `(a, b)`).
fn binary_ref(op: BinaryOp, a: f64, b: f64) -> Option<(f64, f64, f64)> {
    let f = |x: f64, y: f64| reference::binary(op.name(), DType::F64, Val::F(x), Val::F(y)).f();
    let da = reference::derivative(|x| f(x, b), a)?;
    let db = reference::derivative(|y| f(a, y), b)?;
    Some((f(a, b), da, db))
}

/// A pair from [`binary_sample`], rounded to f32, where the op is smooth.
fn smooth_pair(op: BinaryOp, rng: &mut Rng, i: usize) -> (f64, f64) {
    for _ in 0..1000 {
        let (a, b) = binary_sample(op, rng, i);
        let (a, b) = (round_to(DType::F32, a), round_to(DType::F32, b));
        if binary_ref(op, a, b).is_some() {
            return (a, b);
        }
    }
    panic!("{op}: no smooth pair");
}

fn binary_sample(op: BinaryOp, rng: &mut Rng, i: usize) -> (f64, f64) {
    use BinaryOp::*;
    match op {
        Divide | FloorDivide | Remainder => {
            let b = rng.uniform(0.5, 3.0) * if rng.chance(0.5) { 1.0 } else { -1.0 };
            let mut a = rng.uniform(-3.0, 3.0);
            // Off the jumps of floor(a / b).
            if ((a / b) - (a / b).round()).abs() < 0.05 {
                a += 0.3 * b;
            }
            (a, b)
        }
        Power => (rng.uniform(0.5, 3.0), rng.uniform(-2.0, 2.0)),
        // Every fourth element a tie: the derivative is shared.
        Maximum | Minimum if i.is_multiple_of(4) => {
            let a = rng.uniform(-3.0, 3.0);
            (a, a)
        }
        Arctan2 => (rng.uniform(0.3, 3.0), rng.uniform(-3.0, 3.0)),
        _ => (rng.uniform(-3.0, 3.0), rng.uniform(-3.0, 3.0)),
    }
}

/// Every binary op defined on floats: vjp (both inputs, one broadcast) and jvp
/// against central differences of the reference; ties of maximum/minimum share.
pub fn grad_binary_ops(dev: &Device) {
    let mut rng = Rng::new(0xb1a);
    let n = 24;
    for &op in BinaryOp::ALL {
        if op.kind() == wmx::OpKind::Bitwise {
            continue; // integers only: no derivatives (grad_errors checks the Err)
        }
        let what = format!("{op}");
        let (av, bv): (Vec<f64>, Vec<f64>) = (0..n).map(|i| smooth_pair(op, &mut rng, i)).unzip();
        let (a, ar) = arr(dev, DType::F32, &av, &[n]);
        let (b, br) = arr(dev, DType::F32, &bv, &[n]);
        let (w, wr) = arr(dev, DType::F32, &uniform(&mut rng, n, -2.0, 2.0), &[n]);
        let bool_out = op.kind() != wmx::OpKind::Arith && op.kind() != wmx::OpKind::FloatMath;
        let f = move |x: &[Array]| -> Result<Vec<Array>> {
            let y = wmx::binary(op, &x[0], &x[1])?;
            Ok(vec![if bool_out {
                wmx::astype(&y, DType::F32)?
            } else {
                y
            }])
        };
        let (outs, g) = ok(
            &what,
            wmx::vjp(f, &[a.clone(), b.clone()], std::slice::from_ref(&w)),
        );
        let (ta, _) = arr(dev, DType::F32, &uniform(&mut rng, n, -1.0, 1.0), &[n]);
        let (tb, _) = arr(dev, DType::F32, &uniform(&mut rng, n, -1.0, 1.0), &[n]);
        let (tar, tbr) = (f64s(&ta, "ta"), f64s(&tb, "tb"));
        let (_, t) = ok(&what, wmx::jvp(f, &[a, b], &[ta, tb]));
        let refs: Vec<(f64, f64, f64)> = ar
            .iter()
            .zip(&br)
            .map(|(&a, &b)| binary_ref(op, a, b).expect("a smooth pair"))
            .collect();
        let ga: Vec<f64> = refs.iter().zip(&wr).map(|(r, w)| r.1 * w).collect();
        let gb: Vec<f64> = refs.iter().zip(&wr).map(|(r, w)| r.2 * w).collect();
        let jt: Vec<f64> = (0..n)
            .map(|i| refs[i].1 * tar[i] + refs[i].2 * tbr[i])
            .collect();
        close(
            &format!("vjp a of {what}"),
            &f64s(&g[0], &what),
            &ga,
            1e-4,
            1e-5,
        );
        close(
            &format!("vjp b of {what}"),
            &f64s(&g[1], &what),
            &gb,
            1e-4,
            1e-5,
        );
        close(
            &format!("jvp of {what}"),
            &f64s(&t[0], &what),
            &jt,
            1e-4,
            1e-5,
        );
        if !bool_out {
            let v: Vec<f64> = refs.iter().map(|r| r.0).collect();
            close(
                &format!("value of {what}"),
                &f64s(&outs[0], &what),
                &v,
                1e-5,
                1e-6,
            );
        }
    }
    // A broadcast operand's cotangent is summed over the broadcast axes.
    let (a, ar) = arr(dev, DType::F32, &uniform(&mut rng, 12, -2.0, 2.0), &[3, 4]);
    let (b, br) = arr(dev, DType::F32, &uniform(&mut rng, 4, -2.0, 2.0), &[4]);
    let df = wmx::grad(
        |x: &[Array]| Ok(vec![wmx::sum(&wmx::multiply(&x[0], &x[1])?, None, false)?]),
        &[0, 1],
    );
    let g = ok("grad of sum(a * b), b broadcast", df(&[a, b]));
    let want_a: Vec<f64> = (0..12).map(|i| br[i % 4]).collect();
    let want_b: Vec<f64> = (0..4)
        .map(|j| (0..3).map(|i| ar[i * 4 + j]).sum())
        .collect();
    close(
        "grad a, b broadcast",
        &f64s(&g[0], "ga"),
        &want_a,
        1e-6,
        1e-6,
    );
    close(
        "grad b, b broadcast",
        &f64s(&g[1], "gb"),
        &want_b,
        1e-5,
        1e-5,
    );
}

/// Gradient of `sum(w * reduce(x))` for every reduction and several axes against
/// f64 references: sum spreads, prod is the product of the others (inputs with
/// zero, one and two zeros per group), max/min share equally among ties.
pub fn grad_reductions(dev: &Device) {
    let mut rng = Rng::new(0x5ed);
    let shape = [3usize, 4, 5];
    let n = 60;
    let mut xs = uniform(&mut rng, n, 0.5, 1.5);
    for v in xs.iter_mut() {
        *v *= if rng.chance(0.5) { 1.0 } else { -1.0 };
    }
    // Zeros for prod (several per group on some rows) and exact ties for max/min.
    for &i in &[0usize, 7, 8, 21, 33, 34, 35] {
        xs[i] = 0.0;
    }
    xs[42] = 4.0;
    xs[47] = 4.0;
    xs[11] = -4.0;
    xs[16] = -4.0;
    let (x, xr) = arr(dev, DType::F32, &xs, &shape);
    let hx = HostArr::new(&shape, xr.iter().map(|&v| Val::F(v)).collect());
    for &op in ReduceOp::ALL {
        for axes in [vec![], vec![1usize], vec![0, 2], vec![2]] {
            let what = format!("{op} over {axes:?}");
            let ax: Vec<usize> = if axes.is_empty() {
                vec![0, 1, 2]
            } else {
                axes.clone()
            };
            let iax: Vec<isize> = ax.iter().map(|&a| a as isize).collect();
            let kept: Vec<usize> = (0..3)
                .filter(|d| !ax.contains(d))
                .map(|d| shape[d])
                .collect();
            let m: usize = kept.iter().product();
            let (w, wr) = arr(dev, DType::F32, &uniform(&mut rng, m, -2.0, 2.0), &kept);
            let float_out = matches!(
                op,
                ReduceOp::Sum | ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min
            );
            let f = |a: &[Array]| -> Result<Vec<Array>> {
                let r = wmx::reduce(op, &a[0], Some(&iax), false)?;
                let r = wmx::astype(&r, DType::F32)?;
                Ok(vec![wmx::sum(&wmx::multiply(&r, &w)?, None, false)?])
            };
            let g = ok(&what, wmx::grad(f, &[0])(std::slice::from_ref(&x)));
            // Reference: for each element, d reduce / d x within its group, times w.
            let (_, groups) = hx.reduce(&ax, |vals| vals.iter().map(|v| v.f()).collect::<Vec<_>>());
            let want: Vec<f64> = crate::host::indices(&shape)
                .iter()
                .map(|idx| {
                    if !float_out {
                        return 0.0;
                    }
                    let k = kept_index(idx, &ax, &shape);
                    let grp = &groups[k];
                    let pos = pos_in_group(idx, &ax, &shape);
                    let d = match op {
                        ReduceOp::Sum => 1.0,
                        ReduceOp::Prod => grp
                            .iter()
                            .enumerate()
                            .filter(|(j, _)| *j != pos)
                            .map(|(_, v)| v)
                            .product(),
                        ReduceOp::Max | ReduceOp::Min => {
                            let e = if op == ReduceOp::Max {
                                grp.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
                            } else {
                                grp.iter().cloned().fold(f64::INFINITY, f64::min)
                            };
                            let ties = grp.iter().filter(|&&v| v == e).count() as f64;
                            if grp[pos] == e { 1.0 / ties } else { 0.0 }
                        }
                        _ => 0.0,
                    };
                    d * wr[k]
                })
                .collect();
            close(
                &format!("grad of {what}"),
                &f64s(&g[0], &what),
                &want,
                1e-5,
                1e-6,
            );
            // jvp with the same weights as tangent direction of one element.
            let (t, tr) = arr(dev, DType::F32, &uniform(&mut rng, n, -1.0, 1.0), &shape);
            let (_, jt) = ok(&what, wmx::jvp(f, std::slice::from_ref(&x), &[t]));
            let want_t: f64 = want.iter().zip(&tr).map(|(g, t)| g * t).sum();
            close(
                &format!("jvp of {what}"),
                &f64s(&jt[0], &what),
                &[want_t],
                1e-4,
                1e-5,
            );
        }
    }
    // argmax/argmin have no derivative.
    let g = ok(
        "grad through argmax",
        wmx::grad1(|a: &Array| {
            let i = wmx::astype(&wmx::argmax(a, 1, false)?, DType::F32)?;
            wmx::sum(&wmx::add(&i, &wmx::sum(a, None, false)?)?, None, false)
        })(&x),
    );
    // d/dx sum(argmax + sum(x)) over the [3, 5] result: 15 per element.
    close(
        "grad through argmax",
        &f64s(&g, "g"),
        &vec![15.0; n],
        0.0,
        0.0,
    );
}

/// Row-major index of `idx` with `axes` removed.
fn kept_index(idx: &[usize], axes: &[usize], shape: &[usize]) -> usize {
    (0..shape.len())
        .filter(|d| !axes.contains(d))
        .fold(0, |k, d| k * shape[d] + idx[d])
}

/// Row-major position of `idx` among its group (the reduced axes only).
fn pos_in_group(idx: &[usize], axes: &[usize], shape: &[usize]) -> usize {
    let mut ax = axes.to_vec();
    ax.sort();
    ax.iter().fold(0, |k, &d| k * shape[d] + idx[d])
}

/// Central differences of an f64 host function, one coordinate at a time.
fn finite_diff(f: &dyn Fn(&[f64]) -> f64, x: &[f64]) -> Vec<f64> {
    (0..x.len())
        .map(|i| {
            let h = 1e-5 * x[i].abs().max(1.0);
            let (mut p, mut m) = (x.to_vec(), x.to_vec());
            p[i] += h;
            m[i] -= h;
            (f(&p) - f(&m)) / (2.0 * h)
        })
        .collect()
}

fn host(shape: &[usize], xs: &[f64]) -> HostArr {
    HostArr::new(shape, xs.iter().map(|&v| Val::F(v)).collect())
}

/// Views, select, axpby, copies, slice_update and the composite reductions
/// (mean, var, logsumexp) differentiated against central finite differences of the
/// same function written on the host in f64; a function that reads a value inside
/// the transform is still differentiated through it.
pub fn grad_views_and_composites(dev: &Device) {
    let mut rng = Rng::new(0x71e);
    let xs = uniform(&mut rng, 24, -2.0, 2.0);
    let ws = uniform(&mut rng, 12, -1.0, 1.0);
    let cs = uniform(&mut rng, 6, -1.0, 1.0);
    let (x, xr) = arr(dev, DType::F32, &xs, &[4, 6]);
    let (w, wr) = arr(dev, DType::F32, &ws, &[2, 6]);
    let (c, cr) = arr(dev, DType::F32, &cs, &[6]);
    // transpose -> strided slice with a negative step -> reshape (a copy) -> sin ->
    // times a broadcast -> where -> axpby -> weighted sum.
    let f = |a: &[Array]| -> Result<Vec<Array>> {
        let t = wmx::transpose(&a[0], None)?; // [6, 4]
        let s = wmx::slice(&t, &[Slice::new(Some(1), None, 2), Slice::reversed()])?; // [3, 4]
        let r = wmx::reshape(&s, &[2, 6])?;
        let y = wmx::multiply(&wmx::sin(&r)?, &c)?;
        let z = wmx::where_(
            &wmx::greater(&r, &wmx::scalar_like(&r, 0.0)?)?,
            &y,
            &wmx::square(&r)?,
        )?;
        let v = wmx::axpby(&z, &r, 2.0, -0.5)?;
        Ok(vec![wmx::sum(&wmx::multiply(&v, &w)?, None, false)?])
    };
    let hf = |v: &[f64]| -> f64 {
        let t = host(&[4, 6], v).transpose(&[1, 0]);
        let s = t.slice(&[(Some(1), None, 2), (None, None, -1)]);
        let r = s.reshape(&[2, 6]);
        let cb = host(&[6], &cr).broadcast_to(&[2, 6]);
        (0..12)
            .map(|i| {
                let rv = r.data[i].f();
                let z = if rv > 0.0 {
                    rv.sin() * cb.data[i].f()
                } else {
                    rv * rv
                };
                (2.0 * z - 0.5 * rv) * wr[i]
            })
            .sum()
    };
    let g = ok(
        "grad of the view chain",
        wmx::grad(f, &[0])(std::slice::from_ref(&x)),
    );
    close(
        "grad of the view chain",
        &f64s(&g[0], "g"),
        &finite_diff(&hf, &xr),
        1e-3,
        1e-4,
    );

    // slice_update (negative steps), expand/squeeze, broadcast of a smaller rank,
    // astype round trip, stop_gradient.
    let (u, ur) = arr(dev, DType::F32, &uniform(&mut rng, 6, -1.0, 1.0), &[2, 3]);
    let f2 = |a: &[Array]| -> Result<Vec<Array>> {
        let (x, u) = (&a[0], &a[1]);
        let up = wmx::slice_update(
            x,
            &wmx::exp(u)?,
            &[
                Slice::new(Some(3), Some(0), -2),
                Slice::new(Some(1), None, 2),
            ],
        )?;
        let e = wmx::squeeze(&wmx::expand_dims(&up, 1)?, Some(&[1]))?;
        let b = wmx::broadcast_to(&wmx::sum(&e, Some(&[0]), false)?, &[3, 6])?;
        let k = wmx::astype(&wmx::astype(&b, DType::F32)?, DType::F32)?;
        let frozen = wmx::stop_gradient(&wmx::square(x)?)?;
        let s = wmx::add(
            &wmx::sum(&wmx::multiply(&k, &k)?, None, false)?,
            &wmx::sum(&frozen, None, false)?,
        )?;
        Ok(vec![s])
    };
    let hf2 = |v: &[f64], uv: &[f64], frozen: &[f64]| -> f64 {
        let mut up = v.to_vec();
        for (ri, r) in [3usize, 1].iter().enumerate() {
            for (ci, cc) in [1usize, 3, 5].iter().enumerate() {
                up[r * 6 + cc] = uv[ri * 3 + ci].exp();
            }
        }
        let colsum: Vec<f64> = (0..6)
            .map(|j| (0..4).map(|i| up[i * 6 + j]).sum())
            .collect();
        3.0 * colsum.iter().map(|s| s * s).sum::<f64>() + frozen.iter().map(|v| v * v).sum::<f64>()
    };
    let g2 = ok(
        "grad of slice_update chain",
        wmx::grad(f2, &[0, 1])(&[x.clone(), u.clone()]),
    );
    let want_x = finite_diff(&|v: &[f64]| hf2(v, &ur, &xr), &xr);
    let want_u = finite_diff(&|uv: &[f64]| hf2(&xr, uv, &xr), &ur);
    close(
        "grad x of slice_update chain",
        &f64s(&g2[0], "gx"),
        &want_x,
        1e-3,
        1e-3,
    );
    close(
        "grad u of slice_update chain",
        &f64s(&g2[1], "gu"),
        &want_u,
        1e-3,
        1e-3,
    );

    // mean, var (ddof 1), logsumexp, clip, max over an axis.
    let f3 = |a: &[Array]| -> Result<Vec<Array>> {
        let x = &a[0];
        let m = wmx::mean(x, Some(&[1]), false)?;
        let v = wmx::var(x, Some(&[0]), false, 1)?;
        let l = wmx::logsumexp(x, Some(&[1]), false)?;
        let c = wmx::clip(
            x,
            Some(&wmx::scalar_like(x, -1.0)?),
            Some(&wmx::scalar_like(x, 1.5)?),
        )?;
        let parts = [
            wmx::sum(&wmx::square(&m)?, None, false)?,
            wmx::sum(&v, None, false)?,
            wmx::sum(&wmx::sin(&l)?, None, false)?,
            wmx::sum(&wmx::multiply(&c, &c)?, None, false)?,
        ];
        let mut s = parts[0].clone();
        for p in &parts[1..] {
            s = wmx::add(&s, p)?;
        }
        Ok(vec![s])
    };
    let hf3 = |v: &[f64]| -> f64 {
        let row = |i: usize| &v[i * 6..i * 6 + 6];
        let mean_sq: f64 = (0..4)
            .map(|i| (row(i).iter().sum::<f64>() / 6.0).powi(2))
            .sum();
        let var: f64 = (0..6)
            .map(|j| {
                let col: Vec<f64> = (0..4).map(|i| v[i * 6 + j]).collect();
                let m = col.iter().sum::<f64>() / 4.0;
                col.iter().map(|c| (c - m).powi(2)).sum::<f64>() / 3.0
            })
            .sum();
        let lse: f64 = (0..4)
            .map(|i| row(i).iter().map(|x| x.exp()).sum::<f64>().ln().sin())
            .sum();
        let clip: f64 = v.iter().map(|x| x.clamp(-1.0, 1.5).powi(2)).sum();
        mean_sq + var + lse + clip
    };
    // Keep samples off the clip bounds (kinks).
    let xs3: Vec<f64> = xr
        .iter()
        .map(|&v| {
            if (v + 1.0).abs() < 0.05 || (v - 1.5).abs() < 0.05 {
                v + 0.1
            } else {
                v
            }
        })
        .collect();
    let (x3, x3r) = arr(dev, DType::F32, &xs3, &[4, 6]);
    let g3 = ok(
        "grad of mean/var/logsumexp/clip",
        wmx::grad(f3, &[0])(std::slice::from_ref(&x3)),
    );
    close(
        "grad of mean/var/logsumexp/clip",
        &f64s(&g3[0], "g"),
        &finite_diff(&hf3, &x3r),
        1e-3,
        1e-4,
    );

    // A function that reads a value while traced is still differentiated through it.
    let g4 = ok(
        "grad with item() inside",
        wmx::grad1(|a: &Array| {
            let y = wmx::exp(a)?;
            let s = wmx::sum(&y, None, false)?;
            let first = s.item::<f32>()?; // evaluates y and s inside the trace
            wmx::multiply(&s, &wmx::scalar_like(&s, 1.0 + 0.0 * first as f64)?)
        })(&x),
    );
    let want4: Vec<f64> = xr.iter().map(|v| v.exp()).collect();
    close(
        "grad with item() inside",
        &f64s(&g4, "g"),
        &want4,
        1e-5,
        1e-6,
    );
}

/// A function of arrays, as the transforms take it.
type Func = dyn Fn(&[Array]) -> Result<Vec<Array>>;

/// Loop reference for vmap: `f` applied to each example (taken along `axis`),
/// compared with the batched result's slices along `out_axis`.
fn check_vmap_loop(
    what: &str,
    f: &dyn Fn(&[Array]) -> Result<Vec<Array>>,
    args: &[Array],
    in_axes: &[Option<isize>],
    out_axis: isize,
) {
    let batched = ok(what, wmx::vmap(f, in_axes, &[out_axis])(args));
    let b = args
        .iter()
        .zip(in_axes)
        .find_map(|(a, ax)| {
            ax.map(|ax| {
                a.shape()[if ax < 0 {
                    (ax + a.ndim() as isize) as usize
                } else {
                    ax as usize
                }]
            })
        })
        .expect("a mapped argument");
    for k in 0..b {
        let ex: Vec<Array> = args
            .iter()
            .zip(in_axes)
            .map(|(a, ax)| match ax {
                None => a.clone(),
                Some(ax) => take(a, *ax, k),
            })
            .collect();
        let want = ok(what, f(&ex));
        for (j, (bo, w)) in batched.iter().zip(&want).enumerate() {
            let got = take(bo, out_axis, k);
            assert_eq!(
                got.shape(),
                w.shape(),
                "{what}: output {j} example {k} shape"
            );
            assert_eq!(got.dtype(), w.dtype(), "{what}: output {j} dtype");
            let (g, wv) = (read_ok(&got, what), read_ok(w, what));
            // Exact, but for float reductions, which a GPU may sum in another order
            // over a batch: a few ulps.
            let ulps = if w.dtype().is_float() {
                4.0 * crate::val::ulp(w.dtype(), 1.0)
            } else {
                0.0
            };
            for (i, (a, e)) in g.iter().zip(&wv).enumerate() {
                let near =
                    matches!((a, e), (Val::F(x), Val::F(y)) if (x - y).abs() <= ulps * y.abs());
                assert!(
                    a.same(*e) || near,
                    "{what}: output {j} example {k} element {i}: vmap {a:?}, loop {e:?}"
                );
            }
        }
    }
}

/// Example `k` along `axis` of `a` (the axis removed).
fn take(a: &Array, axis: isize, k: usize) -> Array {
    let ax = if axis < 0 {
        (axis + a.ndim() as isize) as usize
    } else {
        axis as usize
    };
    let mut sl = vec![Slice::ALL; ax + 1];
    sl[ax] = Slice::range(k as isize, k as isize + 1);
    ok(
        "take",
        wmx::squeeze(&ok("slice", wmx::slice(a, &sl)), Some(&[ax as isize])),
    )
}

/// vmap of every family against a loop over the mapped axis: every unary and
/// binary op (with an unmapped operand), select, astype, axpby, reductions,
/// argmax, transpose, broadcast, slice, reshape, slice_update, stop_gradient;
/// in/out axes other than 0, negative axes, nested vmap.
pub fn vmap_matches_loop(dev: &Device) {
    let mut rng = Rng::new(0x7a9);
    let (x, _) = arr(dev, DType::F32, &uniform(&mut rng, 35, 0.3, 2.5), &[5, 7]);
    let (y, _) = arr(dev, DType::F32, &uniform(&mut rng, 7, 0.5, 2.0), &[7]);
    for &op in UnaryOp::ALL {
        let f = move |a: &[Array]| Ok(vec![wmx::unary(op, &a[0])?]);
        check_vmap_loop(
            &format!("vmap {op}"),
            &f,
            std::slice::from_ref(&x),
            &[Some(0)],
            0,
        );
    }
    let xt = ok("t", wmx::transpose(&x, None)); // [7, 5]: mapped axis 1
    for &op in BinaryOp::ALL {
        if op.kind() == wmx::OpKind::Bitwise {
            continue;
        }
        let f = move |a: &[Array]| Ok(vec![wmx::binary(op, &a[0], &a[1])?]);
        check_vmap_loop(
            &format!("vmap {op}"),
            &f,
            &[xt.clone(), y.clone()],
            &[Some(1), None],
            -1,
        );
    }
    let (i32s, _) = arr(dev, DType::F32, &uniform(&mut rng, 35, -9.0, 9.0), &[5, 7]);
    let i32s = ok(
        "astype",
        wmx::astype(&ok("round", wmx::round(&i32s)), DType::I32),
    );
    let bitwise = |a: &[Array]| Ok(vec![wmx::bitwise_xor(&a[0], &a[1])?]);
    check_vmap_loop(
        "vmap bitwise_xor",
        &bitwise,
        &[i32s.clone(), i32s.clone()],
        &[Some(0), Some(0)],
        0,
    );
    let cases: Vec<(&str, Box<Func>)> = vec![
        (
            "select",
            Box::new(|a: &[Array]| {
                Ok(vec![wmx::where_(
                    &wmx::greater(&a[0], &a[1])?,
                    &a[0],
                    &a[1],
                )?])
            }),
        ),
        (
            "astype f16/i32",
            Box::new(|a: &[Array]| {
                let h = if super::supported(a[0].device(), DType::F16) {
                    DType::F16
                } else {
                    DType::BF16
                };
                Ok(vec![
                    wmx::astype(&a[0], h)?,
                    wmx::astype(&wmx::multiply(&a[0], &a[1])?, DType::I32)?,
                ])
            }),
        ),
        (
            "axpby",
            Box::new(|a: &[Array]| Ok(vec![wmx::axpby(&a[0], &a[1], 1.5, -2.0)?])),
        ),
        (
            "reductions",
            Box::new(|a: &[Array]| {
                let m = wmx::reshape(&a[0], &[7, 1])?;
                let p = wmx::multiply(&m, &a[1])?; // [7, 7]
                Ok(vec![
                    wmx::sum(&p, Some(&[0]), false)?,
                    wmx::max(&p, Some(&[1]), true)?,
                    wmx::prod(&a[0], None, false)?,
                    wmx::argmax(&p, 1, false)?,
                    wmx::any(
                        &wmx::greater(&p, &wmx::scalar_like(&p, 2.0)?)?,
                        Some(&[0]),
                        false,
                    )?,
                ])
            }),
        ),
        (
            "views",
            Box::new(|a: &[Array]| {
                let m = wmx::broadcast_to(&a[0], &[3, 7])?; // rank 1 -> 2
                let t = wmx::transpose(&m, None)?; // [7, 3]
                let s = wmx::slice(
                    &t,
                    &[
                        Slice::new(Some(5), Some(0), -2),
                        Slice::new(Some(1), None, 1),
                    ],
                )?;
                let r = wmx::reshape(&s, &[-1])?;
                let e = wmx::expand_dims(&wmx::stop_gradient(&a[1])?, 0)?;
                Ok(vec![r, wmx::multiply(&e, &a[0])?])
            }),
        ),
        (
            "slice_update",
            Box::new(|a: &[Array]| {
                let u = wmx::slice(&a[0], &[Slice::range(0, 4)])?;
                Ok(vec![wmx::slice_update(
                    &a[1],
                    &wmx::negative(&u)?,
                    &[Slice::new(Some(6), None, -2)],
                )?])
            }),
        ),
        (
            "constant output",
            Box::new(|a: &[Array]| Ok(vec![wmx::sum(&a[1], None, false)?])),
        ),
    ];
    for (name, f) in &cases {
        check_vmap_loop(
            &format!("vmap {name}"),
            f.as_ref(),
            &[xt.clone(), y.clone()],
            &[Some(1), None],
            0,
        );
        check_vmap_loop(
            &format!("vmap {name}, both mapped"),
            f.as_ref(),
            &[x.clone(), x.clone()],
            &[Some(0), Some(-2)],
            -1,
        );
    }
    // Nested: vmap over rows of vmap over columns, against a double loop.
    let inner = |a: &[Array]| -> Result<Vec<Array>> {
        let f = wmx::vmap(
            |b: &[Array]| Ok(vec![wmx::multiply(&wmx::sin(&b[0])?, &b[1])?]),
            &[Some(0), None],
            &[0],
        );
        f(a)
    };
    let (s, _) = arr(dev, DType::F32, &[0.5], &[]);
    check_vmap_loop("nested vmap", &inner, &[x.clone(), s], &[Some(0), None], 1);
}

/// grad of grad against the analytic second derivative, Hessian-vector products
/// (jvp of grad), per-example gradients (vmap of grad) against a loop, grad of vmap.
pub fn transform_compositions(dev: &Device) {
    let mut rng = Rng::new(0xc0);
    let n = 9;
    let (x, xr) = arr(dev, DType::F32, &uniform(&mut rng, n, -2.0, 2.0), &[n]);
    // f(x) = sum(sin(x) * x^3): f'' = -x^3 sin x + 6 x^2 cos x + 6 x sin x.
    let f = |a: &Array| {
        wmx::sum(
            &wmx::multiply(&wmx::sin(a)?, &wmx::power(a, &wmx::scalar_like(a, 3.0)?)?)?,
            None,
            false,
        )
    };
    let df = wmx::grad1(f);
    let d2 = ok(
        "grad of grad",
        wmx::grad1(|a: &Array| wmx::sum(&df(a)?, None, false))(&x),
    );
    let want: Vec<f64> = xr
        .iter()
        .map(|&x| -x.powi(3) * x.sin() + 6.0 * x * x * x.cos() + 6.0 * x * x.sin())
        .collect();
    close("grad of grad", &f64s(&d2, "d2"), &want, 2e-4, 2e-4);

    // f(x) = (sum x^2)^2 / 2: grad = 2 (sum x^2) x, H v = 4 x (x . v) + 2 (sum x^2) v.
    let (v, vr) = arr(dev, DType::F32, &uniform(&mut rng, n, -1.0, 1.0), &[n]);
    let g = wmx::grad1(|a: &Array| {
        let s = wmx::sum(&wmx::square(a)?, None, false)?;
        wmx::multiply(&wmx::square(&s)?, &wmx::scalar_like(&s, 0.5)?)
    });
    let (_, hv) = ok(
        "jvp of grad",
        wmx::jvp(
            |a: &[Array]| Ok(vec![g(&a[0])?]),
            std::slice::from_ref(&x),
            &[v],
        ),
    );
    let ss: f64 = xr.iter().map(|x| x * x).sum();
    let xv: f64 = xr.iter().zip(&vr).map(|(a, b)| a * b).sum();
    let want: Vec<f64> = (0..n)
        .map(|i| 4.0 * xr[i] * xv + 2.0 * ss * vr[i])
        .collect();
    close(
        "Hessian-vector product",
        &f64s(&hv[0], "hv"),
        &want,
        1e-4,
        1e-4,
    );

    // Per-example gradients of a logistic loss: vmap(grad) over examples vs a loop.
    let (w, _) = arr(dev, DType::F32, &uniform(&mut rng, 4, -1.0, 1.0), &[4]);
    let (xs, _) = arr(dev, DType::F32, &uniform(&mut rng, 24, -2.0, 2.0), &[6, 4]);
    let loss = |a: &[Array]| -> Result<Vec<Array>> {
        let z = wmx::sum(&wmx::multiply(&a[0], &a[1])?, None, false)?;
        let p = wmx::sigmoid(&z)?;
        Ok(vec![wmx::square(&wmx::subtract(
            &p,
            &wmx::scalar_like(&p, 1.0)?,
        )?)?])
    };
    let per_ex = |a: &[Array]| wmx::grad(loss, &[0])(a);
    check_vmap_loop(
        "vmap of grad (per-example gradients)",
        &per_ex,
        &[w.clone(), xs.clone()],
        &[None, Some(0)],
        0,
    );

    // grad of vmap: d/dw sum_k sin(x_k . w) = sum_k cos(x_k . w) x_k.
    let gw = ok(
        "grad of vmap",
        wmx::grad(
            |a: &[Array]| {
                let dots = wmx::vmap(
                    |b: &[Array]| Ok(vec![wmx::sum(&wmx::multiply(&b[0], &b[1])?, None, false)?]),
                    &[None, Some(0)],
                    &[0],
                )(&[a[0].clone(), a[1].clone()])?;
                Ok(vec![wmx::sum(&wmx::sin(&dots[0])?, None, false)?])
            },
            &[0],
        )(&[w.clone(), xs.clone()]),
    );
    let (wr, xsr) = (f64s(&w, "w"), f64s(&xs, "xs"));
    let want: Vec<f64> = (0..4)
        .map(|j| {
            (0..6)
                .map(|k| (0..4).map(|i| xsr[k * 4 + i] * wr[i]).sum::<f64>().cos() * xsr[k * 4 + j])
                .sum()
        })
        .collect();
    close("grad of vmap", &f64s(&gw[0], "gw"), &want, 1e-4, 1e-5);
}

/// Bad uses of the transforms are errors naming the problem.
pub fn transform_errors(dev: &Device) {
    use super::expect_err;
    let (x, _) = arr(dev, DType::F32, &[1.0, 2.0, 3.0], &[3]);
    let i = ok("i32", wmx::astype(&x, DType::I32));
    let sum = |a: &[Array]| Ok(vec![wmx::sum(&a[0], None, false)?]);
    expect_err(
        "grad w.r.t. an i32 array",
        wmx::grad(sum, &[0])(std::slice::from_ref(&i)),
        &["differentiate", "i32"],
    );
    expect_err(
        "vjp w.r.t. an i32 array",
        wmx::vjp(sum, std::slice::from_ref(&i), std::slice::from_ref(&x)),
        &["i32"],
    );
    expect_err(
        "grad of a non-scalar",
        wmx::grad(|a: &[Array]| Ok(vec![a[0].clone()]), &[0])(std::slice::from_ref(&x)),
        &["one element", "[3]"],
    );
    expect_err(
        "grad argnum out of range",
        wmx::grad(sum, &[1])(std::slice::from_ref(&x)),
        &["argnum 1"],
    );
    expect_err(
        "vjp cotangent shape",
        wmx::vjp(
            |a: &[Array]| Ok(a.to_vec()),
            std::slice::from_ref(&x),
            &[ok("z", wmx::zeros(&[2], DType::F32))],
        ),
        &["cotangent 0", "[2]"],
    );
    expect_err(
        "jvp tangent count",
        wmx::jvp(sum, std::slice::from_ref(&x), &[]),
        &["0 tangents"],
    );
    let (m, _) = arr(dev, DType::F32, &[0.0; 6], &[2, 3]);
    expect_err(
        "vmap size mismatch",
        wmx::vmap(
            |a: &[Array]| Ok(vec![wmx::add(&a[0], &a[1])?]),
            &[Some(0), Some(0)],
            &[0],
        )(&[x.clone(), m.clone()]),
        &["differ", "3", "2"],
    );
    expect_err(
        "vmap bad axis",
        wmx::vmap(sum, &[Some(2)], &[0])(std::slice::from_ref(&x)),
        &["axis 2"],
    );
    expect_err(
        "vmap nothing mapped",
        wmx::vmap(sum, &[None], &[0])(std::slice::from_ref(&x)),
        &["no argument is mapped"],
    );
    expect_err(
        "an error inside f reaches the caller",
        wmx::grad(
            |a: &[Array]| {
                Ok(vec![wmx::add(
                    &a[0],
                    &ok("z", wmx::zeros(&[2], DType::F32)),
                )?])
            },
            &[0],
        )(std::slice::from_ref(&x)),
        &["shape mismatch"],
    );
    // A custom primitive without rules: an Err naming it and the rule.
    #[derive(Debug)]
    struct NoRules;
    impl wmx::CustomPrimitive for NoRules {
        fn name(&self) -> &str {
            "no_rules"
        }
        fn eval_cpu(
            &self,
            _: &[wmx::View<'_, wmx::cpu::CpuBuffer>],
            _: &mut wmx::CpuOutput<'_>,
        ) -> Result<()> {
            Err(wmx::Error::Invalid {
                op: "no_rules",
                msg: "not evaluated in this test".into(),
            })
        }
    }
    let c = |a: &[Array]| {
        Ok(vec![wmx::sum(
            &wmx::custom(std::sync::Arc::new(NoRules), a, &[3], DType::F32)?,
            None,
            false,
        )?])
    };
    expect_err(
        "custom primitive without vjp",
        wmx::grad(c, &[0])(std::slice::from_ref(&x)),
        &["no_rules", "vjp"],
    );
    expect_err(
        "custom primitive without jvp",
        wmx::jvp(c, std::slice::from_ref(&x), std::slice::from_ref(&x)),
        &["no_rules", "jvp"],
    );
    expect_err(
        "custom primitive without vmap",
        wmx::vmap(c, &[Some(0)], &[0])(&[m]),
        &["no_rules", "vmap"],
    );
}

/// slice_update on every dtype against a host reference: steps of ±1/±2, a
/// broadcast update, views as inputs, an empty region, errors.
pub fn slice_update_values(dev: &Device) {
    let mut rng = Rng::new(0x51);
    for dt in DType::REAL {
        if !super::supported(dev, dt) {
            continue;
        }
        let what = format!("slice_update on {dt}");
        let base_vals = crate::rng::values(&mut rng, dt, 5 * 7, crate::rng::Domain::Any);
        let upd_vals = crate::rng::values(&mut rng, dt, 3 * 3, crate::rng::Domain::Any);
        let base = make_ok(dev, dt, &base_vals, &[5, 7]);
        let upd = make_ok(dev, dt, &upd_vals, &[3, 3]);
        let hb = HostArr::new(&[5, 7], base_vals.clone());
        let hu = HostArr::new(&[3, 3], upd_vals.clone());
        for (sl, rows, cols) in [
            (
                [Slice::range(1, 4), Slice::new(Some(0), None, 3)],
                vec![1, 2, 3],
                vec![0, 3, 6],
            ),
            (
                [
                    Slice::new(Some(4), None, -2),
                    Slice::new(Some(-2), Some(0), -2),
                ],
                vec![4, 2, 0],
                vec![5, 3, 1],
            ),
        ] {
            let got = ok(&what, wmx::slice_update(&base, &upd, &sl));
            let want: Vec<Val> = crate::host::indices(&[5, 7])
                .iter()
                .map(|i| {
                    match (
                        rows.iter().position(|&r| r == i[0]),
                        cols.iter().position(|&c| c == i[1]),
                    ) {
                        (Some(r), Some(c)) => hu.get(&[r, c]),
                        _ => hb.get(i),
                    }
                })
                .collect();
            let g = read_ok(&got, &what);
            for (k, (a, e)) in g.iter().zip(&want).enumerate() {
                assert!(
                    a.same(*e),
                    "{what} {sl:?}: element {k}: got {a:?}, want {e:?}"
                );
            }
            assert_eq!(got.shape(), &[5, 7]);
            assert_eq!(got.dtype(), dt);
        }
        // Views as inputs: a transposed base, a broadcast row as update; the base is
        // left untouched.
        let bt = ok("t", wmx::transpose(&base, None)); // [7, 5]
        let row = ok("row", wmx::slice(&upd, &[Slice::range(0, 1)])); // [1, 3]
        let got = ok(
            &what,
            wmx::slice_update(
                &bt,
                &row,
                &[Slice::range(2, 6), Slice::new(Some(0), None, 2)],
            ),
        );
        let want: Vec<Val> = crate::host::indices(&[7, 5])
            .iter()
            .map(|i| {
                if (2..6).contains(&i[0]) && i[1] % 2 == 0 {
                    hu.get(&[0, i[1] / 2])
                } else {
                    hb.get(&[i[1], i[0]])
                }
            })
            .collect();
        for (k, (a, e)) in read_ok(&got, &what).iter().zip(&want).enumerate() {
            assert!(
                a.same(*e),
                "{what} (views): element {k}: got {a:?}, want {e:?}"
            );
        }
        let again = read_ok(&base, &what);
        assert!(
            again.iter().zip(&base_vals).all(|(a, e)| a.same(*e)),
            "{what}: the base changed"
        );
        // An empty region changes nothing.
        let empty = ok(
            &what,
            wmx::slice_update(
                &base,
                &ok("e", wmx::zeros(&[0, 7], dt)),
                &[Slice::range(3, 3)],
            ),
        );
        assert!(
            read_ok(&empty, &what)
                .iter()
                .zip(&base_vals)
                .all(|(a, e)| a.same(*e)),
            "{what}: empty region"
        );
    }
    let base = ok(
        "z",
        wmx::with_device(dev, || wmx::zeros(&[4, 4], DType::F32)),
    );
    super::expect_err(
        "slice_update with a wrong update shape",
        wmx::slice_update(
            &base,
            &ok("u", wmx::with_device(dev, || wmx::ones(&[3], DType::F32))),
            &[Slice::range(0, 2)],
        ),
        &["slice_update", "[3]", "[2, 4]"],
    );
    super::expect_err(
        "slice_update with step 0",
        wmx::slice_update(&base, &base, &[Slice::new(None, None, 0)]),
        &["step 0"],
    );
    // A big region over more than 65535 workgroups' worth of words (u8: 4 per word).
    let n = 1 << 20;
    let big = ok(
        "big",
        wmx::with_device(dev, || wmx::zeros(&[n + 3], DType::U8)),
    );
    let ones = ok(
        "ones",
        wmx::with_device(dev, || wmx::ones(&[n / 2 + 1], DType::U8)),
    );
    let r = ok(
        "big slice_update",
        wmx::slice_update(&big, &ones, &[Slice::new(Some(1), None, 2)]),
    );
    let v = ok("read", r.to_vec::<u8>());
    for (i, &b) in v.iter().enumerate() {
        assert_eq!(
            b,
            (i % 2 == 1 && i <= n + 1) as u8,
            "big slice_update element {i}"
        );
    }
}

/// Completeness: every op of every table and every view goes through jvp, vjp and
/// vmap without an error (values are checked by the cases above; an op added to a
/// table without rules fails here or does not compile).
pub fn transforms_cover_every_primitive(dev: &Device) {
    let mut rng = Rng::new(0xa11);
    let (x, _) = arr(dev, DType::F32, &uniform(&mut rng, 12, 0.5, 2.0), &[3, 4]);
    let (y, _) = arr(dev, DType::F32, &uniform(&mut rng, 12, 0.5, 2.0), &[3, 4]);
    // Batches of two examples of that shape, for vmap.
    let (xb, _) = arr(
        dev,
        DType::F32,
        &uniform(&mut rng, 24, 0.5, 2.0),
        &[2, 3, 4],
    );
    let (yb, _) = arr(
        dev,
        DType::F32,
        &uniform(&mut rng, 24, 0.5, 2.0),
        &[3, 4, 2],
    );
    let mut fns: Vec<(String, Box<Func>)> = vec![];
    for &op in UnaryOp::ALL {
        fns.push((
            op.to_string(),
            Box::new(move |a: &[Array]| Ok(vec![wmx::unary(op, &a[0])?])),
        ));
    }
    for &op in BinaryOp::ALL {
        if op.kind() != wmx::OpKind::Bitwise {
            fns.push((
                op.to_string(),
                Box::new(move |a: &[Array]| Ok(vec![wmx::binary(op, &a[0], &a[1])?])),
            ));
        }
    }
    for &op in ReduceOp::ALL {
        fns.push((
            op.to_string(),
            Box::new(move |a: &[Array]| Ok(vec![wmx::reduce(op, &a[0], Some(&[1]), false)?])),
        ));
    }
    fns.push((
        "argmax".into(),
        Box::new(|a: &[Array]| Ok(vec![wmx::argmax(&a[0], 0, false)?])),
    ));
    fns.push((
        "argmin".into(),
        Box::new(|a: &[Array]| Ok(vec![wmx::argmin(&a[0], 1, false)?])),
    ));
    fns.push((
        "select".into(),
        Box::new(|a: &[Array]| Ok(vec![wmx::where_(&wmx::less(&a[0], &a[1])?, &a[0], &a[1])?])),
    ));
    fns.push((
        "copy".into(),
        Box::new(|a: &[Array]| {
            Ok(vec![
                wmx::contiguous(&wmx::transpose(&a[0], None)?)?,
                wmx::astype(&a[1], DType::I32)?,
            ])
        }),
    ));
    fns.push((
        "generate".into(),
        Box::new(|a: &[Array]| {
            Ok(vec![wmx::add(
                &a[0],
                &wmx::with_device(a[0].device(), || wmx::arange(0.0, 4.0, 1.0, DType::F32))?,
            )?])
        }),
    ));
    fns.push((
        "axpby".into(),
        Box::new(|a: &[Array]| Ok(vec![wmx::axpby(&a[0], &a[1], 0.5, 3.0)?])),
    ));
    fns.push((
        "views".into(),
        Box::new(|a: &[Array]| {
            let t = wmx::transpose(&a[0], Some(&[1, 0]))?;
            let b = wmx::broadcast_to(&wmx::expand_dims(&t, 0)?, &[2, 4, 3])?;
            let s = wmx::slice(&b, &[Slice::ALL, Slice::new(None, None, -3)])?;
            let r = wmx::reshape(
                &wmx::squeeze(&wmx::expand_dims(&s, -1)?, Some(&[-1]))?,
                &[-1],
            )?;
            Ok(vec![r, wmx::stop_gradient(&a[1])?])
        }),
    ));
    fns.push((
        "matmul".into(),
        Box::new(|a: &[Array]| {
            let bt = wmx::transpose(&a[1], None)?;
            Ok(vec![
                wmx::matmul(&a[0], &bt)?,
                wmx::addmm(&a[0], &a[0], &wmx::matmul(&bt, &a[1])?, 0.5, 2.0)?,
            ])
        }),
    ));
    fns.push((
        "normalize".into(),
        Box::new(|a: &[Array]| {
            Ok(vec![
                wmx::softmax(&a[0], &[-1])?,
                wmx::log_softmax(&a[1], &[0])?,
                wmx::layer_norm(
                    &a[0],
                    Some(&wmx::squeeze(&a[1].slice(&[Slice::range(0, 1)])?, None)?),
                    None,
                    1e-5,
                )?,
                wmx::rms_norm(&a[1], None, 1e-5)?,
            ])
        }),
    ));
    fns.push((
        "slice_update".into(),
        Box::new(|a: &[Array]| {
            let u = wmx::slice(&a[1], &[Slice::range(0, 2)])?;
            Ok(vec![wmx::slice_update(
                &a[0],
                &u,
                &[Slice::new(Some(2), None, -2)],
            )?])
        }),
    ));
    fns.push((
        "concatenate, gather, scatter".into(),
        Box::new(|a: &[Array]| {
            let idx = wmx::with_device(a[0].device(), || {
                wmx::astype(&wmx::arange(2.0, -1.0, -1.0, DType::F32)?, DType::I32)
            })?;
            let t = wmx::take(&a[0], &idx, Some(1))?;
            Ok(vec![
                wmx::concatenate(&[&a[0], &a[1]], 0)?,
                t.clone(),
                wmx::scatter(&a[1], &idx, &t, 1)?,
                wmx::scatter_add(&a[0], &idx, &wmx::exp(&t)?, 1)?,
            ])
        }),
    ));
    fns.push((
        "scan".into(),
        Box::new(|a: &[Array]| {
            Ok(vec![
                wmx::cumsum(&a[0], Some(1), false, true)?,
                wmx::cummax(&a[1], Some(0), true, false)?,
            ])
        }),
    ));
    fns.push((
        "random bits".into(),
        Box::new(|a: &[Array]| {
            let key = wmx::with_device(a[0].device(), || wmx::random::key(3))?;
            let u = wmx::random::uniform(&key, &[4], 0.0, 1.0, DType::F32)?;
            Ok(vec![wmx::multiply(&a[0], &u)?])
        }),
    ));
    for (name, f) in &fns {
        let what = format!("transforms of {name}");
        let outs = ok(&what, f(&[x.clone(), y.clone()]));
        let cts: Vec<Array> = outs.iter().map(|o| ok(&what, wmx::ones_like(o))).collect();
        let (_, g) = ok(&what, wmx::vjp(f.as_ref(), &[x.clone(), y.clone()], &cts));
        let (_, t) = ok(
            &what,
            wmx::jvp(f.as_ref(), &[x.clone(), y.clone()], &[x.clone(), y.clone()]),
        );
        let v = ok(
            &what,
            wmx::vmap(f.as_ref(), &[Some(0), Some(-1)], &[0])(&[xb.clone(), yb.clone()]),
        );
        ok(&what, wmx::eval(&[g, t, v].concat()));
    }
}

/// The cotangent of an array split into slices: pieces that tile an axis (joined
/// as one concatenation), pieces that overlap or leave a gap, pieces mixed with a
/// direct use of the array, and a split of an op's output (not a primal), against
/// central differences in f64.
pub fn grad_split_pieces(dev: &Device) {
    let mut rng = Rng::new(0x5b1);
    let xs = uniform(&mut rng, 4 * 9, -2.0, 2.0);
    let (x, xr) = arr(dev, DType::F32, &xs, &[4, 9]);
    let cols = |a: &Array, lo: isize, hi: isize| wmx::slice(a, &[Slice::ALL, Slice::range(lo, hi)]);
    // The columns of p, q and r for each kind: 0, 2 and 3 tile the 9 columns in
    // thirds; 1 takes [0, 2), [2, 4) of the overlapping [0, 4), [2, 6) and [7, 9)
    // (column 6 unused). Kind 2 also uses y directly; kind 3 splits y = x * x.
    for kind in 0..4usize {
        let what = format!("split cotangents, kind {kind}");
        let f = |a: &[Array]| -> Result<Vec<Array>> {
            let y = if kind == 3 { wmx::multiply(&a[0], &a[0])? } else { a[0].clone() };
            let (p, q, r) = if kind == 1 {
                let two = [Slice::ALL, Slice::range(0, 2)];
                (
                    wmx::slice(&cols(&y, 0, 4)?, &two)?,
                    wmx::slice(&cols(&y, 2, 6)?, &two)?,
                    cols(&y, 7, 9)?,
                )
            } else {
                (cols(&y, 0, 3)?, cols(&y, 3, 6)?, cols(&y, 6, 9)?)
            };
            let half = wmx::multiply(&q, &wmx::scalar_like(&q, 0.5)?)?;
            let mut t = wmx::add(&wmx::multiply(&wmx::sin(&p)?, &wmx::exp(&half)?)?, &wmx::square(&r)?)?;
            if kind == 2 {
                t = wmx::add(&t, &wmx::sum(&wmx::cos(&y)?, Some(&[1]), true)?)?;
            }
            Ok(vec![wmx::sum(&t, None, false)?])
        };
        let (p0, q0, r0, w) = if kind == 1 { (0, 2, 7, 2) } else { (0, 3, 6, 3) };
        let hf = |v: &[f64]| -> f64 {
            (0..4)
                .map(|i| {
                    let y = |j: usize| if kind == 3 { v[i * 9 + j] * v[i * 9 + j] } else { v[i * 9 + j] };
                    let mut s: f64 = (0..w)
                        .map(|j| y(p0 + j).sin() * (0.5 * y(q0 + j)).exp() + y(r0 + j).powi(2))
                        .sum();
                    if kind == 2 {
                        s += w as f64 * (0..9).map(|j| y(j).cos()).sum::<f64>();
                    }
                    s
                })
                .sum()
        };
        let g = ok(&what, wmx::grad(f, &[0])(std::slice::from_ref(&x)));
        let h = 1e-6;
        let want: Vec<f64> = (0..xr.len())
            .map(|k| {
                let (mut p, mut m) = (xr.clone(), xr.clone());
                p[k] += h;
                m[k] -= h;
                (hf(&p) - hf(&m)) / (2.0 * h)
            })
            .collect();
        close(&what, &f64s(&g[0], &what), &want, 1e-4, 1e-4);
    }
}
