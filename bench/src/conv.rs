//! `--conv`: issue 36's convolution shapes (channels-last), forward and backward
//! (the vjp for input and weight with a given cotangent), f32 and f16, through
//! the public API (lazy graphs, one eval per call). Wall clock over `iters` calls
//! after a warm-up, the device synchronised at both ends; each result checked on
//! a few elements against an f64 loop first. `bench/torch_conv.py` is the cuDNN
//! side (channels-last memory format, TF32 off).

use super::{Res, Row, err, wall_ms as time};
use wmx::{Array, ConvOptions, DType, Device};

/// One shape: input `[n, spatial..., cin]`, kernel, `cout`, stride, padding,
/// groups.
struct Case {
    name: &'static str,
    n: usize,
    spatial: Vec<usize>,
    cin: usize,
    cout: usize,
    kernel: Vec<usize>,
    stride: usize,
    pad: usize,
    groups: usize,
}

fn cases(smoke: bool) -> Vec<Case> {
    let c = |name, n, spatial: &[usize], cin, cout, kernel: &[usize], stride, pad, groups| Case {
        name,
        n,
        spatial: spatial.to_vec(),
        cin,
        cout,
        kernel: kernel.to_vec(),
        stride,
        pad,
        groups,
    };
    if smoke {
        return vec![
            c("r3x3_64", 2, &[9, 8], 4, 4, &[3, 3], 1, 1, 1),
            c("dw3x3", 2, &[9, 8], 4, 4, &[3, 3], 1, 1, 4),
        ];
    }
    vec![
        c("r3x3_64", 32, &[56, 56], 64, 64, &[3, 3], 1, 1, 1),
        c("r3x3_256", 32, &[14, 14], 256, 256, &[3, 3], 1, 1, 1),
        c("r1x1_1024", 32, &[14, 14], 1024, 256, &[1, 1], 1, 0, 1),
        c("stem7x7", 32, &[224, 224], 3, 64, &[7, 7], 2, 3, 1),
        c("dw3x3", 32, &[112, 112], 32, 32, &[3, 3], 1, 1, 32),
        c("conv1d_4096", 8, &[4096], 512, 512, &[3], 1, 1, 1),
    ]
}

fn shape(lead: usize, mid: &[usize], last: usize) -> Vec<usize> {
    let mut s = vec![lead];
    s.extend(mid);
    s.push(last);
    s
}

/// Output element `o` (multi-index) of the convolution, in f64 from the inputs.
fn reference(c: &Case, x: &[f32], w: &[f32], o: &[usize]) -> f64 {
    let d = c.spatial.len();
    let (cg, og) = (c.cin / c.groups, c.cout / c.groups);
    let g = o[d + 1] / og;
    let mut acc = 0.0;
    let taps: usize = c.kernel.iter().product();
    'tap: for t in 0..taps {
        let (mut xi, mut wi, mut rest) = (o[0], o[d + 1], t);
        let mut k = vec![0; d];
        for i in (0..d).rev() {
            k[i] = rest % c.kernel[i];
            rest /= c.kernel[i];
        }
        for i in 0..d {
            let q = (o[1 + i] * c.stride + k[i]) as i64 - c.pad as i64;
            if q < 0 || q >= c.spatial[i] as i64 {
                continue 'tap;
            }
            xi = xi * c.spatial[i] + q as usize;
            wi = wi * c.kernel[i] + k[i];
        }
        for ci in 0..cg {
            acc += x[xi * c.cin + g * cg + ci] as f64 * w[wi * cg + ci] as f64;
        }
    }
    acc
}

