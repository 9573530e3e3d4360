//! The benchmark's CI-sized run: `bench --smoke` checks every case of both paths
//! (wmx API and bare kernels) and the 1000-op lazy chain against f64 references on
//! the first adapter (lavapipe in CI), and asserts nothing about timings.

use std::process::Command;

#[test]
fn bench_smoke_checks_every_case() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .arg("--smoke")
        .output()
        .expect("the bench binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench --smoke failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("cases checked"), "{stdout}");
}

/// `bench --attention --smoke`: the attention cases' outputs checked against an
/// f64 loop, fused and composed paths and the backward run.
#[test]
fn bench_attention_smoke_checks_its_cases() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["--attention", "--smoke"])
        .output()
        .expect("the bench binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench --attention --smoke failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("composed_bwd"), "{stdout}");
}
