//! Matrix products: `matmul` and `addmm` against f64 host loops, on odd shapes,
//! K much larger than a tile, transposed, sliced and broadcast operands, batches,
//! vectors, empty dims, special values and 16-bit rounding; their derivatives
//! against derivatives written out in f64; errors.

use crate::rng::Rng;
use crate::val::{Val, make_ok, read_ok, round_to};
use wmx_core::{self as wmx, Array, DType, Device, Result, Slice};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

/// A host matrix stack: row-major values of `shape` (already rounded to the dtype).
#[derive(Clone)]
struct Host {
    shape: Vec<usize>,
    v: Vec<f64>,
}

impl Host {
    fn random(rng: &mut Rng, dt: DType, shape: &[usize]) -> Host {
        let n = shape.iter().product();
        let v = (0..n)
            .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
            .collect();
        Host {
            shape: shape.to_vec(),
            v,
        }
    }
    fn array(&self, dev: &Device, dt: DType) -> Array {
        let vals: Vec<Val> = self.v.iter().map(|&x| Val::F(x)).collect();
        make_ok(dev, dt, &vals, &self.shape)
    }
    /// Element at a (possibly longer, broadcast) multi-index.
    fn at(&self, idx: &[usize]) -> f64 {
        let lead = idx.len() - self.shape.len();
        let mut flat = 0;
        for (d, &n) in self.shape.iter().enumerate() {
            let i = if n == 1 { 0 } else { idx[lead + d] };
            flat = flat * n + i;
        }
        self.v[flat]
    }
    fn transpose_last(&self) -> Host {
        let nd = self.shape.len();
        let (r, c) = (self.shape[nd - 2], self.shape[nd - 1]);
        let mut shape = self.shape.clone();
        shape.swap(nd - 2, nd - 1);
        let mut v = vec![0.0; self.v.len()];
        for b in 0..self.v.len() / (r * c).max(1) {
            for i in 0..r {
                for j in 0..c {
                    v[b * r * c + j * r + i] = self.v[b * r * c + i * c + j];
                }
            }
        }
        Host { shape, v }
    }
}

/// f64 reference of `alpha * a @ b + beta * c` for operands of at least two dims
/// (numpy batch broadcasting), with the sum of |terms| per output for the bound.
fn reference(a: &Host, b: &Host, c: Option<&Host>, alpha: f64, beta: f64) -> (Host, Vec<f64>) {
    let (an, bn) = (a.shape.len(), b.shape.len());
    let (m, k, n) = (a.shape[an - 2], a.shape[an - 1], b.shape[bn - 1]);
    let batch = super::bshape(&a.shape[..an - 2], &b.shape[..bn - 2]);
    let mut shape = batch.clone();
    shape.extend([m, n]);
    let mut v = vec![];
    let mut mags = vec![];
    for bi in crate::host::indices(&batch) {
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut mag) = (0.0, 0.0);
                for kk in 0..k {
                    let mut ia = bi.clone();
                    ia.extend([i, kk]);
                    let mut ib = bi.clone();
                    ib.extend([kk, j]);
                    let t = a.at(&ia) * b.at(&ib);
                    s += t;
                    mag += t.abs();
                }
                let mut y = alpha * s;
                mag *= alpha.abs();
                if let Some(c) = c {
                    let mut ic = bi.clone();
                    ic.extend([i, j]);
                    let cv = beta * c.at(&ic);
                    y += cv;
                    mag += cv.abs();
                }
                v.push(y);
                mags.push(mag);
            }
        }
    }
    (Host { shape, v }, mags)
}

/// f32 accumulation of `k` terms plus one rounding to `dt` (f64: in f64).
fn check(what: &str, got: &Array, want: &Host, mags: &[f64], k: usize, dt: DType) {
    assert_eq!(got.shape(), &want.shape[..], "{what}: shape");
    assert_eq!(got.dtype(), dt, "{what}: dtype");
    let g: Vec<f64> = read_ok(got, what).into_iter().map(Val::f).collect();
    let acc_eps = if dt == DType::F64 {
        2f64.powi(-53)
    } else {
        2f64.powi(-24)
    };
    let out_eps = match dt {
        DType::F32 | DType::F64 => 0.0,
        DType::F16 => 2f64.powi(-11),
        _ => 2f64.powi(-8),
    };
    for (i, ((&g, &w), &mag)) in g.iter().zip(&want.v).zip(mags).enumerate() {
        let tol = (k as f64 + 4.0) * acc_eps * mag + out_eps * w.abs() + 1e-300;
        let same = (g - w).abs() <= tol || (g.is_nan() && w.is_nan()) || g == w;
        assert!(same, "{what}: element {i}: got {g}, want {w} (tol {tol:e})");
    }
}

