//! `--int64`: i64 (pairs of 32-bit words in WGSL) against i32 through the public
//! API: add, multiply, floor_divide and a full sum, each checked exactly on
//! sampled elements first, then timed (GPU timestamps around 20 evals, median of
//! `reps`). `bench/torch_int64.py` measures the same cases with PyTorch.

use super::blocks::time_evals;
use super::{Res, Stamps, err, median};
use wmx::{Array, DType, Device};

/// Deterministic values: any i64 (or i32), and nonzero divisors.
fn values(n: usize, seed: u64, small: bool) -> Vec<i64> {
    super::words(seed)
        .take(n)
        .map(|s| {
            if small {
                (s % 1000) as i64 + 1
            } else {
                s as i64
            }
        })
        .collect()
}

fn array(v: &[i64], dtype: DType, dev: &Device) -> Res<Array> {
    let a = if dtype == DType::I64 {
        Array::from_slice_on(v, &[v.len()], dev)
    } else {
        let w: Vec<i32> = v.iter().map(|&x| x as i32).collect();
        Array::from_slice_on(&w, &[w.len()], dev)
    };
    let a = a.map_err(err)?;
    a.eval().map_err(err)?;
    Ok(a)
}

/// numpy's floor division (0 for a zero divisor; none here).
fn floor_div(a: i64, b: i64) -> i64 {
    let q = a.wrapping_div(b);
    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

pub(crate) fn bench_int64(dev: &Device, stamps: Option<&Stamps>, reps: usize) -> Res<()> {
    for n in [1usize << 20, 1 << 24, 1 << 26] {
        let (xv, yv) = (values(n, 1, false), values(n, 2, true));
        for dtype in [DType::I32, DType::I64] {
            let narrow = |v: i64| {
                if dtype == DType::I64 {
                    v
                } else {
                    v as i32 as i64
                }
            };
            let (x, y) = (array(&xv, dtype, dev)?, array(&yv, dtype, dev)?);
            let size = dtype.size() as f64;
            type Case<'a> = (&'a str, Box<dyn Fn() -> wmx::Result<Array> + 'a>, f64);
            let cases: Vec<Case> = vec![
                ("add", Box::new(|| x.add(&y)), 3.0),
                ("multiply", Box::new(|| x.multiply(&y)), 3.0),
                ("floor_divide", Box::new(|| x.floor_divide(&y)), 3.0),
                ("sum", Box::new(|| x.sum(None, false)), 1.0),
            ];
            for (op, run, moved) in &cases {
                let got = run().map_err(err)?.to_vec_as::<f64>().map_err(err)?;
                let idx: Vec<usize> = if *op == "sum" {
                    vec![0]
                } else {
                    (0..n).step_by(n / 997).collect()
                };
                for &i in &idx {
                    let (a, b) = (narrow(xv[i]), narrow(yv[i]));
                    let want = match *op {
                        "add" => narrow(a.wrapping_add(b)),
                        "multiply" => narrow(a.wrapping_mul(b)),
                        "floor_divide" => narrow(floor_div(a, b)),
                        _ => narrow(xv.iter().fold(0i64, |s, &v| s.wrapping_add(narrow(v)))),
                    };
                    // Read as f64: compare in f64 (exact below 2^53, the rounding of
                    // the same value above).
                    if got[if *op == "sum" { 0 } else { i }] != want as f64 {
                        return Err(format!(
                            "{op} {dtype} n={n}: element {i} is {}, want {want}",
                            got[i.min(got.len() - 1)]
                        ));
                    }
                }
                let ms = median(
                    (0..reps)
                        .map(|_| time_evals(dev, stamps, 20, &**run))
                        .collect::<Res<Vec<f64>>>()?,
                );
                let gbps = moved * size * n as f64 / ms / 1e6;
                println!(
                    "int64 {op:12} {dtype} n=2^{:2}: {ms:8.3} ms ({gbps:7.1} GB/s)",
                    n.trailing_zeros()
                );
            }
        }
    }
    Ok(())
}
