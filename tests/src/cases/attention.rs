//! Scaled dot-product attention's fused path (flash attention, split-KV
//! decoding) against an f64 host loop of the formula: every fused mask kind,
//! grouped-query ratios 1, 4 and 8, fewer and more queries than keys, one query,
//! odd lengths up to 1000, large logits, rows with no key, head dimensions 4 to
//! 256, transposed and sliced inputs, f16 and bf16 rounding, empty inputs;
//! derivatives against central differences of the reference, jvp, and vmap
//! against a loop.

use crate::rng::Rng;
use crate::val::{Val, make_ok, read_ok, round_to};
use wmx_core::{self as wmx, Array, AttentionMask as M, DType, Device, Result};

fn ok<T>(what: &str, r: Result<T>) -> T {
    super::ok(what, r)
}

/// One call: batch, query heads, key heads, query and key lengths, head dim, mask
/// (0 none, 1 causal, 2 window) and window, scale.
#[derive(Clone, Copy, Debug)]
struct Call {
    b: usize,
    hq: usize,
    hkv: usize,
    lq: usize,
    lk: usize,
    d: usize,
    mask: u8,
    window: usize,
    scale: f64,
}

impl Call {
    fn new(b: usize, hq: usize, hkv: usize, lq: usize, lk: usize, d: usize, mask: u8) -> Call {
        Call {
            b,
            hq,
            hkv,
            lq,
            lk,
            d,
            mask,
            window: 3,
            scale: 1.0 / (d as f64).sqrt(),
        }
    }

    fn mask(&self) -> M<'static> {
        match self.mask {
            0 => M::None,
            1 => M::Causal,
            _ => M::SlidingWindow(self.window),
        }
    }
}

/// The reference: `softmax(q kᵀ · scale)` over the keys each query sees, times v,
/// in f64; a query that sees no key gives zeros.
fn reference(c: Call, q: &[f64], k: &[f64], v: &[f64]) -> Vec<f64> {
    let g = c.hq / c.hkv;
    let mut out = vec![0.0; c.b * c.hq * c.lq * c.d];
    for b in 0..c.b {
        for h in 0..c.hq {
            let kv = (b * c.hkv + h / g) * c.lk * c.d;
            for i in 0..c.lq {
                let row = ((b * c.hq + h) * c.lq + i) * c.d;
                let end = i as i64 + c.lk as i64 - c.lq as i64;
                let sees = |j: usize| {
                    let j = j as i64;
                    match c.mask {
                        0 => true,
                        1 => j <= end,
                        _ => j <= end && j > end - c.window as i64,
                    }
                };
                let s: Vec<Option<f64>> = (0..c.lk)
                    .map(|j| {
                        sees(j).then(|| {
                            (0..c.d)
                                .map(|t| q[row + t] * k[kv + j * c.d + t])
                                .sum::<f64>()
                                * c.scale
                        })
                    })
                    .collect();
                let top = s.iter().flatten().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
                if top == f64::NEG_INFINITY {
                    continue;
                }
                let w: Vec<f64> = s
                    .iter()
                    .map(|x| x.map_or(0.0, |x| (x - top).exp()))
                    .collect();
                let total: f64 = w.iter().sum();
                for (j, wj) in w.iter().enumerate() {
                    for t in 0..c.d {
                        out[row + t] += wj / total * v[kv + j * c.d + t];
                    }
                }
            }
        }
    }
    out
}

fn arr(dev: &Device, dt: DType, v: &[f64], shape: &[usize]) -> Array {
    let vals: Vec<Val> = v.iter().map(|&x| Val::F(x)).collect();
    make_ok(dev, dt, &vals, shape)
}

fn f64s(a: &Array, what: &str) -> Vec<f64> {
    read_ok(a, what).into_iter().map(Val::f).collect()
}

/// Within `tol` of the largest value of the reference (at least 1).
fn close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let big = want.iter().fold(1f64, |m, v| m.max(v.abs()));
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * big,
            "{what}: element {i} of {}: got {g}, want {w}",
            want.len()
        );
    }
}

fn tol(dt: DType) -> f64 {
    match dt {
        DType::F32 => 2e-5,
        DType::F16 => 4e-3,
        _ => 3e-2,
    }
}

