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

/// The one list of cases, shared by [`conformance_tests!`] and [`cases::ALL`].
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_case {
    ($($args:tt)*) => {
        $crate::__dispatch_cases! { [$($args)*]
            creation_from_slice_round_trip,
            creation_scalar,
            creation_full_zeros_ones,
            creation_arange,
            creation_linspace,
            creation_eye,
            unary_all_ops_all_dtypes,
            unary_special_values,
            f64_library_sweep,
            binary_all_ops_all_dtype_pairs,
            binary_float_special_values,
            integer_overflow_wraps,
            integer_division_and_remainder,
            integer_power,
            bool_arithmetic,
            half_precision_rounding,
            where_select,
            clip_bounds,
            astype_all_pairs,
            axpby_dtypes_and_broadcast,
            reductions_all_ops_all_axes,
            reductions_empty,
            reductions_nan_and_inf,
            mean_var_logsumexp,
            argmax_argmin,
            views_values,
            reshape_view_and_copy,
            ops_on_views_match_contiguous,
            edge_shapes,
            big_add_and_sum,
            graph_shared_subgraph,
            graph_long_chain,
            lazy_until_read,
            display_format,
            errors_carry_values,
            device_dtype_support,
            grad_unary_ops,
            grad_binary_ops,
            grad_reductions,
            grad_views_and_composites,
            vmap_matches_loop,
            transform_compositions,
            transform_errors,
            slice_update_values,
            transforms_cover_every_primitive,
            matmul_values,
            matmul_big_and_special,
            addmm_values,
            matmul_errors,
            grad_matmul,
            norm_values,
            norm_special_values,
            grad_norm,
            join_values,
            gather_values,
            scatter_values,
            one_hot_values,
            index_errors,
            grad_index,
            custom_primitive_in_transforms,
            custom_code_may_evaluate_other_arrays,
            custom_function_rules,
            compile_matches_uncompiled,
            compile_cache,
            compile_report_and_errors,
            modes_and_async_eval,
            compiled_mode_fuses_eval,
            huge_shapes_and_hostile_arguments,
            random_matches_mlx,
            random_distributions,
            random_errors,
            scan_values,
            grad_scan,
            sort_values,
            permutation_and_grad_sort,
        }
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
    ([list] $($case:ident),* $(,)?) => {
        &[$((stringify!($case), $crate::cases::$case as fn(&$crate::__Device))),*]
    };
}

#[doc(hidden)]
pub use wmx_core::Device as __Device;

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
