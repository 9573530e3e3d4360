//! The profiler times each dispatch of the profiled closure on the GPU, names it
//! by its kernel, and writes a table and a Chrome trace. On a real adapter
//! (lavapipe in CI).

use wmx_core::{self as wmx, Array, DType};

mod common;
use common::gpu;

#[test]
fn a_profile_times_every_dispatch_by_kernel() {
    let Some((dev, be)) = gpu() else { return };
    let x = Array::from_slice_on(&common::data(256 * 256, 1), &[256, 256], &dev).unwrap();
    let w = Array::from_slice_on(&common::data(96 * 256, 2), &[96, 256], &dev).unwrap();
    wmx::eval(&[x.clone(), w.clone()]).unwrap();
    let (out, p) = be
        .profile(|| {
            let y = wmx::matmul(&x, &x)?;
            let z = wmx::add(&y, &x)?;
            let s = wmx::sum(&z, None, false)?;
            let t = wmx::matmul(&x, &w.t()?)?;
            wmx::eval(&[s.clone(), t])?;
            Ok::<_, wmx::Error>(s)
        })
        .unwrap();
    out.unwrap();
    // Products carry their shape and FLOP: `x @ x`, and `x @ wᵀ` read in place.
    let mut shapes: Vec<(String, f64)> = p
        .kernels
        .iter()
        .filter_map(|k| k.work.as_ref().filter(|w| w.flop > 0.0))
        .map(|w| (w.shape.clone(), w.flop))
        .collect();
    shapes.sort_by(|a, b| a.0.cmp(&b.0));
    let n = 256.0f64;
    assert_eq!(
        shapes,
        [
            ("256x256 @ 256x256".to_string(), 2.0 * n * n * n),
            ("256x256 @ 256x96ᵀ".to_string(), 2.0 * n * n * 96.0),
        ]
    );
    assert_eq!(p.by_shape().iter().filter(|t| t.flop > 0.0).count(), 2);
    let x_bytes = 256.0 * 256.0 * 4.0;
    let w = &p
        .by_shape()
        .into_iter()
        .find(|t| t.shape.contains("96ᵀ"))
        .unwrap();
    assert_eq!(w.bytes, x_bytes + 96.0 * 256.0 * 4.0 + 256.0 * 96.0 * 4.0);
    assert!(p.kernels.len() >= 3, "{:?}", p.kernels);
    let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
    for want in ["Matmul", "Binary:add", "Reduce:sum"] {
        assert!(
            names.iter().any(|n| n.contains(want)),
            "no {want} in {names:?}"
        );
    }
    assert!(
        p.kernels
            .iter()
            .all(|k| k.dur_ns >= 0.0 && k.start_ns >= 0.0)
    );
    assert!(p.gpu_ms() > 0.0 && p.submits >= 1 && p.wall_ms >= p.gpu_ms() * 0.5);
    // In order on the GPU: each dispatch starts after the one before began.
    assert!(p.kernels.windows(2).all(|w| w[1].start_ns >= w[0].start_ns));
    let table = p.table();
    assert!(
        table.contains("Matmul")
            && table.contains("dispatches")
            && table.contains("TFLOP/s")
            && table.contains("256x256 @ 256x96ᵀ"),
        "{table}"
    );
    let trace = p.chrome_trace();
    assert!(trace.starts_with('[') && trace.ends_with(']') && trace.contains("\"ph\": \"X\""));
    // Nothing is timed outside a profile.
    let (_, empty) = be.profile(|| ()).unwrap();
    assert!(empty.kernels.is_empty());
    let w = wmx::add(&x, &x).unwrap();
    w.eval().unwrap();
    let _ = DType::F32;
}
