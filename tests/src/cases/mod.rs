//! The conformance cases. Each `pub fn name(dev: &Device)` is a whole test body:
//! it creates its inputs on `dev`, runs ops through the public API, reads the
//! results and compares them with the independent reference, panicking with a
//! precise message on a mismatch. Dtypes the device does not support are checked
//! to fail with an error naming the dtype.

use crate::host::HostArr;
use crate::reference::{self as r, binary_dtypes, unary_dtypes};
use crate::rng::{Domain, Rng, edge_values, values, with_edges};
use crate::tol::{Class, Tol, assert_close, assert_close_with, assert_same, class_of};
use crate::val::{Val, cast, make_ok, promote, read_ok, round_to, to_float};
use wmx_core::{self as wmx, Array, BinaryOp, DType, Device, ReduceOp, Result, UnaryOp};

/// A case: its name and its body.
pub type Case = (&'static str, fn(&Device));

/// Every case with its name (the same list as [`crate::conformance_tests!`]).
pub const ALL: &[Case] = crate::for_each_case!(list);

// ------------------------------------------------------------------ helpers

/// True when `dev` holds and computes `dt`.
pub fn supported(dev: &Device, dt: DType) -> bool {
    dev.check_dtype(dt).is_ok()
}

/// Unwraps, panicking with `what` and the error.
pub fn ok<T>(what: &str, r: Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: unexpected error: {e}"))
}

/// Asserts `r` is an error whose message contains every `needle`.
pub fn expect_err<T>(what: &str, r: Result<T>, needles: &[&str]) {
    match r {
        Ok(_) => panic!("{what}: expected an error mentioning {needles:?}, got Ok"),
        Err(e) => {
            let msg = e.to_string();
            for n in needles {
                assert!(
                    msg.contains(n),
                    "{what}: error message {msg:?} does not mention {n:?}"
                );
            }
        }
    }
}

/// For a dtype `dev` lacks: creating an array of it must fail naming the dtype.
pub fn check_unsupported(dev: &Device, dt: DType) {
    let vals = edge_values(dt);
    expect_err(
        &format!("from_slice of {dt} on {dev}"),
        crate::val::make(dev, dt, &vals, &[vals.len()]),
        &[dt.name()],
    );
    expect_err(
        &format!("zeros of {dt} on {dev}"),
        wmx::with_device(dev, || wmx::zeros(&[3], dt)),
        &[dt.name()],
    );
}

fn show(vals: &[&[Val]], i: usize) -> String {
    vals.iter()
        .map(|v| v[i].to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads `a`, checks its dtype and shape, returns the elements.
fn read_checked(what: &str, a: &Array, dt: DType, shape: &[usize]) -> Vec<Val> {
    assert_eq!(a.dtype(), dt, "{what}: output dtype");
    assert_eq!(a.shape(), shape, "{what}: output shape");
    assert_eq!(a.device(), a.device(), "{what}");
    read_ok(a, what)
}

fn tiny_exp(dt: DType) -> i128 {
    if dt == DType::F16 { 12 } else { 20 }
}

/// Inputs of a unary op on `dt`: edges (only moderate ones for library functions)
/// and random values in the op's natural domain, with some tiny values.
fn unary_inputs(rng: &mut Rng, name: &str, dt: DType, n: usize) -> Vec<Val> {
    let lib = matches!(
        class_of(name),
        Class::Transcendental | Class::Power | Class::Divide
    );
    let mut v: Vec<Val> = edge_values(dt)
        .into_iter()
        .filter(|x| !lib || !x.f().is_finite() || x.f().abs() <= 7.0)
        .collect();
    while v.len() < n {
        let x = if !dt.is_float() {
            if lib {
                crate::rng::value(rng, dt, Domain::SmallInt(100))
            } else {
                crate::rng::value(rng, dt, Domain::Any)
            }
        } else if lib && rng.chance(0.25) {
            let s = if rng.chance(0.5) { -1.0 } else { 1.0 };
            let e = rng.int_in(1, tiny_exp(dt)) as i32;
            Val::F(round_to(dt, s * rng.uniform(1.0, 2.0) * 2f64.powi(-e)))
        } else {
            let x = match name {
                "exp" | "expm1" => rng.uniform(-10.0, 10.0),
                "log" | "log2" | "sqrt" | "rsqrt" => 2f64.powf(rng.uniform(-10.0, 10.0)),
                "log1p" => rng.uniform(-0.99, 100.0),
                "sin" | "cos" => rng.uniform(-10.0, 10.0),
                "tan" => rng.uniform(-1.5, 1.5),
                "tanh" | "sigmoid" | "erf" => rng.uniform(-8.0, 8.0),
                // Near ±1 (the tails) a third of the time.
                "erfinv" if rng.chance(0.35) => {
                    let s = if rng.chance(0.5) { -1.0 } else { 1.0 };
                    s * (1.0 - 2f64.powf(-rng.uniform(1.0, 24.0)))
                }
                "erfinv" => rng.uniform(-1.0, 1.0),
                _ => return_any(rng, dt),
            };
            Val::F(round_to(dt, x))
        };
        v.push(x);
    }
    v
}

fn return_any(rng: &mut Rng, dt: DType) -> f64 {
    crate::rng::value(rng, dt, Domain::Any).f()
}

/// Pairs of inputs of a binary op on (`da`, `db`): every pair of edge values and
/// `extra` random pairs.
fn binary_inputs(
    rng: &mut Rng,
    name: &str,
    da: DType,
    db: DType,
    extra: usize,
) -> (Vec<Val>, Vec<Val>) {
    let lib = class_of(name) == Class::Transcendental;
    let edges = |d: DType| -> Vec<Val> {
        edge_values(d)
            .into_iter()
            .filter(|x| !lib || !x.f().is_finite() || x.f().abs() <= 7.0)
            .collect()
    };
    let (ea, eb) = (edges(da), edges(db));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for x in &ea {
        for y in &eb {
            a.push(*x);
            b.push(*y);
        }
    }
    for _ in 0..extra {
        if name == "power" {
            // Bases of every size, exponents small enough to matter.
            a.push(crate::rng::value(rng, da, Domain::Range(-10.0, 10.0)));
            b.push(crate::rng::value(rng, db, Domain::SmallInt(12)));
            a.push(crate::rng::value(rng, da, Domain::Any));
            b.push(crate::rng::value(rng, db, Domain::Range(-3.0, 3.0)));
        } else if name.ends_with("_shift") {
            // Amounts around every bit width, negative ones too.
            a.push(crate::rng::value(rng, da, Domain::Any));
            b.push(crate::rng::value(rng, db, Domain::Range(-2.0, 70.0)));
        } else if lib {
            a.push(crate::rng::value(rng, da, Domain::Range(-100.0, 100.0)));
            b.push(crate::rng::value(rng, db, Domain::Range(-100.0, 100.0)));
        } else {
            a.push(crate::rng::value(rng, da, Domain::Any));
            b.push(crate::rng::value(rng, db, Domain::Any));
        }
    }
    (a, b)
}

fn f(x: f64) -> Val {
    Val::F(x)
}

fn ints(xs: &[i128]) -> Vec<Val> {
    xs.iter().map(|&i| Val::I(i)).collect()
}

fn reduce_tol(name: &str, dt: DType, xs: &[Val]) -> Tol {
    match name {
        "sum" => Tol::of(Class::Sum, dt, xs.iter().map(|v| v.f().abs()).sum()),
        "prod" if matches!(dt, DType::F32 | DType::F64) => Tol {
            ulps: xs.len() as f64 + 1.0,
            abs: 0.0,
            log_ulps: 0.0,
        },
        "prod" => Tol::of(Class::Sum, dt, 0.0),
        _ => Tol::EXACT,
    }
}

fn axes_usize(axes: Option<&[isize]>, nd: usize) -> Vec<usize> {
    match axes {
        None => (0..nd).collect(),
        Some(a) => a
            .iter()
            .map(|&x| {
                if x < 0 {
                    (x + nd as isize) as usize
                } else {
                    x as usize
                }
            })
            .collect(),
    }
}

fn keep_shape(shape: &[usize], axes: &[usize], keepdims: bool) -> Vec<usize> {
    (0..shape.len())
        .filter_map(|d| {
            if axes.contains(&d) {
                keepdims.then_some(1)
            } else {
                Some(shape[d])
            }
        })
        .collect()
}

/// The one list of cases, shared by [`conformance_tests!`](crate::conformance_tests)
/// and [`ALL`]: a new case file adds its `mod` line below and its names here.
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
            einsum_values,
            einsum_paths,
            contraction_helpers,
            grad_einsum,
            linalg_identities,
            linalg_match_numpy,
            linalg_errors,
            grad_linalg,
            linalg_blocked,
            norm_values,
            norm_special_values,
            grad_norm,
            rope_values,
            rope_errors,
            grad_rope,
            quantize_mlx,
            quantized_matmul_mlx,
            quantized_matmul_values,
            quantized_errors,
            grad_quantized_matmul,
            quantized_layers,
            gather_qmm_values,
            llama_mlx,
            llama_errors,
            llama_sampling,
            gpt2_mlx,
            gpt2_errors,
            transformers_models,
            transformers_models_f16,
            conv_values,
            conv_transpose_values,
            pool_values,
            adaptive_pool_and_windows,
            conv_errors,
            grad_conv,
            conv_match_torch,
            nn_layers_match_torch,
            nn_activations_match_torch,
            nn_losses_match_torch,
            optim_match_torch,
            adafactor_match_mlx,
            init_values,
            nn_module_api,
            nn_autocast,
            kv_cache_decode,
            attention_values,
            grad_attention,
            attention_matches_torch,
            multi_head_attention_matches_torch,
            group_and_batch_norm_match_torch,
            tall_column_reductions,
            long_64bit_reductions,
            complex_elementwise,
            complex_reductions_and_matmul,
            complex_indexing_and_joins,
            grad_complex,
            complex_errors,
            fft_values,
            fft_axes_and_views,
            rfft_values,
            fftn_values,
            grad_fft,
            fft_errors,
            fft_long_and_strided,
            fft_matches_numpy,
            fft_helpers,
            tril_triu_clamp,
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
            compile_stores_several_outputs,
            huge_shapes_and_hostile_arguments,
            random_matches_mlx,
            random_distributions,
            random_errors,
            random_same_values_as_cpu,
            scan_values,
            grad_scan,
            sort_values,
            permutation_and_grad_sort,
        }
    };
}

mod attention;
mod compile;
mod complex;
mod contract;
mod conv;
mod creation;
mod custom;
mod decomp;
mod elementwise;
mod errors;
mod fft;
mod goldens;
mod gpt2;
mod graph;
mod hf;
mod index;
mod linalg;
mod llama;
mod nn;
mod quantized;
mod random;
mod reduce;
mod robust;
mod rope;
mod scan;
mod shapes;
mod sort;
mod training;
mod transforms;
mod views;
pub use attention::*;
pub use compile::*;
pub use complex::*;
pub use contract::*;
pub use conv::*;
pub use creation::*;
pub use custom::*;
pub use decomp::*;
pub use elementwise::*;
pub use errors::*;
pub use fft::*;
pub use gpt2::*;
pub use graph::*;
pub use hf::*;
pub use index::*;
pub use linalg::*;
pub use llama::*;
pub use nn::*;
pub use quantized::*;
pub use random::*;
pub use reduce::*;
pub use robust::*;
pub use rope::*;
pub use scan::*;
pub use shapes::*;
pub use sort::*;
pub use training::*;
pub use transforms::*;
pub use views::*;
