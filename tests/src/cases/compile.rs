//! Compiled functions and execution modes on every backend: compiled results equal
//! the uncompiled ones (which the other cases check against references) and an
//! f64 reference; the trace cache; errors; eager mode and async_eval.

use super::{expect_err, ok};
use crate::rng::{Domain, Rng, values};
use crate::val::{Val, make_ok, read_ok, ulp};
use std::sync::Arc;
use wmx_core::{self as wmx, Array, DType, Device, Mode, Result, Slice};

type Func = Arc<dyn Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync>;
type BinaryFn = fn(&Array, &Array) -> Result<Array>;
type HostFn = fn(f64, f64) -> f64;

/// Compiled and uncompiled results of `f` on `args`: equal bits, except floats
/// may differ by `ulps` units in the last place (a GPU compiler may contract a
/// multiply and an add inside one fused kernel).
fn check_same(what: &str, f: &Func, args: &[Array], ulps: f64) {
    check_same_at(what, f, args, ulps, 0.0)
}

/// As [`check_same`], the tolerance at the magnitude `scale` at least (values
/// that cancel keep the absolute error of their larger operands).
fn check_same_at(what: &str, f: &Func, args: &[Array], ulps: f64, scale: f64) {
    let g = f.clone();
    let compiled = wmx::compile(move |a: &[Array]| g(a));
    // Op by op: evaluated in lazy mode (the default would fuse it too).
    let plain = ok(
        &format!("{what}: uncompiled"),
        wmx::with_mode(Mode::Lazy, || {
            let outs = f(args)?;
            wmx::eval(&outs)?;
            Ok(outs)
        }),
    );
    let fused = ok(&format!("{what}: compiled"), compiled.call(args));
    assert_eq!(plain.len(), fused.len(), "{what}: number of outputs");
    for (k, (p, c)) in plain.iter().zip(&fused).enumerate() {
        assert_eq!(p.shape(), c.shape(), "{what}: output {k} shape");
        assert_eq!(p.dtype(), c.dtype(), "{what}: output {k} dtype");
        let (pv, cv) = (read_ok(p, what), read_ok(c, what));
        for (i, (a, b)) in pv.iter().zip(&cv).enumerate() {
            let fine = match (a, b) {
                (Val::F(x), Val::F(y)) => {
                    a.same(*b)
                        || (x.is_finite()
                            && y.is_finite()
                            && (x - y).abs()
                                <= ulps * ulp(p.dtype(), x.abs().max(y.abs()).max(scale)))
                }
                _ => a.same(*b),
            };
            assert!(
                fine,
                "{what}: output {k} element {i}: compiled {b:?}, uncompiled {a:?}"
            );
        }
    }
    // A second call replays the trace: same results, no new trace.
    let again = ok(&format!("{what}: replay"), compiled.call(args));
    for (k, (c, r)) in fused.iter().zip(&again).enumerate() {
        let (cv, rv) = (read_ok(c, what), read_ok(r, what));
        if let Some(i) = cv.iter().zip(&rv).position(|(a, b)| !a.same(*b)) {
            panic!(
                "{what}: output {k} differs between the first call and the replay at element {i} \
                 of {}: {:?} then {:?}",
                cv.len(),
                cv[i],
                rv[i]
            );
        }
    }
    assert_eq!(compiled.traces(), 1, "{what}: the replay traced again");
}

fn arr(dev: &Device, rng: &mut Rng, dt: DType, shape: &[usize], lo: f64, hi: f64) -> Array {
    let n = shape.iter().product();
    make_ok(dev, dt, &values(rng, dt, n, Domain::Range(lo, hi)), shape)
}

/// GELU written out with scalar constants, the 10-op chain.
fn gelu(x: &Array) -> Result<Array> {
    let x3 = wmx::multiply(&wmx::multiply(x, x)?, x)?;
    let inner = &(x + &(&x3 * 0.044715)) * 0.797_884_560_802_865_4;
    Ok(&(x * 0.5) * &(&wmx::tanh(&inner)? + 1.0))
}

