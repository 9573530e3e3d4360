//! f16 data computed on the CPU and on the default device (the GPU when one
//! opens): elementwise ops, a sum accumulated in f32 and a matrix product, each
//! checked against f64 on the host within f16 rounding, and the two devices
//! against each other.
//!
//! ```text
//! cargo run --release --example f16_check
//! ```

use wmx::prelude::*;

const N: usize = 64;

fn compute(x: &Array, y: &Array) -> Result<Vec<Array>> {
    Ok(vec![
        x.exp()?,
        (x * y + 0.5).tanh()?,
        x.astype(DType::F32)?.sum(None, false)?,
        x.matmul(y)?,
    ])
}

fn main() -> Result<()> {
    let dev = default_device()?;
    if dev.check_dtype(DType::F16).is_err() {
        println!("{dev} has no f16: checking the CPU only");
    }
    let key = random::key(5)?;
    let (k1, k2) = random::split2(&key)?;
    let xs = random::uniform(&k1, &[N, N], -1.0, 1.0, DType::F32)?.to_vec::<f32>()?;
    let ys = random::uniform(&k2, &[N, N], -1.0, 1.0, DType::F32)?.to_vec::<f32>()?;
    let on = |d: &Device| -> Result<Vec<Vec<f64>>> {
        let x = Array::from_slice_on(&xs, &[N, N], d)?.astype(DType::F16)?;
        let y = Array::from_slice_on(&ys, &[N, N], d)?.astype(DType::F16)?;
        compute(&x, &y)?
            .iter()
            .map(|a| a.to_vec_as::<f64>())
            .collect()
    };
    let cpu = on(&Device::cpu())?;
    let other = if dev.check_dtype(DType::F16).is_ok() {
        on(&dev)?
    } else {
        cpu.clone()
    };

    // f64 of the f16-rounded inputs.
    let h = |v: f32| f16::from_f32(v).to_f64();
    let (x, y): (Vec<f64>, Vec<f64>) = (
        xs.iter().map(|&v| h(v)).collect(),
        ys.iter().map(|&v| h(v)).collect(),
    );
    let exp: Vec<f64> = x.iter().map(|v| v.exp()).collect();
    let th: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(a, b)| (a * b + 0.5).tanh())
        .collect();
    let sum = vec![x.iter().sum::<f64>()];
    let mut mm = vec![0.0; N * N];
    for i in 0..N {
        for k in 0..N {
            for j in 0..N {
                mm[i * N + j] += x[i * N + k] * y[k * N + j];
            }
        }
    }
    let names = ["exp", "tanh(x*y + 0.5)", "sum (f32)", "matmul"];
    // f16: 2^-11 relative per rounding; the products accumulate in f32.
    let tol = [2e-3, 4e-3, 1e-3, 8e-3];
    let mut worst = 0f64;
    for (k, want) in [exp, th, sum, mm].iter().enumerate() {
        for (what, got) in [("cpu", &cpu[k]), (dev.name().as_str(), &other[k])] {
            let scale = want.iter().map(|v| v.abs()).fold(1.0, f64::max);
            let err = got
                .iter()
                .zip(want)
                .map(|(g, w)| (g - w).abs())
                .fold(0.0, f64::max)
                / scale;
            worst = worst.max(err / tol[k]);
            println!(
                "{:<16} {what:<12} max relative error {err:.2e} (allowed {:.0e})",
                names[k], tol[k]
            );
        }
        let agree = cpu[k].iter().zip(&other[k]).filter(|(a, b)| a == b).count();
        println!(
            "{:<16} cpu and {dev}: {agree} of {} equal",
            names[k],
            cpu[k].len()
        );
    }
    if worst > 1.0 {
        return Err(Error::invalid("f16_check", "an error beyond f16 rounding"));
    }
    Ok(())
}
