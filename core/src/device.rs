//! Devices: which backend computes an array, and how the default is chosen.

use crate::{DType, DeviceKind, DynBackend, Error, Result, cpu::CpuBackend};
use std::cell::RefCell;
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock};

/// A handle to a backend. Cheap to clone; equal when it is the same backend instance.
#[derive(Clone)]
pub struct Device(Arc<dyn DynBackend>);

/// Opens the GPU backend; registered by a GPU crate (the `wmx` facade does it).
pub type GpuFactory = fn() -> Result<Device>;

static GPU_FACTORY: RwLock<Option<GpuFactory>> = RwLock::new(None);
static GPU: OnceLock<Result<Device>> = OnceLock::new();
static METAL_FACTORY: RwLock<Option<GpuFactory>> = RwLock::new(None);
static METAL: OnceLock<Result<Device>> = OnceLock::new();
static CPU: OnceLock<Device> = OnceLock::new();
static DEFAULT: RwLock<Option<Device>> = RwLock::new(None);

thread_local! {
    static SCOPE: RefCell<Vec<Device>> = const { RefCell::new(Vec::new()) };
}

impl Device {
    /// Wraps a backend instance.
    pub fn new(backend: Arc<dyn DynBackend>) -> Device {
        Device(backend)
    }

    /// The shared CPU device.
    pub fn cpu() -> Device {
        CPU.get_or_init(|| Device(Arc::new(CpuBackend::new())))
            .clone()
    }

    /// The shared GPU device, opened on first use; `Err` when no GPU backend is
    /// linked (see [`register_gpu_backend`]) or no adapter exists.
    pub fn gpu() -> Result<Device> {
        GPU.get_or_init(|| {
            let factory = *GPU_FACTORY.read().unwrap();
            match factory {
                Some(f) => f(),
                None => Err(Error::NoDevice(
                    "no GPU backend is linked: depend on `wmx` with its default `webgpu` feature"
                        .into(),
                )),
            }
        })
        .clone()
    }

    /// The native Metal device (`wmx-metal`), opened on first use; `Err` off Apple,
    /// when `wmx-metal` is not linked (see [`register_metal_backend`]) or no Metal
    /// device exists. [`Device::gpu`] stays wgpu's Metal translation on macOS until
    /// wmx-metal has passed the conformance suite on Apple hardware.
    pub fn metal() -> Result<Device> {
        METAL
            .get_or_init(|| {
                let factory = *METAL_FACTORY.read().unwrap();
                match factory {
                    Some(f) => f(),
                    None => Err(Error::NoDevice(
                        "no Metal backend is linked: wmx-metal runs on Apple targets only".into(),
                    )),
                }
            })
            .clone()
    }

    /// Backend name, e.g. `"cpu"`.
    pub fn name(&self) -> String {
        self.0.name()
    }

    /// CPU or GPU.
    pub fn kind(&self) -> DeviceKind {
        self.0.kind()
    }

    /// `Ok` if the device can hold and compute `dtype`.
    pub fn check_dtype(&self, dtype: DType) -> Result<()> {
        self.0.check_dtype(dtype)
    }

    /// Waits until all work submitted to this device is done (for timing).
    pub fn synchronize(&self) -> Result<()> {
        self.0.synchronize()
    }

    /// The backend.
    pub fn backend(&self) -> &dyn DynBackend {
        &*self.0
    }

    /// The backend as `&dyn Any`, to downcast to its concrete type.
    pub fn backend_any(&self) -> &dyn std::any::Any {
        self.0.as_any()
    }

