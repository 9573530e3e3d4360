//! Rotary position embedding (`rope`, MLX's `fast.rope`) against an f64 host loop
//! over pairs: both layouts, partial rotary dims, base and custom frequencies,
//! scalar and per-batch offsets, large positions, views, 16-bit rounding, empty
//! inputs, bad arguments; derivatives against central differences of the reference,
//! jvp, and vmap against a loop.

use crate::rng::Rng;
use crate::val::{Val, make_ok, read_ok, round_to};
use wmx_core::{self as wmx, Array, DType, Device, Result};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

/// How one case rotates.
#[derive(Clone, Copy, Debug)]
struct Rot {
    dims: usize,
    traditional: bool,
    scale: f32,
    /// `Some(base)`, else the custom periods of [`periods`].
    base: Option<f64>,
}

/// Custom periods (MLX's `freqs`): a Llama-3-like stretch of the base-10000 ones.
fn periods(dims: usize) -> Vec<f64> {
    (0..dims / 2)
        .map(|k| {
            10000f64.powf(2.0 * k as f64 / dims as f64) * if k >= dims / 4 { 8.0 } else { 1.0 }
        })
        .map(|f| round_to(DType::F32, f))
        .collect()
}

/// The inverse frequencies as the op documents them.
fn inv_freqs(r: Rot) -> Vec<f64> {
    match r.base {
        Some(b) => (0..r.dims / 2)
            .map(|k| b.powf(-2.0 * k as f64 / r.dims as f64))
            .collect(),
        None => periods(r.dims).iter().map(|&f| 1.0 / f).collect(),
    }
}

/// The f64 reference, pair by pair: the angle `(scale * p) * inv_freq` in f32 as
/// documented (in f64 for f64 inputs, `wide`), everything after it in f64.
fn rope_ref_in(x: &[f64], shape: &[usize], r: Rot, offsets: &[i64], wide: bool) -> Vec<f64> {
    let (l, d) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let inv = inv_freqs(r);
    let mut out = x.to_vec();
    if x.is_empty() {
        return out;
    }
    let per = x.len() / offsets.len();
    for row in 0..x.len() / d {
        let at = row * d;
        let (o, pos) = (offsets[at / per], (row % l) as f64);
        for (k, &f) in inv.iter().enumerate() {
            let (i, j) = if r.traditional {
                (2 * k, 2 * k + 1)
            } else {
                (k, k + r.dims / 2)
            };
            let th = if wide {
                r.scale as f64 * (o as f64 + pos) * f
            } else {
                (r.scale * (o as f32 + pos as f32) * f as f32) as f64
            };
            let (c, s) = (th.cos(), th.sin());
            out[at + i] = x[at + i] * c - x[at + j] * s;
            out[at + j] = x[at + i] * s + x[at + j] * c;
        }
    }
    out
}

fn rope_ref(x: &[f64], shape: &[usize], r: Rot, offsets: &[i64]) -> Vec<f64> {
    rope_ref_in(x, shape, r, offsets, false)
}

fn arr(dev: &Device, dt: DType, v: &[f64], shape: &[usize]) -> Array {
    let vals: Vec<Val> = v.iter().map(|&x| Val::F(x)).collect();
    make_ok(dev, dt, &vals, shape)
}

fn ints(dev: &Device, v: &[i64], shape: &[usize]) -> Array {
    let vals: Vec<Val> = v.iter().map(|&x| Val::I(x as i128)).collect();
    make_ok(dev, DType::I32, &vals, shape)
}

fn f64s(a: &Array, what: &str) -> Vec<f64> {
    read_ok(a, what).into_iter().map(Val::f).collect()
}

fn run(dev: &Device, x: &Array, r: Rot, offset: &Array) -> Result<Array> {
    let freqs = r
        .base
        .is_none()
        .then(|| arr(dev, DType::F32, &periods(r.dims), &[r.dims / 2]));
    wmx::rope(
        x,
        r.dims,
        r.traditional,
        r.base,
        r.scale as f64,
        offset,
        freqs.as_ref(),
    )
}

/// Within the dtype's rounding of the row's scale (the rotation mixes two elements).
fn close(what: &str, got: &[f64], want: &[f64], dt: DType) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let big = want.iter().fold(1f64, |m, v| m.max(v.abs()));
    let eps = match dt {
        DType::F64 => 1e-12,
        DType::F32 => 4e-6,
        DType::F16 => 2f64.powi(-10),
        _ => 2f64.powi(-7),
    };
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= eps * big,
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

fn offsets_of(o: &[i64], dev: &Device) -> Array {
    if o.len() == 1 {
        ints(dev, o, &[])
    } else {
        ints(dev, o, &[o.len()])
    }
}

