//! `wmx::random` against goldens made by MLX (`tests/goldens/mlx_random.py`), an
//! independent threefry-2x32 written here from the Random123 specification, and
//! the distributions' moments; vmap over keys; errors.

use crate::val::read_ok;
use wmx_core::{self as wmx, Array, DType, Device, Result, random};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

const GOLDENS: &str = include_str!("../../goldens/mlx_random.txt");

/// Threefry-2x32, 20 rounds (Salmon et al., Random123), as MLX and JAX use it.
fn threefry(key: [u32; 2], x: [u32; 2]) -> [u32; 2] {
    let r = [13, 15, 26, 6, 17, 29, 16, 24];
    let k = [key[0], key[1], key[0] ^ key[1] ^ 0x1bd11bda];
    let mut v = [x[0].wrapping_add(k[0]), x[1].wrapping_add(k[1])];
    for round in 0..20 {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(r[round % 8]) ^ v[0];
        if round % 4 == 3 {
            let s = round / 4 + 1;
            v[0] = v[0].wrapping_add(k[s % 3]);
            v[1] = v[1].wrapping_add(k[(s + 1) % 3]).wrapping_add(s as u32);
        }
    }
    v
}

/// MLX's layout of `e` words for one key.
fn reference_bits(key: [u32; 2], e: usize) -> Vec<u32> {
    let (h, odd) = (e / 2, e % 2);
    let mut out = vec![0; e];
    for c in 0..h {
        let r = threefry(key, [c as u32, (c + h + odd) as u32]);
        out[c] = r[0];
        out[c + h + odd] = r[1];
    }
    if odd == 1 {
        out[h] = threefry(key, [h as u32, 0])[0];
    }
    out
}

fn key_on(dev: &Device, seed: u64) -> Array {
    ok("key", wmx::with_device(dev, || random::key(seed)))
}

fn list<T: std::str::FromStr>(s: &str) -> Vec<T>
where
    T::Err: std::fmt::Debug,
{
    s.split(',')
        .filter(|t| !t.is_empty())
        .map(|t| t.parse().unwrap())
        .collect()
}

/// Every golden line of MLX's output reproduced exactly.
pub fn random_matches_mlx(dev: &Device) {
    let mut n = 0;
    for line in GOLDENS.lines().filter(|l| !l.starts_with('#')) {
        let f: std::collections::HashMap<&str, &str> = line
            .split(' ')
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let what = format!("random vs MLX: {line:.60}");
        let key = key_on(dev, f["seed"].parse().unwrap());
        let shape: Vec<usize> = list(f["shape"]);
        let dtype = |name: &str| DType::from_name(name).unwrap();
        let got = match f["op"] {
            "bits" => ok(&what, random::bits(&key, &shape)),
            "split" => ok(&what, random::split(&key, f["num"].parse().unwrap())),
            "uniform" => ok(
                &what,
                random::uniform(
                    &key,
                    &shape,
                    f["low"].parse().unwrap(),
                    f["high"].parse().unwrap(),
                    dtype(f["dtype"]),
                ),
            ),
            "randint" => ok(
                &what,
                random::randint(
                    &key,
                    &shape,
                    f["low"].parse().unwrap(),
                    f["high"].parse().unwrap(),
                    DType::I32,
                ),
            ),
            "bernoulli" => ok(
                &what,
                random::bernoulli(&key, f["p"].parse().unwrap(), &shape),
            ),
            "permutation" => ok(&what, random::permutation(&key, f["n"].parse().unwrap())),
            "categorical" => {
                let l: Vec<f32> = list::<f64>(f["logits"]).iter().map(|&v| v as f32).collect();
                let lshape: Vec<usize> = list(f["lshape"]);
                let logits = ok(&what, Array::from_slice_on(&l, &lshape, dev));
                ok(&what, random::categorical(&key, &logits, -1))
            }
            op => panic!("goldens: unknown op {op}"),
        };
        assert_eq!(got.shape(), &shape[..], "{what}: shape");
        let want: Vec<f64> = list(f["values"]);
        let g: Vec<f64> = read_ok(&got, &what).into_iter().map(|v| v.f()).collect();
        assert_eq!(g, want, "{what}");
        n += 1;
    }
    assert!(n >= 38, "only {n} golden cases read");
}

