//! `wmx::fft` against direct sums in f64 written out here (O(n^2) DFTs of the
//! same f32 inputs): lengths with every radix, primes (direct and Bluestein),
//! powers of two past one workgroup (four-step on a GPU), along any axis of views,
//! cropped and padded, each norm; real transforms and their inverses; 2-D and
//! n-D forms; gradients against central differences; vmap; errors.

use wmx_core::fft::{self, Norm};
use wmx_core::{self as wmx, Array, Complex32, DType, Device, Result};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

type C = (f64, f64);

/// `sum_j x[j] exp(sign 2 pi i jk / n)` for each k, in f64.
fn dft(x: &[C], sign: f64) -> Vec<C> {
    let n = x.len();
    let w: Vec<C> = (0..n)
        .map(|k| {
            let t = sign * std::f64::consts::TAU * k as f64 / n as f64;
            (t.cos(), t.sin())
        })
        .collect();
    (0..n)
        .map(|k| {
            x.iter().enumerate().fold((0.0, 0.0), |s, (j, &(a, b))| {
                let (c, si) = w[(j * k) % n];
                (s.0 + a * c - b * si, s.1 + a * si + b * c)
            })
        })
        .collect()
}

fn random(n: usize, seed: u64) -> Vec<Complex32> {
    let mut rng = crate::rng::Rng::new(seed);
    (0..n)
        .map(|_| Complex32::new(rng.uniform(-1.0, 1.0) as f32, rng.uniform(-1.0, 1.0) as f32))
        .collect()
}

fn host(v: &[Complex32]) -> Vec<C> {
    v.iter().map(|z| (z.re as f64, z.im as f64)).collect()
}

fn read(what: &str, a: &Array, shape: &[usize]) -> Vec<C> {
    assert_eq!(a.shape(), shape, "{what}: shape");
    assert_eq!(a.dtype(), DType::C64, "{what}: dtype");
    host(&ok(what, a.to_vec::<Complex32>()))
}

/// Each element within `tol * (1 + log2 n) * |x|_2` of `want` (the FFT's error
/// grows with the row's norm and its depth).
fn close(what: &str, got: &[C], want: &[C], norm2: f64, n: usize, tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let bound = tol * (1.0 + (n as f64).log2()) * norm2.max(1e-30);
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let e = (g.0 - w.0).hypot(g.1 - w.1);
        assert!(
            e <= bound,
            "{what}: element {k}: got {g:?}, want {w:?} (error {e:e}, bound {bound:e})"
        );
    }
}

fn l2(x: &[C]) -> f64 {
    x.iter().map(|z| z.0 * z.0 + z.1 * z.1).sum::<f64>().sqrt()
}

/// Rows of every kind of length, forward and inverse, each norm.
pub fn fft_values(dev: &Device) {
    let lengths = [
        1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 30, 49, 64, 97, 128, 243, 1000, 2048, 4096, 8192,
    ];
    for (i, &n) in lengths.iter().enumerate() {
        let rows = if n >= 4096 { 2 } else { 3 };
        let v = random(rows * n, 100 + i as u64);
        let x = ok("x", Array::from_slice_on(&v, &[rows, n], dev));
        let h = host(&v);
        let refs: Vec<[Vec<C>; 2]> = (0..rows)
            .map(|r| [-1.0, 1.0].map(|s| dft(&h[r * n..(r + 1) * n], s)))
            .collect();
        for (inverse, norm) in [
            (false, Norm::Backward),
            (true, Norm::Backward),
            (false, Norm::Ortho),
            (true, Norm::Forward),
        ] {
            let what = format!(
                "{} n={n} {norm:?} on {dev}",
                if inverse { "ifft" } else { "fft" }
            );
            let y = if inverse {
                fft::ifft(&x, None, -1, norm)
            } else {
                fft::fft(&x, None, -1, norm)
            };
            let got = read(&what, &ok(&what, y), &[rows, n]);
            let scale = match (norm, inverse) {
                (Norm::Backward, true) | (Norm::Forward, false) => 1.0 / n as f64,
                (Norm::Ortho, _) => 1.0 / (n as f64).sqrt(),
                _ => 1.0,
            };
            for r in 0..rows {
                let row = &h[r * n..(r + 1) * n];
                let want: Vec<C> = refs[r][inverse as usize]
                    .iter()
                    .copied()
                    .map(|z| (z.0 * scale, z.1 * scale))
                    .collect();
                close(
                    &format!("{what} row {r}"),
                    &got[r * n..(r + 1) * n],
                    &want,
                    l2(row) * scale,
                    n,
                    3e-7,
                );
            }
        }
    }
}

