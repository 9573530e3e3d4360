//! `--quant`: issue 38's quantized products at a 1B Llama's MLP shapes (d = 2048,
//! hidden 8192), f16 activations. A chain of 16 matrices alternating `[8192, 2048]`
//! and `[2048, 8192]` (268 M weights, past any L2) is applied to x in one eval:
//! 4- and 8-bit (groups of 64) through `quantized_matmul`, and the same chain of
//! f16 weights through `matmul` (x @ W.T); one row (decoding, the matrix-vector
//! kernel) and 512 rows (prefill, the dequantized product). Wall clock over
//! `iters` evals, the device synchronised at both ends; GB/s is the bytes of the
//! weights (packed values, scales and biases) per second. Each chain's output is
//! checked against an f64 loop on its first layer first. `bench/torch_quant.py` is
//! PyTorch's side (the f16 chain and the copy limit).

use super::{Res, Row, err, wall_ms as time};
use wmx::{Array, DType, Device};

const D: usize = 2048;
const H: usize = 8192;

/// (rows, cols) of layer i: alternating up and down projections.
fn layer(i: usize) -> (usize, usize) {
    if i.is_multiple_of(2) { (H, D) } else { (D, H) }
}

pub(crate) fn bench_quant(dev: &Device, smoke: bool, rows: &mut Vec<Row>) -> Res<()> {
    let (layers, iters) = if smoke { (2, 1) } else { (16, 20) };
    let dt = DType::F16;
    // Small weights and activations: the chain stays finite in f16.
    let weights: Vec<Array> = (0..layers)
        .map(|i| {
            let (r, c) = layer(i);
            let v: Vec<f32> = super::random(r * c, 10 + i as u64)
                .iter()
                .map(|x| x * 0.02)
                .collect();
            wmx::with_device(dev, || Array::from_slice(&v, &[r, c])?.astype(dt))
        })
        .collect::<wmx::Result<_>>()
        .map_err(err)?;
    wmx::eval(&weights).map_err(err)?;
    // Smoke: 9 rows (the dequantized product) in place of 512.
    for m in [1usize, if smoke { 9 } else { 512 }] {
        let x: Vec<f32> = super::random(m * D, 3);
        let xa =
            wmx::with_device(dev, || Array::from_slice(&x, &[m, D])?.astype(dt)).map_err(err)?;
        let mut push = |name: String, ms: f64, bytes: f64| {
            println!(
                "quant {name:24}: {ms:9.3} ms ({:8.1} GB/s of weights)",
                bytes / ms / 1e6
            );
            rows.push(Row {
                path: "wmx",
                op: name,
                dtype: dt,
                n: m,
                ms,
                gbps: bytes / ms / 1e6,
                extra: vec![],
            });
        };
        // f16 weights: x @ W.T per layer.
        let dense = |x: &Array| -> wmx::Result<Array> {
            let mut y = x.clone();
            for w in &weights {
                y = wmx::matmul(&y, &wmx::swapaxes(w, 0, 1)?)?;
            }
            Ok(y)
        };
        let dense_bytes: f64 = weights.iter().map(|w| 2.0 * w.size() as f64).sum();
        let t = time(dev, iters, || {
            dense(&xa).and_then(|y| wmx::eval(&[y])).map_err(err)
        })?;
        push(format!("f16_chain_m{m}"), t, dense_bytes);
        for bits in [4usize, 8] {
            let q: Vec<(Array, Array, Array)> = weights
                .iter()
                .map(|w| wmx::quantize(w, 64, bits))
                .collect::<wmx::Result<_>>()
                .map_err(err)?;
            for (a, b, c) in &q {
                wmx::eval(&[a.clone(), b.clone(), c.clone()]).map_err(err)?;
            }
            let bytes: f64 = q
                .iter()
                .map(|(a, b, c)| 4.0 * a.size() as f64 + 2.0 * (b.size() + c.size()) as f64)
                .sum();
            let chain = |x: &Array, n: usize| -> wmx::Result<Array> {
                let mut y = x.clone();
                for (wq, s, b) in &q[..n] {
                    y = wmx::quantized_matmul(&y, wq, s, b, true, 64, bits)?;
                }
                Ok(y)
            };
            // The first layer against an f64 loop over the dequantized weights.
            let y = chain(&xa, 1).map_err(err)?;
            let yv = y.to_vec_as::<f64>().map_err(err)?;
            let deq = wmx::dequantize(&q[0].0, &q[0].1, &q[0].2, 64, bits)
                .and_then(|w| w.to_vec_as::<f64>())
                .map_err(err)?;
            let xr = xa.to_vec_as::<f64>().map_err(err)?;
            let (r, c) = layer(0);
            for (i, j) in [(0, 0), (m - 1, r - 1), (m / 2, r / 3)] {
                let want: f64 = (0..c).map(|k| xr[i * c + k] * deq[j * c + k]).sum();
                let got = yv[i * r + j];
                if (got - want).abs() > 2e-3 * (1.0 + want.abs()) {
                    return Err(format!(
                        "quant {bits}-bit m{m} row {i} col {j}: got {got}, want {want}"
                    ));
                }
            }
            let t = time(dev, iters, || {
                chain(&xa, layers)
                    .and_then(|y| wmx::eval(&[y]))
                    .map_err(err)
            })?;
            push(format!("q{bits}_chain_m{m}"), t, bytes);
            if let (Some(be), true) = (
                wmx::webgpu::backend(dev),
                std::env::var_os("WMX_BENCH_PROFILE").is_some(),
            ) {
                let (r, p) = be
                    .profile(|| wmx::eval(&[chain(&xa, layers)?]))
                    .map_err(err)?;
                r.map_err(err)?;
                println!("profile of q{bits}_chain_m{m}:\n{}", p.table());
            }
        }
    }
    Ok(())
}
