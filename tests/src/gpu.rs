//! The GPU device the suites run on: one per test process, shared by its tests.

use std::sync::OnceLock;
use wmx_core::Device;

/// The shared WebGPU device. Panics (failing the test) when no adapter opens,
/// unless `WMX_ALLOW_NO_GPU=1`, where it returns `None` and the caller skips
/// with a printed note: a GPU test never skips silently.
pub fn device(open: fn() -> wmx_core::Result<Device>) -> Option<Device> {
    static DEV: OnceLock<Result<Device, String>> = OnceLock::new();
    let opened = DEV.get_or_init(|| open().map_err(|e| e.to_string()));
    wmx_reference::gpu::opened(opened.as_ref()).cloned()
}

/// The CPU, and the GPU when one opens (see [`device`]).
pub fn devices() -> Vec<Device> {
    let mut v = vec![Device::cpu()];
    v.extend(device(wmx_webgpu::open));
    v
}

/// Runs the test `name` of this test binary again in a child process under
/// `ulimit -v limit_kib`, with `marker` set in its environment (the test runs its
/// checks when it sees it); fails unless the child succeeds and prints `done`
/// within 5 minutes (a hang is killed and fails the test). Out-of-memory tests use
/// it, so the machine running them is never at risk.
pub fn in_memory_limited_child(name: &str, marker: &str, limit_kib: u64, done: &str) {
    let exe = std::env::current_exe().expect("the test binary");
    let run = |limit_kib: u64| {
        std::process::Command::new("timeout")
            .args(["-k", "10", "300", "sh", "-c"])
            .arg(format!(
                "ulimit -v {limit_kib} && exec \"$0\" --exact {name} --nocapture --test-threads=1"
            ))
            .arg(&exe)
            .env(marker, "1")
            .output()
            .expect("sh runs")
    };
    let mut out = run(limit_kib);
    // What is left after the refused allocation depends on where the limit falls
    // among the test's allocations; with almost nothing left, lavapipe's LLVM or
    // Rust's runtime (a new thread's signal stack) abort the process themselves.
    // Those aborts are not wmx's handling: once more, with the limit moved.
    let driver_abort = |e: &str| {
        e.contains("LLVM ERROR: Unable to allocate")
            || e.contains("failed to allocate an alternative stack")
    };
    let both = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    if !out.status.success() && driver_abort(&both(&out)) {
        eprintln!(
            "{name}: the child's driver or runtime ran out of memory; again with 48 MiB more"
        );
        out = run(limit_kib + (48 << 10));
    }
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "child failed ({:?}):\n{o}\n{e}",
        out.status
    );
    assert!(o.contains(done), "{o}\n{e}");
}
