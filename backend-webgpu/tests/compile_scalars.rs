//! A compiled function that captures a scalar (a learning rate, a step count) runs
//! one fused pipeline whatever the scalar's value: the scalars of a fused kernel are
//! parameters, not literals in its WGSL (a new value compiled and kept a new
//! pipeline, 0.5 MB a step on lavapipe). On a real adapter (lavapipe in CI).

use wmx_core::{self as wmx, Array};

mod common;
use common::gpu;

#[test]
fn a_changing_captured_scalar_reuses_one_pipeline() {
    let Some((dev, be)) = gpu() else { return };
    let xs: Vec<f32> = (0..1000).map(|i| i as f32 * 0.25 - 100.0).collect();
    let x = Array::from_slice_on(&xs, &[1000], &dev).unwrap();
    let mut counts = Vec::new();
    for step in 0..12 {
        let lr = 0.1 + step as f64 * 0.37;
        let shift = -(step as f64);
        // A fresh compile each step, as a training loop might write it.
        let f = wmx::compile(move |a: &[Array]| {
            let y = wmx::axpby(&a[0], &wmx::exp(&(&a[0] * 0.01))?, lr, 2.0)?;
            Ok(vec![&y + shift])
        });
        let y = wmx::with_device(&dev, || f.call1(&x)).unwrap();
        let got = y.to_vec::<f32>().unwrap();
        for (i, (&g, &v)) in got.iter().zip(&xs).enumerate() {
            let v = v as f64;
            let want = lr * v + 2.0 * (v * 0.01).exp() + shift;
            assert!(
                (g as f64 - want).abs() <= 1e-5 * want.abs().max(1.0),
                "step {step}, element {i}: {g} vs {want}"
            );
        }
        counts.push(be.kernels().fused_pipeline_count());
    }
    assert!(counts[0] >= 1, "the function ran fused: {counts:?}");
    assert!(
        counts.iter().all(|&c| c == counts[0]),
        "pipelines per step: {counts:?}"
    );
}