/// Compiled elementwise graphs equal uncompiled ones: float chains in f32, f16
/// and bf16, integers, u8 wrapping, bool logic, casts, broadcasts, transposed and
/// sliced arguments, shared nodes, outputs in the middle of the graph, views of
/// intermediates, a reduction consumer; and GELU against an f64 reference.
pub fn compile_matches_uncompiled(dev: &Device) {
    let mut rng = Rng::new(1501);
    let g: Func = Arc::new(|a: &[Array]| Ok(vec![gelu(&a[0])?]));
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        if !super::supported(dev, dt) {
            continue;
        }
        // 20001: the fused kernel's four-words-per-iteration loop and its tail (f16 too).
        for n in [1usize, 7, 1000, 4099, 20001] {
            let x = arr(dev, &mut rng, dt, &[n], -4.0, 4.0);
            check_same_at(
                &format!("gelu {dt} [{n}]"),
                &g,
                std::slice::from_ref(&x),
                4.0,
                4.0,
            );
        }
    }
    // GELU against f64 on the host (f32 tolerance: a few ulp through 10 ops).
    let xs: Vec<f32> = (0..777).map(|i| (i as f32 - 388.0) / 97.0).collect();
    let x = ok("x", Array::from_slice_on(&xs, &[777], dev));
    let y = ok(
        "gelu",
        wmx::compile(|a: &[Array]| Ok(vec![gelu(&a[0])?])).call1(&x),
    );
    let got = ok("read", y.to_vec::<f32>());
    for (v, gv) in xs.iter().zip(&got) {
        let v = *v as f64;
        let want = 0.5 * v * (1.0 + (0.7978845608028654 * (v + 0.044715 * v * v * v)).tanh());
        assert!(
            (*gv as f64 - want).abs() <= 2e-6 * (1.0 + want.abs()),
            "compiled gelu({v}) = {gv}, f64 {want}"
        );
    }

    // Two float inputs (one broadcast), an int input; outputs in the middle.
    let mixed: Func = Arc::new(|a: &[Array]| {
        let (x, b, c) = (&a[0], &a[1], &a[2]);
        let xb = wmx::multiply(x, b)?;
        let e = wmx::exp(&wmx::negative(&wmx::abs(x)?)?)?;
        let sel = wmx::where_(&wmx::greater(x, b)?, &xb, &e)?;
        let ints = wmx::add(
            &(c * 3.0),
            &wmx::astype(&wmx::greater(c, &(c * 0.0))?, DType::I32)?,
        )?;
        let ss = wmx::sum(&wmx::square(&wmx::subtract(x, b)?)?, Some(&[1]), false)?;
        Ok(vec![sel, xb, ints, ss])
    });
    let x = arr(dev, &mut rng, DType::F32, &[9, 70], -3.0, 3.0);
    let b = arr(dev, &mut rng, DType::F32, &[70], -3.0, 3.0);
    let c = arr(dev, &mut rng, DType::I32, &[9, 70], -1000.0, 1000.0);
    check_same_at("mixed graph", &mixed, &[x.clone(), b.clone(), c], 2.0, 9.0);

    // Views: a transposed and a sliced argument, and a view of an intermediate.
    let views: Func = Arc::new(|a: &[Array]| {
        let t = wmx::transpose(&a[0], None)?;
        let s = a[1].slice(&[Slice::new(None, None, 2), Slice::ALL])?;
        let u = wmx::sin(&wmx::add(&t, &s)?)?;
        let r = wmx::reshape(&u, &[-1])?;
        Ok(vec![wmx::multiply(&r, &wmx::cos(&r)?)?])
    });
    let a0 = arr(dev, &mut rng, DType::F32, &[33, 17], -2.0, 2.0);
    let a1 = arr(dev, &mut rng, DType::F32, &[34, 33], -2.0, 2.0);
    check_same_at("views", &views, &[a0, a1], 2.0, 4.0);

    // u8 arithmetic wraps at every step; bool logic; casts through f16 round.
    let small: Func = Arc::new(|a: &[Array]| {
        let u = &a[0];
        let w = wmx::multiply(&wmx::add(u, u)?, &(u * 3.0))?;
        let m = wmx::logical_and(
            &wmx::greater(&w, &(u * 0.0))?,
            &wmx::less(u, &(&(u * 0.0) + 100.0))?,
        )?;
        let h = wmx::astype(
            &wmx::astype(&wmx::sqrt(&wmx::astype(u, DType::F32)?)?, DType::F16)?,
            DType::F32,
        )?;
        Ok(vec![w, m, h])
    });
    if super::supported(dev, DType::F16) {
        let u = arr(dev, &mut rng, DType::U8, &[4097], 0.0, 255.0);
        check_same("u8, bool, f16 casts", &small, &[u], 0.0);
    }

    // The same subexpression twice (merged), axpby, a scalar-only constant chain.
    let shared: Func = Arc::new(|a: &[Array]| {
        let (x, y) = (&a[0], &a[1]);
        let e1 = wmx::exp(x)?;
        let e2 = wmx::exp(x)?;
        let z = wmx::axpby(&wmx::add(&e1, &e2)?, y, 0.25, -1.5)?;
        Ok(vec![wmx::maximum(
            &z,
            &(&wmx::full(&[], 2.0, DType::F32)? * 0.5),
        )?])
    });
    let x = arr(dev, &mut rng, DType::F32, &[3, 5, 7], -2.0, 2.0);
    let y = arr(dev, &mut rng, DType::F32, &[3, 5, 7], -2.0, 2.0);
    check_same_at("shared and axpby", &shared, &[x, y], 2.0, 16.0);

    // Reductions of elementwise chains (fused into the reduction's first pass):
    // rows, columns, all, several ops, f16 values summed, a broadcast operand.
    let reds: Func = Arc::new(|a: &[Array]| {
        let (x, b) = (&a[0], &a[1]);
        let d = wmx::square(&wmx::subtract(x, b)?)?;
        Ok(vec![
            wmx::sum(&d, Some(&[1]), false)?,
            wmx::max(&wmx::tanh(&wmx::multiply(x, b)?)?, Some(&[0]), false)?,
            wmx::any(
                &wmx::greater(&wmx::abs(x)?, &(&wmx::abs(b)? * 1.9))?,
                None,
                false,
            )?,
            wmx::mean(&wmx::exp(&wmx::negative(&wmx::abs(x)?)?)?, None, false)?,
            wmx::prod(
                &wmx::add(&(x * 0.01), &(&wmx::ones_like(x)? * 1.0))?,
                Some(&[0, 1]),
                true,
            )?,
        ])
    });
    for (dt, n) in [(DType::F32, 70), (DType::F32, 5000), (DType::F16, 300)] {
        if !super::supported(dev, dt) {
            continue;
        }
        let x = arr(dev, &mut rng, dt, &[9, n], -2.0, 2.0);
        let b = arr(dev, &mut rng, dt, &[n], -2.0, 2.0);
        check_same_at(
            &format!("reductions {dt} [9, {n}]"),
            &reds,
            &[x, b],
            4.0,
            4.0 * n as f64,
        );
    }

    // Empty arguments and a scalar.
    let e = arr(dev, &mut rng, DType::F32, &[0, 3], -1.0, 1.0);
    check_same("empty", &g, &[e], 0.0);
    let s = arr(dev, &mut rng, DType::F32, &[], -1.0, 1.0);
    check_same_at("scalar", &g, &[s], 4.0, 1.0);
}