/// The RMS error of whole transforms, `|fft(x) - X|_2 / |X|_2` against f64
/// sums, within `2.2e-8 log2 n`: an f32 FFT whose twiddles come straight from
/// f64 tables measures 1.3-1.5e-8 log2 n at these lengths on lavapipe, one that
/// derives them by repeated squaring 3.0-3.2e-8 log2 n (bench/NOTES.md, run 205's
/// correction).
pub fn fft_rms_accuracy(dev: &Device) {
    for (i, &n) in [256usize, 1024, 2048].iter().enumerate() {
        let rows = 4;
        let v = random(rows * n, 900 + i as u64);
        let x = ok("x", Array::from_slice_on(&v, &[rows, n], dev));
        let h = host(&v);
        for inverse in [false, true] {
            let what = format!("{} of {n} on {dev}", if inverse { "ifft" } else { "fft" });
            let y = if inverse {
                fft::ifft(&x, None, -1, Norm::Forward)
            } else {
                fft::fft(&x, None, -1, Norm::Backward)
            };
            let got = read(&what, &ok(&what, y), &[rows, n]);
            let (mut err, mut norm) = (0.0, 0.0);
            for r in 0..rows {
                let want = dft(&h[r * n..(r + 1) * n], if inverse { 1.0 } else { -1.0 });
                for (g, w) in got[r * n..(r + 1) * n].iter().zip(&want) {
                    err += (g.0 - w.0).powi(2) + (g.1 - w.1).powi(2);
                    norm += w.0 * w.0 + w.1 * w.1;
                }
            }
            let rel = (err / norm).sqrt();
            let bound = 2.2e-8 * (n as f64).log2();
            assert!(rel <= bound, "{what}: RMS relative error {rel:e} > {bound:e}");
        }
    }
}

/// Along the first axis of a transposed view, cropped and padded, real and
/// integer input, and a batch with more than 65535 rows.
pub fn fft_axes_and_views(dev: &Device) {
    let (r, c) = (6, 10);
    let v = random(r * c, 7);
    let h = host(&v);
    let x = ok("x", Array::from_slice_on(&v, &[r, c], dev));
    let xt = ok("t", x.t()); // [c, r], a view
    // fft of the view along axis 1 = fft of the columns of x.
    let got = read(
        "fft of a transposed view",
        &ok("fft", fft::fft(&xt, None, 1, Norm::Backward)),
        &[c, r],
    );
    for j in 0..c {
        let col: Vec<C> = (0..r).map(|i| h[i * c + j]).collect();
        close(
            "fft of a transposed view",
            &got[j * r..(j + 1) * r],
            &dft(&col, -1.0),
            l2(&col),
            r,
            3e-7,
        );
    }
    // Along axis 0, n cropped (4) and padded (9).
    for n in [4, 9] {
        let got = read(
            "fft axis 0",
            &ok("fft", fft::fft(&x, Some(n), 0, Norm::Backward)),
            &[n, c],
        );
        for j in 0..c {
            let col: Vec<C> = (0..n)
                .map(|i| if i < r { h[i * c + j] } else { (0.0, 0.0) })
                .collect();
            let g: Vec<C> = (0..n).map(|k| got[k * c + j]).collect();
            close(
                &format!("fft axis 0 n={n}"),
                &g,
                &dft(&col, -1.0),
                l2(&col),
                n,
                3e-7,
            );
        }
    }
    // Real and integer input are cast to c64.
    let ints: Vec<i32> = (0..12).map(|i| (i * 7 % 5) - 2).collect();
    let xi = ok("i32", Array::from_slice_on(&ints, &[12], dev));
    let hi: Vec<C> = ints.iter().map(|&a| (a as f64, 0.0)).collect();
    let got = read(
        "fft of i32",
        &ok("fft", fft::fft(&xi, None, 0, Norm::Backward)),
        &[12],
    );
    close("fft of i32", &got, &dft(&hi, -1.0), l2(&hi), 12, 3e-7);
    // 70000 rows of 4: more rows than one dispatch's workgroups.
    let rows = 70_000;
    let v = random(rows * 4, 8);
    let x = ok("x", Array::from_slice_on(&v, &[rows, 4], dev));
    let got = read(
        "70000 rows",
        &ok("fft", fft::fft(&x, None, -1, Norm::Backward)),
        &[rows, 4],
    );
    let h = host(&v);
    for row in [0, 1, 65535, 65536, rows - 1] {
        let x = &h[row * 4..row * 4 + 4];
        close(
            &format!("row {row} of 70000"),
            &got[row * 4..row * 4 + 4],
            &dft(x, -1.0),
            l2(x),
            4,
            3e-7,
        );
    }
}