pub(crate) fn bench_conv(
    dev: &Device,
    smoke: bool,
    dtypes: &[DType],
    rows: &mut Vec<Row>,
) -> Res<()> {
    let iters = if smoke { 1 } else { 20 };
    for c in cases(smoke) {
        let d = c.spatial.len();
        let xs = shape(c.n, &c.spatial, c.cin);
        let ws = shape(c.cout, &c.kernel, c.cin / c.groups);
        let x: Vec<f32> = super::random(xs.iter().product(), 1);
        let w: Vec<f32> = super::random(ws.iter().product(), 2);
        let opts = ConvOptions {
            stride: vec![c.stride],
            padding: vec![(c.pad, c.pad)],
            groups: c.groups,
            ..ConvOptions::default()
        };
        let out: Vec<usize> = c
            .spatial
            .iter()
            .zip(&c.kernel)
            .map(|(&s, &k)| (s + 2 * c.pad - k) / c.stride + 1)
            .collect();
        let ys = shape(c.n, &out, c.cout);
        let flops = 2.0
            * ys.iter().product::<usize>() as f64
            * (c.kernel.iter().product::<usize>() * c.cin / c.groups) as f64;
        for &dt in dtypes {
            let (xa, wa, ga) = wmx::with_device(dev, || {
                let xa = Array::from_slice(&x, &xs)?.astype(dt)?;
                let wa = Array::from_slice(&w, &ws)?.astype(dt)?;
                let ga = wmx::ones(&ys, dt)?;
                wmx::eval(&[xa.clone(), wa.clone(), ga.clone()])?;
                Ok::<_, wmx::Error>((xa, wa, ga))
            })
            .map_err(err)?;
            // Check a few outputs (the inputs rounded to dt on both sides).
            let y = wmx::conv_general(&xa, &wa, &opts).map_err(err)?;
            let yv: Vec<f64> = y.to_vec_as::<f64>().map_err(err)?;
            let xr: Vec<f32> = xa.to_vec_as::<f32>().map_err(err)?;
            let wr: Vec<f32> = wa.to_vec_as::<f32>().map_err(err)?;
            let total = yv.len();
            for k in [0, total / 3, total / 2 + 7, total - 1] {
                let mut o = vec![0; d + 2];
                let mut rest = k;
                for i in (0..d + 2).rev() {
                    o[i] = rest % ys[i];
                    rest /= ys[i];
                }
                let want = reference(&c, &xr, &wr, &o);
                let tol = if dt == DType::F32 { 1e-3 } else { 5e-2 } * (1.0 + want.abs());
                if (yv[k] - want).abs() > tol {
                    return Err(format!(
                        "{} {dt}: output {o:?} is {}, want {want}",
                        c.name, yv[k]
                    ));
                }
            }
            let fwd = time(dev, iters, || {
                wmx::conv_general(&xa, &wa, &opts)
                    .and_then(|y| wmx::eval(&[y]))
                    .map_err(err)
            })?;
            let bwd = time(dev, iters, || {
                let f = |a: &[Array]| Ok(vec![wmx::conv_general(&a[0], &a[1], &opts)?]);
                let (_, g) = wmx::vjp(f, &[xa.clone(), wa.clone()], std::slice::from_ref(&ga))
                    .map_err(err)?;
                wmx::eval(&g).map_err(err)
            })?;
            // One forward and one backward under the profiler: where the time goes.
            let what = format!("{} {dt}, forward then backward", c.name);
            super::profile_once(dev, &what, || {
                wmx::eval(&[wmx::conv_general(&xa, &wa, &opts)?])?;
                let f = |a: &[Array]| Ok(vec![wmx::conv_general(&a[0], &a[1], &opts)?]);
                let (_, g) = wmx::vjp(f, &[xa.clone(), wa.clone()], std::slice::from_ref(&ga))?;
                wmx::eval(&g)
            })?;
            println!(
                "conv {:12} {dt}: forward {fwd:8.3} ms ({:6.1} TFLOP/s), backward {bwd:8.3} ms ({:6.1} TFLOP/s)",
                c.name,
                flops / fwd / 1e9,
                2.0 * flops / bwd / 1e9
            );
            for (pass, ms, f) in [("fwd", fwd, flops), ("bwd", bwd, 2.0 * flops)] {
                rows.push(Row {
                    path: "wmx",
                    op: format!("conv_{}_{pass}", c.name),
                    dtype: dt,
                    n: c.n,
                    ms,
                    gbps: 0.0,
                    extra: vec![("tflops", f / ms / 1e9)],
                });
            }
        }
    }
    Ok(())
}
