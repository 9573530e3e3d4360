//! Affine quantization (`quantize`, `dequantize`, `quantized_matmul`): MLX's own
//! results bit for bit (goldens from MLX's CPU build, `tests/goldens/mlx_quant.py`)
//! for every dtype, bit width and group size; the product on random data against
//! an f64 loop over the dequantized matrix, on both of its paths (the
//! matrix-vector kernel and the dequantized product), with views, batches, 16-bit
//! rounding, NaN groups, empty inputs, more than 65535 workgroups and bad
//! arguments; derivatives against central differences, jvp, and vmap.

use super::goldens::Goldens;
use super::{expect_err, supported};
use crate::rng::Rng;
use crate::val::round_to;
use wmx_core::{self as wmx, Array, DType, Device, Result};

static MLX: Goldens = Goldens::new(include_str!("../../goldens/mlx_quant.txt"));

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

fn name(dt: DType) -> &'static str {
    match dt {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => "f32",
    }
}

/// `v` (values exact in `dt`) as an array of `dt` on `dev`.
fn arr(dev: &Device, dt: DType, v: &[f64], shape: &[usize]) -> Array {
    let v32: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    let a = ok("array", Array::from_slice_on(&v32, shape, dev));
    ok("astype", wmx::astype(&a, dt))
}

fn words(dev: &Device, v: &[f64], shape: &[usize]) -> Array {
    let w: Vec<u32> = v.iter().map(|&x| x as u32).collect();
    ok("words", Array::from_slice_on(&w, shape, dev))
}

fn f64s(a: &Array, what: &str) -> Vec<f64> {
    ok(what, a.to_vec_as::<f64>())
}

/// f32 bit patterns of `v` (f16 and bf16 values widen exactly): equal patterns
/// are equal values, NaN included.
fn bits(v: &[f64]) -> Vec<u32> {
    v.iter().map(|&x| (x as f32).to_bits()).collect()
}

fn same_bits(what: &str, got: &Array, want: &(Vec<usize>, Vec<f64>)) {
    assert_eq!(got.shape(), want.0.as_slice(), "{what}: shape");
    let (g, w) = (bits(&f64s(got, what)), bits(&want.1));
    if let Some(i) = (0..w.len()).find(|&i| g[i] != w[i]) {
        panic!(
            "{what}: element {i} of {}: got {} ({:#x}), MLX {} ({:#x})",
            w.len(),
            f32::from_bits(g[i]),
            g[i],
            f32::from_bits(w[i]),
            w[i]
        );
    }
}

/// quantize and dequantize against MLX, bit for bit: every dtype the device
/// holds, bits 2-8 but 7, groups 32, 64 and 128, rows that reach each branch of
/// the scale rule.
pub fn quantize_mlx(dev: &Device) {
    for dt in [DType::F32, DType::F16, DType::BF16] {
        if !supported(dev, dt) {
            continue;
        }
        for bits in wmx::QUANT_BITS {
            for group in wmx::QUANT_GROUP_SIZES {
                let case = format!("q_{}_b{bits}_g{group}", name(dt));
                let (shape, w) = MLX.get(&format!("{case}.w"));
                let wa = arr(dev, dt, w, shape);
                let what = format!("quantize {case} on {dev}");
                let (wq, s, b) = ok(&what, wmx::quantize(&wa, group, bits));
                let want_wq = MLX.get(&format!("{case}.wq"));
                assert_eq!(wq.dtype(), DType::U32, "{what}: dtype");
                assert_eq!(wq.shape(), want_wq.0.as_slice(), "{what}: words shape");
                let got: Vec<u32> = ok(&what, wq.to_vec::<u32>());
                if let Some(i) = (0..got.len()).find(|&i| got[i] as f64 != want_wq.1[i]) {
                    panic!(
                        "{what}: word {i}: got {:#x}, MLX {:#x}",
                        got[i], want_wq.1[i] as u32
                    );
                }
                assert_eq!((s.dtype(), b.dtype()), (dt, dt), "{what}: dtypes");
                same_bits(
                    &format!("{what}: scales"),
                    &s,
                    MLX.get(&format!("{case}.scales")),
                );
                same_bits(
                    &format!("{what}: biases"),
                    &b,
                    MLX.get(&format!("{case}.biases")),
                );
                // dequantize from MLX's own parts.
                if let Some(deq) = MLX.get_opt(&format!("{case}.deq")) {
                    let part = |p: &str| {
                        let (sh, v) = MLX.get(&format!("{case}.{p}"));
                        arr(dev, dt, v, sh)
                    };
                    let wq = words(dev, &want_wq.1, &want_wq.0);
                    let got = ok(
                        &what,
                        wmx::dequantize(&wq, &part("scales"), &part("biases"), group, bits),
                    );
                    assert_eq!(got.dtype(), dt, "{what}: dequantized dtype");
                    same_bits(&format!("dequantize {case} on {dev}"), &got, deq);
                }
            }
        }
    }
}