/// Every layout and frequency choice on random data of each float dtype, scalar
/// and per-batch offsets, large positions (angles past 51000 take the kernel's
/// exact reduction), a transposed and a sliced input.
pub fn rope_values(dev: &Device) {
    let mut rng = Rng::new(0x40be);
    let rots = [
        Rot {
            dims: 8,
            traditional: false,
            scale: 1.0,
            base: Some(10000.0),
        },
        Rot {
            dims: 8,
            traditional: true,
            scale: 1.0,
            base: Some(10000.0),
        },
        Rot {
            dims: 6,
            traditional: false,
            scale: 0.5,
            base: Some(500.0),
        },
        Rot {
            dims: 4,
            traditional: true,
            scale: 1.0,
            base: None,
        },
        Rot {
            dims: 8,
            traditional: false,
            scale: 1.0,
            base: None,
        },
    ];
    let shape = [2usize, 3, 5, 10];
    let n: usize = shape.iter().product();
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        if !super::supported(dev, dt) {
            continue;
        }
        let x: Vec<f64> = (0..n)
            .map(|_| round_to(dt, rng.uniform(-3.0, 3.0)))
            .collect();
        let xa = arr(dev, dt, &x, &shape);
        for r in rots {
            for offs in [
                vec![0i64],
                vec![3],
                vec![7, 30_000],
                vec![-4, 2],
                vec![100_000, 51_000],
            ] {
                let what = format!("rope {dt} {r:?} offsets {offs:?}");
                let y = ok(&what, run(dev, &xa, r, &offsets_of(&offs, dev)));
                assert_eq!(y.dtype(), dt, "{what}: dtype");
                assert_eq!(y.shape(), shape, "{what}: shape");
                let want: Vec<f64> = rope_ref_in(&x, &shape, r, &offs, dt == DType::F64)
                    .into_iter()
                    .map(|v| round_to(dt, v))
                    .collect();
                close(&what, &f64s(&y, &what), &want, dt);
            }
        }
        // A transposed view ([B, H, D, L] stored, read as [B, H, L, D]) and a slice.
        let r = rots[0];
        let t_shape = [2usize, 3, 10, 5];
        let xt: Vec<f64> = (0..n)
            .map(|_| round_to(dt, rng.uniform(-3.0, 3.0)))
            .collect();
        let view = ok(
            "transpose",
            wmx::transpose(&arr(dev, dt, &xt, &t_shape), Some(&[0, 1, 3, 2])),
        );
        let dense = f64s(&ok("copy", wmx::contiguous(&view)), "copy");
        let what = format!("rope {dt} of a transposed view");
        let y = ok(&what, run(dev, &view, r, &ints(dev, &[2], &[])));
        close(
            &what,
            &f64s(&y, &what),
            &rope_ref_in(&dense, &shape, r, &[2], dt == DType::F64),
            dt,
        );
        let sliced = ok(
            "slice",
            wmx::slice(
                &xa,
                &[
                    wmx::Slice::ALL,
                    wmx::Slice::new(Some(1), None, 1),
                    wmx::Slice::new(None, None, 2),
                    wmx::Slice::ALL,
                ],
            ),
        );
        let dense = f64s(&ok("copy", wmx::contiguous(&sliced)), "copy");
        let what = format!("rope {dt} of a sliced view");
        let y = ok(&what, run(dev, &sliced, r, &ints(dev, &[5, 9], &[2])));
        let want = rope_ref_in(&dense, sliced.shape(), r, &[5, 9], dt == DType::F64);
        close(&what, &f64s(&y, &what), &want, dt);
    }
    // Empty inputs keep their shape.
    let e = ok("empty", wmx::zeros(&[0, 4, 8], DType::F32));
    let y = ok(
        "rope of empty",
        run(dev, &e, rots[0], &ints(dev, &[1], &[])),
    );
    assert_eq!(y.shape(), [0, 4, 8], "rope of empty: shape");
    assert!(f64s(&y, "empty").is_empty());
}

/// Bad arguments are errors at `rope` naming the problem.
pub fn rope_errors(dev: &Device) {
    let x = ok(
        "x",
        wmx::with_device(dev, || wmx::ones(&[2, 4, 8], DType::F32)),
    );
    let zero = ints(dev, &[0], &[]);
    let e = |what: &str, r: Result<Array>, needle: &str| super::expect_err(what, r, &[needle]);
    e(
        "odd dims",
        wmx::rope(&x, 7, false, Some(1e4), 1.0, &zero, None),
        "dims",
    );
    e(
        "dims past the row",
        wmx::rope(&x, 10, false, Some(1e4), 1.0, &zero, None),
        "dims",
    );
    e(
        "no dims",
        wmx::rope(&x, 0, false, Some(1e4), 1.0, &zero, None),
        "dims",
    );
    let xi = ints(dev, &[1; 16], &[2, 8]);
    e(
        "integer x",
        wmx::rope(&xi, 8, false, Some(1e4), 1.0, &zero, None),
        "float",
    );
    let x1 = arr(dev, DType::F32, &[1.0; 8], &[8]);
    e(
        "rank 1",
        wmx::rope(&x1, 8, false, Some(1e4), 1.0, &zero, None),
        "[..., L, D]",
    );
    let f = arr(dev, DType::F32, &[1.0; 4], &[4]);
    e(
        "base and freqs",
        wmx::rope(&x, 8, false, Some(1e4), 1.0, &zero, Some(&f)),
        "exactly one",
    );
    e(
        "neither",
        wmx::rope(&x, 8, false, None, 1.0, &zero, None),
        "exactly one",
    );
    let f3 = arr(dev, DType::F32, &[1.0; 3], &[3]);
    e(
        "freqs length",
        wmx::rope(&x, 8, false, None, 1.0, &zero, Some(&f3)),
        "freqs",
    );
    e(
        "bad base",
        wmx::rope(&x, 8, false, Some(-1.0), 1.0, &zero, None),
        "base",
    );
    e(
        "bad scale",
        wmx::rope(&x, 8, false, Some(1e4), f64::NAN, &zero, None),
        "scale",
    );
    let fo = arr(dev, DType::F32, &[1.0], &[]);
    e(
        "float offset",
        wmx::rope(&x, 8, false, Some(1e4), 1.0, &fo, None),
        "integer",
    );
    let o3 = ints(dev, &[1, 2, 3], &[3]);
    e(
        "offsets per batch",
        wmx::rope(&x, 8, false, Some(1e4), 1.0, &o3, None),
        "offset",
    );
}

