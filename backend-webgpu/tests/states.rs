//! Buffer states and statistics of the WebGPU backend, on a real adapter
//! (lavapipe in CI). No adapter is a failure unless `WMX_ALLOW_NO_GPU=1`.

use std::sync::Arc;
use wmx_core::{Array, DType, Device, Error};
use wmx_webgpu::{BufferState, Stats, WebGpuBackend};

mod common;
use common::{data, gpu};

/// The tests that count submits run alone: lavapipe computes on the CPU, so other
/// tests running beside them slow their evals until every eval finds the spacing
/// passed and submits (a flaky count). The rest share the adapter.
static TURNS: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    TURNS.read().unwrap_or_else(|e| e.into_inner())
}

fn alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    TURNS.write().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn chain_of_50_ops_stays_on_the_gpu() {
    let _turn = shared();
    let Some((dev, be)) = gpu() else { return };
    let n = 10_000;
    let (xs, ys) = (data(n, 1), data(n, 2));
    let x = Array::from_slice_on(&xs, &[n], &dev).unwrap();
    let y = Array::from_slice_on(&ys, &[n], &dev).unwrap();
    assert_eq!(wmx_webgpu::buffer_state(&x), Some(BufferState::HostOnly));

    let chain = || {
        let mut r = x.clone();
        for i in 0..50 {
            r = if i % 2 == 0 {
                wmx_core::add(&r, &y).unwrap()
            } else {
                wmx_core::multiply(&r, &x).unwrap()
            };
        }
        r
    };
    let r = chain();
    let mut want: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
    for i in 0..50 {
        for k in 0..n {
            want[k] = if i % 2 == 0 {
                want[k] + ys[k] as f64
            } else {
                want[k] * xs[k] as f64
            };
        }
    }
    // Lazy mode: one kernel per op.
    let before = be.stats();
    wmx_core::with_mode(wmx_core::Mode::Lazy, || r.eval()).unwrap();
    let s = be.stats();
    assert_eq!(s.downloads, 0, "eval must not download: {s:?}");
    assert_eq!(s.uploads - before.uploads, 2, "one upload per input: {s:?}");
    assert_eq!(s.submits - before.submits, 1, "one submit per eval: {s:?}");
    assert_eq!(s.dispatches - before.dispatches, 50, "{s:?}");
    assert_eq!(wmx_webgpu::buffer_state(&r), Some(BufferState::GpuOnly));
    assert_eq!(wmx_webgpu::buffer_state(&x), Some(BufferState::Both));

    let got = r.to_vec::<f32>().unwrap();
    let s1 = be.stats();
    assert_eq!(s1.downloads, 1);
    assert_eq!(
        s1.bytes_downloaded,
        (n * 4) as u64,
        "exactly the result's bytes"
    );
    assert_eq!(wmx_webgpu::buffer_state(&r), Some(BufferState::Both));
    let close = |what: &str, got: &[f32]| {
        for k in 0..n {
            let tol = 1e-4 * want[k].abs().max(1.0);
            assert!(
                (got[k] as f64 - want[k]).abs() <= tol,
                "{what} element {k}: {} vs {}",
                got[k],
                want[k]
            );
        }
    };
    close("lazy", &got);
    let again = r.to_vec::<f32>().unwrap();
    assert_eq!(again, got);
    assert_eq!(be.stats().downloads, 1, "a second read downloads nothing");

    // Compiled mode fuses the chain: one kernel, nothing downloaded, the same
    // values (up to multiply-add contraction).
    let f = chain();
    let before = be.stats();
    wmx_core::with_mode(wmx_core::Mode::Compiled, || f.eval()).unwrap();
    let s = be.stats();
    assert_eq!(
        s.dispatches - before.dispatches,
        1,
        "one fused kernel: {s:?}"
    );
    assert_eq!(
        s.downloads, before.downloads,
        "eval must not download: {s:?}"
    );
    close("fused", &f.to_vec::<f32>().unwrap());
}

#[test]
fn long_chains_fuse_into_kernels_of_at_most_256_steps() {
    let _turn = shared();
    let Some((dev, be)) = gpu() else { return };
    let one = Array::from_slice_on(&[1i32; 16], &[16], &dev).unwrap();
    let mut a = Array::from_slice_on(&[5i32; 16], &[16], &dev).unwrap();
    for _ in 0..600 {
        a = wmx_core::add(&a, &one).unwrap();
    }
    let before = be.stats();
    wmx_core::with_mode(wmx_core::Mode::Compiled, || a.eval()).unwrap();
    let s = be.stats();
    assert_eq!(s.dispatches - before.dispatches, 3, "600 steps: {s:?}");
    assert_eq!(a.to_vec::<i32>().unwrap(), vec![605; 16]);
}

