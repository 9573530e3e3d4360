//! `wmx::linalg`: every decomposition against the f64 identities that define it
//! (A = L Lᵀ, A·inv(A) = I, L[p] U = A, Q R = A with Q orthonormal, U S Vᵀ = A,
//! A V = V diag(w)), sign-free results against numpy's
//! (`tests/goldens/numpy_linalg.py`), derivatives (vjp and jvp) against central
//! differences in f64, vmap against the batched call, and errors.

use super::goldens::Goldens;
use crate::rng::Rng;
use wmx_core::linalg::{self as la, NormOrd};
use wmx_core::{self as wmx, Array, DType, Device, Result, Slice};

static NP: Goldens = Goldens::new(include_str!("../../goldens/numpy_linalg.txt"));

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

/// A host batch of matrices `[..., r, c]`, row-major f64.
#[derive(Clone, Debug)]
struct M {
    shape: Vec<usize>,
    v: Vec<f64>,
}

impl M {
    fn new(shape: &[usize], v: Vec<f64>) -> M {
        assert_eq!(shape.iter().product::<usize>(), v.len());
        M {
            shape: shape.to_vec(),
            v,
        }
    }
    fn random(rng: &mut Rng, shape: &[usize]) -> M {
        let n = shape.iter().product();
        M::new(shape, (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect())
    }
    fn rc(&self) -> (usize, usize) {
        let n = self.shape.len();
        (self.shape[n - 2], self.shape[n - 1])
    }
    fn count(&self) -> usize {
        let (r, c) = self.rc();
        self.v.len() / (r * c).max(1)
    }
    fn at(&self, b: usize, i: usize, j: usize) -> f64 {
        let (r, c) = self.rc();
        self.v[b * r * c + i * c + j]
    }
    fn of(what: &str, x: &Array) -> M {
        M::new(x.shape(), ok(what, x.to_vec_as::<f64>()))
    }
    fn arr(&self, dev: &Device, dt: DType) -> Array {
        let a = ok(
            "input",
            Array::from_slice_on(&self.v, &self.shape, &Device::cpu()),
        );
        ok("input", ok("input", a.astype(dt)).to_device(dev))
    }
    fn mm(&self, o: &M) -> M {
        let (r, k) = self.rc();
        let (k2, c) = o.rc();
        assert_eq!(k, k2);
        let mut shape = self.shape.clone();
        *shape.last_mut().unwrap() = c;
        let mut v = vec![];
        for b in 0..self.count() {
            for i in 0..r {
                for j in 0..c {
                    v.push((0..k).map(|t| self.at(b, i, t) * o.at(b, t, j)).sum());
                }
            }
        }
        M::new(&shape, v)
    }
    fn t(&self) -> M {
        let (r, c) = self.rc();
        let mut shape = self.shape.clone();
        let n = shape.len();
        shape.swap(n - 2, n - 1);
        let mut v = vec![];
        for b in 0..self.count() {
            for j in 0..c {
                for i in 0..r {
                    v.push(self.at(b, i, j));
                }
            }
        }
        M::new(&shape, v)
    }
    /// Symmetric positive definite: A Aᵀ + r I.
    fn spd(&self) -> M {
        let (r, _) = self.rc();
        let mut s = self.mm(&self.t());
        for b in 0..s.count() {
            for i in 0..r {
                s.v[b * r * r + i * r + i] += r as f64;
            }
        }
        s
    }
    fn eye_like(&self) -> M {
        let (r, _) = self.rc();
        let mut shape = self.shape.clone();
        *shape.last_mut().unwrap() = r;
        let v = (0..self.count() * r * r)
            .map(|i| {
                if (i % (r * r)) % (r + 1) == 0 {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        M::new(&shape, v)
    }
}

fn close(what: &str, got: &M, want: &M, tol: f64) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    for (i, (&a, &b)) in got.v.iter().zip(&want.v).enumerate() {
        assert!(
            (a - b).abs() <= tol * (1.0 + b.abs()),
            "{what}: element {i}: got {a}, want {b}"
        );
    }
}

fn tri_check(what: &str, x: &M, upper: bool, unit: bool) {
    let (r, c) = x.rc();
    for b in 0..x.count() {
        for i in 0..r {
            for j in 0..c {
                let v = x.at(b, i, j);
                if (upper && j < i) || (!upper && j > i) {
                    assert_eq!(v, 0.0, "{what}: [{b}, {i}, {j}] outside the triangle");
                }
                if unit && i == j {
                    assert_eq!(v, 1.0, "{what}: unit diagonal at {i}");
                }
            }
        }
    }
}

fn dtypes(dev: &Device) -> Vec<(DType, f64)> {
    let mut v = vec![(DType::F32, 2e-5)];
    if super::supported(dev, DType::F64) {
        v.push((DType::F64, 1e-11));
    }
    v
}

/// Every decomposition and solve on batches, odd sizes, 1×1, 0×0 and views,
/// checked by the identities that define it, in f32 and f64.
pub fn linalg_identities(dev: &Device) {
    let mut rng = Rng::new(0x11a);
    for (dt, tol) in dtypes(dev) {
        for shape in [
            vec![4, 4],
            vec![2, 3, 5, 5],
            vec![1, 1],
            vec![0, 0],
            vec![3, 0, 0],
        ] {
            let what = |op: &str| format!("{op} of {shape:?} {dt}");
            let raw = M::random(&mut rng, &shape);
            let a = raw.spd();
            let aa = a.arr(dev, dt);
            let a = M::of("a", &aa); // rounded to dt
            let eye = a.eye_like();
            // cholesky, both triangles.
            let l = M::of(
                &what("cholesky"),
                &ok(&what("cholesky"), la::cholesky(&aa, false)),
            );
            tri_check(&what("cholesky"), &l, false, false);
            close(&what("L Lᵀ"), &l.mm(&l.t()), &a, tol);
            let u = M::of(
                &what("cholesky"),
                &ok(&what("cholesky"), la::cholesky(&aa, true)),
            );
            close(&what("Uᵀ U"), &u.t().mm(&u), &a, tol);
            // inv and solve with a matrix and a vector right side.
            let ai = M::of(&what("inv"), &ok(&what("inv"), la::inv(&aa)));
            close(&what("A inv(A)"), &a.mm(&ai), &eye, tol * 10.0);
            let (r, _) = a.rc();
            let mut bs = shape.clone();
            *bs.last_mut().unwrap() = 3;
            let b = M::random(&mut rng, &bs);
            let ba = b.arr(dev, dt);
            let b = M::of("b", &ba);
            let x = M::of(&what("solve"), &ok(&what("solve"), la::solve(&aa, &ba)));
            close(&what("A solve(A, B)"), &a.mm(&x), &b, tol * 10.0);
            let xc = M::of(
                &what("cho_solve"),
                &ok(
                    &what("cho_solve"),
                    la::cho_solve(&ok("l", la::cholesky(&aa, false)), &ba),
                ),
            );
            close(&what("A cho_solve(L, B)"), &a.mm(&xc), &b, tol * 10.0);
            // solve_triangular reads only its triangle: the other holds garbage.
            for upper in [false, true] {
                let t = if upper { u.clone() } else { l.clone() };
                let mut g = t.clone();
                for bi in 0..g.count() {
                    for i in 0..r {
                        for j in 0..r {
                            if (upper && j < i) || (!upper && j > i) {
                                g.v[bi * r * r + i * r + j] = 7.5;
                            }
                        }
                    }
                }
                let xt = ok(
                    &what("solve_triangular"),
                    la::solve_triangular(&g.arr(dev, dt), &ba, upper),
                );
                close(
                    &what("T solve_triangular(T, B)"),
                    &t.mm(&M::of("x", &xt)),
                    &b,
                    tol * 10.0,
                );
            }
            // lu: l[p] u = a, l unit lower, u upper.
            let gm = M::random(&mut rng, &shape);
            let ga = gm.arr(dev, dt);
            let gm = M::of("a", &ga);
            let (p, l, u) = ok(&what("lu"), la::lu(&ga));
            assert_eq!(p.dtype(), DType::U32, "{}: p's dtype", what("lu"));
            let (lm, um) = (M::of("l", &l), M::of("u", &u));
            tri_check(&what("lu's l"), &lm, false, true);
            tri_check(&what("lu's u"), &um, true, false);
            let pv = ok("p", p.to_vec_as::<f64>());
            let lu = lm.mm(&um);
            let mut perm = lu.clone();
            for bi in 0..lu.count() {
                for i in 0..r {
                    let src = pv[bi * r + i] as usize;
                    for j in 0..r {
                        perm.v[bi * r * r + i * r + j] = lu.at(bi, src, j);
                    }
                }
            }
            close(&what("L[p] U"), &perm, &gm, tol);
            // det against the product of U's diagonal with the permutation's sign,
            // recomputed on the host from p.
            let det = ok("det", ok(&what("det"), la::det(&ga)).to_vec_as::<f64>());
            for bi in 0..lu.count() {
                let mut d: f64 = (0..r).map(|i| um.at(bi, i, i)).product();
                let mut q: Vec<usize> = (0..r).map(|i| pv[bi * r + i] as usize).collect();
                for i in 0..r {
                    while q[i] != i {
                        let j = q[i];
                        q.swap(i, j);
                        d = -d;
                    }
                }
                assert!(
                    (det[bi] - d).abs() <= tol * 10.0 * (1.0 + d.abs()),
                    "{}: det[{bi}] = {}, want {d}",
                    what("det"),
                    det[bi]
                );
            }
            // qr of tall, wide and square shapes.
            for (rr, cc) in [(r, r), (r + 2, r), (r, r + 3)] {
                let mut qs = shape.clone();
                let nd = qs.len();
                qs[nd - 2] = rr;
                qs[nd - 1] = cc;
                let x = M::random(&mut rng, &qs);
                let xa = x.arr(dev, dt);
                let x = M::of("x", &xa);
                let w = format!("qr of {qs:?} {dt}");
                let (q, rm) = ok(&w, la::qr(&xa));
                let (q, rm) = (M::of(&w, &q), M::of(&w, &rm));
                tri_check(&w, &rm, true, false);
                close(&format!("{w}: Q R"), &q.mm(&rm), &x, tol * 10.0);
                close(
                    &format!("{w}: Qᵀ Q"),
                    &q.t().mm(&q),
                    &q.t().mm(&q).eye_like(),
                    tol * 10.0,
                );
                // svd, reduced and full.
                let w = format!("svd of {qs:?} {dt}");
                for full in [false, true] {
                    let (u, s, vt) = ok(&w, la::svd(&xa, full));
                    let (u, s, vt) = (M::of(&w, &u), M::of(&w, &s), M::of(&w, &vt));
                    let k = rr.min(cc);
                    assert_eq!(u.rc(), if full { (rr, rr) } else { (rr, k) }, "{w}: U");
                    assert_eq!(vt.rc(), if full { (cc, cc) } else { (k, cc) }, "{w}: Vᵀ");
                    close(
                        &format!("{w}: UᵀU"),
                        &u.t().mm(&u),
                        &u.t().mm(&u).eye_like(),
                        tol * 10.0,
                    );
                    close(
                        &format!("{w}: V Vᵀ"),
                        &vt.mm(&vt.t()),
                        &vt.mm(&vt.t()).eye_like(),
                        tol * 10.0,
                    );
                    // U[:, :k] diag(s) Vᵀ[:k] = A; s descending and nonnegative.
                    let mut us = M::new(&[x.count(), rr, k], vec![0.0; x.count() * rr * k]);
                    let mut vk = M::new(&[x.count(), k, cc], vec![0.0; x.count() * k * cc]);
                    for bi in 0..x.count() {
                        for j in 0..k {
                            let sv = s.v[bi * k + j];
                            assert!(sv >= 0.0, "{w}: s < 0");
                            if j > 0 {
                                assert!(sv <= s.v[bi * k + j - 1], "{w}: s not descending");
                            }
                            for i in 0..rr {
                                us.v[(bi * rr + i) * k + j] = u.at(bi, i, j) * sv;
                            }
                            for c in 0..cc {
                                vk.v[(bi * k + j) * cc + c] = vt.at(bi, j, c);
                            }
                        }
                    }
                    let flat = M::new(&[x.count(), rr, cc], x.v.clone());
                    close(&format!("{w}: U S Vᵀ"), &us.mm(&vk), &flat, tol * 10.0);
                }
            }
            // eigh of the symmetric a: A V = V diag(w), w ascending, V orthonormal.
            let (wv, v) = ok(&what("eigh"), la::eigh(&aa));
            let (wv, v) = (M::of("w", &wv), M::of("v", &v));
            close(&what("Vᵀ V"), &v.t().mm(&v), &eye, tol * 10.0);
            let av = a.mm(&v);
            let mut vw = v.clone();
            for bi in 0..v.count() {
                for i in 0..r {
                    for j in 0..r {
                        vw.v[(bi * r + i) * r + j] *= wv.v[bi * r + j];
                    }
                    if i > 0 {
                        assert!(
                            wv.v[bi * r + i] >= wv.v[bi * r + i - 1],
                            "{}: ascending",
                            what("eigh")
                        );
                    }
                }
            }
            close(&what("A V = V diag(w)"), &av, &vw, tol * 10.0 * r as f64);
            let ev = M::of("eigvalsh", &ok(&what("eigvalsh"), la::eigvalsh(&aa)));
            close(&what("eigvalsh"), &ev, &wv, 0.0);
        }
        // A transposed view is read as the matrix it shows.
        let what = format!("inv of a transposed view {dt}");
        let x = M::random(&mut rng, &[5, 5]).spd();
        let xt = ok(&what, x.arr(dev, dt).t());
        let xi = M::of(&what, &ok(&what, la::inv(&xt)));
        close(&what, &x.t().mm(&xi), &x.eye_like(), tol * 10.0);
        // A batch of solves broadcast: a [2, 1, 4, 4] with b [3, 4, 2], and b [4].
        let what = format!("solve with broadcast batches {dt}");
        let a = M::random(&mut rng, &[2, 1, 4, 4]).spd();
        let b = M::random(&mut rng, &[3, 4, 2]);
        let x = ok(&what, la::solve(&a.arr(dev, dt), &b.arr(dev, dt)));
        assert_eq!(x.shape(), &[2, 3, 4, 2], "{what}");
        let xm = M::of(&what, &x);
        for i in 0..2 {
            for j in 0..3 {
                for r in 0..4 {
                    for c in 0..2 {
                        let s: f64 = (0..4).map(|t| a.at(i, r, t) * xm.at(i * 3 + j, t, c)).sum();
                        let want = b.at(j, r, c);
                        assert!(
                            (s - want).abs() < tol * 100.0,
                            "{what}: [{i}, {j}, {r}, {c}] {s} vs {want}"
                        );
                    }
                }
            }
        }
        let bv = M::random(&mut rng, &[4]);
        let xv = ok(&what, la::solve(&a.arr(dev, dt), &bv.arr(dev, dt)));
        assert_eq!(xv.shape(), &[2, 1, 4], "{what}: vector right side");
    }
    // Ill-conditioned (Hilbert 7×7, condition 4.8e8) in f64: small residual.
    if super::supported(dev, DType::F64) {
        let n = 7;
        let h = M::new(
            &[n, n],
            (0..n * n)
                .map(|i| 1.0 / ((i / n + i % n) as f64 + 1.0))
                .collect(),
        );
        let ones = M::new(&[n, 1], vec![1.0; n]);
        let x = M::of(
            "hilbert",
            &ok(
                "hilbert",
                la::solve(&h.arr(dev, DType::F64), &ones.arr(dev, DType::F64)),
            ),
        );
        close("Hilbert residual", &h.mm(&x), &ones, 1e-7);
    }
}

/// Sign-free results against numpy: singular values, det, slogdet, inv,
/// eigvalsh, pinv, lstsq (full rank and rank-deficient), every norm,
/// matrix_power and cross.
pub fn linalg_match_numpy(dev: &Device) {
    let dt = if super::supported(dev, DType::F64) {
        DType::F64
    } else {
        DType::F32
    };
    let tol = if dt == DType::F64 { 1e-10 } else { 2e-4 };
    let g = |name: &str| -> Array {
        let (s, v) = NP.get(name);
        M::new(s, v.clone()).arr(dev, dt)
    };
    let check = |what: &str, x: &Array, name: &str| NP.check(what, x, name, tol, tol);
    let a = g("a");
    check("svdvals", &ok("svdvals", la::svdvals(&a)), "svdvals_a");
    check("det", &ok("det", la::det(&a)), "det_a");
    let (s, l) = ok("slogdet", la::slogdet(&a));
    check("slogdet sign", &s, "slogdet_sign_a");
    check("slogdet log", &l, "slogdet_log_a");
    check("inv", &ok("inv", la::inv(&a)), "inv_a");
    let sym = ok("sym", wmx::add(&a, &ok("t", wmx::swapaxes(&a, -1, -2))));
    check(
        "eigvalsh",
        &ok("eigvalsh", la::eigvalsh(&sym)),
        "eigvalsh_sym",
    );
    let tall = g("tall");
    check("pinv", &ok("pinv", la::pinv(&tall, None)), "pinv_tall");
    let r = ok("lstsq", la::lstsq(&tall, &g("b"), None));
    check("lstsq x", &r.solution, "lstsq_x");
    check("lstsq residuals", &r.residuals, "lstsq_res");
    check("lstsq s", &r.singular_values, "lstsq_sv");
    assert_eq!(ok("rank", r.rank.to_vec::<i32>()), vec![4], "lstsq rank");
    let wide = g("wide");
    check(
        "pinv rank-deficient",
        &ok("pinv", la::pinv(&wide, None)),
        "pinv_wide",
    );
    let r = ok(
        "lstsq",
        la::lstsq(
            &wide,
            &g("b").slice(&[Slice::range(0, 3), Slice::ALL]).unwrap(),
            None,
        ),
    );
    assert_eq!(
        ok("rank", r.rank.to_vec::<i32>()),
        vec![2],
        "lstsq rank-deficient"
    );
    for (name, o) in [
        ("2", NormOrd::P(2.0)),
        ("1", NormOrd::P(1.0)),
        ("inf", NormOrd::Inf),
        ("ninf", NormOrd::NegInf),
        ("0", NormOrd::P(0.0)),
        ("3.5", NormOrd::P(3.5)),
        ("n1", NormOrd::P(-1.0)),
    ] {
        let w = format!("vector norm {o:?}");
        check(
            &w,
            &ok(&w, la::norm(&tall, o, Some(&[1]), false)),
            &format!("vnorm_{name}"),
        );
    }
    for (name, o) in [
        ("fro", NormOrd::Fro),
        ("nuc", NormOrd::Nuc),
        ("1", NormOrd::P(1.0)),
        ("n1", NormOrd::P(-1.0)),
        ("2", NormOrd::P(2.0)),
        ("n2", NormOrd::P(-2.0)),
        ("inf", NormOrd::Inf),
        ("ninf", NormOrd::NegInf),
    ] {
        let w = format!("matrix norm {o:?}");
        let got = ok(&w, la::norm(&tall, o, None, false));
        let (_, want) = NP.get(&format!("mnorm_{name}"));
        let gv = ok(&w, got.to_vec_as::<f64>());
        assert!(
            (gv[0] - want[0]).abs() <= tol * (1.0 + want[0].abs()),
            "{w}: {gv:?} vs {want:?}"
        );
        // Over axes (2, 1) of a batch: the matrices' transposes.
        let w = format!("batched matrix norm {o:?} over axes (2, 1)");
        check(
            &w,
            &ok(&w, la::norm(&a, o, Some(&[2, 1]), false)),
            &format!("bnorm_{name}"),
        );
        let k = ok(&w, la::norm(&a, o, Some(&[2, 1]), true));
        assert_eq!(k.shape(), &[2, 1, 1], "{w}: keepdims");
    }
    let all = ok("norm", la::norm(&a, NormOrd::Default, None, false));
    let (_, want) = NP.get("norm_all");
    assert!((ok("norm", all.to_vec_as::<f64>())[0] - want[0]).abs() < tol * want[0]);
    let a0 = ok(
        "a0",
        a.slice(&[Slice::range(0, 1)])
            .and_then(|x| x.reshape(&[5, 5])),
    );
    check(
        "matrix_power 3",
        &ok("mp", la::matrix_power(&a0, 3)),
        "mpow3",
    );
    check(
        "matrix_power -2",
        &ok("mp", la::matrix_power(&a0, -2)),
        "mpowm2",
    );
    let p0 = ok("mp", la::matrix_power(&a0, 0));
    assert_eq!(
        M::of("mp", &p0).v,
        M::new(&[5, 5], vec![0.0; 25]).eye_like().v
    );
    check(
        "cross",
        &ok("cross", la::cross(&g("v1"), &g("v2"), -1)),
        "cross",
    );
}

/// Bad input: a clear `Err` at the op (shapes, dtypes) or at evaluation
/// (singular, not positive definite), naming the matrix of the batch.
pub fn linalg_errors(dev: &Device) {
    let mk = |v: &[f32], s: &[usize]| ok("input", Array::from_slice_on(v, s, dev));
    fn e<T>(what: &str, r: Result<T>, needles: &[&str]) {
        super::expect_err(what, r, needles)
    }
    e(
        "inv of non-square",
        la::inv(&mk(&[0.0; 6], &[2, 3])),
        &["linalg.inv", "square", "2×3"],
    );
    e(
        "cholesky of a vector",
        la::cholesky(&mk(&[1.0; 3], &[3]), false),
        &["linalg.cholesky", "[3]"],
    );
    let i = ok("int", Array::from_slice_on(&[1i32, 0, 0, 1], &[2, 2], dev));
    e("inv of i32", la::inv(&i), &["linalg.inv", "i32", "astype"]);
    let f16 = ok("f16", mk(&[1.0, 0.0, 0.0, 1.0], &[2, 2]).astype(DType::F16));
    e("svd of f16", la::svd(&f16, false), &["linalg.svd", "f16"]);
    let a = mk(&[1.0, 0.0, 0.0, 1.0], &[2, 2]);
    e(
        "solve with wrong rows",
        la::solve(&a, &mk(&[1.0; 3], &[3])),
        &["linalg.solve", "2×2", "3 rows"],
    );
    e(
        "solve with bad batches",
        la::solve(&mk(&[0.0; 8], &[2, 2, 2]), &mk(&[0.0; 12], &[3, 2, 2])),
        &["linalg.solve", "[2]", "[3]"],
    );
    e(
        "norm of bad ord",
        la::norm(&a, NormOrd::Nuc, Some(&[0]), false),
        &["linalg.norm", "Nuc"],
    );
    e(
        "norm of 3-D without axes",
        la::norm(&mk(&[0.0; 8], &[2, 2, 2]), NormOrd::P(2.0), None, false),
        &["linalg.norm", "axes"],
    );
    e(
        "cross of 2-vectors",
        la::cross(&mk(&[1.0; 2], &[2]), &mk(&[1.0; 2], &[2]), -1),
        &["linalg.cross", "3"],
    );
    e(
        "matrix_power of non-square",
        la::matrix_power(&mk(&[0.0; 6], &[2, 3]), 2),
        &["matrix_power", "[2, 3]"],
    );
    // Singular and not positive definite: errors at evaluation naming the matrix.
    let batch = mk(&[1.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 4.0], &[2, 2, 2]);
    if dev.kind() == wmx::DeviceKind::Cpu {
        e(
            "inv of a singular matrix",
            la::inv(&batch).and_then(|x| x.eval()),
            &["linalg.inv", "singular", "matrix 1 of the batch"],
        );
        e(
            "solve with a singular matrix",
            la::solve(&batch, &mk(&[1.0; 4], &[2, 2, 1])).and_then(|x| x.eval()),
            &["linalg.solve", "singular"],
        );
    } else {
        // The LU block kernel cannot stop a batch: inf or NaN in that matrix.
        let v = ok(
            "inv of a singular matrix",
            la::inv(&batch).and_then(|x| x.to_vec::<f32>()),
        );
        assert_eq!(&v[..4], &[1.0, 0.0, 0.0, 1.0], "the regular matrix inverts");
        assert!(
            v[4..].iter().any(|x| !x.is_finite()),
            "the singular one: {v:?}"
        );
    }
    // (cholesky's indefinite matrices: `linalg_blocked`.)
    if dev.kind() == wmx::DeviceKind::Cpu {
        e(
            "solve_triangular with a zero pivot",
            la::solve_triangular(
                &mk(&[1.0, 0.0, 3.0, 0.0], &[2, 2]),
                &mk(&[1.0; 2], &[2]),
                false,
            )
            .and_then(|x| x.eval()),
            &["solve_triangular", "singular", "diagonal at 1"],
        );
    }
    // det of a singular matrix is 0, slogdet (0, -inf): no error.
    let d = ok("det", la::det(&batch).and_then(|x| x.to_vec::<f32>()));
    assert_eq!(d, vec![1.0, 0.0], "det of a singular matrix");
    let (s, l) = ok("slogdet", la::slogdet(&batch));
    assert_eq!(ok("sign", s.to_vec::<f32>()), vec![1.0, 0.0]);
    assert_eq!(ok("log", l.to_vec::<f32>())[1], f32::NEG_INFINITY);
    // Off the CPU: `tests/tests/device_moves.rs` (the switch is process-wide).
}

/// f(x + h t) - f(x - h t) over 2h, for a scalar f.
fn fd(f: &dyn Fn(&Array) -> Result<Array>, x: &M, t: &M, dev: &Device) -> f64 {
    let h = 1e-6;
    let shift = |s: f64| -> f64 {
        let v: Vec<f64> = x.v.iter().zip(&t.v).map(|(a, b)| a + s * h * b).collect();
        let y = ok("fd", f(&M::new(&x.shape, v).arr(dev, DType::F64)));
        ok("fd", y.to_vec_as::<f64>())[0]
    };
    (shift(1.0) - shift(-1.0)) / (2.0 * h)
}

/// Derivatives of every function in f64: for random directions t, <grad f, t>
/// and jvp(f)(t) against central differences (symmetric t for cholesky and
/// eigh, which differentiate the symmetric part); vmap against the batched call.
pub fn grad_linalg(dev: &Device) {
    if !super::supported(dev, DType::F64) {
        return super::check_unsupported(dev, DType::F64);
    }
    let mut rng = Rng::new(0x9ad);
    let dt = DType::F64;
    type F = Box<dyn Fn(&Array) -> Result<Array>>;
    type Rule = Box<dyn Fn(&Array) -> Result<Vec<Array>>>;
    // sum(w * g(x)) for results g, with fixed random weights per result.
    let weighted = |rng: &mut Rng, xs: Vec<Array>| -> Result<Array> {
        let mut acc: Option<Array> = None;
        for x in xs {
            let w = M::random(rng, x.shape()).arr(x.device(), DType::F64);
            let t = wmx::sum(&wmx::multiply(&w, &x)?, None, false)?;
            acc = Some(match acc {
                None => t,
                Some(a) => wmx::add(&a, &t)?,
            });
        }
        Ok(acc.unwrap())
    };
    let sq = |x: &Array| wmx::multiply(x, x);
    let seeds = |name: &str| -> u64 {
        name.bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
    };
    let mk = move |name: &'static str, f: Rule| -> (&'static str, F) {
        let s = seeds(name);
        (
            name,
            Box::new(move |x: &Array| {
                let mut r = Rng::new(s);
                let ys = f(x)?;
                weighted(&mut r, ys)
            }) as F,
        )
    };
    let rhs = M::random(&mut rng, &[2, 4, 3]).arr(dev, dt);
    let r2 = rhs.clone();
    let a4 = M::random(&mut rng, &[2, 4, 4]).spd().arr(dev, dt);
    // (function, input shape, symmetric directions, well-conditioned/SPD input)
    let cases: Vec<((&'static str, F), Vec<usize>, bool)> = vec![
        (
            mk(
                "cholesky",
                Box::new(|x: &Array| Ok(vec![la::cholesky(x, false)?])),
            ),
            vec![2, 4, 4],
            true,
        ),
        (
            mk("inv", Box::new(|x: &Array| Ok(vec![la::inv(x)?]))),
            vec![2, 4, 4],
            false,
        ),
        (
            mk(
                "solve",
                Box::new(move |x: &Array| Ok(vec![la::solve(x, &rhs)?])),
            ),
            vec![2, 4, 4],
            false,
        ),
        (
            mk(
                "solve_triangular",
                Box::new(move |x: &Array| Ok(vec![la::solve_triangular(x, &r2, true)?])),
            ),
            vec![2, 4, 4],
            false,
        ),
        (
            mk(
                "solve wrt b",
                Box::new(move |x: &Array| Ok(vec![la::solve(&a4, x)?])),
            ),
            vec![2, 4, 4],
            false,
        ),
        (
            mk(
                "lu",
                Box::new(|x: &Array| {
                    let (_, l, u) = la::lu(x)?;
                    Ok(vec![l, u])
                }),
            ),
            vec![2, 4, 4],
            false,
        ),
        (
            mk("det", Box::new(|x: &Array| Ok(vec![la::det(x)?]))),
            vec![2, 4, 4],
            false,
        ),
        (
            mk("slogdet", Box::new(|x: &Array| Ok(vec![la::slogdet(x)?.1]))),
            vec![2, 4, 4],
            false,
        ),
        (
            mk(
                "qr square",
                Box::new(|x: &Array| {
                    let (q, r) = la::qr(x)?;
                    Ok(vec![q, r])
                }),
            ),
            vec![2, 4, 4],
            false,
        ),
        (
            mk(
                "qr tall",
                Box::new(|x: &Array| {
                    let (q, r) = la::qr(x)?;
                    Ok(vec![q, r])
                }),
            ),
            vec![2, 5, 3],
            false,
        ),
        (
            mk(
                "qr wide",
                Box::new(|x: &Array| {
                    let (q, r) = la::qr(x)?;
                    Ok(vec![q, r])
                }),
            ),
            vec![2, 3, 5],
            false,
        ),
        (
            mk(
                "svd square",
                Box::new(move |x: &Array| {
                    let (u, s, vt) = la::svd(x, false)?;
                    Ok(vec![s, sq(&u)?, sq(&vt)?])
                }),
            ),
            vec![2, 4, 4],
            false,
        ),
        (
            mk(
                "svd tall",
                Box::new(move |x: &Array| {
                    let (u, s, vt) = la::svd(x, false)?;
                    Ok(vec![s, sq(&u)?, sq(&vt)?])
                }),
            ),
            vec![2, 5, 3],
            false,
        ),
        (
            mk(
                "svd wide",
                Box::new(move |x: &Array| {
                    let (u, s, vt) = la::svd(x, false)?;
                    Ok(vec![s, sq(&u)?, sq(&vt)?])
                }),
            ),
            vec![2, 3, 5],
            false,
        ),
        (
            mk(
                "eigh",
                Box::new(move |x: &Array| {
                    let (w, v) = la::eigh(x)?;
                    Ok(vec![w, sq(&v)?])
                }),
            ),
            vec![2, 4, 4],
            true,
        ),
        (
            mk("pinv", Box::new(|x: &Array| Ok(vec![la::pinv(x, None)?]))),
            vec![2, 5, 3],
            false,
        ),
        (
            mk(
                "norm 2 and nuc",
                Box::new(|x: &Array| {
                    Ok(vec![
                        la::norm(x, NormOrd::P(2.0), Some(&[-2, -1]), false)?,
                        la::norm(x, NormOrd::Nuc, Some(&[-2, -1]), false)?,
                    ])
                }),
            ),
            vec![2, 5, 3],
            false,
        ),
        (
            mk(
                "matrix_power -3",
                Box::new(|x: &Array| Ok(vec![la::matrix_power(x, -3)?])),
            ),
            vec![2, 4, 4],
            false,
        ),
    ];
    for ((name, f), shape, symmetric) in cases {
        let raw = M::random(&mut rng, &shape);
        let x = if symmetric {
            raw.spd()
        } else if shape[1] == shape[2] {
            // Well conditioned: add 3 I.
            let mut m = raw.clone();
            for v in m.eye_like().v.iter().zip(m.v.iter_mut()) {
                *v.1 += 3.0 * v.0;
            }
            m
        } else {
            raw
        };
        let xa = x.arr(dev, dt);
        let what = format!("d {name} of {shape:?}");
        let g = ok(&what, wmx::grad1(|x: &Array| f(x))(&xa));
        let g = M::of(&what, &g);
        for k in 0..3 {
            let mut t = M::random(&mut rng, &shape);
            if symmetric {
                t = M::new(
                    &shape,
                    t.v.iter().zip(&t.t().v).map(|(a, b)| a + b).collect(),
                );
            }
            let want = fd(&*f, &x, &t, dev);
            let got: f64 = g.v.iter().zip(&t.v).map(|(a, b)| a * b).sum();
            assert!(
                (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "{what}: <vjp, t{k}> = {got}, central difference {want}"
            );
            let f1 = |xs: &[Array]| -> Result<Vec<Array>> { Ok(vec![f(&xs[0])?]) };
            let (_, jt) = ok(
                &what,
                wmx::jvp(f1, std::slice::from_ref(&xa), &[t.arr(dev, dt)]),
            );
            let jv = ok(&what, jt[0].to_vec_as::<f64>())[0];
            assert!(
                (jv - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "{what}: jvp along t{k} = {jv}, central difference {want}"
            );
        }
    }
    // vmap of a decomposition over a batch axis equals the batched call.
    let what = "vmap of solve and qr";
    let a = M::random(&mut rng, &[3, 4, 4]).spd().arr(dev, dt);
    let b = M::random(&mut rng, &[4, 2]).arr(dev, dt);
    let bb = b.clone();
    let f = move |xs: &[Array]| -> Result<Vec<Array>> {
        let (q, r) = la::qr(&xs[0])?;
        Ok(vec![la::solve(&xs[0], &bb)?, q, r])
    };
    let v = ok(
        what,
        wmx::vmap(f, &[Some(0)], &[0, 0, 0])(std::slice::from_ref(&a)),
    );
    let want = ok(what, la::solve(&a, &b));
    close(what, &M::of(what, &v[0]), &M::of(what, &want), 1e-12);
    let (q, r) = ok(what, la::qr(&a));
    close(what, &M::of(what, &v[1]), &M::of(what, &q), 1e-12);
    close(what, &M::of(what, &v[2]), &M::of(what, &r), 1e-12);
}

/// Cholesky, triangular solves and cho_solve across the blocks of the GPU path
/// (32 wide up to 64, then 64: sizes 33, 64, 65 and 130, batched, f32), by their identities; their
/// gradients against the same functions' gradients on the CPU in f64 (the GPU
/// path keeps the CPU path's rules); a matrix that is not positive definite.
pub fn linalg_blocked(dev: &Device) {
    let mut rng = Rng::new(0xb10c);
    let dt = DType::F32;
    for n in [33usize, 64, 65, 130] {
        let what = |op: &str| format!("{op} of [2, {n}, {n}] f32");
        let a = M::random(&mut rng, &[2, n, n]).spd();
        let aa = a.arr(dev, dt);
        let a = M::of("a", &aa);
        let l = M::of(
            &what("cholesky"),
            &ok(&what("cholesky"), la::cholesky(&aa, false)),
        );
        tri_check(&what("cholesky"), &l, false, false);
        close(&what("L Lᵀ"), &l.mm(&l.t()), &a, 2e-5);
        let b = M::random(&mut rng, &[2, n, 3]);
        let ba = b.arr(dev, dt);
        for upper in [false, true] {
            let t = if upper { l.t() } else { l.clone() };
            let x = ok(
                &what("solve_triangular"),
                la::solve_triangular(&t.arr(dev, dt), &ba, upper),
            );
            close(
                &what("T solve_triangular(T, B)"),
                &t.mm(&M::of("x", &x)),
                &b,
                1e-4,
            );
        }
        let x = ok(&what("cho_solve"), la::cho_solve(&l.arr(dev, dt), &ba));
        close(&what("A cho_solve(L, B)"), &a.mm(&M::of("x", &x)), &b, 1e-3);
    }
    // LU solves and inverses of n <= 64 (the GPU's LU block kernel): general
    // matrices, one that needs pivoting (zeros on the diagonal), batches.
    for n in [1usize, 5, 64] {
        let what = |op: &str| format!("{op} of [3, {n}, {n}] f32");
        let mut a = M::random(&mut rng, &[3, n, n]);
        for b in 0..3 {
            for i in 0..n {
                a.v[b * n * n + i * n + i] = if b == 1 && n > 1 {
                    0.0
                } else {
                    a.v[b * n * n + i * n + i] + 3.0
                };
            }
        }
        if n > 1 {
            // Matrix 1: a permutation-like part keeps it nonsingular.
            for i in 0..n {
                a.v[n * n + i * n + (i + 1) % n] += 4.0;
            }
        }
        let aa = a.arr(dev, dt);
        let a = M::of("a", &aa);
        let b = M::random(&mut rng, &[3, n, 2]);
        let x = ok(&what("solve"), la::solve(&aa, &b.arr(dev, dt)));
        close(&what("A solve(A, B)"), &a.mm(&M::of("x", &x)), &b, 1e-4);
        let ai = ok(&what("inv"), la::inv(&aa));
        close(
            &what("A inv(A)"),
            &a.mm(&M::of("inv", &ai)),
            &a.eye_like(),
            1e-4,
        );
    }
    // Gradients through the blocked path against the CPU's in f64.
    let n = 70;
    let a = M::random(&mut rng, &[2, n, n]).spd();
    let w = M::random(&mut rng, &[2, n, n]);
    let rhs = M::random(&mut rng, &[2, n, 2]);
    let grads = |d: &Device, dt: DType| -> Vec<M> {
        let (wa, ra) = (w.arr(d, dt), rhs.arr(d, dt));
        let f = move |xs: &[Array]| -> Result<Vec<Array>> {
            let l = la::cholesky(&xs[0], false)?;
            let x = la::solve_triangular(&l, &ra, false)?;
            let y = la::solve_triangular(&wmx::swapaxes(&l, -1, -2)?, &x, true)?;
            // LU solve and inverse of a 35×35 block (the LU block kernel).
            let s = xs[0].slice(&[Slice::ALL, Slice::range(0, 35), Slice::range(0, 35)])?;
            let z = la::solve(
                &s,
                &ra.slice(&[Slice::ALL, Slice::range(0, 35), Slice::ALL])?,
            )?;
            let zi = la::inv(&s)?;
            Ok(vec![wmx::add(
                &wmx::add(
                    &wmx::sum(&wmx::multiply(&wa, &l)?, None, false)?,
                    &wmx::sum(&y, None, false)?,
                )?,
                &wmx::add(&wmx::sum(&z, None, false)?, &wmx::sum(&zi, None, false)?)?,
            )?])
        };
        let g = ok("grad", wmx::grad(f, &[0])(&[a.arr(d, dt)]));
        vec![M::of("grad", &g[0])]
    };
    let want = &grads(&Device::cpu(), DType::F64)[0];
    let got = &grads(dev, dt)[0];
    let scale = want.v.iter().fold(0f64, |m, v| m.max(v.abs()));
    for (i, (&g, &r)) in got.v.iter().zip(&want.v).enumerate() {
        assert!(
            (g - r).abs() <= 2e-3 * scale,
            "grad through blocked cholesky and solves: element {i}: {g} vs {r} (scale {scale})"
        );
    }
    // Compiled: a step with a factorisation, solves and its gradient, traced once
    // and replayed, equals the uncompiled one.
    let step = |xs: &[Array]| -> Result<Vec<Array>> {
        let f = |a: &[Array]| -> Result<Vec<Array>> {
            let l = la::cholesky(&a[0], false)?;
            Ok(vec![wmx::sum(&la::cho_solve(&l, &a[1])?, None, false)?])
        };
        let (v, g) = wmx::value_and_grad(f, &[0])(xs)?;
        Ok(vec![v[0].clone(), g[0].clone()])
    };
    let inputs = [
        M::random(&mut rng, &[3, 70, 70]).spd().arr(dev, dt),
        M::random(&mut rng, &[3, 70, 2]).arr(dev, dt),
    ];
    let want = ok("uncompiled", step(&inputs));
    let compiled = wmx::compile(step);
    for round in 0..2 {
        let got = ok("compiled", compiled.call(&inputs));
        for (g, w) in got.iter().zip(&want) {
            close(
                &format!("compiled step, call {round}"),
                &M::of("c", g),
                &M::of("u", w),
                1e-5,
            );
        }
    }
    // Not positive definite: an Err on the CPU, NaN from the failing column on
    // other devices (their kernels cannot stop the batch).
    let notpd = M::new(&[2, 2], vec![1.0, 2.0, 2.0, 1.0]).arr(dev, dt);
    let r = la::cholesky(&notpd, false).and_then(|x| x.to_vec::<f32>());
    if dev.kind() == wmx::DeviceKind::Cpu {
        super::expect_err(
            "cholesky of an indefinite matrix",
            r,
            &["linalg.cholesky", "not positive definite"],
        );
    } else {
        let v = ok("cholesky of an indefinite matrix", r);
        assert_eq!(v[0], 1.0, "the first column factors");
        assert!(v[3].is_nan(), "the failing pivot is NaN: {v:?}");
    }
}

/// LU across the GPU path's 64-column panels (`solve`, `inv`, `lu`, `det`,
/// `slogdet` of f32 matrices of 7, 65 and 150: one panel, a panel and one column,
/// three panels) and Householder QR of tall, wide, square, thin and 1×1 shapes,
/// by their identities and against the CPU's f64 results (QR's R with its
/// signs: both follow LAPACK's reflections); a matrix that needs pivoting, a
/// singular one; gradients through both against the CPU's in f64.
pub fn linalg_lu_qr(dev: &Device) {
    let mut rng = Rng::new(0x1a9c);
    let dt = DType::F32;
    let cpu = Device::cpu();
    for n in [7usize, 65, 150] {
        let what = |op: &str| format!("{op} of [2, {n}, {n}] f32");
        let mut a = M::random(&mut rng, &[2, n, n]);
        // Matrix 1 needs pivoting at every step: zeros on its diagonal.
        for i in 0..n {
            a.v[n * n + i * n + i] = 0.0;
            a.v[n * n + i * n + (i + 1) % n] += 2.0;
        }
        let aa = a.arr(dev, dt);
        let a = M::of("a", &aa);
        let b = M::random(&mut rng, &[2, n, 3]);
        let x = ok(&what("solve"), la::solve(&aa, &b.arr(dev, dt)));
        close(&what("A solve(A, B)"), &a.mm(&M::of("x", &x)), &b, 2e-3);
        let ai = ok(&what("inv"), la::inv(&aa));
        close(&what("A inv(A)"), &a.mm(&M::of("inv", &ai)), &a.eye_like(), 2e-3);
        let (p, l, u) = ok(&what("lu"), la::lu(&aa));
        let (l, u) = (M::of("l", &l), M::of("u", &u));
        tri_check(&what("lu's L"), &l, false, true);
        tri_check(&what("lu's U"), &u, true, false);
        assert!(
            l.v.iter().all(|v| v.abs() <= 1.0),
            "{}: partial pivoting keeps |L| <= 1",
            what("lu")
        );
        let p = ok("p", p.to_vec::<u32>());
        let prod = l.mm(&u);
        for bi in 0..2 {
            let mut seen = vec![false; n];
            for i in 0..n {
                let pi = p[bi * n + i] as usize;
                assert!(pi < n && !seen[pi], "{}: p is a permutation: {p:?}", what("lu"));
                seen[pi] = true;
                for j in 0..n {
                    let (got, want) = (prod.at(bi, pi, j), a.at(bi, i, j));
                    assert!(
                        (got - want).abs() <= 1e-4 * n as f64,
                        "{}: (L[p] U)[{bi}, {i}, {j}] = {got}, A = {want}",
                        what("lu")
                    );
                }
            }
        }
        let a64 = a.arr(&cpu, DType::F64);
        let (sw, lw) = ok("slogdet f64", la::slogdet(&a64));
        let (sg, lg) = ok(&what("slogdet"), la::slogdet(&aa));
        let (sw, lw, sg, lg) = (M::of("s", &sw), M::of("l", &lw), M::of("s", &sg), M::of("l", &lg));
        assert_eq!(sg.v, sw.v, "{}: signs", what("slogdet"));
        for (g, w) in lg.v.iter().zip(&lw.v) {
            assert!((g - w).abs() <= 1e-4 * (n as f64 + w.abs()), "{}: {g} vs {w}", what("slogdet"));
        }
        if n == 7 {
            let dw = M::of("det", &ok("det f64", la::det(&a64)));
            let dg = M::of("det", &ok(&what("det"), la::det(&aa)));
            close(&what("det"), &dg, &dw, 1e-4 * dw.v.iter().fold(1f64, |m, v| m.max(v.abs())));
            // Two equal rows: an exactly zero pivot, det 0 and slogdet (0, -inf).
            let mut s = M::random(&mut rng, &[n, n]);
            for j in 0..n {
                s.v[4 * n + j] = s.v[j];
            }
            let sa = s.arr(dev, dt);
            assert_eq!(ok("det", ok("det", la::det(&sa)).to_vec::<f32>()), vec![0.0]);
            let (s0, l0) = ok("slogdet", la::slogdet(&sa));
            assert_eq!(ok("sign", s0.to_vec::<f32>()), vec![0.0]);
            assert_eq!(ok("log", l0.to_vec::<f32>()), vec![f32::NEG_INFINITY]);
        }
    }
    for (r, c) in [(130usize, 70usize), (40, 100), (65, 65), (9, 1), (1, 6), (1, 1), (300, 3)] {
        let w = format!("qr of [2, {r}, {c}] f32");
        let x = M::random(&mut rng, &[2, r, c]);
        let xa = x.arr(dev, dt);
        let x = M::of("x", &xa);
        let (q, rm) = ok(&w, la::qr(&xa));
        let (q, rm) = (M::of(&w, &q), M::of(&w, &rm));
        let k = r.min(c);
        assert_eq!((q.rc(), rm.rc()), ((r, k), (k, c)), "{w}: shapes");
        tri_check(&w, &rm, true, false);
        close(&format!("{w}: Q R"), &q.mm(&rm), &x, 1e-4);
        close(&format!("{w}: Qᵀ Q"), &q.t().mm(&q), &q.t().mm(&q).eye_like(), 1e-4);
        let (qw, rw) = ok("qr f64", la::qr(&x.arr(&cpu, DType::F64)));
        close(&format!("{w}: R against f64"), &rm, &M::of("r", &rw), 1e-3);
        close(&format!("{w}: Q against f64"), &q, &M::of("q", &qw), 1e-3);
    }
    // Views: QR of a transposed view, LU solve of a sliced block (two panels).
    let x = M::random(&mut rng, &[2, 70, 130]);
    let xt = ok("view", wmx::swapaxes(&x.arr(dev, dt), -1, -2));
    let (q, rm) = ok("qr of a transposed view", la::qr(&xt));
    let (q, rm) = (M::of("q", &q), M::of("r", &rm));
    close("qr of a transposed view: Q R", &q.mm(&rm), &M::of("x", &xt), 1e-4);
    tri_check("qr of a transposed view", &rm, true, false);
    let mut big = M::random(&mut rng, &[2, 160, 160]);
    for b in 0..2 {
        for i in 0..100 {
            big.v[b * 160 * 160 + (5 + i) * 160 + 7 + i] += 4.0;
        }
    }
    let block = ok(
        "view",
        big.arr(dev, dt)
            .slice(&[Slice::ALL, Slice::range(5, 105), Slice::range(7, 107)]),
    );
    let b = M::random(&mut rng, &[2, 100, 2]);
    let x = ok("solve of a sliced view", la::solve(&block, &b.arr(dev, dt)));
    close(
        "solve of a sliced view: A x",
        &M::of("a", &block).mm(&M::of("x", &x)),
        &b,
        2e-3,
    );
    // Gradients through the panels and the QR kernel against the CPU's in f64.
    let n = 70;
    let a = M::random(&mut rng, &[2, n, n]);
    let (w1, w2, w3) = (
        M::random(&mut rng, &[2, n, 2]),
        M::random(&mut rng, &[2, n, n]),
        M::random(&mut rng, &[2, n, n]),
    );
    let rhs = M::random(&mut rng, &[2, n, 2]);
    let grads = |d: &Device, dt: DType| -> M {
        let (w1, w2, w3, ra) = (w1.arr(d, dt), w2.arr(d, dt), w3.arr(d, dt), rhs.arr(d, dt));
        let f = move |xs: &[Array]| -> Result<Vec<Array>> {
            let x = la::solve(&xs[0], &ra)?;
            let (_, logdet) = la::slogdet(&xs[0])?;
            let (q, r) = la::qr(&xs[0])?;
            let terms = [
                wmx::sum(&wmx::multiply(&w1, &x)?, None, false)?,
                wmx::sum(&logdet, None, false)?,
                wmx::sum(&wmx::multiply(&w2, &q)?, None, false)?,
                wmx::sum(&wmx::multiply(&w3, &r)?, None, false)?,
            ];
            let mut s = terms[0].clone();
            for t in &terms[1..] {
                s = wmx::add(&s, t)?;
            }
            Ok(vec![s])
        };
        let g = ok("grad", wmx::grad(f, &[0])(&[a.arr(d, dt)]));
        M::of("grad", &g[0])
    };
    let want = grads(&cpu, DType::F64);
    let got = grads(dev, dt);
    let scale = want.v.iter().fold(0f64, |m, v| m.max(v.abs()));
    for (i, (&g, &r)) in got.v.iter().zip(&want.v).enumerate() {
        assert!(
            (g - r).abs() <= 2e-3 * scale,
            "grad through LU panels and QR: element {i}: {g} vs {r} (scale {scale})"
        );
    }
}

/// Whether the lazy graph of `x` holds the custom primitive `name` (a GPU path's
/// kernel): the walk stops after `limit` nodes.
fn graph_has(x: &Array, name: &str, limit: usize) -> bool {
    let mut stack = vec![x.clone()];
    let mut seen = 0;
    while let Some(a) = stack.pop() {
        seen += 1;
        if seen > limit {
            return false;
        }
        if let Some(wmx::Primitive::Custom(c)) = a.primitive()
            && c.name() == name
        {
            return true;
        }
        stack.extend(a.inputs());
    }
    false
}

/// f64 on a GPU that computes it: each block kernel against its CPU reference in
/// f64 to 1e-12 (an f32 kernel misses by 1e-7), then the blocked ops across the
/// 32-wide f64 blocks and panels (n = 70: three) against the CPU's f64 results,
/// which come from faer, with their graphs holding the kernels (not the CPU
/// fallback), and a gradient through them.
pub fn linalg_f64_gpu(dev: &Device) {
    use wmx_core::linalg::{Block, LinalgBlock};
    if dev.kind() == wmx::DeviceKind::Cpu {
        return;
    }
    if !super::supported(dev, DType::F64) {
        return super::check_unsupported(dev, DType::F64);
    }
    let dt = DType::F64;
    let cpu = Device::cpu();
    let mut rng = Rng::new(0xf640);
    let diag = |mut m: M, add: f64| {
        let (r, _) = m.rc();
        for b in 0..m.count() {
            for i in 0..r {
                m.v[b * r * r + i * r + i] += add;
            }
        }
        m
    };
    let cases: Vec<(LinalgBlock, M)> = vec![
        (LinalgBlock::Cholesky, M::random(&mut rng, &[3, 32, 32]).spd()),
        (LinalgBlock::Cholesky, M::random(&mut rng, &[2, 7, 7]).spd()),
        (LinalgBlock::TriInv, diag(M::random(&mut rng, &[3, 32, 32]), 4.0)),
        (LinalgBlock::Lu, M::random(&mut rng, &[3, 32, 32])),
        (LinalgBlock::Lu, M::random(&mut rng, &[2, 1, 1])),
        (LinalgBlock::LuPanel, M::random(&mut rng, &[2, 70, 32])),
        (LinalgBlock::LuPanel, M::random(&mut rng, &[2, 40, 5])),
        (LinalgBlock::Qr, M::random(&mut rng, &[2, 70, 40])),
        (LinalgBlock::Qr, M::random(&mut rng, &[2, 40, 70])),
        (LinalgBlock::Qr, M::random(&mut rng, &[1, 1, 1])),
    ];
    for (block, x) in cases {
        let what = format!("{} of {:?} f64", block.name(), x.shape);
        let (m, n) = x.rc();
        let mut shape = x.shape[..x.shape.len() - 2].to_vec();
        shape.extend(block.out_shape(m, n));
        let run = |d: &Device| {
            let prim = std::sync::Arc::new(Block { block });
            let y = wmx::with_device(d, || wmx::custom(prim, &[x.arr(d, dt)], &shape, dt));
            M::of(&what, &ok(&what, y))
        };
        let (got, want) = (run(dev), run(&cpu));
        close(&what, &got, &want, 1e-12);
    }
    // The blocked ops: one matrix that needs pivoting at every step.
    let n = 70;
    let mut a = M::random(&mut rng, &[2, n, n]);
    for i in 0..n {
        a.v[n * n + i * n + i] = 0.0;
        a.v[n * n + i * n + (i + 1) % n] += 2.0;
    }
    let s = M::random(&mut rng, &[2, n, n]).spd();
    let b = M::random(&mut rng, &[2, n, 3]);
    let q = M::random(&mut rng, &[2, 130, 45]);
    type Op = fn(&Array, &Array, &Array, &Array) -> Result<Vec<Array>>;
    let ops: [(&str, &str, Op); 6] = [
        ("cholesky", "chol_small", |_, s, _, _| Ok(vec![la::cholesky(s, false)?])),
        ("cho_solve", "tri_inv_small", |_, s, b, _| {
            Ok(vec![la::cho_solve(&la::cholesky(s, false)?, b)?])
        }),
        ("solve", "lu_panel", |a, _, b, _| Ok(vec![la::solve(a, b)?])),
        ("inv", "lu_panel", |a, _, _, _| Ok(vec![la::inv(a)?])),
        ("lu and slogdet", "lu_panel", |a, _, _, _| {
            let (p, l, u) = la::lu(a)?;
            let (sg, ld) = la::slogdet(a)?;
            Ok(vec![p.astype(DType::F64)?, l, u, sg, ld])
        }),
        ("qr", "qr_house", |_, _, _, q| {
            let (qq, r) = la::qr(q)?;
            Ok(vec![qq, r])
        }),
    ];
    for (name, kernel, f) in ops {
        let what = format!("{name} of [2, {n}, {n}] f64");
        let run = |d: &Device| ok(&what, f(&a.arr(d, dt), &s.arr(d, dt), &b.arr(d, dt), &q.arr(d, dt)));
        let got = run(dev);
        assert!(graph_has(&got[0], kernel, 10_000), "{what}: on the GPU ({kernel} in its graph)");
        for (g, w) in got.iter().zip(run(&cpu)) {
            close(&what, &M::of(&what, g), &M::of(&what, &w), 1e-10);
        }
    }
    // A gradient through the f64 kernels against the CPU's.
    let grads = |d: &Device| -> M {
        let (sa, ba) = (s.arr(d, dt), b.arr(d, dt));
        let f = move |xs: &[Array]| -> Result<Vec<Array>> {
            let x = la::solve(&xs[0], &ba)?;
            let y = la::cho_solve(&la::cholesky(&sa, false)?, &x)?;
            let (_, r) = la::qr(&xs[0])?;
            Ok(vec![wmx::add(&wmx::sum(&y, None, false)?, &wmx::sum(&r, None, false)?)?])
        };
        M::of("grad", &ok("grad", wmx::grad(f, &[0])(&[a.arr(d, dt)]))[0])
    };
    close("grad through the f64 kernels", &grads(dev), &grads(&cpu), 1e-9);
}