/// The trace cache: a hit per signature, a new trace per shape or dtype or
/// strides, views at other offsets replayed shifted, the bound evicting.
pub fn compile_cache(dev: &Device) {
    let mut rng = Rng::new(1502);
    let f = wmx::compile(|a: &[Array]| Ok(vec![wmx::tanh(&(&a[0] * 2.0))?])).cache_limit(3);
    let x = arr(dev, &mut rng, DType::F32, &[8, 8], -1.0, 1.0);
    let want = |x: &Array| read_ok(&ok("tanh", wmx::tanh(&(x * 2.0))), "want");
    let same = |what: &str, got: &Array, want: Vec<Val>| {
        let g = read_ok(got, what);
        assert!(
            g.iter().zip(&want).all(|(a, b)| a.same(*b)) && g.len() == want.len(),
            "{what}: compiled results differ"
        );
    };
    for _ in 0..3 {
        same("same signature", &ok("call", f.call1(&x)), want(&x));
    }
    assert_eq!(f.traces(), 1, "three calls with one signature trace once");
    // Rows of a bigger array: same shape and strides at other offsets.
    let big = arr(dev, &mut rng, DType::F32, &[5, 8, 8], -1.0, 1.0);
    for i in 0..5 {
        let row = ok(
            "row",
            big.slice(&[
                Slice::range(i as isize, i as isize + 1),
                Slice::ALL,
                Slice::ALL,
            ]),
        );
        let row = ok("squeeze", wmx::reshape(&row, &[8, 8]));
        same(&format!("row {i}"), &ok("call", f.call1(&row)), want(&row));
    }
    assert_eq!(f.traces(), 1, "views at other offsets replay the trace");
    let xt = ok("t", x.t());
    same("transposed", &ok("call", f.call1(&xt)), want(&xt));
    assert_eq!(f.traces(), 2, "other strides trace again");
    let y = arr(dev, &mut rng, DType::F32, &[3], -1.0, 1.0);
    same("new shape", &ok("call", f.call1(&y)), want(&y));
    assert_eq!(f.traces(), 3);
    if super::supported(dev, DType::BF16) {
        let h = arr(dev, &mut rng, DType::BF16, &[3], -1.0, 1.0);
        same("new dtype", &ok("call", f.call1(&h)), want(&h));
        assert_eq!(f.traces(), 4);
    }
    for n in 10..40 {
        let z = arr(dev, &mut rng, DType::F32, &[n], -1.0, 1.0);
        same("many shapes", &ok("call", f.call1(&z)), want(&z));
    }
    assert!(f.cache_len() <= 3, "cache grew to {}", f.cache_len());
    // The most recent signature is still cached; an evicted one traces again.
    let t = f.traces();
    let z = arr(dev, &mut rng, DType::F32, &[39], -1.0, 1.0);
    ok("call", f.call1(&z));
    assert_eq!(f.traces(), t, "the last signature was evicted");
    ok("call", f.call1(&x));
    assert_eq!(
        f.traces(),
        t + 1,
        "an evicted signature did not trace again"
    );

    // Shapeless: an elementwise function of one-shape arguments traces once for
    // every shape; one with a reduction still traces per shape.
    let g = wmx::compile(|a: &[Array]| Ok(vec![gelu(&a[0])?, wmx::maximum(&a[0], &a[1])?]))
        .shapeless(true);
    for s in [
        vec![8usize],
        vec![100],
        vec![3, 7],
        vec![],
        vec![0, 4],
        vec![2, 3, 5],
    ] {
        let a = arr(dev, &mut rng, DType::F32, &s, -3.0, 3.0);
        let b = arr(dev, &mut rng, DType::F32, &s, -3.0, 3.0);
        let got = ok("shapeless", g.call(&[a.clone(), b.clone()]));
        assert_eq!(got[0].shape(), &s[..]);
        let want = [ok("gelu", gelu(&a)), ok("max", wmx::maximum(&a, &b))];
        for (k, (gv, wv)) in got.iter().zip(&want).enumerate() {
            let (gv, wv) = (read_ok(gv, "g"), read_ok(wv, "w"));
            assert!(
                gv.len() == wv.len()
                    && gv
                        .iter()
                        .zip(&wv)
                        .all(|(p, q)| (p.f() - q.f()).abs() <= 4.0 * ulp(DType::F32, 4.0)),
                "shapeless output {k} at {s:?}"
            );
        }
    }
    assert_eq!(g.traces(), 1, "shapeless elementwise traced again");
    if super::supported(dev, DType::BF16) {
        let h = arr(dev, &mut rng, DType::BF16, &[5], -1.0, 1.0);
        ok("bf16", g.call(&[h.clone(), h]));
        assert_eq!(g.traces(), 2, "a new dtype traces");
    }
    let bc = wmx::compile(|a: &[Array]| Ok(vec![wmx::add(&a[0], &wmx::sum(&a[0], None, false)?)?]))
        .shapeless(true);
    for n in [4usize, 5, 6] {
        let a = arr(dev, &mut rng, DType::F32, &[n], -1.0, 1.0);
        let got = read_ok(&ok("call", bc.call1(&a)), "bc");
        let want = read_ok(
            &ok("want", wmx::add(&a, &ok("sum", wmx::sum(&a, None, false)))),
            "w",
        );
        assert!(
            got.iter()
                .zip(&want)
                .all(|(p, q)| (p.f() - q.f()).abs() <= 1e-5)
        );
    }
    assert_eq!(bc.traces(), 3, "a reduction is not shapeless");
}

