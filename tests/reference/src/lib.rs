//! `wmx-reference`: what every test crate of wmx compares against, written once
//! and independently of the code under test (it knows the vocabulary, `wmx-spec`,
//! and nothing else of wmx):
//!
//! - [`val`]: host values ([`Val`]), rounding to f32/f16/bf16, casts and type
//!   promotion, from `docs/SEMANTICS.md`;
//! - [`reference`](mod@reference): an f64/i128 reference of every op, by name;
//! - [`rng`]: a deterministic SplitMix64 generator and test data per dtype, with
//!   edge values (NaN, ±inf, −0, integer MIN/MAX, values near f16 overflow);
//! - [`tol`]: the one tolerance table and the comparison helpers;
//! - [`host`]: a host-side n-d array (views computed by plain index math);
//! - [`gpu`]: the rule for a GPU test without a GPU.
#![warn(missing_docs)]

pub mod gpu;
pub mod host;
pub mod reference;
pub mod rng;
pub mod tol;
pub mod val;

pub use val::Val;