fn float_dtypes(dev: &Device) -> Vec<DType> {
    [DType::F32, DType::F16, DType::BF16, DType::F64]
        .into_iter()
        .filter(|&d| super::supported(dev, d))
        .collect()
}

/// `matmul` on matrices, vectors, batches and views, every float dtype.
pub fn matmul_values(dev: &Device) {
    let mut rng = Rng::new(0x3a7);
    // (M, K, N): odd sizes around tile edges, K much larger than a tile, vectors.
    let sizes = [
        (1, 1, 1),
        (2, 3, 2),
        (7, 5, 3),
        (63, 65, 64),
        (65, 63, 129),
        (130, 33, 127),
        (9, 1000, 11),
        (1, 65, 63),
        (63, 65, 1),
        (1000, 7, 1),
        (1, 300, 1),
        (3, 4097, 2),
        (5, 256, 1),
        (1, 512, 1),
        (67, 68, 132),
        (128, 256, 64),
        (1, 33, 64),
        (1, 700, 136),
        // Multiples of 8 past one 128 x 128 tile: the vec4 cooperative kernel on
        // adapters with cooperative matrices (f16), K not a multiple of its 32.
        (136, 40, 72),
        (200, 264, 256),
        // Matrix-vector products whose rows the vectorised kernel takes four at a
        // time (M a multiple of 4, K of a vec4 of words), and a vector @ matrix
        // that becomes one through B's transposed view.
        (8, 256, 1),
        (1000, 64, 1),
        (1, 64, 12),
        // Few output tiles and a long K: computed in parts of K summed in f32
        // (8, 6 and 3 parts; K 1000 has no even split and stays whole).
        (9, 2048, 11),
        (20, 1536, 24),
        (12, 768, 20),
    ];
    for dt in float_dtypes(dev) {
        for &(m, k, n) in &sizes {
            let what = format!("matmul {dt} [{m},{k}] @ [{k},{n}]");
            let a = Host::random(&mut rng, dt, &[m, k]);
            let b = Host::random(&mut rng, dt, &[k, n]);
            let (want, mags) = reference(&a, &b, None, 1.0, 0.0);
            let got = ok(&what, wmx::matmul(&a.array(dev, dt), &b.array(dev, dt)));
            check(&what, &got, &want, &mags, k, dt);
            // The same product from transposed operands (views read in place), each
            // and both.
            let at = a.transpose_last().array(dev, dt);
            let bt = b.transpose_last().array(dev, dt);
            let (a1, b1) = (a.array(dev, dt), b.array(dev, dt));
            let (at, bt) = (ok(&what, at.t()), ok(&what, bt.t()));
            for (x, y, how) in [(&at, &bt, "both"), (&at, &b1, "A"), (&a1, &bt, "B")] {
                let what_t = format!("{what} from transposed views ({how})");
                let got = ok(&what_t, wmx::matmul(x, y));
                check(&what_t, &got, &want, &mags, k, dt);
            }
        }
        // Batches: broadcast batch dims, a batch of one, a shared matrix.
        for (sa, sb) in [
            (vec![2, 3, 5, 4], vec![3, 4, 6]),
            (vec![1, 7, 9], vec![4, 9, 2]),
            (vec![5, 1, 8], vec![8, 7]),
            (vec![3, 6], vec![2, 2, 6, 65]),
            (vec![4, 1, 33], vec![4, 33, 1]),
            (vec![3, 33, 8], vec![8, 20]),
            (vec![3, 136, 24], vec![3, 24, 80]),
            (vec![2, 1, 72, 16], vec![3, 16, 136]),
            (vec![3, 12, 40], vec![3, 40, 1]),
            // A shared matrix under batches that fold into one product's rows.
            (vec![2, 3, 5, 16], vec![16, 24]),
            (vec![4, 16, 512], vec![512, 8]),
        ] {
            let what = format!("matmul {dt} {sa:?} @ {sb:?}");
            let a = Host::random(&mut rng, dt, &sa);
            let b = Host::random(&mut rng, dt, &sb);
            let (want, mags) = reference(&a, &b, None, 1.0, 0.0);
            let got = ok(&what, wmx::matmul(&a.array(dev, dt), &b.array(dev, dt)));
            check(&what, &got, &want, &mags, sa[sa.len() - 1], dt);
        }
        // Batches whose rows do not fold without a copy (a view with its batch
        // axes swapped), against a shared matrix.
        let (p, q, m, k, n) = (3, 4, 6, 16, 10);
        let src = Host::random(&mut rng, dt, &[q, p, m, k]);
        let mut v = vec![0.0; src.v.len()];
        for (i, x) in src.v.iter().enumerate() {
            let (qi, pi, r) = (i / (p * m * k), i / (m * k) % p, i % (m * k));
            v[(pi * q + qi) * m * k + r] = *x;
        }
        let a = Host {
            shape: vec![p, q, m, k],
            v,
        };
        let b = Host::random(&mut rng, dt, &[k, n]);
        let what = format!("matmul {dt} of a batch-swapped view @ [{k},{n}]");
        let view = ok(
            &what,
            wmx::transpose(&src.array(dev, dt), Some(&[1, 0, 2, 3])),
        );
        let got = ok(&what, wmx::matmul(&view, &b.array(dev, dt)));
        let (want, mags) = reference(&a, &b, None, 1.0, 0.0);
        check(&what, &got, &want, &mags, k, dt);
    }
    let dt = DType::F32;
    // 1-D operands: vector @ matrix, matrix @ vector, vector @ vector, batched.
    for (sa, sb, out) in [
        (vec![5], vec![5, 3], vec![3]),
        (vec![4, 5], vec![5], vec![4]),
        (vec![6], vec![6], vec![]),
        (vec![5], vec![2, 5, 3], vec![2, 3]),
        (vec![7], vec![3, 7, 16], vec![3, 16]),
        (vec![2, 4, 5], vec![5], vec![2, 4]),
    ] {
        let what = format!("matmul {sa:?} @ {sb:?}");
        let a = Host::random(&mut rng, dt, &sa);
        let b = Host::random(&mut rng, dt, &sb);
        let a2 = if sa.len() == 1 {
            Host {
                shape: vec![1, sa[0]],
                v: a.v.clone(),
            }
        } else {
            a.clone()
        };
        let b2 = if sb.len() == 1 {
            Host {
                shape: vec![sb[0], 1],
                v: b.v.clone(),
            }
        } else {
            b.clone()
        };
        let (mut want, mags) = reference(&a2, &b2, None, 1.0, 0.0);
        want.shape = out;
        let got = ok(&what, wmx::matmul(&a.array(dev, dt), &b.array(dev, dt)));
        check(&what, &got, &want, &mags, *sa.last().unwrap(), dt);
    }
    // Strided slices with negative steps and a broadcast (stride 0) operand.
    let base = Host::random(&mut rng, dt, &[20, 30]);
    let x = base.array(dev, dt);
    let s = ok(
        "slice",
        x.slice(&[
            Slice::new(Some(18), Some(2), -3),
            Slice::new(Some(1), None, 2),
        ]),
    );
    let hs = Host {
        shape: vec![6, 15],
        v: (0..6)
            .flat_map(|i| (0..15).map(move |j| (18 - 3 * i, 1 + 2 * j)))
            .map(|(i, j)| base.v[i * 30 + j])
            .collect(),
    };
    let row = Host::random(&mut rng, dt, &[1, 15]);
    let bc = ok("broadcast", row.array(dev, dt).broadcast_to(&[7, 15]));
    let hb = Host {
        shape: vec![7, 15],
        v: (0..7).flat_map(|_| row.v.clone()).collect(),
    };
    let what = "matmul of a negative-step slice and a broadcast transposed";
    let (want, mags) = reference(&hs, &hb.transpose_last(), None, 1.0, 0.0);
    let got = ok(what, wmx::matmul(&s, &ok(what, bc.t())));
    check(what, &got, &want, &mags, 15, dt);
    // A matrix @ vector whose rows run backwards (a negative row stride).
    let base = Host::random(&mut rng, dt, &[16, 64]);
    let s = ok(
        "slice",
        base.array(dev, dt)
            .slice(&[Slice::new(None, None, -2), Slice::ALL]),
    );
    let hs = Host {
        shape: vec![8, 64],
        v: (0..8)
            .flat_map(|i| base.v[(15 - 2 * i) * 64..(16 - 2 * i) * 64].to_vec())
            .collect(),
    };
    let v = Host::random(&mut rng, dt, &[64, 1]);
    let what = "matmul of rows in reverse @ a vector";
    let (want, mags) = reference(&hs, &v, None, 1.0, 0.0);
    let got = ok(what, wmx::matmul(&s, &v.array(dev, dt)));
    check(what, &got, &want, &mags, 64, dt);
    // Empty dims: M, N or K of 0 (K = 0 is all zeros).
    for (sa, sb) in [([0, 3], [3, 4]), ([2, 3], [3, 0]), ([2, 0], [0, 4])] {
        let what = format!("matmul {sa:?} @ {sb:?}");
        let a = ok(&what, wmx::with_device(dev, || wmx::ones(&sa, dt)));
        let b = ok(&what, wmx::with_device(dev, || wmx::ones(&sb, dt)));
        let y = ok(&what, wmx::matmul(&a, &b));
        assert_eq!(y.shape(), &[sa[0], sb[1]], "{what}");
        let v = read_ok(&y, &what);
        assert!(v.iter().all(|x| x.f() == 0.0), "{what}: {v:?}");
    }
}