/// quantized_matmul against MLX's (f32, both layouts; three rows of x take the
/// matrix-vector kernel when transposed, the dequantized product otherwise).
pub fn quantized_matmul_mlx(dev: &Device) {
    for (bits, group) in [(4, 64), (3, 32), (8, 128), (2, 64), (6, 64)] {
        for (t, transpose) in [("t", true), ("n", false)] {
            let case = format!("qmm_{t}_b{bits}_g{group}");
            let get = |p: &str| MLX.get(&format!("{case}.{p}"));
            let x = arr(dev, DType::F32, &get("x").1, &get("x").0);
            let wq = words(dev, &get("wq").1, &get("wq").0);
            let s = arr(dev, DType::F32, &get("scales").1, &get("scales").0);
            let b = arr(dev, DType::F32, &get("biases").1, &get("biases").0);
            let what = format!("quantized_matmul {case} on {dev}");
            let y = ok(
                &what,
                wmx::quantized_matmul(&x, &wq, &s, &b, transpose, group, bits),
            );
            MLX.check(&what, &y, &format!("{case}.y"), 1e-5, 1e-5);
        }
    }
}

/// A random quantized matrix `[n, k]` (or `[k, n]` untransposed) of dtype `dt`:
/// the arrays and the dequantized values in f64 (from the arrays' own values).
struct QMat {
    wq: Array,
    s: Array,
    b: Array,
    /// Row-major dequantized values, in the matrix's own layout.
    w: Vec<f64>,
}

fn qmat(
    dev: &Device,
    rng: &mut Rng,
    dt: DType,
    shape: &[usize],
    group: usize,
    bits: usize,
) -> QMat {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
        .collect();
    let (wq, s, b) = ok(
        "quantize",
        wmx::quantize(&arr(dev, dt, &v, shape), group, bits),
    );
    let (qv, sv, bv) = (
        ok("words", wq.to_vec::<u32>()),
        f64s(&s, "scales"),
        f64s(&b, "biases"),
    );
    let w = (0..n)
        .map(|e| {
            let (g, i) = (e / group, e % group);
            let bit = (g * group + i) * bits;
            let row_bits = shape[shape.len() - 1] * bits;
            let (row, rb) = (bit / row_bits, bit % row_bits);
            let wpr = row_bits / 32;
            let at = row * wpr + rb / 32;
            let mut q = (qv[at] as u64) >> (rb % 32);
            if rb % 32 + bits > 32 {
                q |= (qv[at + 1] as u64) << (32 - rb % 32);
            }
            let q = (q & ((1 << bits) - 1)) as f64;
            sv[g] * q + bv[g]
        })
        .collect();
    QMat { wq, s, b, w }
}

/// y = x @ W.T (W [n, k]) or x @ W (W [k, n]) in f64, x [m, k].
fn product(x: &[f64], w: &[f64], m: usize, k: usize, n: usize, transpose: bool) -> Vec<f64> {
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            y[i * n + j] = (0..k)
                .map(|p| {
                    x[i * k + p]
                        * if transpose {
                            w[j * k + p]
                        } else {
                            w[p * n + j]
                        }
                })
                .sum();
        }
    }
    y
}

