//! Derivatives of the elementwise op tables, shared by jvp and vjp: an elementwise
//! op's derivative with respect to one input is a diagonal linear map, so both
//! modes apply the same [`Partial`] (to a tangent or to a cotangent).
//!
//! Conventions (docs/TRANSFORMS.md): ops with integer or bool outputs, and the
//! piecewise-constant ops (sign, floor, ceil, round, floor_divide), have zero
//! derivative; `maximum`/`minimum` split the derivative equally on ties; `power`'s
//! derivative in the base is 0 where the exponent is 0, in the exponent 0 where the
//! base is 0.

use crate::{Array, BinaryOp, Result, UnaryOp, ops as o};

/// The derivative of an elementwise op with respect to one input.
pub(super) enum Partial {
    /// No dependence.
    Zero,
    /// `d = t`.
    Identity,
    /// `d = -t`.
    Negate,
    /// `d = t * s` elementwise.
    Scale(Array),
}

impl Partial {
    /// The derivative applied to `t` (`None`: zero).
    pub(super) fn apply(&self, t: &Array) -> Result<Option<Array>> {
        Ok(match self {
            Partial::Zero => None,
            Partial::Identity => Some(t.clone()),
            Partial::Negate => Some(o::negative(t)?),
            Partial::Scale(s) => Some(o::multiply(t, s)?),
        })
    }
}

fn c(like: &Array, v: f64) -> Result<Array> {
    o::scalar_like(like, v)
}

/// `d op(x) / dx`, given the input `x` and the output `y`.
pub(super) fn unary(op: UnaryOp, x: &Array, y: &Array) -> Result<Partial> {
    use Partial::*;
    use UnaryOp::*;
    if !y.dtype().is_float() {
        return Ok(Zero);
    }
    Ok(match op {
        Negative => Negate,
        Abs => Scale(o::sign(x)?),
        Sign | Floor | Ceil | Round | LogicalNot | IsNan | IsInf => Zero,
        Square => Scale(o::multiply(x, &c(x, 2.0)?)?),
        Sqrt => Scale(o::divide(&c(y, 0.5)?, y)?),
        // d x^-1/2 = -1/2 x^-3/2 = -1/2 y / x
        Rsqrt => Scale(o::multiply(&o::divide(y, x)?, &c(y, -0.5)?)?),
        // 1 / (3 y^2): inf at 0, as the derivative is
        Cbrt => Scale(o::divide(&c(y, 1.0 / 3.0)?, &o::square(y)?)?),
        Exp => Scale(y.clone()),
        Expm1 => Scale(o::add(y, &c(y, 1.0)?)?),
        Log => Scale(o::divide(&c(x, 1.0)?, x)?),
        Log1p => Scale(o::divide(&c(x, 1.0)?, &o::add(x, &c(x, 1.0)?)?)?),
        Log2 => Scale(o::divide(&c(x, std::f64::consts::LOG2_E)?, x)?),
        Sin => Scale(o::cos(x)?),
        Cos => Scale(o::negative(&o::sin(x)?)?),
        Tan => Scale(o::add(&c(y, 1.0)?, &o::square(y)?)?),
        Tanh => Scale(o::subtract(&c(y, 1.0)?, &o::square(y)?)?),
        Sigmoid => Scale(o::multiply(y, &o::subtract(&c(y, 1.0)?, y)?)?),
        Erf => Scale(o::multiply(
            &c(x, std::f64::consts::FRAC_2_SQRT_PI)?,
            &o::exp(&o::negative(&o::square(x)?)?)?,
        )?),
        // sqrt(pi)/2 * exp(y^2)
        Erfinv => Scale(o::multiply(
            &c(y, 0.886_226_925_452_758)?,
            &o::exp(&o::square(y)?)?,
        )?),
    })
}

/// `(d op(a, b) / da, d op(a, b) / db)`, given the inputs (already broadcast to the
/// output's shape) and the output `y`.
pub(super) fn binary(op: BinaryOp, a: &Array, b: &Array, y: &Array) -> Result<[Partial; 2]> {
    use BinaryOp::*;
    use Partial::*;
    if !y.dtype().is_float() {
        return Ok([Zero, Zero]);
    }
    let dt = y.dtype();
    // Weights of maximum/minimum: 1 for the input that wins, 1/2 each on ties (the
    // tie mask built once for both inputs).
    let split = |first: Array, second: Array| -> Result<[Partial; 2]> {
        let tie = o::multiply(&o::astype(&o::equal(a, b)?, dt)?, &c(y, 0.5)?)?;
        Ok([
            Scale(o::add(&o::astype(&first, dt)?, &tie)?),
            Scale(o::add(&o::astype(&second, dt)?, &tie)?),
        ])
    };
    Ok(match op {
        Add => [Identity, Identity],
        Subtract => [Identity, Negate],
        Multiply => [Scale(b.clone()), Scale(a.clone())],
        Divide => [
            Scale(o::divide(&c(b, 1.0)?, b)?),
            Scale(o::negative(&o::divide(y, b)?)?),
        ],
        FloorDivide => [Zero, Zero],
        // a - b * floor(a / b)
        Remainder => [Identity, Scale(o::negative(&o::floor_divide(a, b)?)?)],
        Power => {
            let zero = c(y, 0.0)?;
            let bm1 = o::subtract(b, &c(b, 1.0)?)?;
            let da = o::multiply(b, &o::power(a, &bm1)?)?;
            let da = o::where_(&o::equal(b, &zero)?, &zero, &da)?;
            let safe_a = o::where_(&o::equal(a, &zero)?, &c(a, 1.0)?, a)?;
            let db = o::multiply(y, &o::log(&safe_a)?)?;
            [Scale(da), Scale(db)]
        }
        Maximum => split(o::greater(a, b)?, o::less(a, b)?)?,
        Minimum => split(o::less(a, b)?, o::greater(a, b)?)?,
        // a / y, b / y (NaN at the origin, as the derivative is undefined there)
        Hypot => [Scale(o::divide(a, y)?), Scale(o::divide(b, y)?)],
        Arctan2 => {
            let den = o::add(&o::square(a)?, &o::square(b)?)?;
            [
                Scale(o::divide(b, &den)?),
                Scale(o::negative(&o::divide(a, &den)?)?),
            ]
        }
        Equal | NotEqual | Less | LessEqual | Greater | GreaterEqual | LogicalAnd | LogicalOr
        | BitwiseAnd | BitwiseOr | BitwiseXor | LeftShift | RightShift => [Zero, Zero],
    })
}