/// What compile reports and refuses: fused kernels on a backend that fuses (their
/// WGSL), none on the CPU; a function that reads data while traced, arguments on
/// two devices, and the function's own errors are `Err`s.
pub fn compile_report_and_errors(dev: &Device) {
    let mut rng = Rng::new(1503);
    let x = arr(dev, &mut rng, DType::F32, &[64], -1.0, 1.0);
    let f = wmx::compile(|a: &[Array]| Ok(vec![gelu(&a[0])?]));
    let r = ok("report", f.report(std::slice::from_ref(&x)));
    assert!(r.traced_ops >= 9, "gelu traced {} ops", r.traced_ops);
    if dev.backend().fusion_limit().is_some() {
        assert_eq!(r.kernels.len(), 1, "gelu fuses into one kernel: {r:?}");
        assert_eq!(r.nodes, 1, "one node per call: {r:?}");
        let src = r.kernels[0].source.as_deref().expect("WGSL source");
        assert!(
            src.contains("fn fused") && src.contains("tanh_f32"),
            "{src}"
        );
        assert!(r.kernels[0].kernel.steps.len() >= 9);
    } else {
        assert!(r.kernels.is_empty(), "the CPU replays plain ops");
        assert!(r.nodes <= r.traced_ops);
    }
    // A reduction of an elementwise chain: one kernel on a backend that fuses.
    let gs = wmx::compile(|a: &[Array]| Ok(vec![wmx::sum(&gelu(&a[0])?, None, false)?]));
    let r = ok("report", gs.report(std::slice::from_ref(&x)));
    if dev.backend().fusion_limit().is_some() {
        assert_eq!(r.nodes, 1, "sum(gelu) is one node: {r:?}");
        assert!(r.kernels[0].kernel.reduce.is_some(), "{r:?}");
        let src = r.kernels[0].source.as_deref().expect("WGSL source");
        assert!(
            src.contains("fn value") && src.contains("Reduced (sum"),
            "{src}"
        );
    }
    // GELU and its vjp in one function: the backward recomputes the forward's
    // intermediates from x (two kernels, each storing one value, the backward
    // reading x and the cotangent) instead of the forward storing four of them.
    let dy = arr(dev, &mut rng, DType::F32, &[64], -1.0, 1.0);
    let both = |a: &[Array]| -> Result<Vec<Array>> {
        let (y, g) = wmx::vjp(|b: &[Array]| Ok(vec![gelu(&b[0])?]), &a[..1], &a[1..])?;
        Ok(vec![y[0].clone(), g[0].clone()])
    };
    let fb = wmx::compile(both);
    let args = [x.clone(), dy.clone()];
    let r = ok("report", fb.report(&args));
    if dev.backend().fusion_limit().is_some() {
        // (inputs, values stored) of each kernel.
        let io: Vec<(usize, usize)> = (r.kernels.iter())
            .map(|k| (k.kernel.inputs.len(), k.kernel.outputs.len().max(1)))
            .collect();
        assert_eq!(io, [(1, 1), (2, 1)], "gelu and its vjp's kernels");
    }
    let got = ok("gelu and vjp", fb.call(&args));
    let want = ok("gelu and vjp, uncompiled", both(&args));
    for (g, w) in got.iter().zip(&want) {
        let (gv, wv) = (read_ok(g, "compiled"), read_ok(w, "uncompiled"));
        assert!(
            gv.iter()
                .zip(&wv)
                .all(|(a, b)| (a.f() - b.f()).abs() <= 4.0 * ulp(DType::F32, b.f().abs()) + 1e-7),
            "compiled gelu and vjp differ"
        );
    }
    // f64 is never fused (the fused kernels compute in 32 bits): it runs op by op,
    // reductions of f64 chains too.
    if super::supported(dev, DType::F64) {
        let x64 = arr(dev, &mut rng, DType::F64, &[64], -1.0, 1.0);
        for (name, c) in [("gelu", &f), ("sum(gelu)", &gs)] {
            let r = ok("report f64", c.report(std::slice::from_ref(&x64)));
            assert!(r.kernels.is_empty(), "{name} in f64 was fused: {r:?}");
        }
    }
    let reads = wmx::compile(|a: &[Array]| {
        let s = wmx::sum(&a[0], None, false)?.item::<f32>()?;
        Ok(vec![&a[0] * s as f64])
    });
    expect_err(
        "item inside compile",
        reads.call(std::slice::from_ref(&x)),
        &["compile", "uncompiled"],
    );
    let fails =
        wmx::compile(|a: &[Array]| Ok(vec![wmx::add(&a[0], &wmx::ones(&[3], DType::F32)?)?]));
    expect_err(
        "shape error inside",
        fails.call(std::slice::from_ref(&x)),
        &["[64]", "[3]"],
    );
    if dev != &Device::cpu() {
        let c = ok("cpu x", Array::from_slice(&[1.0f32], &[1]));
        let c = ok("cpu", c.to_device(&Device::cpu()));
        expect_err("two devices", f.call(&[x.clone(), c]), &["one device"]);
    }
    // Transforms see through compiled functions (and compile traces transforms).
    let g = ok(
        "grad of compiled",
        wmx::grad(
            |a: &[Array]| Ok(vec![wmx::sum(&f.call1(&a[0])?, None, false)?]),
            &[0],
        )(std::slice::from_ref(&x)),
    );
    let want = ok(
        "grad",
        wmx::grad(
            |a: &[Array]| Ok(vec![wmx::sum(&gelu(&a[0])?, None, false)?]),
            &[0],
        )(std::slice::from_ref(&x)),
    );
    let (gv, wv) = (read_ok(&g[0], "g"), read_ok(&want[0], "want"));
    assert!(
        gv.iter().zip(&wv).all(|(a, b)| a.same(*b)),
        "grad through compile"
    );
    let cg = wmx::compile(|a: &[Array]| {
        wmx::grad(
            |b: &[Array]| Ok(vec![wmx::sum(&gelu(&b[0])?, None, false)?]),
            &[0],
        )(a)
    });
    let cgv = read_ok(&ok("compiled grad", cg.call1(&x)), "cg");
    assert!(
        cgv.iter()
            .zip(&wv)
            .all(|(a, b)| (a.f() - b.f()).abs() <= 4.0 * ulp(DType::F32, b.f().abs()) + 1e-7),
        "compiled grad differs"
    );
}

/// Eager mode returns an error from the op that caused it (lazy: from eval);
/// async_eval then a read gives eval's bytes; an eager compiled function runs op
/// by op.
pub fn modes_and_async_eval(dev: &Device) {
    let mut rng = Rng::new(1504);
    let x = arr(dev, &mut rng, DType::F32, &[1000], -1.0, 1.0);
    let lazy = wmx::with_mode(Mode::Lazy, || {
        let y = wmx::exp(&x)?;
        Ok::<_, wmx::Error>(y.is_evaluated())
    });
    assert!(!ok("lazy", lazy), "lazy mode computed an op");
    let eager = wmx::with_mode(Mode::Eager, || {
        let y = wmx::exp(&x)?;
        Ok::<_, wmx::Error>(y.is_evaluated())
    });
    assert!(ok("eager", eager), "eager mode left an op pending");
    // A custom function's outputs are computed at once too.
    let cf = wmx::CustomFunction::new(|a: &[Array]| Ok(vec![wmx::exp(&a[0])?]))
        .vjp(|_, outs, ct| Ok(vec![Some(wmx::multiply(&outs[0], &ct[0])?)]));
    let y = ok(
        "eager custom function",
        wmx::with_mode(Mode::Eager, || cf.call(std::slice::from_ref(&x))),
    );
    assert!(
        y[0].is_evaluated(),
        "eager mode left a custom function pending"
    );
    let y = ok("lazy custom function", cf.call(std::slice::from_ref(&x)));
    assert!(!y[0].is_evaluated(), "lazy mode computed a custom function");
    // A primitive that fails when computed: eager reports it at the op.
    let bad = Arc::new(super::custom::Failing);
    let r = wmx::with_mode(Mode::Eager, || {
        wmx::custom(bad.clone(), std::slice::from_ref(&x), &[1000], DType::F32)
    });
    expect_err("eager custom failure", r, &["failing primitive"]);
    let r = wmx::with_mode(Mode::Lazy, || {
        wmx::custom(bad.clone(), std::slice::from_ref(&x), &[1000], DType::F32)
    });
    let y = ok("lazy custom is made", r);
    expect_err(
        "lazy custom failure at eval",
        y.eval(),
        &["failing primitive"],
    );
    // async_eval, then read: the same bytes as eval.
    let a = ok("a", wmx::sin(&(&x * 3.0)));
    let b = ok("b", wmx::sin(&(&x * 3.0)));
    ok("async_eval", wmx::async_eval(std::slice::from_ref(&a)));
    ok("eval", b.eval());
    ok("synchronize", dev.synchronize());
    assert_eq!(ok("a", a.to_bytes()), ok("b", b.to_bytes()));
    ok("synchronize default", wmx::synchronize());
    // An eager compiled function runs uncompiled.
    let f = wmx::compile(|a: &[Array]| Ok(vec![wmx::exp(&a[0])?])).mode(Mode::Eager);
    let y = ok("eager compiled", f.call1(&x));
    assert!(y.is_evaluated() && f.traces() == 0);
    assert!(Mode::parse("fast").is_err() && Mode::parse(" Eager ").ok() == Some(Mode::Eager));
}