/// Products with more than 65535 workgroups in either kernel, NaN and inf.
pub fn matmul_big_and_special(dev: &Device) {
    let mut rng = Rng::new(0x5e1);
    let dt = DType::F32;
    for (sa, sb) in [(vec![70000, 2, 3], vec![3, 2]), (vec![70000, 3], vec![3])] {
        let what = format!("matmul {sa:?} @ {sb:?}");
        let a = Host::random(&mut rng, dt, &sa);
        let b = Host::random(&mut rng, dt, &sb);
        let b2 = if sb.len() == 1 {
            Host {
                shape: vec![3, 1],
                v: b.v.clone(),
            }
        } else {
            b.clone()
        };
        let (mut want, mags) = reference(&a, &b2, None, 1.0, 0.0);
        if sb.len() == 1 {
            want.shape.pop();
        }
        let got = ok(&what, wmx::matmul(&a.array(dev, dt), &b.array(dev, dt)));
        check(&what, &got, &want, &mags, 3, dt);
    }
    // K past the tiled kernel's loop budget (dispatched over parts of K, summed in
    // f32; lavapipe cut the loops at K ~ 52 000), f32 and 16-bit.
    for d in float_dtypes(dev) {
        let (m, k, n) = (3, 60_001, 20);
        let what = format!("matmul {d} [{m},{k}] @ [{k},{n}]");
        let a = Host::random(&mut rng, d, &[m, k]);
        let b = Host::random(&mut rng, d, &[k, n]);
        let (want, mags) = reference(&a, &b, None, 1.0, 0.0);
        let got = ok(&what, wmx::matmul(&a.array(dev, d), &b.array(dev, d)));
        check(&what, &got, &want, &mags, k, d);
    }
    // Enough output tiles for the large f32 tile (128 x 128, K steps of 16) on a
    // large GPU: M, N past one tile, K not a multiple of 16, every operand layout.
    let (sa, sb) = ([128, 136, 40], [128, 40, 132]);
    let a = Host::random(&mut rng, dt, &sa);
    let b = Host::random(&mut rng, dt, &sb);
    let (want, mags) = reference(&a, &b, None, 1.0, 0.0);
    let (a1, b1) = (a.array(dev, dt), b.array(dev, dt));
    let what = format!("matmul {sa:?} @ {sb:?}");
    let at = ok(&what, a.transpose_last().array(dev, dt).swapaxes(-1, -2));
    let bt = ok(&what, b.transpose_last().array(dev, dt).swapaxes(-1, -2));
    for (x, y, how) in [
        (&a1, &b1, "none"),
        (&at, &bt, "both"),
        (&at, &b1, "A"),
        (&a1, &bt, "B"),
    ] {
        let what = format!("{what}, transposed views: {how}");
        check(
            &what,
            &ok(&what, wmx::matmul(x, y)),
            &want,
            &mags,
            sa[2],
            dt,
        );
    }
    // 64 output tiles of 128 x 128 and K = 512: on the GPU two parts of K (a large
    // GPU's units evenly loaded), summed in f32.
    // A's rows repeat with period 7 (not a divisor of any tile) so that the f64
    // reference is 7 rows.
    let (m, k, n, p) = (8192, 512, 128, 7);
    let what = format!("matmul {dt} [{m},{k}] @ [{k},{n}], rows of period {p}");
    let rows = Host::random(&mut rng, dt, &[p, k]);
    let b = Host::random(&mut rng, dt, &[k, n]);
    let (per, per_mags) = reference(&rows, &b, None, 1.0, 0.0);
    let tile = |v: &[f64], w: usize| -> Vec<f64> {
        (0..m)
            .flat_map(|i| v[(i % p) * w..(i % p + 1) * w].to_vec())
            .collect()
    };
    let a = Host {
        shape: vec![m, k],
        v: tile(&rows.v, k),
    };
    let want = Host {
        shape: vec![m, n],
        v: tile(&per.v, n),
    };
    let mags = tile(&per_mags, n);
    let got = ok(&what, wmx::matmul(&a.array(dev, dt), &b.array(dev, dt)));
    check(&what, &got, &want, &mags, k, dt);
    // NaN and inf propagate as in the f64 sum (inf * 0 is NaN, inf - inf is NaN).
    for (m, n) in [(4, 4), (4, 1), (1, 4)] {
        let k = 3;
        let mut a = Host::random(&mut rng, dt, &[m, k]);
        let mut b = Host::random(&mut rng, dt, &[k, n]);
        a.v[0] = f64::NAN;
        b.v[0] = 0.0;
        b.v[k * n - 1] = f64::INFINITY;
        if m > 1 {
            a.v[k] = f64::INFINITY;
            a.v[2 * k + 1] = f64::INFINITY;
            a.v[2 * k + 2] = f64::NEG_INFINITY;
        }
        let what = format!("matmul with NaN and inf [{m},{k}] @ [{k},{n}]");
        let (want, mags) = reference(&a, &b, None, 1.0, 0.0);
        let got = ok(&what, wmx::matmul(&a.array(dev, dt), &b.array(dev, dt)));
        check(&what, &got, &want, &mags, k, dt);
    }
}

