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
    x.eval().unwrap();
    let (out, p) = be
        .profile(|| {
            let y = wmx::matmul(&x, &x)?;
            let z = wmx::add(&y, &x)?;
            let s = wmx::sum(&z, None, false)?;
            s.eval()?;
            Ok::<_, wmx::Error>(s)
        })
        .unwrap();
    out.unwrap();
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
        table.contains("Matmul") && table.contains("dispatches"),
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
