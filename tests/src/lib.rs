//! The wmx conformance suite, written once and run against every backend.
//!
//! - the reference crate's modules, re-exported: [`rng`] (test data with edge
//!   values), [`reference`](mod@reference) (an independent f64/i128 reference of
//!   every op), [`tol`] (the tolerance table), [`host`] (host-side n-d arrays), and
//!   [`val`] (host values, with moving them in and out of arrays);
//! - [`cases`]: the test bodies, each `pub fn name(dev: &Device)`;
//! - [`props`]: property checks (driven by proptest in `tests/properties.rs`).
//!
//! A backend runs the suite with one line in an integration test:
//!
//! ```ignore
//! wmx_tests::conformance_tests!(cpu, wmx_core::Device::cpu());
//! ```

pub mod cases;
pub mod props;
pub mod val;
pub use wmx_reference::{host, reference, rng, tol};

pub use val::Val;

/// Expands to one `#[test]` per conformance case (inside `mod $backend`), each
/// calling `cases::xxx(&$device)`. `$device` is evaluated once per test.
#[macro_export]
macro_rules! conformance_tests {
    ($backend:ident, $device:expr) => {
        $crate::for_each_case!(tests $backend, $device);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __dispatch_cases {
    ([tests $backend:ident, $device:expr] $($case:ident),* $(,)?) => {
        #[allow(non_snake_case)]
        mod $backend {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $case() {
                    // `None` only when a GPU is optional and absent (already reported).
                    let Some(device) = $crate::MaybeDevice::get($device) else { return };
                    $crate::cases::$case(&device);
                }
            )*
        }
    };
}

pub mod gpu;

/// What [`conformance_tests!`] accepts as its device: a `Device`, or an
/// `Option<Device>` from [`gpu::device`] (`None` = skipped with a printed note).
pub trait MaybeDevice {
    /// The device, if there is one.
    fn get(self) -> Option<wmx_core::Device>;
}
impl MaybeDevice for wmx_core::Device {
    fn get(self) -> Option<wmx_core::Device> {
        Some(self)
    }
}
impl MaybeDevice for Option<wmx_core::Device> {
    fn get(self) -> Option<wmx_core::Device> {
        self
    }
}