/// `addmm`: scales and biases of every broadcast shape, every float dtype.
pub fn addmm_values(dev: &Device) {
    let mut rng = Rng::new(0xadd);
    for dt in float_dtypes(dev) {
        for (m, k, n) in [
            (5, 7, 9),
            (64, 33, 65),
            (1, 40, 9),
            (9, 40, 1),
            (3, 0, 4),
            (136, 24, 72),
            (12, 40, 1),
            // In parts of K (4), the bias added after their sum.
            (10, 1024, 12),
        ] {
            for cshape in [vec![m, n], vec![n], vec![m, 1], vec![]] {
                let (alpha, beta) = (1.5, -0.75);
                let what = format!("addmm {dt} [{m},{k}] @ [{k},{n}] + c {cshape:?}");
                let a = Host::random(&mut rng, dt, &[m, k]);
                let b = Host::random(&mut rng, dt, &[k, n]);
                let c = Host::random(&mut rng, dt, &cshape);
                let c2 = match cshape.len() {
                    0 => Host {
                        shape: vec![1, 1],
                        v: c.v.clone(),
                    },
                    1 => Host {
                        shape: vec![1, n],
                        v: c.v.clone(),
                    },
                    _ => c.clone(),
                };
                let (want, mags) = reference(&a, &b, Some(&c2), alpha, beta);
                let got = ok(
                    &what,
                    wmx::addmm(
                        &c.array(dev, dt),
                        &a.array(dev, dt),
                        &b.array(dev, dt),
                        alpha,
                        beta,
                    ),
                );
                check(&what, &got, &want, &mags, k, dt);
            }
        }
    }
}