/// rfft, irfft and their round trip, even and odd lengths, n given. On a GPU
/// powers of two up to 4096 take one pass each way (n / 2 with an even log2
/// loaded straight into the first radix-16 step, else bit-reversed), 8192 a
/// complex transform and the real step's own pass.
pub fn rfft_values(dev: &Device) {
    for (i, &n) in [1usize, 2, 4, 5, 8, 9, 32, 64, 100, 2048, 4096, 8192]
        .iter()
        .enumerate()
    {
        let mut rng = crate::rng::Rng::new(200 + i as u64);
        let v: Vec<f32> = (0..2 * n).map(|_| rng.uniform(-1.0, 1.0) as f32).collect();
        let x = ok("x", Array::from_slice_on(&v, &[2, n], dev));
        let m = n / 2 + 1;
        let got = read(
            "rfft",
            &ok("rfft", fft::rfft(&x, None, -1, Norm::Backward)),
            &[2, m],
        );
        for r in 0..2 {
            let row: Vec<C> = v[r * n..(r + 1) * n]
                .iter()
                .map(|&a| (a as f64, 0.0))
                .collect();
            let want = dft(&row, -1.0);
            close(
                &format!("rfft n={n} row {r}"),
                &got[r * m..(r + 1) * m],
                &want[..m],
                l2(&row),
                n,
                3e-7,
            );
        }
        if n < 2 {
            continue;
        }
        let spec = ok("rfft", fft::rfft(&x, None, -1, Norm::Backward));
        let back = ok("irfft", fft::irfft(&spec, Some(n), -1, Norm::Backward));
        assert_eq!(back.shape(), &[2, n], "irfft shape");
        assert_eq!(back.dtype(), DType::F32, "irfft dtype");
        let b = ok("read", back.to_vec::<f32>());
        for (k, (&g, &w)) in b.iter().zip(&v).enumerate() {
            assert!(
                (g - w).abs() <= 2e-6 * (1.0 + (n as f32).log2()),
                "irfft(rfft(x)) n={n} element {k}: {g} vs {w}"
            );
        }
    }
    // irfft of a spectrum that is not Hermitian: the imaginary parts of the zero
    // and Nyquist frequencies are ignored; default n = 2 (m - 1); n odd.
    let s = [
        Complex32::new(1.0, 5.0),
        Complex32::new(2.0, -1.0),
        Complex32::new(0.5, 0.25),
        Complex32::new(-3.0, 7.0),
    ];
    let spec = ok("spec", Array::from_slice_on(&s, &[4], dev));
    for n in [None, Some(5), Some(3), Some(9)] {
        let nn = n.unwrap_or(6);
        let got = ok(
            "irfft",
            fft::irfft(&spec, n, 0, Norm::Backward).and_then(|y| y.to_vec::<f32>()),
        );
        // The Hermitian extension of the first nn / 2 + 1 points, zero-padded.
        let m = nn / 2 + 1;
        let half: Vec<C> = (0..m)
            .map(|k| {
                if k < 4 {
                    (s[k].re as f64, s[k].im as f64)
                } else {
                    (0.0, 0.0)
                }
            })
            .collect();
        let want: Vec<f64> = (0..nn)
            .map(|j| {
                (0..nn)
                    .map(|k| {
                        let (a, b) = if k < m {
                            half[k]
                        } else {
                            (half[nn - k].0, -half[nn - k].1)
                        };
                        let t = std::f64::consts::TAU * ((j * k) % nn) as f64 / nn as f64;
                        a * t.cos() - b * t.sin()
                    })
                    .sum::<f64>()
                    / nn as f64
            })
            .collect();
        assert_eq!(got.len(), nn, "irfft n={n:?}: length");
        for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= 1e-5,
                "irfft n={n:?} element {k}: {g} vs {w}"
            );
        }
    }
}