#[test]
fn ten_thousand_evals_keep_pooled_memory_bounded() {
    let _turn = shared();
    let Some((dev, be)) = gpu() else { return };
    let x = Array::from_slice_on(&data(4096, 3), &[4096], &dev).unwrap();
    let mut peak_after_warmup = 0;
    for i in 0..10_000 {
        let y = wmx_core::exp(&wmx_core::add(&x, &x).unwrap()).unwrap();
        y.eval().unwrap();
        if i == 10 {
            peak_after_warmup = be.stats().peak_bytes;
        }
    }
    let s: Stats = be.stats();
    assert_eq!(
        s.peak_bytes, peak_after_warmup,
        "memory grew after warm-up: {s:?}"
    );
    assert!(s.active_bytes <= 64 * 1024, "{s:?}");
    assert!(
        (1..=10_000).contains(&s.submits),
        "at most one submit per eval: {s:?}"
    );
    be.clear_cache();
    assert_eq!(be.stats().cached_bytes, 0);
}

#[test]
fn mixed_host_and_gpu_inputs() {
    let _turn = shared();
    let Some((dev, be)) = gpu() else { return };
    let a = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap();
    let b = wmx_core::with_device(&dev, || wmx_core::arange(0.0, 3.0, 1.0, DType::F32)).unwrap();
    let gpu_resident = wmx_core::multiply(&b, &b).unwrap();
    gpu_resident.eval().unwrap();
    assert_eq!(
        wmx_webgpu::buffer_state(&gpu_resident),
        Some(BufferState::GpuOnly)
    );
    // A CPU array used on the GPU moves there at eval.
    let c = Array::from_slice_on(&[10.0f32, 20.0, 30.0], &[3], &Device::cpu()).unwrap();
    let r = wmx_core::with_device(&dev, || {
        wmx_core::add(
            &wmx_core::add(&a, &gpu_resident).unwrap(),
            &c.to_device(&dev).unwrap(),
        )
    })
    .unwrap();
    assert_eq!(r.device(), &dev);
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![11.0, 23.0, 37.0]);
    assert_eq!(be.stats().downloads, 1);
}

