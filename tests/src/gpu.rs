//! The GPU device the suites run on: one per test process, shared by its tests.

use std::sync::OnceLock;
use wmx_core::Device;

/// The shared WebGPU device. Panics (failing the test) when no adapter opens,
/// unless `WMX_ALLOW_NO_GPU=1`, where it returns `None` and the caller skips
/// with a printed note: a GPU test never skips silently.
pub fn device(open: fn() -> wmx_core::Result<Device>) -> Option<Device> {
    static DEV: OnceLock<Result<Device, String>> = OnceLock::new();
    match DEV.get_or_init(|| open().map_err(|e| e.to_string())) {
        Ok(d) => Some(d.clone()),
        Err(e) if std::env::var("WMX_ALLOW_NO_GPU").as_deref() == Ok("1") => {
            eprintln!("skipped: no GPU adapter ({e}) and WMX_ALLOW_NO_GPU=1");
            None
        }
        Err(e) => {
            panic!("no GPU adapter: {e} (install mesa-vulkan-drivers, or set WMX_ALLOW_NO_GPU=1)")
        }
    }
}