    /// True for the devices the process keeps anyway: the shared CPU, GPU and
    /// Metal devices once opened, and the process-wide default. Caches of
    /// per-device arrays keep only these, so that dropping a device opened apart
    /// frees it.
    pub(crate) fn is_long_lived(&self) -> bool {
        let ok = |r: Option<&Result<Device>>| r.and_then(|r| r.as_ref().ok()).cloned();
        let default = DEFAULT.read().unwrap_or_else(|e| e.into_inner()).clone();
        [CPU.get().cloned(), ok(GPU.get()), ok(METAL.get()), default]
            .into_iter()
            .flatten()
            .any(|d| &d == self)
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for Device {}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Device({})", self.name())
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Lets a GPU crate provide [`Device::gpu`]. Call before the first `Device::gpu()`;
/// later registrations after the GPU was opened have no effect.
pub fn register_gpu_backend(factory: GpuFactory) {
    *GPU_FACTORY.write().unwrap() = Some(factory);
}

/// Lets `wmx-metal` provide [`Device::metal`] (the `wmx` facade calls it on Apple).
pub fn register_metal_backend(factory: GpuFactory) {
    *METAL_FACTORY.write().unwrap() = Some(factory);
}

/// True once a GPU backend has been registered.
pub fn gpu_backend_registered() -> bool {
    GPU_FACTORY.read().unwrap().is_some()
}

/// The device new arrays go to: the innermost [`with_device`] scope, else the one
/// set by [`set_default_device`], else `WMX_DEVICE` (`cpu`, `gpu` or `metal`), else
/// the GPU when one opens, else the CPU.
pub fn default_device() -> Result<Device> {
    if let Some(d) = SCOPE.with(|s| s.borrow().last().cloned()) {
        return Ok(d);
    }
    if let Some(d) = DEFAULT.read().unwrap().clone() {
        return Ok(d);
    }
    let chosen = match std::env::var("WMX_DEVICE").ok().as_deref() {
        Some("cpu") => Device::cpu(),
        Some("gpu") => Device::gpu()?,
        Some("metal") => Device::metal()?,
        Some(other) => {
            return Err(Error::invalid(
                "default_device",
                format!("WMX_DEVICE={other:?}; expected \"cpu\", \"gpu\" or \"metal\""),
            ));
        }
        None => Device::gpu().unwrap_or_else(|_| Device::cpu()),
    };
    let mut slot = DEFAULT.write().unwrap();
    Ok(slot.get_or_insert(chosen).clone())
}

/// Sets the process-wide default device.
pub fn set_default_device(device: Device) {
    *DEFAULT.write().unwrap() = Some(device);
}

/// Runs `f` with `device` as this thread's default device.
pub fn with_device<R>(device: &Device, f: impl FnOnce() -> R) -> R {
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            SCOPE.with(|s| s.borrow_mut().pop());
        }
    }
    SCOPE.with(|s| s.borrow_mut().push(device.clone()));
    let _pop = Pop;
    f()
}

/// The innermost [`with_device`] scope's device, if any.
pub(crate) fn scoped_device() -> Option<Device> {
    SCOPE.with(|s| s.borrow().last().cloned())
}

/// Implicit moves: an op whose inputs live on another device than the one it runs
/// on reads them through the host at eval (allowed unless [`set_implicit_moves`]
/// forbade it). Counted here, explicit `to_device` copies not included.
static IMPLICIT_MOVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static IMPLICIT_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static FORBID_IMPLICIT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Counts of implicit device moves in this process ([`implicit_moves`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Moves {
    /// Inputs moved.
    pub count: u64,
    /// Bytes moved.
    pub bytes: u64,
}

/// Inputs moved between devices without `to_device` so far in this process (an
/// op mixing a CPU and a GPU array reads the other through the host at eval).
pub fn implicit_moves() -> Moves {
    use std::sync::atomic::Ordering::Relaxed;
    Moves {
        count: IMPLICIT_MOVES.load(Relaxed),
        bytes: IMPLICIT_BYTES.load(Relaxed),
    }
}

/// Allows (the default) or forbids implicit moves for every thread: forbidden, an
/// op on arrays of two devices is an `Err` naming both, unless it runs inside
/// [`with_device`] (the device was asked for); `to_device` always moves.
pub fn set_implicit_moves(allow: bool) {
    FORBID_IMPLICIT.store(!allow, std::sync::atomic::Ordering::Relaxed);
}

pub(crate) fn implicit_moves_allowed() -> bool {
    !FORBID_IMPLICIT.load(std::sync::atomic::Ordering::Relaxed)
}

pub(crate) fn count_implicit_move(bytes: usize) {
    use std::sync::atomic::Ordering::Relaxed;
    IMPLICIT_MOVES.fetch_add(1, Relaxed);
    IMPLICIT_BYTES.fetch_add(bytes as u64, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared CPU device is long-lived; a backend opened apart is not (caches
    /// must not keep it alive).
    #[test]
    fn long_lived_devices() {
        assert!(Device::cpu().is_long_lived());
        let apart = Device::new(Arc::new(CpuBackend::new()));
        assert!(!apart.is_long_lived());
        assert!(apart == apart.clone() && apart != Device::cpu());
    }
}