/// fft2, ifftn over chosen axes, rfft2 and irfft2 against separable direct sums.
pub fn fftn_values(dev: &Device) {
    let (a, b, c) = (3, 6, 5);
    let v = random(a * b * c, 9);
    let h = host(&v);
    let x = ok("x", Array::from_slice_on(&v, &[a, b, c], dev));
    // 2-D over the last two axes, per leading index.
    let got = read(
        "fft2",
        &ok("fft2", fft::fft2(&x, None, None, Norm::Backward)),
        &[a, b, c],
    );
    let want = separable(&h, &[a, b, c], &[1, 2], -1.0);
    close("fft2", &got, &want, l2(&h), b * c, 3e-7);
    // ifftn over axes (0, 2), ortho.
    let got = read(
        "ifftn",
        &ok("ifftn", fft::ifftn(&x, None, Some(&[0, 2]), Norm::Ortho)),
        &[a, b, c],
    );
    let s = 1.0 / ((a * c) as f64).sqrt();
    let want: Vec<C> = separable(&h, &[a, b, c], &[0, 2], 1.0)
        .into_iter()
        .map(|z| (z.0 * s, z.1 * s))
        .collect();
    close(
        "ifftn axes (0, 2) ortho",
        &got,
        &want,
        l2(&h) * s,
        a * c,
        3e-7,
    );
    // rfft2 of the real parts: the first c / 2 + 1 columns of fft2.
    let re = ok("real", wmx::real(&x));
    let hr: Vec<C> = h.iter().map(|z| (z.0, 0.0)).collect();
    let m = c / 2 + 1;
    let got = read(
        "rfft2",
        &ok("rfft2", fft::rfft2(&re, None, None, Norm::Backward)),
        &[a, b, m],
    );
    let full = separable(&hr, &[a, b, c], &[1, 2], -1.0);
    let want: Vec<C> = (0..a * b)
        .flat_map(|q| full[q * c..q * c + m].to_vec())
        .collect();
    close("rfft2", &got, &want, l2(&hr), b * c, 3e-7);
    let back = ok(
        "irfft2",
        fft::irfft2(
            &ok("rfft2", fft::rfft2(&re, None, None, Norm::Backward)),
            Some(&[b, c]),
            None,
            Norm::Backward,
        ),
    );
    assert_eq!(back.shape(), &[a, b, c], "irfft2 shape");
    let got = ok("read", back.to_vec::<f32>());
    for (k, (g, z)) in got.iter().zip(&h).enumerate() {
        assert!(
            (*g as f64 - z.0).abs() <= 1e-5,
            "irfft2(rfft2(x)) element {k}: {g} vs {}",
            z.0
        );
    }
    // fftn over every axis with s: the last two cropped and padded.
    let got = read(
        "fftn s",
        &ok("fftn", fft::fftn(&x, Some(&[4, 3]), None, Norm::Backward)),
        &[a, 4, 3],
    );
    let fitted: Vec<C> = (0..a * 4 * 3)
        .map(|q| {
            let (i, j, k) = (q / 12, (q / 3) % 4, q % 3);
            if j < b {
                h[(i * b + j) * c + k]
            } else {
                (0.0, 0.0)
            }
        })
        .collect();
    close(
        "fftn with s",
        &got,
        &separable(&fitted, &[a, 4, 3], &[1, 2], -1.0),
        l2(&h),
        12,
        3e-7,
    );
}

/// The DFT of `x` (row-major `shape`) along each of `axes`, in f64.
fn separable(x: &[C], shape: &[usize], axes: &[usize], sign: f64) -> Vec<C> {
    let mut y = x.to_vec();
    for &ax in axes {
        let n = shape[ax];
        let inner: usize = shape[ax + 1..].iter().product();
        let outer: usize = shape[..ax].iter().product();
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| (o * n + k) * inner + i;
                let line: Vec<C> = (0..n).map(|k| y[at(k)]).collect();
                for (k, z) in dft(&line, sign).into_iter().enumerate() {
                    y[at(k)] = z;
                }
            }
        }
    }
    y
}

