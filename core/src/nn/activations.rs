//! Activation functions (composites of ops: they differentiate and fuse), and
//! [`Activation`], the same as a layer.

use super::{Layer, Module, Visitor};
use crate::{Array, Result, scalar_like as c};

/// `max(x, 0)`, NaN kept, with PyTorch's derivative 0 at 0.
pub fn relu(x: &Array) -> Result<Array> {
    let off = crate::less_equal(x, &c(x, 0.0)?)?;
    crate::where_(&off, &crate::zeros_like(x)?, x)
}

/// `min(max(x, 0), 6)`.
pub fn relu6(x: &Array) -> Result<Array> {
    crate::minimum(&relu(x)?, &c(x, 6.0)?)
}

/// `x` where positive, else `slope * x`.
pub fn leaky_relu(x: &Array, slope: f64) -> Result<Array> {
    let pos = crate::greater(x, &c(x, 0.0)?)?;
    crate::where_(&pos, x, &crate::multiply(x, &c(x, slope)?)?)
}

/// `x` where positive, else `alpha * (exp(x) - 1)`.
pub fn elu(x: &Array, alpha: f64) -> Result<Array> {
    let pos = crate::greater(x, &c(x, 0.0)?)?;
    crate::where_(&pos, x, &crate::multiply(&crate::expm1(x)?, &c(x, alpha)?)?)
}

/// Scaled ELU with the self-normalising constants.
pub fn selu(x: &Array) -> Result<Array> {
    const ALPHA: f64 = 1.673_263_242_354_377_3;
    const SCALE: f64 = 1.050_700_987_355_480_5;
    crate::multiply(&elu(x, ALPHA)?, &c(x, SCALE)?)
}

/// `x * sigmoid(x)` (swish).
pub fn silu(x: &Array) -> Result<Array> {
    crate::multiply(x, &crate::sigmoid(x)?)
}

/// `log(1 + exp(x))`: `x + log1p(exp(-x))` above 0, `log1p(exp(x))` elsewhere,
/// each branch fed only its own side (no overflow, and no `0 * inf` in the
/// gradient of the branch not taken); derivative `sigmoid(x)`, 1/2 at 0.
pub fn softplus(x: &Array) -> Result<Array> {
    let zero = crate::zeros_like(x)?;
    let pos = crate::greater(x, &zero)?;
    let xp = crate::where_(&pos, x, &zero)?;
    let xn = crate::where_(&pos, &zero, x)?;
    let above = crate::add(&xp, &crate::log1p(&crate::exp(&crate::negative(&xp)?)?)?)?;
    let below = crate::log1p(&crate::exp(&xn)?)?;
    crate::where_(&pos, &above, &below)
}

/// `log(sigmoid(x)) = -softplus(-x)`.
pub fn log_sigmoid(x: &Array) -> Result<Array> {
    crate::negative(&softplus(&crate::negative(x)?)?)
}

/// `x * tanh(softplus(x))`.
pub fn mish(x: &Array) -> Result<Array> {
    crate::multiply(x, &crate::tanh(&softplus(x)?)?)
}

/// `x * relu6(x + 3) / 6`: 0 to -3, `x` from 3, `x (x + 3) / 6` between
/// (PyTorch's derivative at the ends: 0 at -3, 1 at 3).
pub fn hardswish(x: &Array) -> Result<Array> {
    let mid = crate::divide(
        &crate::multiply(x, &crate::add(x, &c(x, 3.0)?)?)?,
        &c(x, 6.0)?,
    )?;
    let hi = crate::where_(&crate::greater_equal(x, &c(x, 3.0)?)?, x, &mid)?;
    crate::where_(
        &crate::less_equal(x, &c(x, -3.0)?)?,
        &crate::zeros_like(x)?,
        &hi,
    )
}

