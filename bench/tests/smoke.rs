//! The benchmark's CI-sized runs: `bench --smoke` checks every case of both paths
//! (wmx API and bare kernels) and the 1000-op lazy chain against f64 references on
//! the first adapter (lavapipe in CI), and `bench --attention --smoke` its cases;
//! neither asserts anything about timings.

use std::process::Command;

/// The bench's stdout for `args`, which must succeed.
fn bench(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .output()
        .expect("the bench binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench {args:?} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

#[test]
fn bench_smoke_checks_every_case() {
    let stdout = bench(&["--smoke"]);
    assert!(stdout.contains("cases checked"), "{stdout}");
}

/// The attention cases' outputs checked against an f64 loop, fused and composed
/// paths and the backward run.
#[test]
fn bench_attention_smoke_checks_its_cases() {
    let stdout = bench(&["--attention", "--smoke"]);
    assert!(stdout.contains("composed_bwd"), "{stdout}");
}

/// The quantized chains' first layers checked against an f64 loop, both paths.
#[test]
fn bench_quant_smoke_checks_its_cases() {
    let stdout = bench(&["--quant", "--smoke"]);
    assert!(stdout.contains("q4_chain_m9"), "{stdout}");
}