struct Inputs {
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
}

fn inputs(rng: &mut Rng, c: Call, dt: DType, mag: f64) -> Inputs {
    let mut vals = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| round_to(dt, rng.uniform(-mag, mag)))
            .collect()
    };
    Inputs {
        q: vals(c.b * c.hq * c.lq * c.d),
        k: vals(c.b * c.hkv * c.lk * c.d),
        v: vals(c.b * c.hkv * c.lk * c.d),
    }
}

fn run(c: Call, q: &Array, k: &Array, v: &Array) -> Result<Array> {
    wmx::scaled_dot_product_attention(q, k, v, Some(c.scale), c.mask())
}

/// One call on random data of `dt`: contiguous inputs, and (`views`) q as the
/// transpose of a `[B, Lq, Hq, D]` array and k, v as slices of longer arrays.
fn check_call(dev: &Device, rng: &mut Rng, c: Call, dt: DType, mag: f64, views: bool, tl: f64) {
    let x = inputs(rng, c, dt, mag);
    let want: Vec<f64> = reference(c, &x.q, &x.k, &x.v)
        .into_iter()
        .map(|v| round_to(dt, v))
        .collect();
    let what = format!("attention {dt} {c:?}");
    let qs = [c.b, c.hq, c.lq, c.d];
    let ks = [c.b, c.hkv, c.lk, c.d];
    let (q, k, v) = (
        arr(dev, dt, &x.q, &qs),
        arr(dev, dt, &x.k, &ks),
        arr(dev, dt, &x.v, &ks),
    );
    let o = ok(&what, run(c, &q, &k, &v));
    assert_eq!(o.dtype(), dt, "{what}: dtype");
    assert_eq!(o.shape(), qs, "{what}: shape");
    close(&what, &f64s(&o, &what), &want, tl);
    if !views {
        return;
    }
    // q stored as [B, Lq, Hq, D] and transposed; k and v the odd keys of [B, Hkv,
    // 2 Lk, D] arrays.
    let qt = ok(&what, q.swapaxes(1, 2).and_then(|t| wmx::contiguous(&t)));
    let qv = ok(&what, qt.swapaxes(1, 2));
    let wide = |a: &Array| -> Array {
        let t = ok(&what, wmx::stack(&[a, a], 3));
        let t = ok(
            &what,
            t.reshape(&[
                c.b as isize,
                c.hkv as isize,
                2 * c.lk as isize,
                c.d as isize,
            ]),
        );
        ok(
            &what,
            t.slice(&[
                wmx::Slice::ALL,
                wmx::Slice::ALL,
                wmx::Slice::new(Some(1), None, 2),
            ]),
        )
    };
    let o = ok(&what, run(c, &qv, &wide(&k), &wide(&v)));
    close(&format!("{what} on views"), &f64s(&o, &what), &want, tl);
    // q from element 1 of wider rows: rows that start inside a 16-bit word.
    let padded = ok(
        &what,
        wmx::pad(
            &q,
            &[(0, 0), (0, 0), (0, 0), (1, 3)],
            wmx::PadMode::Constant(0.0),
        ),
    );
    let qo = ok(
        &what,
        padded.slice(&[
            wmx::Slice::ALL,
            wmx::Slice::ALL,
            wmx::Slice::ALL,
            wmx::Slice::range(1, 1 + c.d as isize),
        ]),
    );
    let o = ok(&what, run(c, &qo, &k, &v));
    close(
        &format!("{what} on unaligned rows"),
        &f64s(&o, &what),
        &want,
        tl,
    );
}