/// Compiled mode (the default): `x - x`, `x / x`, `floor_divide(x, x)` and
/// `remainder(x, x)` of one value inside a fused kernel keep IEEE's special values
/// (NaN for 0 / 0, inf - inf, inf / inf), which a compiler folding `x / x` to 1
/// would lose (NVIDIA's did); the same values as lazy mode's library kernels.
pub fn fused_equal_operands_keep_special_values(dev: &Device) {
    let xs = [0.0f32, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1.5, -3.0];
    for dt in [DType::F32, DType::F16] {
        if dev.check_dtype(dt).is_err() {
            continue;
        }
        let x = ok("x", Array::from_slice_on(&xs, &[xs.len()], dev)).astype(dt);
        let x = ok("astype", x);
        ok("x", x.eval());
        let ops: [(&str, BinaryFn, HostFn); 4] = [
            ("subtract", wmx::subtract, |a, b| a - b),
            ("divide", wmx::divide, |a, b| a / b),
            ("floor_divide", wmx::floor_divide, |a, b| (a / b).floor()),
            ("remainder", wmx::remainder, |a, b| {
                if a.is_finite() && b != 0.0 { a - b * (a / b).floor() } else { f64::NAN }
            }),
        ];
        for (name, op, want) in ops {
            let what = format!("{name}(-x, -x) {dt}");
            // `-x` in the kernel: both operands are one value of the fused kernel.
            let build = || -> Result<Array> {
                let y = wmx::negative(&x)?;
                op(&y, &y)
            };
            let before = wmx::fused_at_eval();
            let got = ok(&what, wmx::with_mode(Mode::Compiled, build));
            ok(&what, got.eval());
            if dev.backend().fusion_limit().is_some() {
                assert!(wmx::fused_at_eval() > before, "{what}: nothing fused");
            }
            let lazy = ok(&what, wmx::with_mode(Mode::Lazy, || {
                let r = build()?;
                r.eval()?;
                Ok(r)
            }));
            let (g, l) = (read_ok(&got, &what), read_ok(&lazy, &what));
            for (i, v) in xs.iter().enumerate() {
                let w = want(-f64::from(*v), -f64::from(*v));
                let fine = |a: &Val| (a.f().is_nan() && w.is_nan()) || a.f() == w;
                assert!(
                    fine(&g[i]) && fine(&l[i]),
                    "{what} at {v}: compiled mode {:?}, lazy {:?}, want {w}",
                    g[i],
                    l[i]
                );
            }
        }
    }
}

/// Compiled mode: eval fuses the pending elementwise chains; values held by the
/// caller, or needed by pending nodes not evaluated yet, are still computed.
pub fn compiled_mode_fuses_eval(dev: &Device) {
    let mut rng = Rng::new(1505);
    let x = arr(dev, &mut rng, DType::F32, &[3, 1000], -2.0, 2.0);
    let y = arr(dev, &mut rng, DType::F32, &[1000], -2.0, 2.0);
    let build = || -> Result<(Array, Array, Array, Array)> {
        let h = wmx::multiply(&x, &y)?; // held
        let z = wmx::add(&gelu(&h)?, &y)?;
        let s = wmx::add(&x, &y)?; // consumed by w, which is not evaluated with z2
        let z2 = wmx::sin(&wmx::exp(&s)?)?;
        let w = wmx::cos(&s)?;
        let _ = &z2;
        Ok((h, z, w, z2))
    };
    let (h0, z0, w0, z20) = ok("lazy", wmx::with_mode(Mode::Lazy, build));
    ok(
        "lazy eval",
        wmx::with_mode(Mode::Lazy, || wmx::eval(&[z0.clone(), z20.clone()])),
    );
    let before = wmx::fused_at_eval();
    let (h1, z1, w1, z21) = ok("compiled", wmx::with_mode(Mode::Compiled, build));
    ok(
        "compiled eval",
        wmx::with_mode(Mode::Compiled, || wmx::eval(&[z1.clone(), z21.clone()])),
    );
    if dev.backend().fusion_limit().is_some() {
        assert!(wmx::fused_at_eval() > before, "compiled mode fused nothing");
    }
    for (what, a, b) in [
        ("h", &h0, &h1),
        ("z", &z0, &z1),
        ("w", &w0, &w1),
        ("z2", &z20, &z21),
    ] {
        let (av, bv) = (read_ok(a, what), read_ok(b, what));
        assert!(
            av.iter()
                .zip(&bv)
                .all(|(p, q)| (p.f() - q.f()).abs() <= 4.0 * ulp(DType::F32, p.f().abs().max(8.0))),
            "compiled mode {what} differs from lazy"
        );
    }

    // A compiled function's replay was planned when it was traced; eval still
    // fuses the ops a caller adds after it.
    let f = wmx::compile(|a: &[Array]| Ok(vec![wmx::exp(&wmx::multiply(&a[0], &a[1])?)?]));
    let call = || -> Result<Array> {
        let r = f.call(&[x.clone(), y.clone()])?.remove(0);
        wmx::sin(&wmx::add(&r, &y)?)
    };
    let plain = ok("lazy after compiled", wmx::with_mode(Mode::Lazy, call));
    ok("lazy eval", plain.eval());
    let before = wmx::fused_at_eval();
    let fused = ok(
        "compiled after compiled",
        wmx::with_mode(Mode::Compiled, || {
            let z = call()?;
            z.eval()?;
            Ok(z)
        }),
    );
    if dev.backend().fusion_limit().is_some() {
        assert!(
            wmx::fused_at_eval() > before,
            "ops after a compiled function were not fused"
        );
    }
    let (av, bv) = (read_ok(&plain, "plain"), read_ok(&fused, "fused"));
    assert!(
        av.iter()
            .zip(&bv)
            .all(|(p, q)| (p.f() - q.f()).abs() <= 4.0 * ulp(DType::F32, p.f().abs().max(8.0))),
        "ops after a compiled function differ from lazy"
    );
}