/// Large draws: bits against the reference threefry (odd and even counts, many
/// workgroups, batched keys through vmap), determinism, and the moments of
/// uniform, normal, bernoulli, randint and categorical samples.
pub fn random_distributions(dev: &Device) {
    let key = key_on(dev, 2026);
    for n in [100_001usize, 65_536] {
        let what = format!("bits of {n}");
        let b: Vec<u32> = ok(&what, ok(&what, random::bits(&key, &[n])).to_vec());
        let want = reference_bits([0, 2026], n);
        for (k, (g, w)) in b.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{what}: word {k}");
        }
        let again: Vec<u32> = ok(&what, ok(&what, random::bits(&key, &[n])).to_vec());
        assert_eq!(b, again, "{what}: the same key gave different bits");
    }
    // split keys are the bits of the key; vmap over them matches a loop.
    let what = "vmap of uniform over split keys";
    let keys = ok(what, random::split(&key, 3));
    let kv: Vec<u32> = ok(what, keys.to_vec());
    assert_eq!(kv, reference_bits([0, 2026], 6), "{what}: split");
    let f = |a: &[Array]| -> Result<Vec<Array>> {
        Ok(vec![random::uniform(&a[0], &[5], -1.0, 1.0, DType::F32)?])
    };
    let got = ok(
        what,
        wmx::vmap(f, &[Some(0)], &[0])(std::slice::from_ref(&keys)),
    );
    let gv: Vec<f32> = ok(what, got[0].to_vec());
    for i in 0..3 {
        let k = ok(what, Array::from_slice_on(&kv[2 * i..2 * i + 2], &[2], dev));
        let one: Vec<f32> = ok(what, ok(what, f(&[k]))[0].to_vec());
        assert_eq!(&gv[5 * i..5 * i + 5], &one[..], "{what}: example {i}");
    }

    let n = 1 << 16;
    let stats = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64;
        (m, var)
    };
    let (k1, k2) = ok("split2", random::split2(&key));
    for dt in [DType::F32, DType::F16, DType::BF16] {
        if !super::supported(dev, dt) {
            continue;
        }
        let what = format!("uniform {dt}");
        let u = ok(
            &what,
            ok(&what, random::uniform(&k1, &[n], 2.0, 4.0, dt)).to_vec_f64(),
        );
        assert!(
            u.iter().all(|&x| (2.0..4.0).contains(&x)),
            "{what}: out of [2, 4)"
        );
        let (m, v) = stats(&u);
        // Standard errors: 1/sqrt(3 n) for the mean, ~0.0016 for the variance.
        assert!(
            (m - 3.0).abs() < 0.01 && (v - 1.0 / 3.0).abs() < 0.01,
            "{what}: mean {m}, var {v}"
        );
        let what = format!("normal {dt}");
        let z = ok(
            &what,
            ok(&what, random::normal(&k2, &[n], 1.0, 2.0, dt)).to_vec_f64(),
        );
        assert!(z.iter().all(|x| x.is_finite()), "{what}: not finite");
        let (m, v) = stats(&z);
        assert!(
            (m - 1.0).abs() < 0.04 && (v - 4.0).abs() < 0.12,
            "{what}: mean {m}, var {v}"
        );
        let within = z.iter().filter(|&&x| (x - 1.0).abs() < 2.0).count() as f64 / n as f64;
        assert!(
            (within - 0.6827).abs() < 0.01,
            "{what}: {within} within one sigma"
        );
    }
    // Truncated normals: inside the bounds, with the truncated distribution's mean
    // and variance (from the normal density and erf in f64).
    for (lo, hi) in [
        (-1.0f64, 2.0f64),
        (0.5, 3.0),
        (f64::NEG_INFINITY, -0.5),
        (-2.0, 2.0),
    ] {
        let what = format!("truncated_normal [{lo}, {hi}]");
        let z = ok(
            &what,
            ok(
                &what,
                random::truncated_normal(&k1, lo, hi, &[n], DType::F32),
            )
            .to_vec_f64(),
        );
        assert!(
            z.iter().all(|&x| x.is_finite() && x >= lo && x <= hi),
            "{what}: a sample outside the bounds"
        );
        let pdf = |x: f64| {
            if x.is_finite() {
                (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt()
            } else {
                0.0
            }
        };
        let cdf = |x: f64| 0.5 * (1.0 + crate::reference::erf(x / std::f64::consts::SQRT_2));
        let xf = |x: f64| if x.is_finite() { x * pdf(x) } else { 0.0 };
        let zmass = cdf(hi) - cdf(lo);
        let mean = (pdf(lo) - pdf(hi)) / zmass;
        let var = 1.0 + (xf(lo) - xf(hi)) / zmass - mean * mean;
        let (m, v) = stats(&z);
        // Four standard errors of the mean and (roughly) of the variance.
        let se = (var / n as f64).sqrt();
        assert!(
            (m - mean).abs() < 4.0 * se
                && (v - var).abs() < 4.0 * var * (2.0 / n as f64).sqrt() * 1.5,
            "{what}: mean {m} (want {mean}), var {v} (want {var})"
        );
    }
    let what = "bernoulli";
    let b = ok(
        what,
        ok(what, random::bernoulli(&k1, 0.25, &[n])).to_vec_f64(),
    );
    let p = b.iter().sum::<f64>() / n as f64;
    assert!((p - 0.25).abs() < 0.01, "{what}: frequency {p}");
    let what = "randint";
    let r = ok(
        what,
        ok(what, random::randint(&k2, &[n], -3, 4, DType::I32)).to_vec_f64(),
    );
    let mut counts = [0usize; 7];
    for &x in &r {
        assert!((-3.0..4.0).contains(&x) && x.fract() == 0.0, "{what}: {x}");
        counts[(x + 3.0) as usize] += 1;
    }
    for c in counts {
        let f = c as f64 / n as f64;
        assert!(
            (f - 1.0 / 7.0).abs() < 0.01,
            "{what}: frequencies {counts:?}"
        );
    }
    let what = "categorical";
    let logits: Vec<f32> = [0.1f64, 0.2, 0.3, 0.4]
        .iter()
        .map(|p| p.ln() as f32)
        .collect();
    let l = ok(what, Array::from_slice_on(&logits, &[1, 4], dev));
    let lb = ok(what, wmx::broadcast_to(&l, &[n, 4]));
    let c = ok(
        what,
        ok(what, random::categorical(&k1, &lb, -1)).to_vec_f64(),
    );
    assert_eq!(c.len(), n, "{what}: one draw per row");
    for (i, p) in [0.1, 0.2, 0.3, 0.4].iter().enumerate() {
        let f = c.iter().filter(|&&x| x == i as f64).count() as f64 / n as f64;
        assert!(
            (f - p).abs() < 0.01,
            "{what}: class {i} frequency {f}, want {p}"
        );
    }
}