/// The fused path's values on every kind of call.
pub fn attention_values(dev: &Device) {
    let mut rng = Rng::new(0xa77e);
    let calls = [
        // Masks, grouped-query ratios 1, 4 and 8, Lq != Lk.
        Call::new(2, 2, 2, 9, 9, 16, 0),
        Call::new(1, 4, 1, 7, 13, 8, 1),
        Call::new(2, 8, 1, 5, 11, 32, 2),
        Call::new(1, 8, 2, 12, 12, 64, 1),
        // More queries than keys: the first causal rows see no key (zeros).
        Call::new(1, 2, 1, 6, 3, 8, 1),
        // One query (decoding), long keys: the split-KV path.
        Call::new(1, 8, 2, 1, 1000, 64, 0),
        Call::new(2, 4, 4, 1, 600, 16, 1),
        Call::new(1, 4, 1, 3, 700, 32, 2),
        // Few rows per key head: head dimension 128 with grouped heads, two query
        // positions of four heads (rows with different causal ends), a window,
        // three rows with head dimension 96.
        Call::new(1, 32, 8, 1, 1000, 128, 1),
        Call::new(2, 4, 1, 2, 300, 64, 1),
        Call::new(1, 4, 2, 1, 500, 32, 2),
        Call::new(1, 3, 3, 3, 50, 96, 0),
        // One key, head dimensions 4, 80, 96, 128 and 256.
        Call::new(1, 1, 1, 4, 1, 4, 0),
        Call::new(1, 2, 1, 5, 7, 80, 1),
        Call::new(1, 2, 2, 3, 9, 96, 0),
        Call::new(1, 4, 2, 7, 7, 128, 1),
        Call::new(1, 2, 1, 5, 6, 256, 2),
        // Head dimension 6: the composed path, its positional masks as biases
        // (with and without rows that see no key).
        Call::new(1, 2, 1, 6, 3, 6, 1),
        Call::new(2, 4, 2, 5, 9, 6, 1),
        Call::new(1, 2, 1, 4, 7, 6, 2),
    ];
    for dt in [DType::F32, DType::F16, DType::BF16] {
        if !super::supported(dev, dt) {
            continue;
        }
        for c in calls {
            check_call(dev, &mut rng, c, dt, 1.0, c.lk < 100, tol(dt));
        }
    }
    // f16 prefills of at least 64 rows per key head (the cooperative kernel where
    // the adapter has one: several workgroups, a partial last one, every mask,
    // grouped heads, Lq > Lk, head dimensions 16 to 128, key counts off the 16-key
    // blocks, exactly 16 and fewer than 16 keys).
    for c in [
        Call::new(1, 4, 1, 40, 75, 64, 1),
        Call::new(2, 2, 2, 100, 100, 128, 0),
        Call::new(1, 8, 2, 33, 50, 16, 2),
        Call::new(1, 1, 1, 80, 40, 32, 1),
        Call::new(1, 2, 1, 300, 300, 64, 1),
        Call::new(1, 2, 1, 70, 70, 80, 2),
        Call::new(1, 1, 1, 65, 33, 96, 0),
        Call::new(1, 4, 4, 20, 16, 48, 1),
        Call::new(1, 4, 2, 40, 10, 64, 0),
    ] {
        if super::supported(dev, DType::F16) {
            check_call(dev, &mut rng, c, DType::F16, 1.0, c.lk < 100, tol(DType::F16));
        }
    }
    // 16-bit decoding, at most four rows per key head (the decode kernel at head
    // dimensions 32, 64 and 128 where subgroups hold dim / 8 invocations): one
    // chunk (normalised output) and views, rows at two causal positions, one and
    // three rows (padded), a window that leaves most chunks without a key, chunks
    // off the kernel's blocks, a batch.
    for c in [
        Call::new(1, 4, 1, 1, 50, 32, 0),
        Call::new(2, 2, 1, 2, 77, 64, 1),
        Call::new(1, 8, 8, 1, 300, 64, 2),
        Call::new(1, 6, 2, 1, 1000, 32, 1),
        Call::new(3, 4, 2, 1, 129, 32, 0),
        Call::new(1, 8, 2, 1, 90, 128, 2),
        Call::new(1, 4, 4, 1, 700, 128, 0),
    ] {
        for dt in [DType::F16, DType::BF16] {
            if super::supported(dev, dt) {
                check_call(dev, &mut rng, c, dt, 1.0, c.lk < 100, tol(dt));
            }
        }
    }
    // Many key heads (no split: each workgroup walks all keys, block after block)
    // with scores spread over tens of log2 units (rescales between blocks).
    for d in [32, 64, 128] {
        let c = Call::new(1, 256, 128, 1, 600, d, 1);
        if super::supported(dev, DType::F16) {
            check_call(dev, &mut rng, c, DType::F16, 4.0, false, tol(DType::F16));
        }
    }
    // Scores spread over tens of log2 units: the row maxima grow along the keys, so
    // the cooperative kernel rescales its accumulators many times.
    if super::supported(dev, DType::F16) {
        let c = Call::new(1, 2, 1, 200, 200, 64, 1);
        check_call(dev, &mut rng, c, DType::F16, 4.0, false, tol(DType::F16));
    }
    // A long causal prefill (keys past many tiles, rows past one workgroup).
    check_call(
        dev,
        &mut rng,
        Call::new(1, 1, 1, 1000, 1000, 64, 1),
        DType::F32,
        1.0,
        false,
        tol(DType::F32),
    );
    // Large logits (±1e4 after the scale): f32 keeps the scores' rounding.
    let big = Call {
        scale: 1.0,
        ..Call::new(1, 2, 1, 7, 9, 16, 0)
    };
    check_call(dev, &mut rng, big, DType::F32, 25.0, false, 2e-2);
    // Sliding windows of 1 key and of more keys than there are.
    for window in [1, 50] {
        let c = Call {
            window,
            ..Call::new(1, 2, 2, 6, 8, 8, 2)
        };
        check_call(dev, &mut rng, c, DType::F32, 1.0, false, tol(DType::F32));
    }
    // Empty batch, no queries, no keys (zeros).
    for c in [
        Call::new(0, 2, 1, 3, 4, 8, 0),
        Call::new(1, 2, 1, 0, 4, 8, 1),
        Call::new(1, 2, 1, 3, 0, 8, 0),
    ] {
        check_call(dev, &mut rng, c, DType::F32, 1.0, false, tol(DType::F32));
    }
}

