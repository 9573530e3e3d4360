//! The lazy graph: shared subgraphs, long chains, nothing computed until read, display.

use super::*;

/// A node used by several consumers is computed once and every consumer is right.
pub fn graph_shared_subgraph(dev: &Device) {
    let dt = DType::F32;
    let mut rng = Rng::new(14);
    let xs = values(&mut rng, dt, 100, Domain::Range(-3.0, 3.0));
    let a = make_ok(dev, dt, &xs, &[100]);
    let x = ok("exp", wmx::exp(&a));
    let one = make_ok(dev, dt, &[f(1.0)], &[]);
    let two = make_ok(dev, dt, &[f(2.0)], &[]);
    let y1 = ok("y1", wmx::add(&x, &one));
    let y2 = ok("y2", wmx::multiply(&x, &two));
    let y3 = ok("y3", wmx::sqrt(&x));
    let d = ok("diamond", wmx::subtract(&y1, &y2));
    assert!(!x.is_evaluated());
    ok(
        "eval",
        wmx::eval(&[y1.clone(), y2.clone(), y3.clone(), d.clone()]),
    );
    assert!(
        x.is_evaluated(),
        "a shared input held by the user is kept evaluated"
    );
    let ex: Vec<f64> = xs.iter().map(|v| round_to(dt, v.f().exp())).collect();
    let t = Tol::of(Class::Transcendental, dt, 0.0);
    let comp = |what: &str, a: &Array, g: &dyn Fn(f64) -> f64, tol: Tol| {
        let got = read_ok(a, what);
        let want: Vec<Val> = ex.iter().map(|&e| f(g(e))).collect();
        assert_close(what, dt, &got, &want, tol, &|k| xs[k].to_string());
    };
    let t2 = Tol {
        ulps: 8.0,
        abs: 0.0,
        log_ulps: 0.0,
    };
    comp("exp(x)", &x, &|e| e, t);
    comp("exp(x) + 1", &y1, &|e| e + 1.0, t2);
    comp("exp(x) * 2", &y2, &|e| e * 2.0, t2);
    comp("sqrt(exp(x))", &y3, &|e| e.sqrt(), t2);
    comp(
        "(e+1) - 2e",
        &d,
        &|e| (e + 1.0) - 2.0 * e,
        Tol {
            ulps: 8.0,
            abs: 1e-5,
            log_ulps: 0.0,
        },
    );
    // A consumer made after the shared node was evaluated reuses its data.
    let z = ok("z", wmx::add(&x, &x));
    comp("exp(x) + exp(x)", &z, &|e| 2.0 * e, t2);
    // Evaluating the same array twice and evaluating an evaluated array is fine.
    ok("eval again", wmx::eval(&[z.clone(), z.clone()]));
    ok("eval data", a.eval());
}

/// A 200 000-node chain of adds is built, evaluated and dropped on a 2 MiB stack,
/// and a pending chain is dropped without evaluation.
pub fn graph_long_chain(dev: &Device) {
    let dev = dev.clone();
    let h = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let dt = DType::I32;
            let n = 200_000;
            let one = make_ok(&dev, dt, &[Val::I(1)], &[]);
            let mut a = make_ok(&dev, dt, &ints(&[0, 10, -5]), &[3]);
            for _ in 0..n {
                a = ok("add", wmx::add(&a, &one));
            }
            assert!(!a.is_evaluated());
            let got = read_ok(&a, "long chain");
            assert_same("200 000 adds", &got, &ints(&[n, n + 10, n - 5]), &|_| {
                String::new()
            });
            drop(a);
            // A pending chain dropped without eval.
            let mut b = make_ok(&dev, dt, &ints(&[0]), &[1]);
            for _ in 0..n {
                b = ok("add", wmx::add(&b, &one));
            }
            drop(b);
        })
        .expect("spawn");
    h.join()
        .expect("the long chain must not overflow a 2 MiB stack");
}

