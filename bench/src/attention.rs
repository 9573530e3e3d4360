//! `--attention`: issue 37's shapes (f16, D = 128) through
//! `scaled_dot_product_attention`: causal prefill (B = 1 and 8, H = 32, L = 2048
//! and 8192) and decoding (Lq = 1, Lk = 4096 and 32768, Hq = 32, Hkv = 8), the
//! fused path against the composed one (the same attention with its mask given as
//! a boolean array, which takes the composed form), the backward of the 2k
//! prefill (vjp of q, k and v), and a 32k-token causal prefill that the composed
//! form cannot hold. Wall clock over `iters` calls after a warm-up, the device
//! synchronised at both ends; outputs checked on a few rows against an f64 loop
//! first. `bench/torch_attention.py` is PyTorch's side.

use super::{Res, Row, err, wall_ms as time};
use wmx::{Array, AttentionMask, DType, Device};

struct Case {
    name: &'static str,
    b: usize,
    hq: usize,
    hkv: usize,
    lq: usize,
    lk: usize,
    causal: bool,
    /// Also time the composed form (and, `bwd`, the backward).
    composed: bool,
    bwd: bool,
}

fn cases(smoke: bool) -> Vec<Case> {
    let c = |name, b, hq, hkv, lq, lk, causal, composed, bwd| Case {
        name,
        b,
        hq,
        hkv,
        lq,
        lk,
        causal,
        composed,
        bwd,
    };
    if smoke {
        return vec![
            c("prefill_smoke", 1, 2, 2, 70, 70, true, true, true),
            c("decode_smoke", 1, 4, 2, 1, 600, false, true, false),
        ];
    }
    vec![
        c("prefill_2k", 1, 32, 32, 2048, 2048, true, true, true),
        c("prefill_2k_b8", 8, 32, 32, 2048, 2048, true, true, false),
        c("prefill_8k", 1, 32, 32, 8192, 8192, true, true, false),
        c("decode_4k", 1, 32, 8, 1, 4096, false, true, false),
        c("decode_32k", 1, 32, 8, 1, 32768, false, true, false),
        c("prefill_32k", 1, 32, 32, 32768, 32768, true, true, false),
    ]
}

const D: usize = 128;

/// Output row `(b, h, i)` in f64 from the (rounded) inputs.
fn reference(c: &Case, q: &[f32], k: &[f32], v: &[f32], b: usize, h: usize, i: usize) -> Vec<f64> {
    let g = c.hq / c.hkv;
    let kv = (b * c.hkv + h / g) * c.lk * D;
    let qr = &q[((b * c.hq + h) * c.lq + i) * D..][..D];
    let end = if c.causal { i + c.lk - c.lq } else { c.lk - 1 };
    let s: Vec<f64> = (0..=end)
        .map(|j| {
            qr.iter()
                .zip(&k[kv + j * D..kv + (j + 1) * D])
                .map(|(a, b)| *a as f64 * *b as f64)
                .sum::<f64>()
                / (D as f64).sqrt()
        })
        .collect();
    let top = s.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
    let w: Vec<f64> = s.iter().map(|x| (x - top).exp()).collect();
    let total: f64 = w.iter().sum();
    (0..D)
        .map(|t| {
            w.iter()
                .enumerate()
                .map(|(j, wj)| wj * v[kv + j * D + t] as f64)
                .sum::<f64>()
                / total
        })
        .collect()
}

