//! complex64 against f64 host arithmetic written out here (`C`): creation and
//! casts, the parts, arithmetic (Smith's division past f32's range of |b|^2), exp,
//! log, sqrt, reductions, matmul, indexing and joins, on views; gradients against
//! central differences of the real and imaginary parts in f64; vmap against a
//! loop; the errors of ops without a complex form.

use wmx_core::{self as wmx, Array, Complex32, DType, Device, Result, Slice};

type Op1 = fn(&Array) -> Result<Array>;
type Op2 = fn(&Array, &Array) -> Result<Array>;
/// An op, its host reference (and a tolerance).
type Bin = (&'static str, Op2, fn(C, C) -> C);
type Un = (&'static str, Op1, fn(C) -> C, f64);

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

/// A host complex number in f64.
#[derive(Clone, Copy, Debug, PartialEq)]
struct C(f64, f64);

impl C {
    fn of(z: Complex32) -> C {
        C(z.re as f64, z.im as f64)
    }
    fn add(self, o: C) -> C {
        C(self.0 + o.0, self.1 + o.1)
    }
    fn sub(self, o: C) -> C {
        C(self.0 - o.0, self.1 - o.1)
    }
    fn mul(self, o: C) -> C {
        C(self.0 * o.0 - self.1 * o.1, self.0 * o.1 + self.1 * o.0)
    }
    /// Exact enough in f64 for f32 operands (|b|^2 cannot overflow f64).
    fn div(self, o: C) -> C {
        let d = o.0 * o.0 + o.1 * o.1;
        C(
            (self.0 * o.0 + self.1 * o.1) / d,
            (self.1 * o.0 - self.0 * o.1) / d,
        )
    }
    fn abs(self) -> f64 {
        self.0.hypot(self.1)
    }
    fn exp(self) -> C {
        let m = self.0.exp();
        C(m * self.1.cos(), m * self.1.sin())
    }
    fn ln(self) -> C {
        C(self.abs().ln(), self.1.atan2(self.0))
    }
    fn sqrt(self) -> C {
        let r = self.abs();
        let a = ((r + self.0) / 2.0).sqrt();
        let b = ((r - self.0) / 2.0).sqrt();
        C(a, if self.1.is_sign_negative() { -b } else { b })
    }
}

/// Random complex values: mostly moderate, some tiny or huge, some exact zeros.
fn random(n: usize, seed: u64) -> Vec<Complex32> {
    let mut rng = crate::rng::Rng::new(seed);
    (0..n)
        .map(|_| {
            let mut part = || match rng.below(10) {
                0 => 0.0,
                1 => (rng.uniform(-1.0, 1.0) * 1e30) as f32,
                2 => (rng.uniform(-1.0, 1.0) * 1e-30) as f32,
                _ => rng.uniform(-3.0, 3.0) as f32,
            };
            Complex32::new(part(), part())
        })
        .collect()
}

fn read(what: &str, a: &Array, shape: &[usize]) -> Vec<C> {
    assert_eq!(a.dtype(), DType::C64, "{what}: dtype");
    assert_eq!(a.shape(), shape, "{what}: shape");
    ok(what, a.to_vec::<Complex32>())
        .into_iter()
        .map(C::of)
        .collect()
}

fn read_real(what: &str, a: &Array, shape: &[usize]) -> Vec<f64> {
    assert_eq!(a.dtype(), DType::F32, "{what}: dtype");
    assert_eq!(a.shape(), shape, "{what}: shape");
    ok(what, a.to_vec::<f32>())
        .into_iter()
        .map(f64::from)
        .collect()
}

/// `got` within `tol * scale` of `want` per part (NaN matches NaN, infinities
/// match exactly), `scale` the magnitude the op's rounding is relative to.
fn close(what: &str, k: usize, got: f64, want: f64, tol: f64, scale: f64) {
    let fine = if want.is_nan() {
        got.is_nan()
    } else if want.is_infinite() {
        got == want
    } else {
        (got - want).abs() <= tol * scale.max(f32::MIN_POSITIVE as f64)
    };
    assert!(
        fine,
        "{what}: element {k}: got {got:e}, want {want:e} (scale {scale:e})"
    );
}

fn close_c(what: &str, got: &[C], want: &[C], tol: f64, scale: impl Fn(usize) -> f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let s = scale(k);
        close(&format!("{what} (real)"), k, g.0, w.0, tol, s);
        close(&format!("{what} (imag)"), k, g.1, w.1, tol, s);
    }
}

fn make(dev: &Device, v: &[Complex32], shape: &[usize]) -> Array {
    ok("from_slice", Array::from_slice_on(v, shape, dev))
}

/// Creation, casts, the parts and the elementwise ops, on contiguous and
/// transposed inputs, with a real operand broadcast against a complex one.
pub fn complex_elementwise(dev: &Device) {
    let (r, c) = (7, 5);
    let xv = random(r * c, 1);
    let yv = random(r * c, 2);
    let x0 = make(dev, &xv, &[r, c]);
    let y0 = make(dev, &yv, &[r, c]);
    let hx: Vec<C> = xv.iter().map(|&z| C::of(z)).collect();
    let hy: Vec<C> = yv.iter().map(|&z| C::of(z)).collect();
    let t = |a: &Array| ok("transpose", a.t());
    // The same values laid out transposed: x = xt.t() reads through strides.
    let xt = make(dev, &transposed(&xv, r, c), &[c, r]);
    for (layout, x) in [("row-major", x0.clone()), ("transposed", t(&xt))] {
        let what = |op: &str| format!("{op} of c64 [{r}, {c}] ({layout})");
        let all = |f: &dyn Fn(usize) -> C| (0..r * c).map(f).collect::<Vec<C>>();
        let got = read(&what("copy"), &ok("contiguous", x.contiguous()), &[r, c]);
        assert_eq!(got, hx, "{}", what("contiguous"));
        let re = read_real(&what("real"), &ok("real", wmx::real(&x)), &[r, c]);
        let im = read_real(&what("imag"), &ok("imag", wmx::imag(&x)), &[r, c]);
        assert_eq!(re, hx.iter().map(|z| z.0).collect::<Vec<_>>(), "real");
        assert_eq!(im, hx.iter().map(|z| z.1).collect::<Vec<_>>(), "imag");
        let cj = read(&what("conj"), &ok("conj", wmx::conj(&x)), &[r, c]);
        assert_eq!(cj, all(&|k| C(hx[k].0, -hx[k].1)), "{}", what("conj"));
        let abs = read_real(&what("abs"), &ok("abs", wmx::abs(&x)), &[r, c]);
        for (k, a) in abs.iter().enumerate() {
            close(&what("abs"), k, *a, hx[k].abs(), 2e-7, hx[k].abs());
        }
        let ang = read_real(&what("angle"), &ok("angle", wmx::angle(&x)), &[r, c]);
        for (k, a) in ang.iter().enumerate() {
            close(&what("angle"), k, *a, hx[k].1.atan2(hx[k].0), 4e-7, 1.0);
        }
        let bin: [Bin; 4] = [
            ("add", wmx::add, C::add),
            ("subtract", wmx::subtract, C::sub),
            ("multiply", wmx::multiply, C::mul),
            ("divide", wmx::divide, C::div),
        ];
        for (name, f, h) in bin {
            let got = read(&what(name), &ok(name, f(&x, &y0)), &[r, c]);
            let want = all(&|k| h(hx[k], hy[k]));
            // Rounding relative to the operands' magnitudes (cancellation).
            let scale = |k: usize| match name {
                "multiply" => hx[k].abs() * hy[k].abs(),
                "divide" => hx[k].abs() / hy[k].abs(),
                _ => hx[k].abs() + hy[k].abs(),
            };
            // Partial products past f32's range overflow (as numpy's c64 do).
            let keep: Vec<usize> = (0..r * c)
                .filter(|&k| hy[k] != C(0.0, 0.0) && hx[k].abs() * hy[k].abs() < 1e38)
                .collect();
            let pick = |v: &[C]| keep.iter().map(|&k| v[k]).collect::<Vec<_>>();
            close_c(&what(name), &pick(&got), &pick(&want), 4e-7, |i| {
                scale(keep[i])
            });
        }
        // A real row broadcast against the complex matrix: promoted to c64.
        let row: Vec<f32> = (0..c).map(|j| j as f32 - 1.5).collect();
        let rowa = ok("row", Array::from_slice_on(&row, &[c], dev));
        let got = read(
            &what("multiply by f32 row"),
            &ok("mul", wmx::multiply(&x, &rowa)),
            &[r, c],
        );
        let want = all(&|k| hx[k].mul(C(row[k % c] as f64, 0.0)));
        close_c(&what("multiply by f32 row"), &got, &want, 4e-7, |k| {
            hx[k].abs() * 1.5
        });
        // exp, log and sqrt of moderate values.
        let mv: Vec<Complex32> = xv
            .iter()
            .map(|z| Complex32::new(z.re.clamp(-5.0, 5.0), z.im.clamp(-5.0, 5.0)))
            .collect();
        let hm: Vec<C> = mv.iter().map(|&z| C::of(z)).collect();
        let m = make(dev, &mv, &[r, c]);
        let un: [Un; 4] = [
            ("exp", wmx::exp, C::exp, 2e-6),
            ("log", wmx::log, C::ln, 2e-6),
            ("sqrt", wmx::sqrt, C::sqrt, 1e-6),
            ("square", wmx::square, |z| z.mul(z), 4e-7),
        ];
        for (name, f, h, tol) in un {
            let got = read(&what(name), &ok(name, f(&m)), &[r, c]);
            let want: Vec<C> = hm.iter().map(|&z| h(z)).collect();
            let keep: Vec<usize> = (0..r * c)
                .filter(|&k| hm[k] != C(0.0, 0.0) || name != "log")
                .collect();
            let pick = |v: &[C]| keep.iter().map(|&k| v[k]).collect::<Vec<_>>();
            close_c(&what(name), &pick(&got), &pick(&want), tol, |i| {
                want[keep[i]].abs().max(1.0)
            });
        }
        let _ = t(&x);
    }
    // Smith's division: |b|^2 overflows f32 here, the quotient does not.
    let a = make(
        dev,
        &[Complex32::new(3e30, 1e30), Complex32::new(1e-30, 2e-30)],
        &[2],
    );
    let b = make(
        dev,
        &[Complex32::new(1e30, 1e30), Complex32::new(1e-30, -1e-30)],
        &[2],
    );
    let got = read(
        "divide past f32's |b|^2",
        &ok("divide", wmx::divide(&a, &b)),
        &[2],
    );
    let want = [
        C(3e30, 1e30).div(C(1e30, 1e30)),
        C(1e-30, 2e-30).div(C(1e-30, -1e-30)),
    ];
    close_c("divide past f32's |b|^2", &got, &want, 4e-7, |k| {
        want[k].abs()
    });
    // Creation and casts: a real array cast to c64, zeros, full; NaN and inf kept.
    let re = ok(
        "f32",
        Array::from_slice_on(&[1.5f32, -0.0, f32::NAN, f32::INFINITY], &[4], dev),
    );
    let z = read("astype(c64)", &ok("astype", re.astype(DType::C64)), &[4]);
    assert!(
        z[0] == C(1.5, 0.0) && z[1].0 == 0.0 && z[2].0.is_nan() && z[3] == C(f64::INFINITY, 0.0)
    );
    assert!(
        z.iter().all(|c| c.1 == 0.0),
        "astype(c64): imaginary parts {z:?}"
    );
    let f = ok(
        "full",
        wmx::with_device(dev, || wmx::full(&[2, 3], 2.5, DType::C64)),
    );
    assert_eq!(read("full c64", &f, &[2, 3]), vec![C(2.5, 0.0); 6]);
    let i32s = ok("i32", Array::from_slice_on(&[-3i32, 7], &[2], dev));
    let mixed = read("i32 + c64", &ok("add", wmx::add(&i32s, &a)), &[2]);
    close_c(
        "i32 + c64",
        &mixed,
        &[C(3e30 - 3.0, 1e30), C(7.0 + 1e-30, 2e-30)],
        1e-7,
        |k| mixed[k].abs(),
    );
    let parts = ok("complex", wmx::complex(&re, &ok("neg", wmx::negative(&re))));
    let p = read("complex(re, -re)", &parts, &[4]);
    assert_eq!(p[0], C(1.5, -1.5));
    assert!(p[1].0 == 0.0 && p[1].1 == 0.0 && p[1].1.is_sign_positive());
    let nan = ok("isnan", wmx::isnan(&parts).and_then(|v| v.to_vec::<bool>()));
    let inf = ok("isinf", wmx::isinf(&parts).and_then(|v| v.to_vec::<bool>()));
    assert_eq!(
        (nan, inf),
        (
            vec![false, false, true, false],
            vec![false, false, false, true]
        )
    );
    let eq = ok(
        "equal",
        wmx::equal(&x0, &x0.t().and_then(|v| v.t()).unwrap())
            .and_then(|v| v.all(None, false))
            .and_then(|v| v.item::<bool>()),
    );
    assert!(eq, "a c64 array equals itself");
    let ne = ok(
        "not_equal",
        wmx::not_equal(&x0, &y0).and_then(|v| v.to_vec::<bool>()),
    );
    assert_eq!(
        ne,
        (0..r * c).map(|k| hx[k] != hy[k]).collect::<Vec<_>>(),
        "not_equal"
    );
    // where over complex and real branches.
    let cond = ok("cond", Array::from_slice_on(&[true, false], &[2], dev));
    let w = read(
        "where",
        &ok(
            "where",
            wmx::where_(
                &cond,
                &a,
                &ok(
                    "two",
                    wmx::with_device(dev, || wmx::scalar(2.0, DType::F32)),
                ),
            ),
        ),
        &[2],
    );
    assert_eq!(w, vec![C::of(Complex32::new(3e30, 1e30)), C(2.0, 0.0)]);
}

fn transposed(v: &[Complex32], r: usize, c: usize) -> Vec<Complex32> {
    let mut out = vec![Complex32::new(0.0, 0.0); r * c];
    for i in 0..r {
        for j in 0..c {
            out[j * r + i] = v[i * c + j];
        }
    }
    out
}

/// Sums, means and variances over each axis, and matmul (c64 by c64, by f32,
/// batched, addmm), against f64 host loops.
pub fn complex_reductions_and_matmul(dev: &Device) {
    let (b, m, k, n) = (2, 5, 19, 3);
    let moderate = |seed| -> Vec<Complex32> {
        random(b * m * k, seed)
            .into_iter()
            .map(|z| Complex32::new(z.re.clamp(-3.0, 3.0), z.im.clamp(-3.0, 3.0)))
            .collect()
    };
    let av = moderate(3);
    let a = make(dev, &av, &[b, m, k]);
    let h: Vec<C> = av.iter().map(|&z| C::of(z)).collect();
    let at = |i: usize, j: usize, l: usize| h[(i * m + j) * k + l];
    let sum_k = read("sum axis 2", &ok("sum", a.sum(Some(&[2]), false)), &[b, m]);
    let want: Vec<C> = (0..b * m)
        .map(|q| (0..k).fold(C(0.0, 0.0), |s, l| s.add(at(q / m, q % m, l))))
        .collect();
    close_c("sum axis 2", &sum_k, &want, 1e-6, |_| 3.0 * k as f64);
    let all = read("sum all", &ok("sum", a.sum(None, false)), &[]);
    let tot = h.iter().fold(C(0.0, 0.0), |s, &z| s.add(z));
    close_c("sum all", &all, &[tot], 1e-6, |_| 3.0 * h.len() as f64);
    let mean = read(
        "mean axis 0",
        &ok("mean", a.mean(Some(&[0]), true)),
        &[1, m, k],
    );
    let want: Vec<C> = (0..m * k)
        .map(|q| {
            let s = at(0, q / k, q % k).add(at(1, q / k, q % k));
            C(s.0 / 2.0, s.1 / 2.0)
        })
        .collect();
    close_c("mean axis 0", &mean, &want, 1e-6, |_| 3.0);
    let var = read_real(
        "var axis 2",
        &ok("var", a.var(Some(&[2]), false, 0)),
        &[b, m],
    );
    for (q, &got) in var.iter().enumerate() {
        let mu = C(want_mean(&h, q, k).0, want_mean(&h, q, k).1);
        let v = (0..k)
            .map(|l| at(q / m, q % m, l).sub(mu).abs().powi(2))
            .sum::<f64>()
            / k as f64;
        close("var axis 2", q, got, v, 1e-5, v.max(1.0));
    }
    // matmul: [b, m, k] @ [k, n], then by a real matrix, then addmm.
    let bv = moderate(4)[..k * n].to_vec();
    let bm = make(dev, &bv, &[k, n]);
    let hb: Vec<C> = bv.iter().map(|&z| C::of(z)).collect();
    let prod = |bb: &dyn Fn(usize, usize) -> C| -> Vec<C> {
        (0..b * m * n)
            .map(|q| {
                let (i, j, c) = (q / (m * n), (q / n) % m, q % n);
                (0..k).fold(C(0.0, 0.0), |s, l| s.add(at(i, j, l).mul(bb(l, c))))
            })
            .collect()
    };
    let got = read(
        "matmul c64",
        &ok("matmul", wmx::matmul(&a, &bm)),
        &[b, m, n],
    );
    close_c(
        "matmul c64",
        &got,
        &prod(&|l, c| hb[l * n + c]),
        2e-6,
        |_| 18.0 * k as f64,
    );
    let rv: Vec<f32> = (0..k * n).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let rm = ok("real", Array::from_slice_on(&rv, &[k, n], dev));
    let got = read(
        "matmul c64 by f32",
        &ok("matmul", wmx::matmul(&a, &rm)),
        &[b, m, n],
    );
    close_c(
        "matmul c64 by f32",
        &got,
        &prod(&|l, c| C(rv[l * n + c] as f64, 0.0)),
        2e-6,
        |_| 15.0 * k as f64,
    );
    // Transposed right operand (a view), and addmm with a complex bias row.
    let bt = make(dev, &transposed(&bv, k, n), &[n, k]);
    let got = read(
        "matmul by a view",
        &ok("matmul", wmx::matmul(&a, &ok("t", bt.t()))),
        &[b, m, n],
    );
    close_c(
        "matmul by a view",
        &got,
        &prod(&|l, c| hb[l * n + c]),
        2e-6,
        |_| 18.0 * k as f64,
    );
    let bias = make(dev, &bv[..n], &[n]);
    let got = read(
        "addmm c64",
        &ok("addmm", wmx::addmm(&bias, &a, &bm, 2.0, -1.0)),
        &[b, m, n],
    );
    let p = prod(&|l, c| hb[l * n + c]);
    let want: Vec<C> = (0..b * m * n)
        .map(|q| C(2.0 * p[q].0 - hb[q % n].0, 2.0 * p[q].1 - hb[q % n].1))
        .collect();
    close_c("addmm c64", &got, &want, 2e-6, |_| 40.0 * k as f64);
}

fn want_mean(h: &[C], q: usize, k: usize) -> C {
    let s = (0..k).fold(C(0.0, 0.0), |s, l| s.add(h[q * k + l]));
    C(s.0 / k as f64, s.1 / k as f64)
}

/// Indexing, joins and slice updates move both parts of each element: against
/// host index arithmetic, with an out-of-range gather giving NaN + NaN i.
pub fn complex_indexing_and_joins(dev: &Device) {
    let v = random(12, 5);
    let x = make(dev, &v, &[3, 4]);
    let h: Vec<C> = v.iter().map(|&z| C::of(z)).collect();
    let idx = ok("idx", Array::from_slice_on(&[2i32, -1, 0, 7], &[4], dev));
    let got = read("take axis 1", &ok("take", x.take(&idx, Some(1))), &[3, 4]);
    for i in 0..3 {
        for (j, &c) in [2usize, 3, 0].iter().enumerate() {
            assert_eq!(got[i * 4 + j], h[i * 4 + c], "take [{i}, {j}]");
        }
        assert!(
            got[i * 4 + 3].0.is_nan() && got[i * 4 + 3].1.is_nan(),
            "take out of range"
        );
    }
    let j = read(
        "concatenate",
        &ok(
            "concat",
            wmx::concatenate(&[&x, &ok("rev", x.slice(&[Slice::reversed()]))], 0),
        ),
        &[6, 4],
    );
    for r in 0..6 {
        let src = if r < 3 { r } else { 5 - r };
        assert_eq!(
            &j[r * 4..r * 4 + 4],
            &h[src * 4..src * 4 + 4],
            "concatenate row {r}"
        );
    }
    let s = read("stack", &ok("stack", wmx::stack(&[&x, &x], 2)), &[3, 4, 2]);
    assert!(
        s.chunks(2).zip(&h).all(|(p, &e)| p[0] == e && p[1] == e),
        "stack"
    );
    let upd = make(dev, &[Complex32::new(9.0, -9.0)], &[]);
    let u = read(
        "slice_update",
        &ok(
            "slice_update",
            wmx::slice_update(&x, &upd, &[Slice::ALL, Slice::new(Some(1), None, 2)]),
        ),
        &[3, 4],
    );
    for (k, z) in u.iter().enumerate() {
        let want = if k % 4 % 2 == 1 { C(9.0, -9.0) } else { h[k] };
        assert_eq!(*z, want, "slice_update element {k}");
    }
    let sidx = ok("sidx", Array::from_slice_on(&[1i32, 1, 3], &[1, 3], dev));
    let sup = make(
        dev,
        &[
            Complex32::new(1.0, 2.0),
            Complex32::new(3.0, 4.0),
            Complex32::new(5.0, 6.0),
        ],
        &[1, 3],
    );
    let sa = read(
        "scatter_add",
        &ok("scatter_add", wmx::add_along_axis(&x, &sidx, &sup, 1)),
        &[3, 4],
    );
    // The indices broadcast over the rows: every row gets the updates.
    let want: Vec<C> = (0..12)
        .map(|k| match k % 4 {
            1 => h[k].add(C(4.0, 6.0)),
            3 => h[k].add(C(5.0, 6.0)),
            _ => h[k],
        })
        .collect();
    close_c("add_along_axis", &sa, &want, 1e-7, |k| h[k].abs() + 8.0);
    let p = read(
        "pad",
        &ok(
            "pad",
            wmx::pad(&x, &[(1, 0), (0, 1)], wmx::PadMode::Constant(0.0)),
        ),
        &[4, 5],
    );
    assert!(
        p[..5].iter().all(|&z| z == C(0.0, 0.0)) && p[5] == h[0] && p[9] == C(0.0, 0.0),
        "pad"
    );
    // cumsum (the sums of the parts), reversed and exclusive too, along axis 1.
    for (reverse, inclusive) in [(false, true), (true, false)] {
        let what = format!("cumsum reverse={reverse} inclusive={inclusive}");
        let got = read(
            &what,
            &ok("cumsum", x.cumsum(Some(1), reverse, inclusive)),
            &[3, 4],
        );
        for i in 0..3 {
            for j in 0..4 {
                let range: Vec<usize> = match (reverse, inclusive) {
                    (false, true) => (0..=j).collect(),
                    _ => (j + 1..4).collect(),
                };
                let want = range.iter().fold(C(0.0, 0.0), |s, &t| s.add(h[i * 4 + t]));
                let scale = (0..4).map(|t| h[i * 4 + t].abs()).sum::<f64>();
                close_c(&what, &[got[i * 4 + j]], &[want], 4e-7, |_| scale);
            }
        }
    }
    // sign: z / |z| (0 at 0).
    let sg = read("sign", &ok("sign", wmx::sign(&x)), &[3, 4]);
    for (k, z) in h.iter().enumerate() {
        let a = z.abs();
        let want = if a == 0.0 {
            C(0.0, 0.0)
        } else {
            C(z.0 / a, z.1 / a)
        };
        close_c("sign", &[sg[k]], &[want], 4e-7, |_| 1.0);
    }
    let r = read(
        "reshape of a transposed view",
        &ok("reshape", x.t().and_then(|t| t.reshape(&[12]))),
        &[12],
    );
    assert_eq!(
        r,
        (0..12).map(|k| h[(k % 3) * 4 + k / 3]).collect::<Vec<_>>(),
        "reshape copy"
    );
}

/// Gradients of real losses of complex inputs (dL/dx + i dL/dy, MLX's and
/// PyTorch's convention) against central differences in f64; vjp of `complex`,
/// jvp of a holomorphic map, vmap against a loop.
pub fn grad_complex(dev: &Device) {
    let n = 6;
    let zv: Vec<Complex32> = random(n, 7)
        .into_iter()
        .map(|z| Complex32::new(z.re.clamp(-1.5, 1.5) + 0.25, z.im.clamp(-1.5, 1.5) - 0.5))
        .collect();
    let wv: Vec<Complex32> = random(n, 8)
        .into_iter()
        .map(|z| Complex32::new(z.re.clamp(-2.0, 2.0), z.im.clamp(-2.0, 2.0) + 0.5))
        .collect();
    let w = make(dev, &wv, &[n]);
    let hw: Vec<C> = wv.iter().map(|&z| C::of(z)).collect();
    // L(z) = sum |z w + exp(z) / (z - 3)|^2 + real(z)^3 - angle(z)
    let loss = |z: &Array| -> Result<Array> {
        let q = wmx::divide(
            &wmx::exp(z)?,
            &wmx::subtract(z, &wmx::scalar_like(&wmx::real(z)?, 3.0)?)?,
        )?;
        let u = wmx::add(&wmx::multiply(z, &w)?, &q)?;
        let a = wmx::square(&wmx::abs(&u)?)?;
        let b = wmx::power(&wmx::real(z)?, &wmx::scalar_like(&wmx::real(z)?, 3.0)?)?;
        wmx::sum(
            &wmx::subtract(&wmx::add(&a, &b)?, &wmx::angle(z)?)?,
            None,
            false,
        )
    };
    let host = |z: &[C]| -> f64 {
        z.iter()
            .zip(&hw)
            .map(|(&z, &w)| {
                let u = z.mul(w).add(z.exp().div(z.sub(C(3.0, 0.0))));
                u.abs().powi(2) + z.0.powi(3) - z.1.atan2(z.0)
            })
            .sum()
    };
    let z = make(dev, &zv, &[n]);
    let g = ok(
        "grad",
        wmx::grad(|a: &[Array]| Ok(vec![loss(&a[0])?]), &[0])(std::slice::from_ref(&z)),
    );
    let got = read("grad of a real loss of c64", &g[0], &[n]);
    let hz: Vec<C> = zv.iter().map(|&z| C::of(z)).collect();
    let e = 1e-6;
    for k in 0..n {
        let d = |dz: C| {
            let mut p = hz.clone();
            let mut m = hz.clone();
            p[k] = p[k].add(dz);
            m[k] = m[k].sub(dz);
            (host(&p) - host(&m)) / (2.0 * e)
        };
        let want = C(d(C(e, 0.0)), d(C(0.0, e)));
        close_c(
            &format!("grad element {k}"),
            &[got[k]],
            &[want],
            2e-3,
            |_| want.abs().max(1.0),
        );
    }
    // compile fuses the real ops the complex ones are made of: same values.
    let wc = w.clone();
    let compiled = wmx::compile(move |a: &[Array]| {
        let u = wmx::add(&wmx::multiply(&a[0], &wc)?, &wmx::exp(&a[0])?)?;
        Ok(vec![wmx::divide(&u, &wmx::conj(&a[0])?)?])
    });
    let plain = read(
        "uncompiled",
        &ok(
            "plain",
            wmx::divide(
                &wmx::add(&wmx::multiply(&z, &w).unwrap(), &wmx::exp(&z).unwrap()).unwrap(),
                &wmx::conj(&z).unwrap(),
            ),
        ),
        &[n],
    );
    let fused = read(
        "compiled",
        &ok("compiled", compiled.call(std::slice::from_ref(&z)))[0],
        &[n],
    );
    close_c("compiled complex ops", &fused, &plain, 1e-6, |k| {
        plain[k].abs().max(1.0)
    });
    // vjp of complex(re, im): the cotangent's parts.
    let re = ok("re", Array::from_slice_on(&[1.0f32, 2.0], &[2], dev));
    let im = ok("im", Array::from_slice_on(&[3.0f32, 4.0], &[2], dev));
    let ct = make(
        dev,
        &[Complex32::new(5.0, 6.0), Complex32::new(-7.0, 8.0)],
        &[2],
    );
    let (_, gs) = ok(
        "vjp",
        wmx::vjp(
            |a: &[Array]| Ok(vec![wmx::complex(&a[0], &a[1])?]),
            &[re.clone(), im.clone()],
            &[ct],
        ),
    );
    assert_eq!(
        ok("vjp re", gs[0].to_vec::<f32>()),
        vec![5.0, -7.0],
        "vjp of complex: real part"
    );
    assert_eq!(
        ok("vjp im", gs[1].to_vec::<f32>()),
        vec![6.0, 8.0],
        "vjp of complex: imaginary part"
    );
    // jvp of z -> z * w (holomorphic): the tangent times w.
    let t = make(dev, &wv.iter().rev().copied().collect::<Vec<_>>(), &[n]);
    let (_, ts) = ok(
        "jvp",
        wmx::jvp(
            |a: &[Array]| Ok(vec![wmx::multiply(&a[0], &w)?]),
            std::slice::from_ref(&z),
            &[t],
        ),
    );
    let got = read("jvp of z * w", &ts[0], &[n]);
    let want: Vec<C> = (0..n).map(|k| hw[n - 1 - k].mul(hw[k])).collect();
    close_c("jvp of z * w", &got, &want, 1e-6, |k| {
        want[k].abs().max(1.0)
    });
    // vmap of a complex row op against a loop over rows.
    let m = make(
        dev,
        &random(12, 9)
            .into_iter()
            .map(|z| Complex32::new(z.re.clamp(-2.0, 2.0), z.im.clamp(-2.0, 2.0)))
            .collect::<Vec<_>>(),
        &[3, 4],
    );
    let f = |a: &[Array]| -> Result<Vec<Array>> {
        Ok(vec![wmx::sum(
            &wmx::multiply(&a[0], &wmx::conj(&a[0])?)?,
            None,
            false,
        )?])
    };
    let v = ok(
        "vmap",
        wmx::vmap(f, &[Some(0)], &[0])(std::slice::from_ref(&m)),
    );
    let got = read("vmap of sum(z conj z)", &v[0], &[3]);
    for (i, g) in got.iter().enumerate() {
        let row = ok(
            "row",
            m.slice(&[Slice::range(i as isize, i as isize + 1)])
                .and_then(|r| r.squeeze(Some(&[0]))),
        );
        let want = read("loop", &ok("f", f(&[row]))[0], &[]);
        close_c("vmap row", &[*g], &want, 1e-6, |_| want[0].abs().max(1.0));
    }
}

/// The ops with no complex form are errors naming the op and c64; a cast to a
/// real dtype asks for real(), imag() or abs().
pub fn complex_errors(dev: &Device) {
    let x = make(dev, &random(6, 10), &[2, 3]);
    super::expect_err(
        "astype c64 -> f32",
        x.astype(DType::F32),
        &["astype", "real()"],
    );
    type F = fn(&Array) -> Result<Array>;
    let cases: [(&str, F); 8] = [
        ("max", |x| x.max(None, false)),
        ("prod", |x| x.prod(None, false)),
        ("argmax", |x| x.argmax(0, false)),
        ("floor", wmx::floor),
        ("sort", |x| wmx::sort(x, Some(-1))),
        ("cumprod", |x| x.cumprod(Some(0), false, true)),
        ("less", |x| wmx::less(x, x)),
        ("sigmoid", wmx::sigmoid),
    ];
    for (name, f) in cases {
        super::expect_err(&format!("{name} of c64"), f(&x), &[name, "c64"]);
    }
    let r = ok("f32", wmx::real(&x));
    super::expect_err(
        "complex of c64 parts",
        wmx::complex(&x, &r),
        &["complex", "real arrays"],
    );
    let bad = make(dev, &random(4, 11), &[4, 1]);
    super::expect_err("matmul shapes", wmx::matmul(&x, &bad), &["matmul"]);
}