/// Index `i` of `a`'s first axis.
fn first(a: &Array, i: usize) -> Array {
    let s = ok(
        "index",
        a.slice(&[wmx::Slice::range(i as isize, i as isize + 1)]),
    );
    let shape: Vec<isize> = a.shape()[1..].iter().map(|&d| d as isize).collect();
    ok("index", s.reshape(&shape))
}

/// Gradients of the fused path (f32) against central differences of the f64
/// reference, jvp against the vjp's dot products, vmap against a loop.
pub fn grad_attention(dev: &Device) {
    let mut rng = Rng::new(0x96ad);
    for c in [
        Call::new(1, 2, 1, 3, 5, 4, 1),
        Call::new(1, 2, 2, 4, 4, 8, 2),
        Call::new(1, 4, 2, 1, 6, 4, 0),
        // More queries than keys: the first rows see no key (no gradient).
        Call::new(1, 2, 1, 5, 3, 4, 1),
    ] {
        let what = format!("attention gradient {c:?}");
        let x = inputs(&mut rng, c, DType::F32, 1.0);
        let gw: Vec<f64> = (0..c.b * c.hq * c.lq * c.d)
            .map(|_| round_to(DType::F32, rng.uniform(-1.0, 1.0)))
            .collect();
        let qs = [c.b, c.hq, c.lq, c.d];
        let ks = [c.b, c.hkv, c.lk, c.d];
        let args = [
            arr(dev, DType::F32, &x.q, &qs),
            arr(dev, DType::F32, &x.k, &ks),
            arr(dev, DType::F32, &x.v, &ks),
        ];
        let g = arr(dev, DType::F32, &gw, &qs);
        let loss = |a: &[Array]| -> Result<Vec<Array>> {
            Ok(vec![wmx::sum(
                &wmx::multiply(&run(c, &a[0], &a[1], &a[2])?, &g)?,
                None,
                false,
            )?])
        };
        let grads = ok(&what, wmx::grad(loss, &[0, 1, 2])(&args));
        // The flash forward and the recomputing backward (the path of calls past
        // the saved-scores budget) give the same gradients.
        let re = ok(
            &what,
            wmx::with_attention_recompute(|| wmx::grad(loss, &[0, 1, 2])(&args)),
        );
        for (a, b) in grads.iter().zip(&re) {
            let (av, bv) = (f64s(a, &what), f64s(b, &what));
            for (x, y) in av.iter().zip(&bv) {
                assert!(
                    (x - y).abs() <= 1e-5 * x.abs().max(1.0),
                    "{what}: recomputed {y}, saved {x}"
                );
            }
        }
        let f = |q: &[f64], k: &[f64], v: &[f64]| -> f64 {
            reference(c, q, k, v)
                .iter()
                .zip(&gw)
                .map(|(a, b)| a * b)
                .sum()
        };
        let h = 1e-6;
        for (n, gr) in grads.iter().enumerate() {
            let got = f64s(gr, &what);
            let base = [&x.q, &x.k, &x.v][n];
            let fd: Vec<f64> = (0..base.len())
                .map(|i| {
                    let mut p = [x.q.clone(), x.k.clone(), x.v.clone()];
                    p[n][i] += h;
                    let up = f(&p[0], &p[1], &p[2]);
                    p[n][i] -= 2.0 * h;
                    (up - f(&p[0], &p[1], &p[2])) / (2.0 * h)
                })
                .collect();
            close(&format!("{what} d{}", ["q", "k", "v"][n]), &got, &fd, 1e-4);
        }
        // jvp: the tangent of the output along t equals <vjp, t> for the loss.
        let t: Vec<Array> = args
            .iter()
            .map(|a| {
                let n: usize = a.shape().iter().product();
                let v: Vec<f64> = (0..n)
                    .map(|_| round_to(DType::F32, rng.uniform(-1.0, 1.0)))
                    .collect();
                arr(dev, DType::F32, &v, a.shape())
            })
            .collect();
        let (_, tan) = ok(
            &what,
            wmx::jvp(
                |a: &[Array]| Ok(vec![run(c, &a[0], &a[1], &a[2])?]),
                &args,
                &t,
            ),
        );
        let lhs: f64 = f64s(&tan[0], &what)
            .iter()
            .zip(&gw)
            .map(|(a, b)| a * b)
            .sum();
        let rhs: f64 = grads
            .iter()
            .zip(&t)
            .map(|(g, t)| {
                f64s(g, &what)
                    .iter()
                    .zip(f64s(t, &what))
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
            })
            .sum();
        assert!(
            (lhs - rhs).abs() <= 1e-4 * (1.0 + rhs.abs()),
            "{what}: jvp {lhs} vs vjp {rhs}"
        );
    }
    // vmap over a leading axis of q only, and of all three, against a loop (the
    // second call takes the split-KV path).
    for c in [
        Call::new(2, 4, 2, 5, 6, 8, 1),
        Call::new(1, 4, 2, 1, 600, 8, 0),
    ] {
        let (n, qs, ks) = (3usize, [c.b, c.hq, c.lq, c.d], [c.b, c.hkv, c.lk, c.d]);
        let x = inputs(&mut rng, Call { b: n * c.b, ..c }, DType::F32, 1.0);
        let stack = |v: &[f64], s: &[usize]| {
            let mut shape = vec![n];
            shape.extend(s);
            arr(dev, DType::F32, v, &shape)
        };
        let (q, k, v) = (stack(&x.q, &qs), stack(&x.k, &ks), stack(&x.v, &ks));
        let f = |a: &[Array]| -> Result<Vec<Array>> { Ok(vec![run(c, &a[0], &a[1], &a[2])?]) };
        let all = ok(
            "vmap attention",
            wmx::vmap(f, &[Some(0), Some(0), Some(0)], &[0])(&[q.clone(), k.clone(), v.clone()]),
        );
        let k0 = first(&k, 0);
        let v0 = first(&v, 0);
        let only_q = ok(
            "vmap attention of q",
            wmx::vmap(
                |a: &[Array]| Ok(vec![run(c, &a[0], &k0, &v0)?]),
                &[Some(0)],
                &[0],
            )(std::slice::from_ref(&q)),
        );
        for i in 0..n {
            let at = |a: &Array| first(a, i);
            let want = ok("loop", run(c, &at(&q), &at(&k), &at(&v)));
            close(
                "vmap attention",
                &f64s(&at(&all[0]), "vmap"),
                &f64s(&want, "loop"),
                1e-6,
            );
            let want = ok("loop", run(c, &at(&q), &k0, &v0));
            close(
                "vmap attention of q",
                &f64s(&at(&only_q[0]), "vmap"),
                &f64s(&want, "loop"),
                1e-6,
            );
        }
    }
}