/// Gradients of real losses through fft, rfft and irfft against central
/// differences of an f64 host model; jvp and vmap.
pub fn grad_fft(dev: &Device) {
    let n = 6;
    let v = random(n, 11);
    let h = host(&v);
    let w: Vec<f64> = (0..n).map(|k| 0.5 + k as f64 * 0.25).collect();
    let wa = ok(
        "w",
        Array::from_slice_on(&w.iter().map(|&a| a as f32).collect::<Vec<_>>(), &[n], dev),
    );
    // L(z) = sum_k w_k |fft(z)_k|^2 + real(ifft(z)_1)
    let loss = |z: &Array| -> Result<Array> {
        let f = fft::fft(z, None, 0, Norm::Backward)?;
        let a = wmx::sum(
            &wmx::multiply(&wmx::square(&wmx::abs(&f)?)?, &wa)?,
            None,
            false,
        )?;
        let i = fft::ifft(z, None, 0, Norm::Ortho)?;
        let b = wmx::real(&i.slice(&[wmx::Slice::range(1, 2)])?)?.sum(None, false)?;
        wmx::add(&a, &b)
    };
    let model = |z: &[C]| -> f64 {
        let f = dft(z, -1.0);
        let a: f64 = f
            .iter()
            .zip(&w)
            .map(|(c, w)| w * (c.0 * c.0 + c.1 * c.1))
            .sum();
        a + dft(z, 1.0)[1].0 / (n as f64).sqrt()
    };
    let z = ok("z", Array::from_slice_on(&v, &[n], dev));
    let g = ok(
        "grad",
        wmx::grad(|a: &[Array]| Ok(vec![loss(&a[0])?]), &[0])(std::slice::from_ref(&z)),
    );
    let got = read("grad through fft", &g[0], &[n]);
    let e = 1e-6;
    for k in 0..n {
        let d = |dz: C| {
            let (mut p, mut m) = (h.clone(), h.clone());
            p[k] = (p[k].0 + dz.0, p[k].1 + dz.1);
            m[k] = (m[k].0 - dz.0, m[k].1 - dz.1);
            (model(&p) - model(&m)) / (2.0 * e)
        };
        let want = (d((e, 0.0)), d((0.0, e)));
        let err = (got[k].0 - want.0).hypot(got[k].1 - want.1);
        assert!(
            err <= 1e-3 * want.0.hypot(want.1).max(1.0),
            "grad through fft element {k}: {:?} vs {want:?}",
            got[k]
        );
    }
    // Real input: L(x) = sum |rfft(x)|^2 w[..m] + sum irfft(rfft(x) * w[..m]) x.
    let xr: Vec<f32> = (0..n).map(|k| (k as f32 * 0.7).sin()).collect();
    let m = n / 2 + 1;
    let wm = ok(
        "wm",
        Array::from_slice_on(
            &w[..m].iter().map(|&a| a as f32).collect::<Vec<_>>(),
            &[m],
            dev,
        ),
    );
    let rloss = |x: &Array| -> Result<Array> {
        let s = fft::rfft(x, None, 0, Norm::Backward)?;
        let a = wmx::sum(
            &wmx::multiply(&wmx::square(&wmx::abs(&s)?)?, &wm)?,
            None,
            false,
        )?;
        let back = fft::irfft(&wmx::multiply(&s, &wm)?, Some(n), 0, Norm::Backward)?;
        wmx::add(&a, &wmx::sum(&wmx::multiply(&back, x)?, None, false)?)
    };
    let rmodel = |x: &[f64]| -> f64 {
        let c: Vec<C> = x.iter().map(|&a| (a, 0.0)).collect();
        let s = dft(&c, -1.0);
        let a: f64 = (0..m)
            .map(|k| w[k] * (s[k].0 * s[k].0 + s[k].1 * s[k].1))
            .sum();
        // irfft of the weighted half spectrum: its Hermitian extension's inverse.
        let full: Vec<C> = (0..n)
            .map(|k| {
                let q = if k < m { k } else { n - k };
                let z = (s[q].0 * w[q], s[q].1 * w[q]);
                if k < m { z } else { (z.0, -z.1) }
            })
            .collect();
        let back = dft(&full, 1.0);
        a + back
            .iter()
            .zip(x)
            .map(|(b, x)| b.0 / n as f64 * x)
            .sum::<f64>()
    };
    let xa = ok("x", Array::from_slice_on(&xr, &[n], dev));
    let g = ok(
        "grad",
        wmx::grad(|a: &[Array]| Ok(vec![rloss(&a[0])?]), &[0])(std::slice::from_ref(&xa)),
    );
    let got = ok("read", g[0].to_vec::<f32>());
    let hx: Vec<f64> = xr.iter().map(|&a| a as f64).collect();
    for k in 0..n {
        let (mut p, mut q) = (hx.clone(), hx.clone());
        p[k] += e;
        q[k] -= e;
        let want = (rmodel(&p) - rmodel(&q)) / (2.0 * e);
        assert!(
            (got[k] as f64 - want).abs() <= 1e-3 * want.abs().max(1.0),
            "grad through rfft/irfft element {k}: {} vs {want}",
            got[k]
        );
    }
    // jvp of fft (linear): the fft of the tangent.
    let t = ok("t", Array::from_slice_on(&random(n, 12), &[n], dev));
    let (_, ts) = ok(
        "jvp",
        wmx::jvp(
            |a: &[Array]| Ok(vec![fft::fft(&a[0], None, 0, Norm::Backward)?]),
            std::slice::from_ref(&z),
            std::slice::from_ref(&t),
        ),
    );
    let want = ok("fft t", fft::fft(&t, None, 0, Norm::Backward));
    close(
        "jvp of fft",
        &read("jvp", &ts[0], &[n]),
        &read("fft t", &want, &[n]),
        l2(&host(&ok("t", t.to_vec::<Complex32>()))),
        n,
        3e-7,
    );
    // vmap over a batch axis that is not the transformed one.
    let b = ok("b", Array::from_slice_on(&random(4 * n, 13), &[n, 4], dev));
    let f =
        |a: &[Array]| -> Result<Vec<Array>> { Ok(vec![fft::fft(&a[0], None, 0, Norm::Ortho)?]) };
    let v = ok(
        "vmap",
        wmx::vmap(f, &[Some(1)], &[1])(std::slice::from_ref(&b)),
    );
    let direct = ok("fft axis 0", fft::fft(&b, None, 0, Norm::Ortho));
    let (gv, gd) = (
        read("vmap", &v[0], &[n, 4]),
        read("direct", &direct, &[n, 4]),
    );
    close("vmap of fft", &gv, &gd, 3.0, n, 3e-7);
    // The gradient of a vmapped transform (per-column losses summed), and a vjp
    // of a jvp: the transforms inside keep their rules. For an ortho transform
    // sum |F x|^2 = sum |x|^2, whose gradient is 2 x; 4096 points take the GPU's
    // two passes.
    for len in [n, 4096] {
        let xb = ok(
            "x",
            Array::from_slice_on(&random(len * 3, 16), &[len, 3], dev),
        );
        let per_column = |a: &[Array]| -> Result<Vec<Array>> {
            let f = |c: &[Array]| -> Result<Vec<Array>> {
                let y = fft::fft(&c[0], None, 0, Norm::Ortho)?;
                Ok(vec![wmx::sum(&wmx::square(&wmx::abs(&y)?)?, None, false)?])
            };
            let each = wmx::vmap(f, &[Some(1)], &[0])(a)?;
            Ok(vec![wmx::sum(&each[0], None, false)?])
        };
        let g = ok(
            "grad of vmap",
            wmx::grad(per_column, &[0])(std::slice::from_ref(&xb)),
        );
        let want: Vec<C> = host(&ok("x", xb.to_vec::<Complex32>()))
            .iter()
            .map(|z| (2.0 * z.0, 2.0 * z.1))
            .collect();
        close(
            &format!("grad of vmap of fft ({len} points)"),
            &read("grad", &g[0], &[len, 3]),
            &want,
            l2(&want),
            len,
            3e-7,
        );
    }
    let jv = |a: &[Array]| -> Result<Vec<Array>> {
        let (_, t) = wmx::jvp(
            |x: &[Array]| Ok(vec![fft::fft(&x[0], None, 0, Norm::Backward)?]),
            &a[..1],
            &a[1..],
        )?;
        Ok(vec![wmx::real(&wmx::sum(&t[0], None, false)?)?])
    };
    let g = ok("vjp of jvp", wmx::grad(jv, &[1])(&[z.clone(), t.clone()]));
    // sum_k (F t)_k = n t_0: the gradient (real part) is n at 0, else 0.
    let got = read("vjp of jvp", &g[0], &[n]);
    let want: Vec<C> = (0..n)
        .map(|k| if k == 0 { (n as f64, 0.0) } else { (0.0, 0.0) })
        .collect();
    close("vjp of jvp of fft", &got, &want, n as f64, n, 3e-7);
}