/// An optimizer-like update whose outputs feed each other (new moments, and the
/// parameter computed from them): on a backend that fuses, one kernel stores all
/// three (`FusedKernel::outputs`) and the outputs are views of its output; values
/// as uncompiled, in either order of outputs, on odd, transposed and broadcast
/// arguments; outputs of another dtype, or feeding a reduction, are not stored
/// beside the root.
pub fn compile_stores_several_outputs(dev: &Device) {
    let mut rng = Rng::new(1506);
    let update = |a: &[Array], order: u8| -> Result<Vec<Array>> {
        let (p, g, m, v) = (&a[0], &a[1], &a[2], &a[3]);
        let m2 = &(m * 0.9) + &(g * 0.1);
        let v2 = &(v * 0.999) + &(&(g * g) * 0.001);
        let den = &wmx::sqrt(&(&v2 * 1.5))? + 1e-8;
        let p2 = &(p * 0.99) - &(&wmx::divide(&m2, &den)? * 0.01);
        Ok(match order {
            0 => vec![p2, m2, v2],
            _ => vec![v2, p2, m2],
        })
    };
    let fuses = dev.backend().fusion_limit().is_some();
    for (shape, order, transposed) in [
        (vec![37, 5], 0, false),
        (vec![1000], 1, false),
        (vec![6, 64], 0, true),
    ] {
        let args: Vec<Array> = (0..4)
            .map(|i| {
                let lo = if i == 3 { 0.0 } else { -1.0 };
                let x = arr(dev, &mut rng, DType::F32, &shape, lo, 1.0);
                if transposed && i == 1 {
                    // The gradient read through a transposed view.
                    let t = arr(dev, &mut rng, DType::F32, &[shape[1], shape[0]], -1.0, 1.0);
                    ok("transpose", wmx::transpose(&t, None))
                } else {
                    x
                }
            })
            .collect();
        let f: Func = Arc::new(move |a: &[Array]| update(a, order));
        check_same_at(&format!("update {shape:?}"), &f, &args, 4.0, 1.0);
        let c = wmx::compile(move |a: &[Array]| update(a, order));
        let r = ok("report", c.report(&args));
        if fuses {
            assert_eq!(r.nodes, 1, "one kernel for the update: {r:?}");
            assert_eq!(r.kernels[0].kernel.outputs.len(), 3, "{r:?}");
        }
    }
    // 16-bit updates: stored in whole words of each value, so one kernel where a
    // value's elements fill whole words (an even count) and one kernel per output
    // where they do not; a shapeless trace of an even count replayed on an odd one
    // stores each value by a kernel of its own.
    for d in [DType::F16, DType::BF16] {
        if !super::supported(dev, d) {
            continue;
        }
        for (shape, order, want) in [(vec![6, 64], 0, 1), (vec![37, 5], 1, 3)] {
            let args: Vec<Array> = (0..4)
                .map(|i| arr(dev, &mut rng, d, &shape, if i == 3 { 0.0 } else { -1.0 }, 1.0))
                .collect();
            let f: Func = Arc::new(move |a: &[Array]| update(a, order));
            check_same_at(&format!("{d} update {shape:?}"), &f, &args, 1.0, 1.0);
            let c = wmx::compile(move |a: &[Array]| update(a, order));
            let r = ok("report", c.report(&args));
            if fuses {
                let stores: Vec<usize> = (r.kernels.iter())
                    .map(|k| k.kernel.outputs.len().max(1))
                    .collect();
                assert_eq!(r.nodes, want, "{d} update {shape:?}: {r:?}");
                assert_eq!(stores.iter().sum::<usize>(), 3, "{d} {shape:?}: {r:?}");
            }
        }
        let sl = wmx::compile(move |a: &[Array]| update(a, 0)).shapeless(true);
        for shape in [[2usize, 4], [5, 7], [1, 1]] {
            let a: Vec<Array> = (0..4)
                .map(|i| arr(dev, &mut rng, d, &shape, if i == 3 { 0.0 } else { -1.0 }, 1.0))
                .collect();
            let (got, want) = (ok("shapeless", sl.call(&a)), ok("plain", update(&a, 0)));
            for (x, y) in got.iter().zip(&want) {
                let (xv, yv) = (read_ok(x, "shapeless"), read_ok(y, "shapeless"));
                assert_eq!(x.shape(), y.shape(), "shapeless {d} update {shape:?}");
                for (a, b) in xv.iter().zip(&yv) {
                    assert!(
                        (a.f() - b.f()).abs() <= ulp(d, b.f().abs().max(1.0)),
                        "shapeless {d} update {shape:?}: {a:?} vs {b:?}"
                    );
                }
            }
        }
        assert_eq!(sl.traces(), 1, "a shapeless {d} update traces once");
    }
    // A broadcast scalar argument (a learning rate) and a moment in f16: the f16
    // output is its own kernel, the others still one.
    let p = arr(dev, &mut rng, DType::F32, &[9, 7], -1.0, 1.0);
    let g = arr(dev, &mut rng, DType::F32, &[9, 7], -1.0, 1.0);
    let lr = arr(dev, &mut rng, DType::F32, &[], 0.01, 0.02);
    let mixed: Func = Arc::new(|a: &[Array]| {
        let (p, g, lr) = (&a[0], &a[1], &a[2]);
        let m = &(g * 0.1) + &(p * 0.5);
        let half = wmx::astype(&m, DType::F16)?;
        let p2 = p - &(&m * lr);
        Ok(vec![p2, m, half])
    });
    check_same_at("mixed dtypes", &mixed, &[p, g, lr], 4.0, 1.0);
    // An output that also feeds a reduction stays a kernel of its own.
    let x = arr(dev, &mut rng, DType::F32, &[50], -1.0, 1.0);
    let red: Func = Arc::new(|a: &[Array]| {
        let e = wmx::exp(&a[0])?;
        Ok(vec![e.clone(), wmx::sum(&(&e * 2.0), None, false)?])
    });
    check_same_at("output and reduction", &red, &[x], 4.0, 1.0);
    // An intermediate a later op also reads (as a backward pass reads its forward's
    // values): stored by the chain's kernel, the matmul reads the view.
    let x = arr(dev, &mut rng, DType::F32, &[33, 16], -1.0, 1.0);
    let w = arr(dev, &mut rng, DType::F32, &[16, 5], -1.0, 1.0);
    let saved: Func = Arc::new(|a: &[Array]| {
        let e = wmx::exp(&a[0])?;
        let y = &(&e * 2.0) + &a[0];
        let z = wmx::matmul(&e, &a[1])?;
        Ok(vec![y, z])
    });
    check_same_at(
        "a saved intermediate",
        &saved,
        &[x.clone(), w.clone()],
        4.0,
        1.0,
    );
    // A stored value a later op reads through a broadcast view (the view must
    // start at the value's place in the kernel's output, not at the root's).
    let bx = arr(dev, &mut rng, DType::F32, &[4], -1.0, 1.0);
    let by = arr(dev, &mut rng, DType::F32, &[4], -1.0, 1.0);
    let bw = arr(dev, &mut rng, DType::F32, &[3, 4], -1.0, 1.0);
    let through_view: Func = Arc::new(|a: &[Array]| {
        let t = &a[0] * 2.0;
        let u = wmx::tanh(&(&t + &a[1]))?;
        let z = wmx::sin(&(&a[2] + &t))?;
        Ok(vec![u, z])
    });
    check_same_at(
        "a stored value through a view",
        &through_view,
        &[bx, by, bw],
        4.0,
        1.0,
    );
    // Transforms of a compiled function whose kernel stores several outputs: the
    // gradient and the vmap equal the uncompiled function's.
    let args: Vec<Array> = (0..4)
        .map(|i| {
            let lo = if i == 3 { 0.0 } else { -1.0 };
            arr(dev, &mut rng, DType::F32, &[3, 8], lo, 1.0)
        })
        .collect();
    let c = Arc::new(wmx::compile(move |a: &[Array]| update(a, 0)));
    let compiled: Func = Arc::new(move |a: &[Array]| c.call(a));
    let plain: Func = Arc::new(move |a: &[Array]| update(a, 0));
    let loss = |f: Func| {
        move |a: &[Array]| -> Result<Vec<Array>> {
            let o = f(a)?;
            Ok(vec![wmx::sum(&(&(&o[0] * &o[1]) + &o[2]), None, false)?])
        }
    };
    let every = [0, 1, 2, 3];
    let g1 = ok(
        "grad compiled",
        wmx::grad(loss(compiled.clone()), &every)(&args),
    );
    let g2 = ok("grad plain", wmx::grad(loss(plain.clone()), &every)(&args));
    let batched = [Some(0); 4];
    let v1 = ok(
        "vmap compiled",
        wmx::vmap(move |a: &[Array]| compiled(a), &batched, &[0; 3])(&args),
    );
    let v2 = ok(
        "vmap plain",
        wmx::vmap(move |a: &[Array]| plain(a), &batched, &[0; 3])(&args),
    );
    // Shapeless: one trace serves arguments of other shapes.
    let sl = wmx::compile(move |a: &[Array]| update(a, 1)).shapeless(true);
    for shape in [[5usize, 7], [2, 3]] {
        let a: Vec<Array> = (0..4)
            .map(|i| {
                let lo = if i == 3 { 0.0 } else { -1.0 };
                arr(dev, &mut rng, DType::F32, &shape, lo, 1.0)
            })
            .collect();
        let (got, want) = (ok("shapeless", sl.call(&a)), ok("plain", update(&a, 1)));
        for (x, y) in got.iter().zip(&want) {
            let (xv, yv) = (read_ok(x, "shapeless"), read_ok(y, "shapeless"));
            assert_eq!(x.shape(), y.shape(), "shapeless update {shape:?}");
            for (a, b) in xv.iter().zip(&yv) {
                assert!(
                    (a.f() - b.f()).abs() <= 1e-5 * b.f().abs().max(1.0),
                    "shapeless update {shape:?}: {a:?} vs {b:?}"
                );
            }
        }
    }
    assert_eq!(sl.traces(), 1, "a shapeless update traces once");
    let pairs = g1.iter().zip(&g2).chain(v1.iter().zip(&v2));
    for (k, (x, y)) in pairs.enumerate() {
        let (xv, yv) = (read_ok(x, "transformed"), read_ok(y, "transformed"));
        for (a, b) in xv.iter().zip(&yv) {
            assert!(
                (a.f() - b.f()).abs() <= 1e-5 * b.f().abs().max(1.0),
                "transform {k} of a compiled several-output update: {a:?} vs {b:?}"
            );
        }
    }
    if fuses {
        let g = saved.clone();
        let c = wmx::compile(move |a: &[Array]| g(a));
        let r = ok("report", c.report(&[x, w]));
        assert_eq!(r.nodes, 2, "the chain (storing e) and the matmul: {r:?}");
        assert_eq!(r.kernels[0].kernel.outputs.len(), 2, "{r:?}");
    }
}