/// Bad operands are errors at the op, naming the shapes or dtype.
pub fn matmul_errors(dev: &Device) {
    let mk = |shape: &[usize], dt| ok("operand", wmx::with_device(dev, || wmx::ones(shape, dt)));
    let f = DType::F32;
    super::expect_err(
        "inner dims differ",
        wmx::matmul(&mk(&[2, 3], f), &mk(&[4, 2], f)),
        &["matmul", "[2, 3]", "[4, 2]"],
    );
    super::expect_err(
        "batch dims do not broadcast",
        wmx::matmul(&mk(&[2, 2, 3], f), &mk(&[3, 3, 2], f)),
        &["matmul", "[2]", "[3]"],
    );
    super::expect_err(
        "scalar operand",
        wmx::matmul(&mk(&[], f), &mk(&[3], f)),
        &["matmul", "at least one dimension"],
    );
    super::expect_err(
        "integer operands",
        wmx::matmul(&mk(&[2, 2], DType::I32), &mk(&[2, 2], DType::I32)),
        &["matmul", "i32"],
    );
    super::expect_err(
        "bias that does not broadcast",
        wmx::addmm(&mk(&[3], f), &mk(&[2, 4], f), &mk(&[4, 5], f), 1.0, 1.0),
        &["addmm", "[3]", "[2, 5]"],
    );
}