/// fftfreq, rfftfreq, fftshift and ifftshift against numpy's formulas.
pub fn fft_helpers(dev: &Device) {
    let on = |f: &dyn Fn() -> Result<Array>| ok("helper", wmx::with_device(dev, f));
    let vals = |a: Array| ok("read", a.to_vec::<f32>());
    // Within f32 rounding of k / (d n) (numpy's values).
    let near = |what: &str, got: Vec<f32>, want: &[f64]| {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (g, w) in got.iter().zip(want) {
            assert!(
                (*g as f64 - w).abs() <= 2e-7 * w.abs(),
                "{what}: {got:?} vs {want:?}"
            );
        }
    };
    // np.fft.fftfreq(5, 0.1) and (6, 0.5); rfftfreq(7, 2.0).
    near(
        "fftfreq(5, 0.1)",
        vals(on(&|| fft::fftfreq(5, 0.1))),
        &[0.0, 2.0, 4.0, -4.0, -2.0],
    );
    let t = 1.0 / 3.0;
    let want = [0.0, t, 2.0 * t, -1.0, -2.0 * t, -t];
    near("fftfreq(6, 0.5)", vals(on(&|| fft::fftfreq(6, 0.5))), &want);
    let f = 1.0 / 14.0;
    let want = [0.0, f, 2.0 * f, 3.0 * f];
    near("rfftfreq(7, 2)", vals(on(&|| fft::rfftfreq(7, 2.0))), &want);
    super::expect_err("fftfreq(0)", fft::fftfreq(0, 1.0), &["fftfreq", "n=0"]);
    super::expect_err("rfftfreq d=0", fft::rfftfreq(4, 0.0), &["rfftfreq", "d=0"]);
    // fftshift of [0..5) is [3, 4, 0, 1, 2]; ifftshift undoes it; 2-D along one axis.
    let x = ok(
        "x",
        Array::from_slice_on(&[0f32, 1.0, 2.0, 3.0, 4.0], &[5], dev),
    );
    let s = ok("fftshift", fft::fftshift(&x, None));
    assert_eq!(vals(s.clone()), vec![3.0, 4.0, 0.0, 1.0, 2.0]);
    assert_eq!(
        vals(ok("ifftshift", fft::ifftshift(&s, None))),
        vec![0.0, 1.0, 2.0, 3.0, 4.0]
    );
    let m = ok(
        "m",
        Array::from_slice_on(&(0..6).map(|v| v as f32).collect::<Vec<_>>(), &[2, 3], dev),
    );
    assert_eq!(
        vals(ok("fftshift axis 1", fft::fftshift(&m, Some(&[1])))),
        vec![2.0, 0.0, 1.0, 5.0, 3.0, 4.0]
    );
    assert_eq!(
        vals(ok("fftshift all", fft::fftshift(&m, None))),
        vec![5.0, 3.0, 4.0, 2.0, 0.0, 1.0]
    );
}

