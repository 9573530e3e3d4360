//! A process that ends right after an eval, with the GPU's work still in flight or
//! open batches not yet submitted, exits cleanly (issue 16, item 10). Before the
//! exit hook in `wmx-webgpu`'s submit.rs, about 1 in 3 such processes crashed on
//! lavapipe (SIGSEGV or "pure virtual method called"): the driver's threads ran
//! kernels while Mesa's exit handlers tore the driver down. Each run is a child
//! process: this binary again, running only the child test.

use wmx_core::{self as wmx, DType};

const RUNS: usize = 16;

/// The child: GPU work evaluated (not read back) on the main thread and another
/// thread, then the process ends.
#[test]
fn exit_child() {
    if std::env::var("WMX_EXIT_CHILD").is_err() {
        return;
    }
    let dev = wmx_tests::gpu::device(wmx_webgpu::open).expect("a GPU");
    let work = |n: usize, ops: usize| {
        let x = wmx::with_device(&dev, || wmx::ones(&[n], DType::F32)).unwrap();
        let mut y = x;
        for _ in 0..ops {
            y = wmx::exp(&wmx::negative(&y).unwrap()).unwrap();
        }
        y.eval().unwrap();
    };
    // A long batch (in flight at exit), then a small one (left open for the
    // flusher), the last on another thread.
    work(1 << 20, 8);
    std::thread::scope(|s| {
        s.spawn(|| work(1 << 16, 1));
    });
    println!("child evaluated");
    // End the process here, as a program's main returning would, without the
    // harness's reporting in between.
    use std::io::Write;
    let _ = std::io::stdout().flush();
    std::process::exit(0);
}

#[test]
fn processes_exit_cleanly_with_gpu_work_in_flight() {
    if std::env::var("WMX_EXIT_CHILD").is_ok() {
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    for run in 0..RUNS {
        let out = std::process::Command::new(&exe)
            .args(["--exact", "exit_child", "--nocapture", "--test-threads=1"])
            .env("WMX_EXIT_CHILD", "1")
            .output()
            .expect("the child runs");
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success() && o.contains("child evaluated"),
            "run {run} of {RUNS}: the child exited with {:?}:\n{o}\n{e}",
            out.status
        );
    }
}