/// `normal`, `truncated_normal` and `gumbel` give the CPU's bits for the same key
/// on a device that computes f64 (their transcendental steps run in f64 and round
/// once to f32), for f32, f16 and bf16; elsewhere within a few f32 ulp.
pub fn random_same_values_as_cpu(dev: &Device) {
    let cpu = Device::cpu();
    let exact = dev.check_dtype(DType::F64).is_ok();
    const N: usize = 10_001;
    type Draw = fn(&Array, DType) -> Result<Array>;
    let draws: [(&str, Draw); 4] = [
        ("normal", |k, d| random::normal(k, &[N], 0.5, 2.0, d)),
        ("truncated_normal", |k, d| {
            random::truncated_normal(k, -1.5, 2.5, &[N], d)
        }),
        ("truncated_normal, one tail", |k, d| {
            random::truncated_normal(k, 1.0, f64::INFINITY, &[N], d)
        }),
        ("gumbel", |k, d| random::gumbel(k, &[N], d)),
    ];
    for (name, draw) in draws {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            if !super::supported(dev, dt) {
                continue;
            }
            let what = format!("{name} {dt} on {dev} and the CPU");
            let on = |d: &Device| -> Vec<f64> {
                let x = ok(&what, draw(&key_on(d, 77), dt));
                ok(
                    &what,
                    ok(&what, wmx::astype(&x, DType::F32)).to_vec::<f32>(),
                )
                .into_iter()
                .map(f64::from)
                .collect()
            };
            let (got, want) = (on(dev), on(&cpu));
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
                let near = (g - w).abs() <= 4.0 * f64::from(f32::EPSILON) * w.abs().max(1e-30);
                assert!(
                    same || (!exact && near),
                    "{what}: value {k}: {g} here, {w} on the CPU"
                );
            }
        }
    }
}

