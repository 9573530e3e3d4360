//! A GPU test never skips silently: without an adapter it fails, unless
//! `WMX_ALLOW_NO_GPU=1` is set, where it skips with a printed note. Every test
//! crate opens its device its own way and passes the outcome here.

use std::fmt::Display;

/// The opened device, or `None` (a skip, with a note on stderr) when opening
/// failed and `WMX_ALLOW_NO_GPU=1`; panics otherwise.
pub fn opened<T, E: Display>(device: Result<T, E>) -> Option<T> {
    match device {
        Ok(d) => Some(d),
        Err(e) if std::env::var("WMX_ALLOW_NO_GPU").as_deref() == Ok("1") => {
            eprintln!("skipped: no GPU adapter ({e}) and WMX_ALLOW_NO_GPU=1");
            None
        }
        Err(e) => panic!(
            "no GPU adapter: {e} (install mesa-vulkan-drivers, or set WMX_ALLOW_NO_GPU=1 to skip GPU tests)"
        ),
    }
}
