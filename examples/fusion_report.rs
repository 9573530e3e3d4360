//! Prints what `wmx::compile` fuses for a tanh-GELU and for `sum(gelu(x))`: the
//! kernel count and each generated WGSL kernel (on the GPU, where fusion happens).
//!
//!     cargo run --release --example fusion_report [-- f16]
use wmx::prelude::*;

fn gelu(x: &Array) -> wmx::Result<Array> {
    let c = wmx::multiply(&wmx::square(x)?, x)?;
    let c = wmx::add(&(&c * 0.044715), x)?;
    let t = wmx::tanh(&(&c * (2.0 / std::f64::consts::PI).sqrt()))?;
    wmx::multiply(&(x * 0.5), &(&t + 1.0))
}

fn main() -> wmx::Result<()> {
    let dtype = match std::env::args().nth(1).as_deref() {
        Some("f16") => DType::F16,
        _ => DType::F32,
    };
    let dev = Device::gpu()?;
    let key = wmx::random::key(0)?;
    let x = wmx::random::uniform(&key, &[1 << 16], -3.0, 3.0, dtype)?.to_device(&dev)?;
    let g = wmx::compile(|a: &[Array]| Ok(vec![gelu(&a[0])?]));
    let s = wmx::compile(|a: &[Array]| {
        Ok(vec![wmx::sum(
            &wmx::astype(&gelu(&a[0])?, DType::F32)?,
            None,
            false,
        )?])
    });
    for (name, f) in [("gelu", &g), ("sum(gelu)", &s)] {
        let r = f.report(std::slice::from_ref(&x))?;
        println!(
            "== {name}: {} ops traced, {} nodes per call",
            r.traced_ops, r.nodes
        );
        for k in &r.kernels {
            println!(
                "-- {:?}\n{}",
                k.kernel,
                k.source.as_deref().unwrap_or("(no source)")
            );
        }
    }
    Ok(())
}