#[test]
fn threads_share_one_device() {
    let _turn = shared();
    let Some((dev, _be)) = gpu() else { return };
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let dev = dev.clone();
            std::thread::spawn(move || {
                for i in 0..20 {
                    let v = (t * 100 + i) as f32;
                    let x = Array::from_slice_on(&[v; 257], &[257], &dev).unwrap();
                    let s = wmx_core::sum(&wmx_core::add(&x, &x).unwrap(), None, false).unwrap();
                    assert_eq!(s.item::<f32>().unwrap(), 2.0 * v * 257.0);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn unsupported_dtype_is_an_error() {
    let _turn = shared();
    let Some((dev, be)) = gpu() else { return };
    // i64 is held as pairs of words on every adapter; an op without an i64 kernel
    // is an error naming the op and the dtype.
    let v = [i64::MIN, -1, 1 << 40, i64::MAX];
    let a = Array::from_slice_on(&v, &[2, 2], &dev).unwrap();
    assert_eq!(a.to_vec::<i64>().unwrap(), v);
    let e = a.matmul(&a).and_then(|y| y.to_vec::<i64>()).unwrap_err();
    assert!(
        e.to_string().contains("i64") && e.to_string().contains("matmul"),
        "{e}"
    );
    let x = Array::from_slice_on(&[1i32, 2], &[2], &dev).unwrap();
    assert_eq!(
        x.astype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
        [1, 2]
    );
    // f64: computed where the adapter has SHADER_F64 (lavapipe, NVIDIA), else an
    // error naming the dtype and the feature; a read as f64 works either way.
    let has_f64 = be.kernels().caps().f64;
    match x.astype(DType::F64).and_then(|y| y.to_vec::<f64>()) {
        Ok(v) if has_f64 => assert_eq!(v, vec![1.0, 2.0]),
        Err(e) if !has_f64 => {
            assert!(
                matches!(
                    e,
                    Error::DeviceDType {
                        dtype: DType::F64,
                        ..
                    }
                ) && e.to_string().contains("SHADER_F64"),
                "{e}"
            );
            assert!(Array::from_slice_on(&[0.5f64], &[1], &dev).is_err());
        }
        r => panic!("f64 with SHADER_F64 = {has_f64}: {r:?}"),
    }
    assert_eq!(x.to_vec_as::<f64>().unwrap(), vec![1.0, 2.0]);
    // The graph the user built is intact after the error.
    assert_eq!(x.to_vec::<i32>().unwrap(), vec![1, 2]);
}

#[test]
fn async_read_matches_and_caches() {
    let _turn = shared();
    let Some((dev, be)) = gpu() else { return };
    let x = Array::from_slice_on(&data(1000, 5), &[10, 100], &dev).unwrap();
    let t = wmx_core::transpose(&wmx_core::exp(&x).unwrap(), None).unwrap();
    let a = pollster::block_on(t.to_vec_async::<f32>()).unwrap();
    let b = t.to_vec::<f32>().unwrap();
    assert_eq!(a, b);
    assert_eq!(be.stats().downloads, 1);
}

/// A custom primitive with only CPU code.
#[derive(Debug)]
struct CpuOnly;
impl wmx_core::CustomPrimitive for CpuOnly {
    fn name(&self) -> &str {
        "cpu_only"
    }
    fn eval_cpu(
        &self,
        _inputs: &[wmx_core::View<'_, wmx_core::cpu::CpuBuffer>],
        _out: &mut wmx_core::CpuOutput<'_>,
    ) -> wmx_core::Result<()> {
        Ok(())
    }
}

#[test]
fn custom_primitive_errors_reach_the_user_and_keep_the_graph() {
    let _turn = shared();
    let Some((dev, _be)) = gpu() else { return };
    let x = Array::from_slice_on(&[1.0f32, 2.0], &[2], &dev).unwrap();
    let y = wmx_core::custom(
        Arc::new(CpuOnly),
        std::slice::from_ref(&x),
        &[2],
        DType::F32,
    )
    .unwrap();
    let e = y.eval().unwrap_err();
    let e = e.to_string();
    assert!(e.contains("cpu_only has no code for device webgpu"), "{e}");
    assert!(e.contains("eval_webgpu"), "{e}");
    assert!(!y.is_evaluated());
    // The same primitive on the CPU works; the input is intact on the GPU.
    let yc = wmx_core::custom(
        Arc::new(CpuOnly),
        &[x.to_device(&Device::cpu()).unwrap()],
        &[2],
        DType::F32,
    )
    .unwrap();
    assert_eq!(yc.to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
}

#[test]
fn lost_device_fails_cleanly() {
    let _turn = shared();
    let Some((dev, be)) = gpu() else { return };
    let x = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap();
    let y = wmx_core::exp(&x).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap().len(), 3);
    // Destroying the wgpu device loses it, as a driver reset would.
    be.kernels().device().destroy();
    be.kernels().poll_wait();
    let z = wmx_core::add(&x, &x).unwrap();
    let e = z.eval().unwrap_err();
    assert!(e.to_string().contains("lost"), "{e}");
    // Still an error later, never a panic; data already read stays readable.
    assert!(wmx_core::multiply(&x, &x).unwrap().to_vec::<f32>().is_err());
    assert_eq!(y.to_vec::<f32>().unwrap().len(), 3);
}

#[test]
fn evals_while_the_gpu_is_busy_share_one_submit() {
    let _turn = alone();
    let Some((dev, be)) = gpu() else { return };
    let n = 1 << 22;
    let big = Array::from_slice_on(&data(n, 7), &[n], &dev).unwrap();
    // Milliseconds of work on lavapipe (three kernels, unfused): the GPU is still
    // busy at the next evals.
    let heavy = wmx_core::sum(
        &wmx_core::exp(&wmx_core::sin(&big).unwrap()).unwrap(),
        None,
        false,
    )
    .unwrap();
    wmx_core::with_mode(wmx_core::Mode::Lazy, || heavy.eval()).unwrap();
    let after_heavy = be.stats().submits;
    let small = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap();
    let mut outs = Vec::new();
    for i in 0..5 {
        let r = wmx_core::add(&small, &wmx_core::scalar_like(&small, i as f64).unwrap()).unwrap();
        r.eval().unwrap();
        outs.push(r);
    }
    let merged = be.stats().submits - after_heavy;
    assert!(
        merged < 5,
        "five evals behind busy work took {merged} submits"
    );
    // Reading submits whatever is still open; every result is right.
    for (i, r) in outs.iter().enumerate() {
        let f = i as f32;
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0 + f, 2.0 + f, 3.0 + f]);
    }
    assert!(be.stats().submits - after_heavy <= 5);
    let want: f64 = data(n, 7).iter().map(|&v| (v as f64).sin().exp()).sum();
    let got = heavy.item::<f32>().unwrap() as f64;
    assert!((got - want).abs() <= 1e-4 * want.abs(), "{got} vs {want}");
}

/// An uploaded array past the binding limit computes (in pieces, see
/// `src/split.rs`), and the device goes on.
#[test]
fn arrays_past_the_binding_limit_compute() {
    let _turn = shared();
    let Some((dev, be)) = gpu() else { return };
    let caps = be.kernels().caps().clone();
    let limit = caps.max_storage_binding;
    if limit > 512 << 20 {
        eprintln!(
            "binding limit {limit} bytes: too large to exceed cheaply in a test; not checked here"
        );
        return;
    }
    let n = (limit / 4) as usize + 1024;
    let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let x = Array::from_slice_on(&host, &[n], &dev).unwrap();
    let y = wmx_core::add(&x, &x).unwrap().to_vec::<f32>().unwrap();
    assert!(y.iter().zip(&host).all(|(y, x)| *y == 2.0 * x));
    drop((x, y, host));
    // Past the largest buffer, arrays are held in segments: tests/segments.rs of
    // wmx-tests computes them on lowered limits (here one would take 2 GiB).
    // Smaller work on the same device still runs.
    let y = Array::from_slice_on(&[1.0f32, 2.0], &[2], &dev).unwrap();
    assert_eq!(
        wmx_core::add(&y, &y).unwrap().to_vec::<f32>().unwrap(),
        vec![2.0, 4.0]
    );
}

/// Resolves timestamps 0 and 1 of `set` (after a synchronize) into ticks.
fn stamps(be: &WebGpuBackend, set: &wgpu::QuerySet) -> (u64, u64) {
    let dev = be.kernels().device();
    let usage = |u| wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: u,
        mapped_at_creation: false,
    };
    let resolve = dev.create_buffer(&usage(
        wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
    ));
    let read = dev.create_buffer(&usage(
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    ));
    let mut enc = dev.create_command_encoder(&Default::default());
    enc.resolve_query_set(set, 0..2, &resolve, 0);
    enc.copy_buffer_to_buffer(&resolve, 0, &read, 0, 16);
    be.kernels().queue().submit([enc.finish()]);
    read.slice(..).map_async(wgpu::MapMode::Read, |_| {});
    be.kernels().poll_wait();
    let v = read.slice(..).get_mapped_range().unwrap();
    let t = |i: usize| u64::from_le_bytes(v[i..i + 8].try_into().unwrap());
    (t(0), t(8))
}

#[test]
fn timestamps_are_recorded_in_the_stream() {
    let _turn = shared();
    let Some((dev, be)) = gpu() else { return };
    let need = wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
    let features = be.kernels().device().features();
    let set = features.contains(wgpu::Features::TIMESTAMP_QUERY).then(|| {
        be.kernels()
            .device()
            .create_query_set(&wgpu::QuerySetDescriptor {
                label: None,
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            })
    });
    let Some(set) = set else {
        eprintln!("note: this adapter has no timestamps");
        return;
    };
    if !features.contains(need) {
        // Without the feature the call is a clear Err, not a validation error later.
        let e = be.write_timestamp(&set, 0).unwrap_err();
        assert!(
            e.to_string().contains("TIMESTAMP_QUERY_INSIDE_ENCODERS"),
            "{e}"
        );
        return;
    }
    let n = 1 << 18;
    let xs = data(n, 3);
    let x = Array::from_slice_on(&xs, &[n], &dev).unwrap();
    x.eval().unwrap();
    dev.synchronize().unwrap();
    let before = be.stats();
    be.write_timestamp(&set, 0).unwrap();
    let mut r = x.clone();
    for _ in 0..20 {
        r = wmx_core::add(&wmx_core::multiply(&r, &x).unwrap(), &x).unwrap();
    }
    r.eval().unwrap();
    be.write_timestamp(&set, 1).unwrap();
    dev.synchronize().unwrap();
    let s = be.stats();
    // Stamp 0 goes out with the eval's kernels (the GPU was idle, so it submitted);
    // stamp 1 with synchronize's submit.
    assert_eq!(s.submits - before.submits, 2, "{s:?}");
    let (t0, t1) = stamps(&be, &set);
    assert!(t1 > t0, "the second stamp follows 40 kernels: {t0} .. {t1}");
    // The result is still right (the stamps split the pass, not the work).
    let got = r.to_vec::<f32>().unwrap();
    let want = xs.iter().map(|&v| {
        let mut a = v as f64;
        for _ in 0..20 {
            a = a * v as f64 + v as f64;
        }
        a
    });
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            ((*g as f64) - w).abs() <= 1e-6 + 1e-5 * w.abs(),
            "{i}: {g} vs {w}"
        );
    }
    // A batch holding only a stamp is submitted and resolves too.
    be.write_timestamp(&set, 0).unwrap();
    be.write_timestamp(&set, 1).unwrap();
    dev.synchronize().unwrap();
    let (t0, t1) = stamps(&be, &set);
    assert!(t1 >= t0, "{t0} .. {t1}");
}