/// Ops build graph nodes; nothing is computed before eval or a read.
pub fn lazy_until_read(dev: &Device) {
    let a = make_ok(dev, DType::F32, &[f(1.0), f(2.0), f(3.0)], &[3]);
    assert!(a.is_evaluated(), "data is evaluated");
    let b = ok("exp", wmx::exp(&a));
    let c = ok("add", wmx::add(&b, &b));
    let v = ok("transpose", c.t());
    let z = ok(
        "zeros",
        wmx::with_device(dev, || wmx::zeros(&[2], DType::F32)),
    );
    for (name, x) in [("exp", &b), ("add", &c), ("view", &v), ("zeros", &z)] {
        assert!(!x.is_evaluated(), "{name} was computed before eval");
        assert!(x.buffer().is_none(), "{name} has a buffer before eval");
        assert!(x.primitive().is_some(), "{name} has no primitive");
        assert_eq!(x.device(), dev, "{name} on the wrong device");
    }
    assert_eq!(c.inputs().len(), 2);
    // A read evaluates implicitly.
    let got = ok("to_vec", v.to_vec::<f32>());
    let want: Vec<f32> = [1.0f32, 2.0, 3.0].iter().map(|x| 2.0 * x.exp()).collect();
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 4.0 * f32::EPSILON * w,
            "{got:?} vs {want:?}"
        );
    }
    assert!(v.is_evaluated() && c.is_evaluated() && b.is_evaluated());
    assert!(c.primitive().is_none() && c.inputs().is_empty());
    assert!(!z.is_evaluated(), "an unrelated array stays pending");
    assert_eq!(
        ok(
            "item",
            wmx::sum(&z, None, false).and_then(|s| s.item::<f32>())
        ),
        0.0
    );
}

/// `Display`: numpy-style, with the dtype; `Debug` names shape and dtype.
pub fn display_format(dev: &Device) {
    let mk = |vals: &[Val], dt: DType, shape: &[usize]| make_ok(dev, dt, vals, shape);
    let cases: Vec<(Array, &str)> = vec![
        (
            mk(&ints(&[1, 2, 3]), DType::I32, &[3]),
            "array([1, 2, 3], dtype=i32)",
        ),
        (
            mk(&ints(&[1, 0]), DType::Bool, &[2]),
            "array([true, false], dtype=bool)",
        ),
        (
            mk(
                &[f(0.5), f(f64::NAN), f(f64::NEG_INFINITY), f(1.0)],
                DType::F32,
                &[4],
            ),
            "array([0.5, nan, -inf, 1.0], dtype=f32)",
        ),
        (
            mk(&[f(round_to(DType::F32, 0.1))], DType::F32, &[1]),
            "array([0.1], dtype=f32)",
        ),
        (
            mk(&ints(&[1, 2, 3, 4]), DType::I32, &[2, 2]),
            "array([[1, 2],\n       [3, 4]], dtype=i32)",
        ),
        (mk(&ints(&[7]), DType::I32, &[]), "array(7, dtype=i32)"),
        (
            mk(&ints(&(0..10).collect::<Vec<_>>()), DType::U8, &[10]),
            "array([0, 1, 2, ..., 7, 8, 9], dtype=u8)",
        ),
        (mk(&[], DType::F32, &[0]), "array([], dtype=f32)"),
        (
            mk(&ints(&(0..28).collect::<Vec<_>>()), DType::I32, &[2, 7, 2]),
            "array([[[0, 1],\n        [2, 3],\n        [4, 5],\n        ...,\n        [8, 9],\n        [10, 11],\n        [12, 13]],\n       [[14, 15],\n        [16, 17],\n        [18, 19],\n        ...,\n        [22, 23],\n        [24, 25],\n        [26, 27]]], dtype=i32)",
        ),
    ];
    for (a, want) in cases {
        assert_eq!(format!("{a}"), want, "Display of {a:?}");
    }
    // complex64: each element's two parts (the imaginary part's sign, -0 too).
    let z = [
        wmx_core::Complex32::new(1.5, -2.0),
        wmx_core::Complex32::new(0.0, -0.0),
        wmx_core::Complex32::new(f32::NAN, f32::INFINITY),
        wmx_core::Complex32::new(-3.0, 0.25),
    ];
    let c = Array::from_slice_on(&z, &[2, 2], dev).unwrap();
    assert_eq!(
        format!("{c}"),
        "array([[1.5-2.0j, 0.0-0.0j],\n       [nan+infj, -3.0+0.25j]], dtype=c64)",
        "Display of complex64"
    );
    // 200 000 dimensions print without overflowing the stack.
    let deep = mk(&ints(&[5]), DType::I32, &vec![1; 200_000]);
    let text = format!("{deep}");
    assert_eq!(
        text.len(),
        "array(".len() + 2 * 200_000 + 1 + ", dtype=i32)".len()
    );
    assert!(
        text.starts_with("array([[[") && text.contains("[5]"),
        "{}",
        &text[..40]
    );
    let p = ok("exp", wmx::exp(&mk(&[f(0.0)], DType::F32, &[1])));
    let dbg = format!("{p:?}");
    assert!(
        dbg.contains("[1]") && dbg.contains("f32") && dbg.contains("evaluated=false"),
        "{dbg}"
    );
    assert_eq!(
        format!("{p}"),
        "array([1.0], dtype=f32)",
        "Display evaluates"
    );
}