/// Derivatives of products (vjp, jvp, through batch broadcasting and vectors) and
/// vmap, against the same products written out on the host.
pub fn grad_matmul(dev: &Device) {
    let mut rng = Rng::new(0x9a7);
    let dt = DType::F32;
    for (sa, sb) in [
        (vec![4, 5], vec![5, 3]),
        (vec![2, 4, 5], vec![5, 3]),
        (vec![5], vec![5, 3]),
        (vec![4, 5], vec![5]),
        (vec![3, 1, 2, 4], vec![2, 4, 6]),
    ] {
        let what = format!("grad of sum(w * (a @ b)) for {sa:?} @ {sb:?}");
        let a = Host::random(&mut rng, dt, &sa);
        let b = Host::random(&mut rng, dt, &sb);
        // Forward on the host to learn the output shape, then weights w of it.
        let a2 = promote(&a, true);
        let b2 = promote(&b, false);
        let (y, _) = reference(&a2, &b2, None, 1.0, 0.0);
        let w = Host::random(&mut rng, dt, &y.shape);
        let wa = w.array(dev, dt);
        let f = |xs: &[Array]| -> Result<Vec<Array>> {
            let mut yv = wmx::matmul(&xs[0], &xs[1])?;
            let want: Vec<usize> = squeezed(&y.shape, sa.len() == 1, sb.len() == 1);
            yv = yv.reshape(&want.iter().map(|&d| d as isize).collect::<Vec<_>>())?;
            let wr = wa.reshape(&want.iter().map(|&d| d as isize).collect::<Vec<_>>())?;
            Ok(vec![wmx::sum(&wmx::multiply(&yv, &wr)?, None, false)?])
        };
        let (aa, ba) = (a.array(dev, dt), b.array(dev, dt));
        let g = ok(&what, wmx::grad(f, &[0, 1])(&[aa.clone(), ba.clone()]));
        // da = w @ bᵀ summed over a's broadcast batch dims; db = aᵀ @ w likewise.
        let (da, _) = reference(&w, &b2.transpose_last(), None, 1.0, 0.0);
        let (db, _) = reference(&a2.transpose_last(), &w, None, 1.0, 0.0);
        let da = sum_to(&da, &a2.shape);
        let db = sum_to(&db, &b2.shape);
        for (name, got, want) in [("da", &g[0], &da), ("db", &g[1], &db)] {
            let gv: Vec<f64> = read_ok(got, &what).into_iter().map(Val::f).collect();
            assert_eq!(gv.len(), want.v.len(), "{what}: {name} size");
            for (i, (&x, &r)) in gv.iter().zip(&want.v).enumerate() {
                assert!(
                    (x - r).abs() <= 1e-5 * (1.0 + r.abs()) * 8.0,
                    "{what}: {name}[{i}] = {x}, want {r}"
                );
            }
        }
        // jvp with tangents (a, b): d(sum(w * ab)) = sum(w * (a b + a b)) = 2 f.
        let (p, t) = ok(
            &what,
            wmx::jvp(f, &[aa.clone(), ba.clone()], &[aa.clone(), ba.clone()]),
        );
        let (pv, tv) = (read_ok(&p[0], &what)[0].f(), read_ok(&t[0], &what)[0].f());
        assert!(
            (tv - 2.0 * pv).abs() <= 1e-5 * (1.0 + pv.abs()) * 8.0,
            "{what}: jvp {tv}, want {}",
            2.0 * pv
        );
    }
    // addmm's bias gets beta times the cotangent.
    let what = "grad of addmm's bias";
    let c = Host::random(&mut rng, dt, &[3]);
    let (a, b) = (
        Host::random(&mut rng, dt, &[4, 5]),
        Host::random(&mut rng, dt, &[5, 3]),
    );
    let (aa, ba) = (a.array(dev, dt), b.array(dev, dt));
    let f = move |xs: &[Array]| -> Result<Vec<Array>> {
        Ok(vec![wmx::sum(
            &wmx::addmm(&xs[0], &aa, &ba, 2.0, -3.0)?,
            None,
            false,
        )?])
    };
    let g = ok(what, wmx::grad(f, &[0])(&[c.array(dev, dt)]));
    let gv = read_ok(&g[0], what);
    assert!(
        gv.iter().all(|v| (v.f() + 12.0).abs() < 1e-5),
        "{what}: {gv:?}, want -3 * 4 rows"
    );
    // With beta 1 (a linear layer's bias) the cotangent passes as it is.
    let (aa, ba) = (a.array(dev, dt), b.array(dev, dt));
    let f = move |xs: &[Array]| -> Result<Vec<Array>> {
        let y = wmx::addmm(&xs[0], &aa, &ba, 0.5, 1.0)?;
        Ok(vec![wmx::sum(&wmx::multiply(&y, &y)?, None, false)?])
    };
    let g = ok(what, wmx::grad(f, &[0])(&[c.array(dev, dt)]));
    // d/dc of the sum of squares: twice each column's sum of the f64 product.
    let (y, _) = reference(&a, &b, Some(&c), 0.5, 1.0);
    let want: Vec<f64> = (0..3)
        .map(|j| (0..4).map(|i| 2.0 * y.v[i * 3 + j]).sum())
        .collect();
    let gv = read_ok(&g[0], what);
    for (got, want) in gv.iter().zip(&want) {
        assert!(
            (got.f() - want).abs() <= 1e-2 * want.abs().max(1.0),
            "{what} (beta 1): {gv:?}, want {want:?}"
        );
    }
    // vmap over a batch of left operands equals the batched product.
    let what = "vmap of matmul";
    let a = Host::random(&mut rng, dt, &[6, 4, 5]);
    let b = Host::random(&mut rng, dt, &[5, 3]);
    let ba = b.array(dev, dt);
    let f = move |xs: &[Array]| -> Result<Vec<Array>> { Ok(vec![wmx::matmul(&xs[0], &ba)?]) };
    let v = ok(what, wmx::vmap(f, &[Some(0)], &[0])(&[a.array(dev, dt)]));
    let (want, mags) = reference(&a, &b, None, 1.0, 0.0);
    check(what, &v[0], &want, &mags, 5, dt);
}

/// A 1-D operand as the matrix numpy makes of it.
fn promote(x: &Host, left: bool) -> Host {
    if x.shape.len() > 1 {
        return x.clone();
    }
    let shape = if left {
        vec![1, x.shape[0]]
    } else {
        vec![x.shape[0], 1]
    };
    Host {
        shape,
        v: x.v.clone(),
    }
}

fn squeezed(shape: &[usize], row: bool, col: bool) -> Vec<usize> {
    let mut s = shape.to_vec();
    let nd = s.len();
    if col {
        s.remove(nd - 1);
    }
    if row {
        s.remove(nd - 2);
    }
    s
}

/// Sums a host array over the leading and size-1 axes it was broadcast along.
fn sum_to(x: &Host, shape: &[usize]) -> Host {
    let lead = x.shape.len() - shape.len();
    let mut v = vec![0.0; shape.iter().product()];
    for (flat, idx) in crate::host::indices(&x.shape).iter().enumerate() {
        let mut o = 0;
        for (d, &n) in shape.iter().enumerate() {
            o = o * n + if n == 1 { 0 } else { idx[lead + d] };
        }
        v[o] += x.v[flat];
    }
    Host {
        shape: shape.to_vec(),
        v,
    }
}