/// The vjp against central differences of the reference, the jvp, and vmap over
/// a batch of inputs and of offsets against a loop.
pub fn grad_rope(dev: &Device) {
    let mut rng = Rng::new(0x9a7);
    let dt = DType::F32;
    let shape = [2usize, 3, 6];
    let n: usize = shape.iter().product();
    let offs = [4i64, 11];
    for r in [
        Rot {
            dims: 4,
            traditional: false,
            scale: 1.0,
            base: Some(100.0),
        },
        Rot {
            dims: 6,
            traditional: true,
            scale: 0.25,
            base: None,
        },
    ] {
        let what = format!("grad of rope {r:?}");
        let x: Vec<f64> = (0..n)
            .map(|_| round_to(dt, rng.uniform(-2.0, 2.0)))
            .collect();
        let g: Vec<f64> = (0..n)
            .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
            .collect();
        let loss = |x: &[f64]| -> f64 {
            rope_ref(x, &shape, r, &offs)
                .iter()
                .zip(&g)
                .map(|(y, g)| y * g)
                .sum()
        };
        let o = ints(dev, &offs, &[2]);
        let ga = arr(dev, dt, &g, &shape);
        let f = |xs: &[Array]| -> Result<Vec<Array>> {
            let y = run(dev, &xs[0], r, &o)?;
            Ok(vec![wmx::sum(&wmx::multiply(&y, &ga)?, None, false)?])
        };
        let xa = arr(dev, dt, &x, &shape);
        let grads = ok(&what, wmx::grad(f, &[0])(std::slice::from_ref(&xa)));
        let h = 1e-6;
        let want: Vec<f64> = (0..n)
            .map(|k| {
                let (mut p, mut m) = (x.clone(), x.clone());
                p[k] += h;
                m[k] -= h;
                (loss(&p) - loss(&m)) / (2.0 * h)
            })
            .collect();
        close(&format!("{what}: vjp"), &f64s(&grads[0], &what), &want, dt);
        let t: Vec<f64> = (0..n)
            .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
            .collect();
        let (_, tan) = ok(
            &what,
            wmx::jvp(f, std::slice::from_ref(&xa), &[arr(dev, dt, &t, &shape)]),
        );
        let shifted = |s: f64| -> Vec<f64> { x.iter().zip(&t).map(|(a, b)| a + s * b).collect() };
        let want = (loss(&shifted(h)) - loss(&shifted(-h))) / (2.0 * h);
        close(&format!("{what}: jvp"), &f64s(&tan[0], &what), &[want], dt);
        // vmap over 3 inputs with their own per-batch offsets, and over inputs only.
        let v = 3usize;
        let xs: Vec<f64> = (0..v * n)
            .map(|_| round_to(dt, rng.uniform(-2.0, 2.0)))
            .collect();
        let os: Vec<i64> = (0..v * 2).map(|i| 3 * i as i64 - 2).collect();
        let mut bshape = vec![v];
        bshape.extend(shape);
        let xb = arr(dev, dt, &xs, &bshape);
        let ob = ints(dev, &os, &[v, 2]);
        let per = |a: &[Array]| -> Result<Vec<Array>> { Ok(vec![run(dev, &a[0], r, &a[1])?]) };
        let got = ok(
            &what,
            wmx::vmap(per, &[Some(0), Some(0)], &[0])(&[xb.clone(), ob]),
        );
        let want: Vec<f64> = (0..v)
            .flat_map(|i| rope_ref(&xs[i * n..(i + 1) * n], &shape, r, &os[2 * i..2 * i + 2]))
            .collect();
        close(&format!("{what}: vmap"), &f64s(&got[0], &what), &want, dt);
        let got = ok(
            &what,
            wmx::vmap(per, &[Some(0), None], &[0])(&[xb, o.clone()]),
        );
        let want: Vec<f64> = (0..v)
            .flat_map(|i| rope_ref(&xs[i * n..(i + 1) * n], &shape, r, &offs))
            .collect();
        close(
            &format!("{what}: vmap of x only"),
            &f64s(&got[0], &what),
            &want,
            dt,
        );
    }
}