/// Bad lengths, axes and inputs are errors naming the op.
pub fn fft_errors(dev: &Device) {
    let x = ok("x", Array::from_slice_on(&random(6, 14), &[2, 3], dev));
    let e = |what: &str, r: Result<Array>, needles: &[&str]| super::expect_err(what, r, needles);
    e(
        "n = 0",
        fft::fft(&x, Some(0), -1, Norm::Backward),
        &["fft", "0"],
    );
    e(
        "axis 2",
        fft::fft(&x, None, 2, Norm::Backward),
        &["fft", "axis"],
    );
    e(
        "repeated axes",
        fft::fftn(&x, None, Some(&[1, -1]), Norm::Backward),
        &["fftn", "repeated"],
    );
    e(
        "s and axes",
        fft::fftn(&x, Some(&[2]), Some(&[0, 1]), Norm::Backward),
        &["fftn", "different lengths"],
    );
    e(
        "rfft of complex",
        fft::rfft(&x, None, -1, Norm::Backward),
        &["rfft", "real"],
    );
    let one = ok("one", Array::from_slice_on(&random(1, 15), &[1], dev));
    e(
        "irfft of one point",
        fft::irfft(&one, None, 0, Norm::Backward),
        &["irfft", "(0)"],
    );
    e(
        "empty axis",
        fft::fft(
            &ok(
                "empty",
                wmx::with_device(dev, || wmx::zeros(&[0], DType::F32)),
            ),
            None,
            0,
            Norm::Backward,
        ),
        &["fft", "(0)"],
    );
    super::expect_err("norm name", Norm::from_name("unitary"), &["ortho"]);
}

/// `sum_j x[j * stride] W^{jk}` at one output `k`, in f64 (`w`: `W^j`, `j < n`).
fn dft_at(x: &[C], w: &[C], stride: usize, k: usize) -> C {
    let n = w.len();
    (0..n).fold((0.0, 0.0), |s, j| {
        let (a, b) = x[j * stride];
        let (c, si) = w[(j * k) % n];
        (s.0 + a * c - b * si, s.1 + a * si + b * c)
    })
}