/// The exact GELU, `x * Φ(x) = x/2 (1 + erf(x/√2))`.
pub fn gelu(x: &Array) -> Result<Array> {
    let e = crate::erf(&crate::multiply(
        x,
        &c(x, std::f64::consts::FRAC_1_SQRT_2)?,
    )?)?;
    crate::multiply(
        &crate::multiply(x, &c(x, 0.5)?)?,
        &crate::add(&e, &c(x, 1.0)?)?,
    )
}

/// The tanh approximation of GELU (PyTorch's `approximate="tanh"`):
/// `x/2 (1 + tanh(√(2/π) (x + 0.044715 x³)))`.
pub fn gelu_approx(x: &Array) -> Result<Array> {
    let x3 = crate::multiply(&crate::multiply(x, x)?, x)?;
    let inner = crate::add(x, &crate::multiply(&x3, &c(x, 0.044715)?)?)?;
    let t = crate::tanh(&crate::multiply(
        &inner,
        &c(x, (2.0 / std::f64::consts::PI).sqrt())?,
    )?)?;
    crate::multiply(
        &crate::multiply(x, &c(x, 0.5)?)?,
        &crate::add(&t, &c(x, 1.0)?)?,
    )
}

/// The sigmoid approximation of GELU (MLX's `gelu_fast_approx`): `x σ(1.702 x)`.
pub fn gelu_fast(x: &Array) -> Result<Array> {
    crate::multiply(x, &crate::sigmoid(&crate::multiply(x, &c(x, 1.702)?)?)?)
}

/// Gated linear unit: `a * sigmoid(b)` for the halves `a`, `b` of `axis`.
pub fn glu(x: &Array, axis: isize) -> Result<Array> {
    let parts = crate::split(x, 2, axis)?;
    crate::multiply(&parts[0], &crate::sigmoid(&parts[1])?)
}

/// Which GELU (see [`gelu`], [`gelu_approx`], [`gelu_fast`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gelu {
    /// The exact form (erf).
    Exact,
    /// The tanh approximation.
    Tanh,
    /// The sigmoid approximation.
    Fast,
}

/// An activation function as a layer (no parameters), for [`super::Sequential`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// [`relu`].
    Relu,
    /// [`relu6`].
    Relu6,
    /// [`leaky_relu`] with its slope.
    LeakyRelu(f64),
    /// [`elu`] with its alpha.
    Elu(f64),
    /// [`selu`].
    Selu,
    /// [`silu`].
    Silu,
    /// One of the GELUs.
    Gelu(Gelu),
    /// [`mish`].
    Mish,
    /// [`softplus`].
    Softplus,
    /// `sigmoid`.
    Sigmoid,
    /// [`log_sigmoid`].
    LogSigmoid,
    /// `tanh`.
    Tanh,
    /// [`hardswish`].
    Hardswish,
    /// [`glu`] over the last axis.
    Glu,
    /// `softmax` over the last axis.
    Softmax,
    /// `log_softmax` over the last axis.
    LogSoftmax,
}

impl Module for Activation {
    fn visit(&self, _: &mut dyn Visitor) {}
}

impl Layer for Activation {
    fn forward(&self, x: &Array) -> Result<Array> {
        match *self {
            Activation::Relu => relu(x),
            Activation::Relu6 => relu6(x),
            Activation::LeakyRelu(s) => leaky_relu(x, s),
            Activation::Elu(a) => elu(x, a),
            Activation::Selu => selu(x),
            Activation::Silu => silu(x),
            Activation::Gelu(Gelu::Exact) => gelu(x),
            Activation::Gelu(Gelu::Tanh) => gelu_approx(x),
            Activation::Gelu(Gelu::Fast) => gelu_fast(x),
            Activation::Mish => mish(x),
            Activation::Softplus => softplus(x),
            Activation::Sigmoid => crate::sigmoid(x),
            Activation::LogSigmoid => log_sigmoid(x),
            Activation::Tanh => crate::tanh(x),
            Activation::Hardswish => hardswish(x),
            Activation::Glu => glu(x, -1),
            Activation::Softmax => crate::softmax(x, &[-1]),
            Activation::LogSoftmax => crate::log_softmax(x, &[-1]),
        }
    }
}