/// Multiplications by a constant next to a product fold into it (`alpha`, and
/// `beta` of an addend): a product scaled by its only reader, and a scaled value
/// read only as products' operands, are one node with the uncompiled values (to a
/// rounding: the product scales its accumulator). So is a product plus an array
/// of its shape (the array its addend). Not folded: a 16-bit factor that is not a
/// power of two, a 16-bit sum, a scaled addend, a product that has an addend
/// already, a scaled value or a product that something else reads too.
pub fn compile_folds_into_products(dev: &Device) {
    let mut rng = Rng::new(1507);
    let a = arr(dev, &mut rng, DType::F32, &[2, 9, 16], -1.0, 1.0);
    let b = arr(dev, &mut rng, DType::F32, &[2, 16, 7], -1.0, 1.0);
    let c = arr(dev, &mut rng, DType::F32, &[2, 9, 7], -1.0, 1.0);
    let nodes = |f: &Func, args: &[Array]| {
        let g = f.clone();
        let r = ok("report", wmx::compile(move |a: &[Array]| g(a)).report(args));
        r.nodes
    };
    let folded: [(&str, Func); 5] = [
        (
            "(a @ b) * 0.3",
            Arc::new(|x: &[Array]| Ok(vec![&wmx::matmul(&x[0], &x[1])? * 0.3])),
        ),
        (
            "3 * (a @ b)",
            Arc::new(|x: &[Array]| Ok(vec![&wmx::matmul(&x[0], &x[1])? * 3.0])),
        ),
        (
            "(a * 0.5) @ (b * -3)",
            Arc::new(|x: &[Array]| Ok(vec![wmx::matmul(&(&x[0] * 0.5), &(&x[1] * -3.0))?])),
        ),
        (
            "addmm(c, a, b) * 0.25",
            Arc::new(|x: &[Array]| Ok(vec![&wmx::addmm(&x[2], &x[0], &x[1], 1.0, 1.0)? * 0.25])),
        ),
        (
            "a scaled, read by two products",
            Arc::new(|x: &[Array]| {
                let s = &x[0] * 0.125;
                let t = wmx::matmul(&s, &x[1])?;
                let u = wmx::addmm(&x[2], &s, &x[1], 1.0, 1.0)?;
                Ok(vec![t, u])
            }),
        ),
    ];
    let args = [a.clone(), b.clone(), c.clone()];
    for (what, f) in &folded {
        check_same_at(what, f, &args, 4.0, 4.0);
        let want = if what.contains("two") { 2 } else { 1 };
        assert_eq!(nodes(f, &args), want, "{what}: the products alone");
    }
    // A scaled value read by one product directly and by another through a
    // transpose view (a gradient's gᵀ a): the factor moves into both products.
    let through: Func = Arc::new(|x: &[Array]| {
        let s = &wmx::exp(&x[0])? * 0.125;
        let t = wmx::matmul(&s, &x[1])?;
        let u = wmx::matmul(&wmx::swapaxes(&s, -1, -2)?, &x[2])?;
        Ok(vec![t, u])
    });
    check_same_at("a scaled value read directly and transposed", &through, &args, 4.0, 4.0);
    let added: [(&str, Func, usize); 5] = [
        (
            "a @ b + c",
            Arc::new(|x: &[Array]| Ok(vec![&wmx::matmul(&x[0], &x[1])? + &x[2]])),
            1,
        ),
        (
            "c + (a @ b) * 0.5",
            Arc::new(|x: &[Array]| Ok(vec![&x[2] + &(&wmx::matmul(&x[0], &x[1])? * 0.5)])),
            1,
        ),
        (
            "(a @ b + c) + c: one addend",
            Arc::new(|x: &[Array]| Ok(vec![&(&wmx::matmul(&x[0], &x[1])? + &x[2]) + &x[2]])),
            2,
        ),
        (
            "a @ b + a row, broadcast",
            Arc::new(|x: &[Array]| {
                let row = x[2].slice(&[Slice::range(0, 1), Slice::range(0, 1)])?;
                Ok(vec![&wmx::matmul(&x[0], &x[1])? + &row])
            }),
            0,
        ),
        (
            "a @ b + c, the product also returned",
            Arc::new(|x: &[Array]| {
                let p = wmx::matmul(&x[0], &x[1])?;
                Ok(vec![&p + &x[2], p])
            }),
            0,
        ),
    ];
    for (what, f, want) in &added {
        check_same_at(what, f, &args, 4.0, 4.0);
        if *want > 0 {
            assert_eq!(nodes(f, &args), *want, "{what}: nodes");
        }
    }
    // A product also returned keeps its multiply (a fold would compute the
    // product twice; the values are what can be checked).
    let returned: Func = Arc::new(|x: &[Array]| {
        let p = wmx::matmul(&x[0], &x[1])?;
        Ok(vec![&p * 2.0, p])
    });
    check_same_at("a product also returned", &returned, &args, 4.0, 4.0);
    let kept: [(&str, Func); 2] = [
        (
            "a scaled addend",
            Arc::new(|x: &[Array]| Ok(vec![wmx::addmm(&(&x[2] * 2.0), &x[0], &x[1], 1.0, 1.0)?])),
        ),
        (
            "a scaled value also added",
            Arc::new(|x: &[Array]| {
                let s = &x[0] * 0.5;
                Ok(vec![wmx::matmul(&s, &x[1])?, &s + 1.0])
            }),
        ),
    ];
    for (what, f) in &kept {
        check_same_at(what, f, &args, 4.0, 4.0);
        // The product and the multiply (a fold would leave the product alone).
        assert!(nodes(f, &args) >= 2, "{what} was folded");
    }
    // 16 bits: a power of two folds (exactly), 0.3 does not.
    for d in [DType::F16, DType::BF16] {
        if !super::supported(dev, d) {
            continue;
        }
        let a = ok("a", wmx::astype(&a, d));
        let b = ok("b", wmx::astype(&b, d));
        for (v, want) in [(0.125, 1), (0.3, 2)] {
            let f: Func = Arc::new(move |x: &[Array]| Ok(vec![&wmx::matmul(&x[0], &x[1])? * v]));
            let args = [a.clone(), b.clone()];
            check_same_at(&format!("{d} (a @ b) * {v}"), &f, &args, 0.0, 1.0);
            assert!(
                (nodes(&f, &args) == 1) == (want == 1),
                "{d} (a @ b) * {v}: folded {}",
                want == 1
            );
        }
        let c = ok("c", wmx::astype(&c, d));
        let sum: Func = Arc::new(|x: &[Array]| Ok(vec![&wmx::matmul(&x[0], &x[1])? + &x[2]]));
        let args = [a.clone(), b.clone(), c];
        check_same_at(&format!("{d} a @ b + c"), &sum, &args, 0.0, 1.0);
        assert!(nodes(&sum, &args) >= 2, "{d} a @ b + c was folded");
    }
    // Eval's default mode folds the pending graph's scales too (dispatches
    // counted in `tests/tests/dispatch_counts.rs`, on a device of its own): the
    // same values as op by op.
    let scaled = || -> Result<Array> {
        // No handle on the product: one held would keep it and its multiply.
        let y = &wmx::matmul(&(&a * 0.5), &b)? * 3.0;
        y.eval()?;
        Ok(y)
    };
    let folded = ok("default mode", wmx::with_mode(Mode::Compiled, scaled));
    let want = ok("op by op", wmx::with_mode(Mode::Lazy, scaled));
    let (fv, wv) = (read_ok(&folded, "folded"), read_ok(&want, "op by op"));
    for (x, y) in fv.iter().zip(&wv) {
        assert!(
            (x.f() - y.f()).abs() <= 4.0 * ulp(DType::F32, y.f().abs().max(4.0)),
            "default mode's folded scales: {x:?} vs {y:?}"
        );
    }
    // The gradient of a compiled scaled product (attention's scores) equals the
    // uncompiled one.
    let loss = |x: &[Array]| -> Result<Vec<Array>> {
        let s = &wmx::matmul(&x[0], &wmx::swapaxes(&x[0], 1, 2)?)? * 0.125;
        let p = wmx::softmax(&s, &[-1])?;
        Ok(vec![wmx::sum(&wmx::matmul(&p, &x[1])?, None, false)?])
    };
    let q = arr(dev, &mut rng, DType::F32, &[2, 16, 16], -1.0, 1.0);
    let v = arr(dev, &mut rng, DType::F32, &[2, 16, 7], -1.0, 1.0);
    let cg = wmx::compile(move |x: &[Array]| wmx::grad(loss, &[0, 1])(x));
    let got = ok("compiled grad", cg.call(&[q.clone(), v.clone()]));
    let want = ok("grad", wmx::grad(loss, &[0, 1])(&[q, v]));
    for (g, w) in got.iter().zip(&want) {
        let (gv, wv) = (read_ok(g, "compiled"), read_ok(w, "uncompiled"));
        for (x, y) in gv.iter().zip(&wv) {
            assert!(
                (x.f() - y.f()).abs() <= 1e-5 * y.f().abs().max(1.0),
                "grad of a scaled product: {x:?} vs {y:?}"
            );
        }
    }
}