/// Keys of the wrong dtype or shape, empty ranges and non-float dtypes are errors.
pub fn random_errors(dev: &Device) {
    use super::expect_err;
    let bad = ok(
        "bad",
        wmx::with_device(dev, || wmx::zeros(&[3], DType::U32)),
    );
    let f = ok("f", wmx::with_device(dev, || wmx::zeros(&[2], DType::F32)));
    let key = key_on(dev, 1);
    expect_err(
        "bits of a [3] key",
        random::bits(&bad, &[4]),
        &["random::bits", "[3]"],
    );
    expect_err(
        "bits of an f32 key",
        random::uniform(&f, &[4], 0.0, 1.0, DType::F32),
        &["random::bits", "f32"],
    );
    expect_err(
        "uniform of i32",
        random::uniform(&key, &[4], 0.0, 1.0, DType::I32),
        &["random::uniform", "i32"],
    );
    expect_err(
        "normal of u8",
        random::normal(&key, &[4], 0.0, 1.0, DType::U8),
        &["random::normal", "u8"],
    );
    expect_err(
        "truncated_normal of i32",
        random::truncated_normal(&key, -1.0, 1.0, &[4], DType::I32),
        &["random::truncated_normal", "i32"],
    );
    expect_err(
        "truncated_normal empty",
        random::truncated_normal(&key, 1.0, 1.0, &[4], DType::F32),
        &["random::truncated_normal", "[1, 1]"],
    );
    expect_err(
        "randint of f32",
        random::randint(&key, &[4], 0, 3, DType::F32),
        &["random::randint", "f32"],
    );
    expect_err(
        "randint empty",
        random::randint(&key, &[4], 3, 3, DType::I32),
        &["random::randint", "[3, 3)"],
    );
    // Bounds the dtype cannot hold, and probabilities outside [0, 1]: numpy's errors.
    expect_err(
        "randint high past i32",
        random::randint(&key, &[4], 0, (1 << 31) + 1, DType::I32),
        &["random::randint", "high 2147483649", "i32"],
    );
    expect_err(
        "randint low below u8",
        random::randint(&key, &[4], -1, 3, DType::U8),
        &["random::randint", "low -1", "u8"],
    );
    let full = ok(
        "randint over all of u8",
        random::randint(&key, &[64], 0, 256, DType::U8),
    );
    assert_eq!(full.dtype(), DType::U8);
    for p in [-0.5, 1.5, f64::NAN] {
        expect_err(
            "bernoulli p",
            random::bernoulli(&key, p, &[4]),
            &["random::bernoulli", "[0, 1]"],
        );
    }
    expect_err(
        "categorical of i32",
        random::categorical(
            &key,
            &ok(
                "i",
                wmx::with_device(dev, || wmx::zeros(&[2, 3], DType::I32)),
            ),
            -1,
        ),
        &["random::categorical", "i32"],
    );
}