/// Long transforms at sampled outputs: 2^17 points (three passes on a GPU),
/// columns of 4096 read in place (two passes with neighbouring columns), and
/// 2^20 points along the first axis (moved last on a GPU).
pub fn fft_long_and_strided(dev: &Device) {
    let samples = |n: usize| [0, 1, 2, n / 2 - 1, n / 2, n - 1, 12_345 % n, 99_991 % n];
    for (shape, axis) in [
        (vec![1usize << 17], 0usize),
        (vec![4096, 3], 0),
        (vec![1 << 20, 2], 0),
    ] {
        let total: usize = shape.iter().product();
        let v = random(total, 300 + shape[0] as u64);
        let h = host(&v);
        let x = ok("x", Array::from_slice_on(&v, &shape, dev));
        let what = format!("fft of {shape:?} along axis {axis} on {dev}");
        let got = read(
            &what,
            &ok(&what, fft::fft(&x, None, axis as isize, Norm::Backward)),
            &shape,
        );
        let n = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        let w: Vec<C> = (0..n)
            .map(|j| {
                let t = -std::f64::consts::TAU * j as f64 / n as f64;
                (t.cos(), t.sin())
            })
            .collect();
        for col in 0..inner {
            let line: Vec<C> = (0..n).map(|j| h[j * inner + col]).collect();
            for k in samples(n) {
                let want = dft_at(&h[col..], &w, inner, k);
                close(
                    &format!("{what} column {col} output {k}"),
                    &[got[k * inner + col]],
                    &[want],
                    l2(&line),
                    n,
                    3e-7,
                );
            }
        }
        // The inverse of the transform gives the input back (every element).
        if n > 1 << 17 {
            continue; // (the CPU's f64 transforms of 2^20 points are slow unoptimized)
        }
        let back = ok(
            "ifft",
            fft::ifft(
                &ok("fft", fft::fft(&x, None, axis as isize, Norm::Backward)),
                None,
                axis as isize,
                Norm::Backward,
            ),
        );
        let b = read(&format!("{what}, inverted"), &back, &shape);
        let norm = l2(&h) / (total as f64).sqrt();
        close(&format!("ifft(fft(x)) of {shape:?}"), &b, &h, norm, n, 3e-7);
    }
}

static NUMPY: super::goldens::Goldens =
    super::goldens::Goldens::new(include_str!("../../goldens/numpy_fft.txt"));

/// np.fft's results on recorded inputs (`tests/goldens/numpy_fft.py`): each norm,
/// n cropping and padding, axes, primes, the real transforms and n-D forms.
pub fn fft_matches_numpy(dev: &Device) {
    let c = |name: &str| -> Array {
        let pairs = NUMPY.arr(dev, name);
        let part = |k: isize| {
            let mut s = vec![wmx::Slice::ALL; pairs.ndim() - 1];
            s.push(wmx::Slice::range(k, k + 1));
            ok("part", pairs.slice(&s).and_then(|p| p.squeeze(Some(&[-1]))))
        };
        ok("complex", wmx::complex(&part(0), &part(1)))
    };
    let pairs = |y: Result<Array>| -> Array {
        let y = ok("transform", y);
        ok(
            "pairs",
            wmx::stack(&[&ok("re", wmx::real(&y)), &ok("im", wmx::imag(&y))], -1),
        )
    };
    let check = |what: &str, got: Array, name: &str| NUMPY.check(what, &got, name, 1e-5, 1e-6);
    let (a, b, h, cc, e) = (c("a"), c("b"), c("h"), c("c"), c("e"));
    let (r, d) = (NUMPY.arr(dev, "r"), NUMPY.arr(dev, "d"));
    check(
        "fft ortho",
        pairs(fft::fft(&a, None, -1, Norm::Ortho)),
        "fft_a_ortho",
    );
    check(
        "ifft n=45 axis 0",
        pairs(fft::ifft(&a, Some(45), 0, Norm::Backward)),
        "ifft_a_n45_axis0",
    );
    check(
        "ifft of 97",
        pairs(fft::ifft(&b, None, -1, Norm::Backward)),
        "ifft_b",
    );
    check(
        "fft n=64 forward",
        pairs(fft::fft(&b, Some(64), -1, Norm::Forward)),
        "fft_b_n64_forward",
    );
    check(
        "rfft",
        pairs(fft::rfft(&r, None, -1, Norm::Backward)),
        "rfft_r",
    );
    check(
        "rfft n=63",
        pairs(fft::rfft(&r, Some(63), -1, Norm::Backward)),
        "rfft_r_n63",
    );
    check(
        "irfft",
        ok("irfft", fft::irfft(&h, None, -1, Norm::Backward)),
        "irfft_h",
    );
    check(
        "irfft n=9 ortho",
        ok("irfft", fft::irfft(&h, Some(9), -1, Norm::Ortho)),
        "irfft_h_n9_ortho",
    );
    check(
        "fft2 s=(4, 12)",
        pairs(fft::fft2(&cc, Some(&[4, 12]), None, Norm::Backward)),
        "fft2_c_s4_12",
    );
    let rd = ok("rfftn", fft::rfftn(&d, None, None, Norm::Backward));
    check("rfftn", pairs(Ok(rd.clone())), "rfftn_d");
    check(
        "irfftn",
        ok(
            "irfftn",
            fft::irfftn(&rd, Some(&[3, 4, 5]), None, Norm::Backward),
        ),
        "irfftn_rfftn_d",
    );
    check(
        "ifftn axes (0, 2) forward",
        pairs(fft::ifftn(&e, None, Some(&[0, 2]), Norm::Forward)),
        "ifftn_e_axes02_forward",
    );
}