pub(crate) fn bench_attention(dev: &Device, smoke: bool, rows: &mut Vec<Row>) -> Res<()> {
    let iters = if smoke { 1 } else { 10 };
    // `WMX_BENCH_CACHE_GB`: a fixed cache limit for the pool (run 63 compared 1
    // and 24 GiB: re-creating large buffers each call cost the backward 10-20x).
    if let (Some(be), Some(gb)) = (
        wmx::webgpu::backend(dev),
        std::env::var("WMX_BENCH_CACHE_GB")
            .ok()
            .and_then(|v| v.parse::<u64>().ok()),
    ) {
        be.set_cache_limit(gb << 30);
    }
    let dt = DType::F16;
    // `WMX_BENCH_CASES=a,b`: only the cases named.
    let only = std::env::var("WMX_BENCH_CASES").ok();
    for c in cases(smoke) {
        if only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|n| n == c.name))
        {
            continue;
        }
        // Each case from an empty pool. (A case after a much larger one still
        // measures slower: something below the pool keeps a cost, run 67.)
        if let Some(be) = wmx::webgpu::backend(dev) {
            be.clear_cache();
        }
        let qs = [c.b, c.hq, c.lq, D];
        let ks = [c.b, c.hkv, c.lk, D];
        let n = |s: &[usize]| s.iter().product::<usize>();
        // Scaled so the scores spread over a few units.
        let q: Vec<f32> = super::random(n(&qs), 1).iter().map(|x| 2.0 * x).collect();
        let k: Vec<f32> = super::random(n(&ks), 2).iter().map(|x| 2.0 * x).collect();
        let v: Vec<f32> = super::random(n(&ks), 3);
        let (qa, ka, va, ga) = wmx::with_device(dev, || {
            let qa = Array::from_slice(&q, &qs)?.astype(dt)?;
            let ka = Array::from_slice(&k, &ks)?.astype(dt)?;
            let va = Array::from_slice(&v, &ks)?.astype(dt)?;
            let ga = wmx::ones(&qs, dt)?;
            wmx::eval(&[qa.clone(), ka.clone(), va.clone(), ga.clone()])?;
            Ok::<_, wmx::Error>((qa, ka, va, ga))
        })
        .map_err(err)?;
        let band = wmx::with_device(dev, || {
            let i = wmx::arange(0.0, c.lq as f64, 1.0, DType::I32)?.reshape(&[c.lq as isize, 1])?;
            let j = wmx::arange(0.0, c.lk as f64, 1.0, DType::I32)?.reshape(&[1, c.lk as isize])?;
            let end = wmx::add(&i, &wmx::scalar((c.lk - c.lq) as f64, DType::I32)?)?;
            let m = if c.causal {
                wmx::less_equal(&j, &end)?
            } else {
                wmx::greater_equal(&j, &wmx::scalar(0.0, DType::I32)?)?
            };
            wmx::eval(std::slice::from_ref(&m))?;
            Ok::<_, wmx::Error>(m)
        })
        .map_err(err)?;
        let mask = if c.causal {
            AttentionMask::Causal
        } else {
            AttentionMask::None
        };
        let fused = |q: &Array, k: &Array, v: &Array| {
            wmx::scaled_dot_product_attention(q, k, v, None, mask)
        };
        let composed = |q: &Array, k: &Array, v: &Array| {
            wmx::scaled_dot_product_attention(q, k, v, None, AttentionMask::Bool(&band))
        };
        // Check a few rows of the fused output (f16 rounding of the inputs on both
        // sides).
        let o = fused(&qa, &ka, &va).map_err(err)?;
        let ov: Vec<f64> = o.to_vec_as::<f64>().map_err(err)?;
        let (qr, kr, vr): (Vec<f32>, Vec<f32>, Vec<f32>) = (
            qa.to_vec_as::<f32>().map_err(err)?,
            ka.to_vec_as::<f32>().map_err(err)?,
            va.to_vec_as::<f32>().map_err(err)?,
        );
        // `WMX_BENCH_NOCHECK=1`: no check, for timing experimental kernels.
        let checked = std::env::var("WMX_BENCH_NOCHECK").is_err();
        for (b, h, i) in [
            (0, 0, 0),
            (c.b - 1, c.hq - 1, c.lq - 1),
            (0, c.hq / 2, c.lq / 3),
        ]
        .into_iter()
        .filter(|_| checked)
        {
            let want = reference(&c, &qr, &kr, &vr, b, h, i);
            let got = &ov[((b * c.hq + h) * c.lq + i) * D..][..D];
            for (t, (g, w)) in got.iter().zip(&want).enumerate() {
                if (g - w).abs() > 1e-2 * (1.0 + w.abs()) {
                    return Err(format!(
                        "{} row {b},{h},{i} dim {t}: got {g}, want {w}",
                        c.name
                    ));
                }
            }
        }
        let pairs = if c.causal {
            // Scores computed: the causal band.
            (0..c.lq).map(|i| i + c.lk - c.lq + 1).sum::<usize>()
        } else {
            c.lq * c.lk
        };
        let flops = 4.0 * (c.b * c.hq * pairs * D) as f64;
        let mut push = |path: &str, ms: f64, f: f64| {
            println!(
                "attention {:14} {path:18}: {ms:9.3} ms ({:7.2} TFLOP/s)",
                c.name,
                f / ms / 1e9
            );
            rows.push(Row {
                path: "wmx",
                op: format!("attn_{}_{path}", c.name),
                dtype: dt,
                n: c.b,
                ms,
                gbps: 0.0,
                extra: vec![("tflops", f / ms / 1e9)],
            });
        };
        let call = || {
            fused(&qa, &ka, &va)
                .and_then(|o| wmx::eval(&[o]))
                .map_err(err)
        };
        let t = time(dev, iters, call)?;
        push("fused", t, flops);
        // What a call costs the pool and the host (the batch's time outside its
        // kernel, run 193), over `iters` more calls.
        let stats = || wmx::webgpu::backend(dev).map(|g| g.stats());
        let before = stats();
        for _ in 0..iters {
            call()?;
        }
        dev.synchronize().map_err(err)?;
        if let (Some(a), Some(b)) = (before, stats()) {
            let calls = iters as f64;
            println!(
                "attention {:14} per call: {:.1} buffers created, {:.1} dispatches, {:.1} submits, {:.3} ms encoding",
                c.name,
                (b.buffers_created - a.buffers_created) as f64 / calls,
                (b.dispatches - a.dispatches) as f64 / calls,
                (b.submits - a.submits) as f64 / calls,
                (b.submit_ns - a.submit_ns) as f64 / calls / 1e6,
            );
        }
        let vjp = |f: &dyn Fn(&Array, &Array, &Array) -> wmx::Result<Array>| -> Res<()> {
            let g = |a: &[Array]| Ok(vec![f(&a[0], &a[1], &a[2])?]);
            let args = [qa.clone(), ka.clone(), va.clone()];
            let (_, grads) = wmx::vjp(g, &args, std::slice::from_ref(&ga)).map_err(err)?;
            wmx::eval(&grads).map_err(err)
        };
        // `WMX_BENCH_FUSED_ONLY=1`: the fused forward alone.
        let fused_only = std::env::var_os("WMX_BENCH_FUSED_ONLY").is_some();
        if c.bwd && !fused_only {
            let t = time(dev, iters, || vjp(&fused))?;
            push("fused_bwd", t, 2.5 * flops);
        }
        if c.composed && !fused_only {
            match time(dev, iters, || {
                composed(&qa, &ka, &va)
                    .and_then(|o| wmx::eval(&[o]))
                    .map_err(err)
            }) {
                Ok(t) => push("composed", t, flops),
                Err(e) => println!("attention {:14} composed: {e}", c.name),
            }
            if c.bwd {
                let t = time(dev, iters, || vjp(&composed))?;
                push("composed_bwd", t, 2.5 * flops);
            }
        }
        if let (Some(be), true) = (
            wmx::webgpu::backend(dev),
            std::env::var_os("WMX_BENCH_PROFILE").is_some(),
        ) {
            let (r, p) = be
                .profile(|| wmx::eval(&[fused(&qa, &ka, &va)?]))
                .map_err(err)?;
            r.map_err(err)?;
            println!("profile of {} fused:\n{}", c.name, p.table());
            if c.bwd {
                let (r, p) = be.profile(|| vjp(&fused)).map_err(err)?;
                r?;
                println!("profile of {} fused backward:\n{}", c.name, p.table());
                let (r, p) = be
                    .profile(|| wmx::eval(&[composed(&qa, &ka, &va)?]))
                    .map_err(err)?;
                r.map_err(err)?;
                println!("profile of {} composed:\n{}", c.name, p.table());
            }
        }
    }
    Ok(())
}