fn close(what: &str, got: &[f64], want: &[f64], scale: &[f64], dt: DType) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let eps = match dt {
        DType::F32 => 1e-5,
        DType::F16 => 2e-3,
        _ => 1.6e-2,
    };
    for (i, ((g, w), s)) in got.iter().zip(want).zip(scale).enumerate() {
        assert!(
            (g - w).abs() <= eps * (w.abs() + s + 1e-3),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

/// The product on random data, both paths, every dtype, against the f64 loop.
pub fn quantized_matmul_values(dev: &Device) {
    let mut rng = Rng::new(0x38);
    for dt in [DType::F32, DType::F16, DType::BF16] {
        if !supported(dev, dt) {
            continue;
        }
        // (m, k, n, bits, group, transpose): 1 and 8 rows (the kernel's two
        // variants), 9 (the dequantized product), untransposed, odd n; one row
        // with words per row not a multiple of four, and with a team of lanes
        // taking a row's words in more than one round.
        for (m, k, n, bits, group, transpose) in [
            (1, 256, 48, 4, 64, true),
            (3, 128, 10, 3, 32, true),
            (8, 384, 16, 5, 128, true),
            (2, 4096, 6, 8, 64, true),
            (9, 128, 12, 6, 32, true),
            (2, 64, 7, 2, 32, true),
            (1, 64, 7, 8, 32, true),
            (1, 192, 5, 2, 64, true),
            (1, 96, 10, 2, 32, true),
            (1, 16384, 4, 8, 128, true),
            (4, 128, 64, 4, 64, false),
        ] {
            let what = format!(
                "quantized_matmul {dt} m{m} k{k} n{n} b{bits} g{group} t{transpose} on {dev}"
            );
            let wshape = if transpose { [n, k] } else { [k, n] };
            let q = qmat(dev, &mut rng, dt, &wshape, group, bits);
            let x: Vec<f64> = (0..m * k)
                .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
                .collect();
            let xa = arr(dev, dt, &x, &[m, k]);
            let y = ok(
                &what,
                wmx::quantized_matmul(&xa, &q.wq, &q.s, &q.b, transpose, group, bits),
            );
            assert_eq!((y.dtype(), y.shape()), (dt, &[m, n][..]), "{what}");
            let want = product(&x, &q.w, m, k, n, transpose);
            let ax: Vec<f64> = x.iter().map(|v| v.abs()).collect();
            let aw: Vec<f64> = q.w.iter().map(|v| v.abs()).collect();
            let scale = product(&ax, &aw, m, k, n, transpose);
            close(&what, &f64s(&y, &what), &want, &scale, dt);
        }
    }
    let dt = DType::F32;
    let mut rng = Rng::new(0x39);
    let (k, n) = (128, 24);
    let q = qmat(dev, &mut rng, dt, &[n, k], 64, 4);
    let x: Vec<f64> = (0..6 * k).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let want = product(&x, &q.w, 6, k, n, true);
    let ax: Vec<f64> = x.iter().map(|v| v.abs()).collect();
    let aw: Vec<f64> = q.w.iter().map(|v| v.abs()).collect();
    let scale = product(&ax, &aw, 6, k, n, true);
    let run = |what: &str, x: &Array| -> Vec<f64> {
        let y = ok(
            what,
            wmx::quantized_matmul(x, &q.wq, &q.s, &q.b, true, 64, 4),
        );
        f64s(&y, what)
    };
    // x [2, 3, k]: six rows through the kernel; a transposed view; one row as a
    // vector.
    let xa = arr(dev, dt, &x, &[2, 3, k]);
    close("x [2, 3, k]", &run("x [2, 3, k]", &xa), &want, &scale, dt);
    let xt: Vec<f64> = (0..k * 6).map(|i| x[(i % 6) * k + i / 6]).collect();
    let view = ok(
        "transpose",
        wmx::transpose(&arr(dev, dt, &xt, &[k, 6]), None),
    );
    close(
        "x as a transposed view",
        &run("view", &view),
        &want,
        &scale,
        dt,
    );
    let row = arr(dev, dt, &x[..k], &[k]);
    let got = run("x [k]", &row);
    close("x [k]", &got, &want[..n], &scale[..n], dt);
    // x at an odd element offset (a 16-bit x then reads its values one by one).
    for dt in [DType::F16, DType::F32] {
        if !supported(dev, dt) {
            continue;
        }
        let qh = qmat(dev, &mut rng, dt, &[n, k], 64, 4);
        let xs: Vec<f64> = (0..=k)
            .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
            .collect();
        let whole = arr(dev, dt, &xs, &[1, k + 1]);
        let odd = ok(
            "slice",
            wmx::slice(
                &whole,
                &[wmx::Slice::ALL, wmx::Slice::new(Some(1), None, 1)],
            ),
        );
        let y = ok(
            "odd offset",
            wmx::quantized_matmul(&odd, &qh.wq, &qh.s, &qh.b, true, 64, 4),
        );
        let want = product(&xs[1..], &qh.w, 1, k, n, true);
        let ax: Vec<f64> = xs[1..].iter().map(|v| v.abs()).collect();
        let aw: Vec<f64> = qh.w.iter().map(|v| v.abs()).collect();
        let sc = product(&ax, &aw, 1, k, n, true);
        close(
            &format!("x at an odd offset, {dt}"),
            &f64s(&y, "odd"),
            &want,
            &sc,
            dt,
        );
    }
    // A batch of matrices [2, n, k] against x [2, 1, k]: the dequantized product.
    let (wq2, s2, b2) = (
        ok("stack", wmx::stack(&[&q.wq, &q.wq], 0)),
        ok("stack", wmx::stack(&[&q.s, &q.s], 0)),
        ok("stack", wmx::stack(&[&q.b, &q.b], 0)),
    );
    let x2 = arr(dev, dt, &x[..2 * k], &[2, 1, k]);
    let y = ok(
        "batched",
        wmx::quantized_matmul(&x2, &wq2, &s2, &b2, true, 64, 4),
    );
    assert_eq!(y.shape(), &[2, 1, n]);
    close(
        "batched matrices",
        &f64s(&y, "batched"),
        &want[..2 * n],
        &scale[..2 * n],
        dt,
    );
    // No rows; no groups.
    let none = arr(dev, dt, &[], &[0, k]);
    let y = ok(
        "no rows",
        wmx::quantized_matmul(&none, &q.wq, &q.s, &q.b, true, 64, 4),
    );
    assert_eq!(y.shape(), &[0, n], "no rows");
    let (wq0, s0, _) = ok("empty", wmx::quantize(&arr(dev, dt, &[], &[3, 0]), 32, 4));
    assert_eq!(
        (wq0.shape(), s0.shape()),
        (&[3usize, 0][..], &[3usize, 0][..]),
        "empty w"
    );
    // A group with NaN or inf: NaN scale and bias, NaN values, the rest as usual.
    let mut v: Vec<f64> = (0..128).map(|i| i as f64 / 16.0).collect();
    v[3] = f64::NAN;
    v[70] = f64::INFINITY;
    let (wq, s, b) = ok("nan", wmx::quantize(&arr(dev, dt, &v, &[2, 64]), 32, 4));
    let sv = f64s(&s, "nan scales");
    assert!(
        sv[0].is_nan() && sv[2].is_nan() && sv[1].is_finite() && sv[3].is_finite(),
        "NaN groups: scales {sv:?}"
    );
    let back = f64s(&ok("nan", wmx::dequantize(&wq, &s, &b, 32, 4)), "nan back");
    assert!(
        back[..32].iter().all(|v| v.is_nan()) && back[40].is_finite(),
        "NaN groups dequantize to NaN"
    );
    // More than 65535 workgroups: 600 000 rows of one group.
    let nn = 600_000;
    let wq = ok(
        "big",
        Array::from_slice_on(&vec![0x9999_9999u32; nn * 2], &[nn, 2], dev),
    );
    let s = arr(dev, dt, &vec![0.5; nn], &[nn, 1]);
    let b = arr(dev, dt, &vec![-1.0; nn], &[nn, 1]);
    let xv: Vec<f64> = (0..32).map(|i| i as f64).collect();
    let y = ok(
        "big",
        wmx::quantized_matmul(&arr(dev, dt, &xv, &[1, 32]), &wq, &s, &b, true, 32, 2),
    );
    // q alternates 1, 2 (0b01, 0b10): w alternates -0.5 and 0.
    let want: f64 = (0..32)
        .map(|i| i as f64 * if i % 2 == 0 { -0.5 } else { 0.0 })
        .sum();
    let got = f64s(&y, "big");
    assert!(
        got.iter().all(|&g| g == want),
        "600 000 rows: got {} .. {}, want {want}",
        got[0],
        got[nn - 1]
    );
}

/// Bad arguments are errors at the op that names the problem.
pub fn quantized_errors(dev: &Device) {
    let dt = DType::F32;
    let w = arr(dev, dt, &[0.5; 256], &[4, 64]);
    expect_err("bits 7", wmx::quantize(&w, 64, 7), &["bits", "7"]);
    expect_err("group 16", wmx::quantize(&w, 16, 4), &["group_size", "16"]);
    expect_err(
        "rank 1",
        wmx::quantize(&arr(dev, dt, &[0.0; 64], &[64]), 64, 4),
        &["rank"],
    );
    expect_err(
        "k not whole groups",
        wmx::quantize(&arr(dev, dt, &[0.0; 96], &[2, 48]), 32, 4),
        &["48", "multiple"],
    );
    let ints = ok("ints", Array::from_slice_on(&[1i32; 64], &[1, 64], dev));
    expect_err("int w", wmx::quantize(&ints, 64, 4), &["f32"]);
    let (wq, s, b) = ok("quantize", wmx::quantize(&w, 64, 4));
    expect_err(
        "bits mismatch",
        wmx::dequantize(&wq, &s, &b, 64, 8),
        &["do not fit"],
    );
    expect_err("float words", wmx::dequantize(&s, &s, &b, 64, 4), &["u32"]);
    let b16 = ok("astype", wmx::astype(&b, DType::F16));
    if supported(dev, DType::F16) {
        expect_err(
            "biases dtype",
            wmx::dequantize(&wq, &s, &b16, 64, 4),
            &["dtype"],
        );
    }
    let x = arr(dev, dt, &[1.0; 32], &[1, 32]);
    expect_err(
        "inner length",
        wmx::quantized_matmul(&x, &wq, &s, &b, true, 64, 4),
        &["32", "64"],
    );
    let x = arr(dev, dt, &[1.0; 64], &[1, 64]);
    if supported(dev, DType::F16) {
        let xh = ok("astype", wmx::astype(&x, DType::F16));
        expect_err(
            "x dtype",
            wmx::quantized_matmul(&xh, &wq, &s, &b, true, 64, 4),
            &["dtype"],
        );
    }
    expect_err(
        "quantize's gradient",
        wmx::grad(
            |a: &[Array]| {
                let (_, s, _) = wmx::quantize(&a[0], 64, 4)?;
                Ok(vec![wmx::sum(&s, None, false)?])
            },
            &[0],
        )(std::slice::from_ref(&w)),
        &["not differentiable"],
    );
}

/// Gradients in x, scales and biases against central differences (both paths),
/// the jvp, and vmap over x and over the matrices against a loop.
pub fn grad_quantized_matmul(dev: &Device) {
    let dt = DType::F32;
    let mut rng = Rng::new(0x3a);
    let (k, n, group, bits) = (64, 6, 32, 4);
    let q = qmat(dev, &mut rng, dt, &[n, k], group, bits);
    let (sv, bv) = (f64s(&q.s, "s"), f64s(&q.b, "b"));
    let levels: Vec<f64> = (0..n * k)
        .map(|e| (q.w[e] - bv[e / group]) / sv[e / group])
        .map(f64::round)
        .collect();
    for m in [2usize, 10] {
        let what = format!("grad of quantized_matmul, {m} rows");
        let x: Vec<f64> = (0..m * k)
            .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
            .collect();
        let g: Vec<f64> = (0..m * n)
            .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
            .collect();
        // The loss from x, scales and biases (the parameters' order below).
        let loss = |p: &[f64]| -> f64 {
            let (x, s, b) = (
                &p[..m * k],
                &p[m * k..m * k + sv.len()],
                &p[m * k + sv.len()..],
            );
            let w: Vec<f64> = (0..n * k)
                .map(|e| s[e / group] * levels[e] + b[e / group])
                .collect();
            product(x, &w, m, k, n, true)
                .iter()
                .zip(&g)
                .map(|(y, g)| y * g)
                .sum()
        };
        let ga = arr(dev, dt, &g, &[m, n]);
        let wq = q.wq.clone();
        let f = move |a: &[Array]| -> Result<Vec<Array>> {
            let y = wmx::quantized_matmul(&a[0], &wq, &a[1], &a[2], true, group, bits)?;
            Ok(vec![wmx::sum(&wmx::multiply(&y, &ga)?, None, false)?])
        };
        let inputs = [arr(dev, dt, &x, &[m, k]), q.s.clone(), q.b.clone()];
        let grads = ok(&what, wmx::grad(&f, &[0, 1, 2])(&inputs));
        let p: Vec<f64> = x.iter().chain(&sv).chain(&bv).copied().collect();
        let h = 1e-4;
        let fd: Vec<f64> = (0..p.len())
            .map(|i| {
                let (mut a, mut b) = (p.clone(), p.clone());
                a[i] += h;
                b[i] -= h;
                (loss(&a) - loss(&b)) / (2.0 * h)
            })
            .collect();
        let got: Vec<f64> = grads.iter().flat_map(|g| f64s(g, &what)).collect();
        let ones = vec![1.0; fd.len()];
        close(&format!("{what}: vjp"), &got, &fd, &ones, dt);
        let t: Vec<f64> = (0..p.len())
            .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
            .collect();
        let tang = [
            arr(dev, dt, &t[..m * k], &[m, k]),
            arr(dev, dt, &t[m * k..m * k + sv.len()], q.s.shape()),
            arr(dev, dt, &t[m * k + sv.len()..], q.b.shape()),
        ];
        let (_, jv) = ok(&what, wmx::jvp(&f, &inputs, &tang));
        let shifted = |s: f64| -> Vec<f64> { p.iter().zip(&t).map(|(a, b)| a + s * b).collect() };
        let want = (loss(&shifted(h)) - loss(&shifted(-h))) / (2.0 * h);
        close(
            &format!("{what}: jvp"),
            &f64s(&jv[0], &what),
            &[want],
            &[1.0],
            dt,
        );
    }
    // vmap over x (3 x [2, k]) and over the scales.
    let v = 3;
    let xs: Vec<f64> = (0..v * 2 * k)
        .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
        .collect();
    let xb = arr(dev, dt, &xs, &[v, 2, k]);
    let (wq, s, b) = (q.wq.clone(), q.s.clone(), q.b.clone());
    let per = move |a: &[Array]| -> Result<Vec<Array>> {
        Ok(vec![wmx::quantized_matmul(
            &a[0], &wq, &a[1], &b, true, group, bits,
        )?])
    };
    let sb = ok(
        "stack",
        wmx::stack(
            &[
                &s,
                &wmx::multiply(&s, &wmx::scalar(2.0, dt).unwrap()).unwrap(),
                &s,
            ],
            0,
        ),
    );
    for (axes, what) in [
        ([Some(0), None], "vmap over x"),
        ([Some(0), Some(0)], "vmap over x and scales"),
    ] {
        let sarg = if axes[1].is_some() {
            sb.clone()
        } else {
            s.clone()
        };
        let got = ok(what, wmx::vmap(&per, &axes, &[0])(&[xb.clone(), sarg]));
        let mut want = Vec::new();
        for i in 0..v {
            let si = if axes[1].is_some() {
                ok(
                    "index",
                    wmx::take(&sb, &wmx::scalar(i as f64, DType::I32).unwrap(), Some(0)),
                )
            } else {
                s.clone()
            };
            let xi = arr(dev, dt, &xs[i * 2 * k..(i + 1) * 2 * k], &[2, k]);
            want.extend(f64s(&ok(what, per(&[xi, si]))[0], what));
        }
        let ones = vec![1.0; want.len()];
        close(what, &f64s(&got[0], what), &want, &ones, dt);
    }
}

/// Layers quantized in place: `Linear` and `Embedding` against the op on their own
/// parameters and an f64 loop, `nn::quantize` over a model (a layer whose rows are
/// not whole groups skipped), frozen parameters, MLX's names through a save and a
/// load into another quantized model, and the errors.
pub fn quantized_layers(dev: &Device) {
    use wmx::nn::{self, Layer, ModuleExt};
    let dt = DType::F32;
    let on = |f: &dyn Fn() -> Result<Array>| ok("on device", wmx::with_device(dev, f));
    let key = on(&|| wmx::random::key(38));
    let model = wmx::with_device(dev, || {
        Ok(nn::Sequential::new()
            .push(nn::Linear::new(&key, 128, 32, true)?)
            .push(nn::Linear::new(
                &wmx::random::split(&key, 2)?.take(&wmx::scalar(1.0, DType::I32)?, Some(0))?,
                32,
                8,
                false,
            )?))
    });
    let model = ok("model", model);
    let x: Vec<f64> = (0..3 * 128)
        .map(|i| ((i * 37 % 101) as f64 - 50.0) / 50.0)
        .collect();
    let xa = arr(dev, dt, &x, &[3, 128]);
    let dense = f64s(&ok("dense", model.forward(&xa)), "dense");
    assert_eq!(
        ok("nn::quantize", nn::quantize(&model, 64, 8)),
        1,
        "one layer has rows of 64"
    );
    let names: Vec<String> = model
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        ["0.weight", "0.scales", "0.biases", "0.bias", "1.weight"]
    );
    let trainable: Vec<String> = model.trainable_parameters().into_keys().collect();
    assert_eq!(
        trainable,
        ["0.bias", "1.weight"],
        "quantized parameters are frozen"
    );
    let p = model.parameters();
    assert_eq!(
        (p["0.weight"].dtype(), p["0.weight"].shape()),
        (DType::U32, &[32usize, 32][..])
    );
    // The first layer against the op on its own parameters, plus the bias.
    let l0 = &model.layers()[0];
    let y0 = f64s(&ok("layer 0", l0.forward(&xa)), "layer 0");
    let op = ok(
        "op",
        wmx::quantized_matmul(
            &xa,
            &p["0.weight"],
            &p["0.scales"],
            &p["0.biases"],
            true,
            64,
            8,
        ),
    );
    let want: Vec<f64> = f64s(&ok("bias", wmx::add(&op, &p["0.bias"])), "op");
    close("quantized Linear", &y0, &want, &vec![1.0; want.len()], dt);
    // 8 bits keep the model's output close to the dense one.
    let quant = f64s(&ok("quantized", model.forward(&xa)), "quantized");
    close(
        "8-bit model vs dense",
        &quant,
        &dense,
        &vec![1.0; dense.len()],
        DType::BF16,
    );
    // MLX's names through a file, into another model quantized the same way.
    let dir = std::env::temp_dir().join(format!(
        "wmx-quant-{}-{}",
        std::process::id(),
        dev.name().len()
    ));
    ok(
        "dir",
        std::fs::create_dir_all(&dir).map_err(|e| wmx::Error::invalid("test", e.to_string())),
    );
    let file = dir.join("q.safetensors");
    ok("save", model.save_weights(&file));
    let other = ok(
        "other",
        wmx::with_device(dev, || {
            let k = wmx::random::key(7)?;
            Ok(nn::Sequential::new()
                .push(nn::Linear::new(&k, 128, 32, true)?)
                .push(nn::Linear::new(&k, 32, 8, false)?))
        }),
    );
    expect_err(
        "loading quantized weights into a dense model",
        other.load_weights(&file),
        &["0.scales"],
    );
    ok("quantize other", nn::quantize(&other, 64, 8));
    ok("load", other.load_weights(&file));
    let again = f64s(&ok("other", other.forward(&xa)), "other");
    assert_eq!(again, quant, "the loaded model computes the same");
    let _ = std::fs::remove_dir_all(&dir);
    // Errors: twice, rows not whole groups.
    let lin = ok(
        "linear",
        wmx::with_device(dev, || nn::Linear::new(&key, 48, 4, false)),
    );
    expect_err(
        "48 in groups of 32",
        lin.quantize(32, 4),
        &["48", "group_size"],
    );
    assert!(
        lin.quantization().is_none(),
        "a failed quantize changes nothing"
    );
    let lin = ok(
        "linear",
        wmx::with_device(dev, || nn::Linear::new(&key, 64, 4, false)),
    );
    ok("quantize", lin.quantize(32, 4));
    assert_eq!(lin.quantization(), Some((32, 4)));
    expect_err("twice", lin.quantize(32, 4), &["already"]);
    // An embedding: rows dequantized on lookup, and as a tied output layer.
    let table: Vec<f64> = (0..10 * 64)
        .map(|i| ((i * 13 % 29) as f64 - 14.0) / 7.0)
        .collect();
    let emb = ok(
        "embedding",
        nn::Embedding::from_array(arr(dev, dt, &table, &[10, 64])),
    );
    ok("quantize embedding", emb.quantize(32, 4));
    let p = emb.parameters();
    let full = f64s(
        &ok(
            "deq",
            wmx::dequantize(&p["weight"], &p["scales"], &p["biases"], 32, 4),
        ),
        "deq",
    );
    let idx = ok("idx", Array::from_slice_on(&[3i32, 0, 9, 3], &[2, 2], dev));
    let rows = ok("lookup", emb.forward(&idx));
    assert_eq!(rows.shape(), &[2, 2, 64]);
    let want: Vec<f64> = [3usize, 0, 9, 3]
        .iter()
        .flat_map(|&r| full[r * 64..(r + 1) * 64].to_vec())
        .collect();
    assert_eq!(
        f64s(&rows, "rows"),
        want,
        "quantized lookup = dequantized rows"
    );
    let h: Vec<f64> = (0..64).map(|i| (i as f64 - 32.0) / 32.0).collect();
    let scores = f64s(
        &ok("as_linear", emb.as_linear(&arr(dev, dt, &h, &[1, 64]))),
        "scores",
    );
    let want = product(&h, &full, 1, 64, 10, true);
    close("quantized tied output", &scores, &want, &[1.0; 10], dt);
}

/// gather_qmm (MLX's, a mixture-of-experts product): per-batch experts by index,
/// with and without gathered rows of x, against the f64 loop on each expert.
pub fn gather_qmm_values(dev: &Device) {
    let dt = DType::F32;
    let mut rng = Rng::new(0x3b);
    let (e, n, k) = (3usize, 8usize, 64usize);
    let experts: Vec<QMat> = (0..e)
        .map(|_| qmat(dev, &mut rng, dt, &[n, k], 32, 4))
        .collect();
    let stack = |f: &dyn Fn(&QMat) -> &Array| {
        let parts: Vec<&Array> = experts.iter().map(f).collect();
        ok("stack", wmx::stack(&parts, 0))
    };
    let (wq, s, b) = (stack(&|q| &q.wq), stack(&|q| &q.s), stack(&|q| &q.b));
    let ints = |v: &[i32]| ok("indices", Array::from_slice_on(v, &[v.len()], dev));
    let x: Vec<f64> = (0..4 * k)
        .map(|_| round_to(dt, rng.uniform(-1.0, 1.0)))
        .collect();
    let check = |what: &str, y: &Array, rows: &[usize], picks: &[usize]| {
        assert_eq!(y.shape(), &[picks.len(), 1, n], "{what}: shape");
        let got = f64s(y, what);
        for (i, (&r, &p)) in rows.iter().zip(picks).enumerate() {
            let xr = &x[r * k..(r + 1) * k];
            let want = product(xr, &experts[p].w, 1, k, n, true);
            let ax: Vec<f64> = xr.iter().map(|v| v.abs()).collect();
            let aw: Vec<f64> = experts[p].w.iter().map(|v| v.abs()).collect();
            let sc = product(&ax, &aw, 1, k, n, true);
            close(
                &format!("{what}: batch {i}"),
                &got[i * n..(i + 1) * n],
                &want,
                &sc,
                dt,
            );
        }
    };
    let xa = arr(dev, dt, &x, &[4, 1, k]);
    let rhs = ints(&[2, 0, 2, 1]);
    let y = ok(
        "gather_qmm",
        wmx::gather_qmm(&xa, &wq, &s, &b, None, Some(&rhs), true, 32, 4),
    );
    check("experts by index", &y, &[0, 1, 2, 3], &[2, 0, 2, 1]);
    let lhs = ints(&[3, 0, 0]);
    let rhs = ints(&[1, 1, 0]);
    let y = ok(
        "gather_qmm",
        wmx::gather_qmm(&xa, &wq, &s, &b, Some(&lhs), Some(&rhs), true, 32, 4),
    );
    check("rows and experts by index", &y, &[3, 0, 0], &[1, 1, 0]);
    let bad = ok("float", Array::from_slice_on(&[0.0f32], &[1], dev));
    expect_err(
        "float indices",
        wmx::gather_qmm(&xa, &wq, &s, &b, None, Some(&bad), true, 32, 4),
        &["integers"],
    );
    expect_err(
        "no stack",
        wmx::gather_qmm(
            &xa,
            &experts[0].wq,
            &experts[0].s,
            &experts[0].b,
            None,
            None,
            true,
            32,
            4,
        ),
        &["stack"],
    );
}