/// A custom primitive whose WebGPU code compiles invalid WGSL (or panics), then
/// returns a buffer of zeros as if it had worked.
#[derive(Debug)]
struct BadGpuCode {
    panic: bool,
}
impl wmx_core::CustomPrimitive for BadGpuCode {
    fn name(&self) -> &str {
        "bad_gpu_code"
    }
    fn eval_webgpu(&self, gpu: &mut wmx_core::GpuContext<'_>) -> wmx_core::Result<()> {
        let ev = gpu.get::<wmx_webgpu::CustomEval>()?;
        if self.panic {
            panic!("user code failed");
        }
        // Bypasses naga's check (as a user calling wgpu directly would): the error
        // comes from wgpu's error handler.
        let _ = ev
            .device()
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("users_broken_kernel"),
                source: wgpu::ShaderSource::Wgsl("fn main( { oops".into()),
            });
        Ok(())
    }
}

#[test]
fn custom_primitive_device_errors_and_panics_belong_to_that_op() {
    let _turn = shared();
    let Some((dev, _be)) = gpu() else { return };
    let x = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap();
    for panic in [false, true] {
        let y = wmx_core::custom(
            Arc::new(BadGpuCode { panic }),
            std::slice::from_ref(&x),
            &[3],
            DType::F32,
        )
        .unwrap();
        // The failed op reads back an error naming the primitive (and the shader
        // or the panic), never the zeros it returned.
        let e = y.to_vec::<f32>().unwrap_err().to_string();
        assert!(e.contains("bad_gpu_code"), "{e}");
        let cause = if panic {
            "user code failed"
        } else {
            "users_broken_kernel"
        };
        assert!(e.contains(cause), "{e}");
        assert!(!y.is_evaluated());
        // The next op is clean, and so is the one after it.
        let z = wmx_core::add(&x, &x).unwrap();
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
        assert_eq!(x.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
    }
}

#[test]
fn small_evals_share_submits_and_nothing_is_left_unsubmitted() {
    let _turn = alone();
    let Some((dev, be)) = gpu() else { return };
    let small = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &dev).unwrap();
    // A stream of tiny evals: after the first, most find the last submit too recent
    // (within 3x its cost, at most 250 µs ago) and leave their dispatch for the next
    // submit. The graphs are made first, so the evals follow each other closely.
    let outs: Vec<Array> = (0..200)
        .map(|i| wmx_core::add(&small, &wmx_core::scalar_like(&small, i as f64).unwrap()).unwrap())
        .collect();
    let s0 = be.stats();
    let t0 = std::time::Instant::now();
    for r in &outs {
        r.eval().unwrap();
    }
    let gap = t0.elapsed() / 200;
    let s1 = be.stats();
    // Evals further apart than the longest deferral (`MAX_DEFER` in submit.rs, 250
    // µs: a slow host's debug build) find the spacing passed and submit each, as
    // documented; then only the second half below applies.
    if gap < std::time::Duration::from_micros(250) {
        assert!(
            s1.submits - s0.submits < 200,
            "200 tiny evals ({gap:?} apart) took a submit each: {s0:?} -> {s1:?}"
        );
    } else {
        eprintln!("200 evals {gap:?} apart, past the longest deferral: sharing not checked");
    }
    // Nobody evaluates, reads or syncs now: the flusher thread submits what is open
    // (within MAX_DEFER of 250 µs once the GPU is idle; 100 ms allows a loaded
    // machine), so the reads below find nothing left to submit.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let s2 = be.stats();
    for (i, r) in outs.iter().enumerate() {
        let f = i as f32;
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![1.0 + f, 2.0 + f, 3.0 + f]);
    }
    let s3 = be.stats();
    assert_eq!(
        (s3.submits, s3.dispatches),
        (s2.submits, s2.dispatches),
        "work was left unsubmitted until the reads: {s1:?} -> {s2:?} -> {s3:?}"
    );
}
