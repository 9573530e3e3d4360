//! complex64 and `wmx::fft` for JavaScript: `complex`, `real`, `imag`, `conj`,
//! `angle`, and `fft`, `ifft`, `rfft`, `irfft` with their 2-D and n-D forms
//! (numpy's arguments in an options object).

use crate::api::{JsResult, NdArray, field, lead, wrap};
use crate::convert::{self as cv, err, js_err};
use crate::types::{ArrayInput, FftNdOptionsArg, FftOptionsArg};
use wasm_bindgen::prelude::*;
use wmx_core as wc;
use wmx_core::fft::{self, Norm};

/// `re + i im` (broadcast together; complex64).
#[wasm_bindgen]
pub fn complex(re: &ArrayInput, im: &ArrayInput) -> JsResult<NdArray> {
    wrap(wc::complex(&lead(re)?, &lead(im)?))
}

/// The real part (a real array as it is).
#[wasm_bindgen]
pub fn real(x: &ArrayInput) -> JsResult<NdArray> {
    wrap(wc::real(&lead(x)?))
}

/// The imaginary part (zeros for a real array).
#[wasm_bindgen]
pub fn imag(x: &ArrayInput) -> JsResult<NdArray> {
    wrap(wc::imag(&lead(x)?))
}

/// The complex conjugate.
#[wasm_bindgen]
pub fn conj(x: &ArrayInput) -> JsResult<NdArray> {
    wrap(wc::conj(&lead(x)?))
}

/// The argument of each element, in (-pi, pi].
#[wasm_bindgen]
pub fn angle(x: &ArrayInput) -> JsResult<NdArray> {
    wrap(wc::angle(&lead(x)?))
}

fn norm(o: &JsValue) -> JsResult<Norm> {
    match field(o, "norm").as_string() {
        Some(n) => Norm::from_name(&n).map_err(err),
        None => Ok(Norm::Backward),
    }
}

/// `n` and `axis` of a 1-D transform's options (defaults: the axis' length, -1).
fn one(o: &JsValue) -> JsResult<(Option<usize>, isize, Norm)> {
    let n = match field(o, "n").as_f64() {
        None => None,
        Some(v) if v >= 0.0 && v.fract() == 0.0 => Some(v as usize),
        Some(v) => return Err(js_err(format!("fft: n must be a whole number, got {v}"))),
    };
    let axis = match field(o, "axis").as_f64() {
        None => -1,
        Some(v) if v.fract() == 0.0 => v as isize,
        Some(v) => return Err(js_err(format!("fft: axis must be an integer, got {v}"))),
    };
    Ok((n, axis, norm(o)?))
}

type Nd = (Option<Vec<usize>>, Option<Vec<isize>>, Norm);

/// `s` and `axes` of an n-D transform's options.
fn nd(o: &JsValue) -> JsResult<Nd> {
    let s = field(o, "s");
    let s = if cv::is_nullish(&s) {
        None
    } else {
        Some(cv::shape("fft: s", &s)?)
    };
    Ok((s, cv::axes(&field(o, "axes"))?, norm(o)?))
}

fn opts<T: Into<JsValue>>(o: Option<T>) -> JsValue {
    o.map(Into::into).unwrap_or(JsValue::UNDEFINED)
}

macro_rules! one_d {
    ($($(#[$m:meta])* $name:ident => $f:path;)*) => {$(
        $(#[$m])*
        #[wasm_bindgen]
        pub fn $name(x: &ArrayInput, options: Option<FftOptionsArg>) -> JsResult<NdArray> {
            let (n, axis, norm) = one(&opts(options))?;
            wrap($f(&lead(x)?, n, axis, norm))
        }
    )*};
}

one_d! {
    /// The discrete Fourier transform along `axis` (numpy's `fft.fft`); options
    /// `n` (crop or zero-pad), `axis` (default -1), `norm`.
    fft => fft::fft;
    /// The inverse of `fft`.
    ifft => fft::ifft;
    /// The transform of real input: the `n / 2 + 1` non-negative frequencies.
    rfft => fft::rfft;
    /// The inverse of `rfft`: `n` real points (default `2 (m - 1)`).
    irfft => fft::irfft;
}

macro_rules! n_d {
    ($($(#[$m:meta])* $name:ident / $js:literal => $f:path, $two:literal;)*) => {$(
        $(#[$m])*
        #[wasm_bindgen(js_name = $js)]
        pub fn $name(x: &ArrayInput, options: Option<FftNdOptionsArg>) -> JsResult<NdArray> {
            let (s, axes, norm) = nd(&opts(options))?;
            let axes = axes.or($two.then(|| vec![-2, -1]));
            wrap($f(&lead(x)?, s.as_deref(), axes.as_deref(), norm))
        }
    )*};
}

n_d! {
    /// The 2-D transform over `axes` (default the last two); options `s`, `axes`, `norm`.
    fft2 / "fft2" => fft::fftn, true;
    /// The inverse of `fft2`.
    ifft2 / "ifft2" => fft::ifftn, true;
    /// The 2-D transform of real input.
    rfft2 / "rfft2" => fft::rfftn, true;
    /// The inverse of `rfft2`.
    irfft2 / "irfft2" => fft::irfftn, true;
    /// The n-D transform over `axes` (default all, or the last `s.length`).
    fftn / "fftn" => fft::fftn, false;
    /// The inverse of `fftn`.
    ifftn / "ifftn" => fft::ifftn, false;
    /// The n-D transform of real input.
    rfftn / "rfftn" => fft::rfftn, false;
    /// The inverse of `rfftn`.
    irfftn / "irfftn" => fft::irfftn, false;
}
