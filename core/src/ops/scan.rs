//! Scans: `cumsum`, `cumprod`, `cummax`, `cummin` along any axis, inclusive or
//! exclusive, forwards or reversed (the `Scan` primitive), with their derivatives.

use super::{
    binary, broadcast_to, concat_node, node, op_device, reshape_exact, slice_region, where_,
    zeros_like,
};
use crate::{Array, BinaryOp, DType, Error, Generator, Primitive, ReduceOp, Result};

/// Cumulative `op` along `axis` (`None`: of the flattened array), MLX's `cumsum`
/// family: `inclusive` makes element `i` include input `i` (else the identity
/// comes first and the last input is left out); `reverse` scans from the end.
/// Output dtype as the reduction's ([`ReduceOp::out_dtype`]: bool, u8 and u32
/// sums and products are u32); floats accumulate in at least f32 and are rounded
/// once per element; integers wrap; max and min propagate NaN. `all`/`any` are an
/// error.
pub fn scan(
    op: ReduceOp,
    x: &Array,
    axis: Option<isize>,
    reverse: bool,
    inclusive: bool,
) -> Result<Array> {
    if matches!(op, ReduceOp::All | ReduceOp::Any) {
        return Err(Error::invalid(
            "scan",
            format!("cumulative {op} is not defined (use cummax/cummin of a bool array)"),
        ));
    }
    let (x, ax) = super::resolve_axis(op.name(), x, axis)?;
    scan_node(op, &x, ax, reverse, inclusive)
}

macro_rules! scan_fns {
    ($($(#[$m:meta])* $f:ident => $op:ident;)*) => {$(
        $(#[$m])*
        pub fn $f(x: &Array, axis: Option<isize>, reverse: bool, inclusive: bool) -> Result<Array> {
            scan(ReduceOp::$op, x, axis, reverse, inclusive)
        }
    )*};
}
scan_fns! {
    /// Cumulative sum ([`scan`] with [`ReduceOp::Sum`]).
    cumsum => Sum;
    /// Cumulative product ([`scan`] with [`ReduceOp::Prod`]).
    cumprod => Prod;
    /// Running maximum ([`scan`] with [`ReduceOp::Max`]).
    cummax => Max;
    /// Running minimum ([`scan`] with [`ReduceOp::Min`]).
    cummin => Min;
}

/// The primitive (axis in range).
pub(crate) fn scan_node(
    op: ReduceOp,
    x: &Array,
    axis: usize,
    reverse: bool,
    inclusive: bool,
) -> Result<Array> {
    let prim = Primitive::Scan {
        op,
        axis,
        reverse,
        inclusive,
    };
    let d = op_device(x);
    node(prim, vec![x.clone()], x.shape(), op.out_dtype(x.dtype()), d)
}

/// `a` moved one place along `axis` towards the end (`later`) or the start, the
/// vacated element zero: the step between inclusive and exclusive scans.
fn shift(a: &Array, axis: usize, later: bool) -> Result<Array> {
    let n = a.shape()[axis];
    if n == 0 {
        return Ok(a.clone());
    }
    let mut one = a.shape().to_vec();
    one[axis] = 1;
    let zero = broadcast_to(
        &zeros_like(&slice_region(
            a,
            &vec![0; a.ndim()],
            &vec![1; a.ndim()],
            &one,
        ))?,
        &one,
    )?;
    let mut starts = vec![0; a.ndim()];
    let mut counts = a.shape().to_vec();
    counts[axis] = n - 1;
    let steps = vec![1; a.ndim()];
    let parts = if later {
        vec![zero, slice_region(a, &starts, &steps, &counts)]
    } else {
        starts[axis] = 1;
        vec![slice_region(a, &starts, &steps, &counts), zero]
    };
    concat_node(parts, axis, a.shape())
}

/// For max/min: the index along `axis` of the element each inclusive running
/// extreme `y` was taken from (the latest one on ties).
fn running_source(x: &Array, y: &Array, axis: usize, reverse: bool) -> Result<Array> {
    let n = x.shape()[axis];
    let d = op_device(x);
    let range = Generator::Arange {
        start: 0.0,
        step: 1.0,
    };
    let pos = node(
        Primitive::Generate(range),
        vec![],
        &[n],
        DType::I32,
        d.clone(),
    )?;
    let mut line = vec![1; x.ndim()];
    line[axis] = n;
    let pos = broadcast_to(&reshape_exact(&pos, &line)?, x.shape())?;
    let hit = binary(BinaryOp::Equal, x, y)?;
    let none = if reverse { n as f64 } else { -1.0 };
    let fill = node(
        Primitive::Generate(Generator::Fill(none)),
        vec![],
        &[],
        DType::I32,
        d,
    )?;
    let marked = where_(&hit, &pos, &broadcast_to(&fill, x.shape())?)?;
    let op = if reverse {
        ReduceOp::Min
    } else {
        ReduceOp::Max
    };
    scan_node(op, &marked, axis, reverse, true)
}

fn no_rule(op: ReduceOp, rule: &str) -> Error {
    Error::invalid(
        "transform",
        format!("cumulative {op} has no {rule} rule yet (cumsum, cummax and cummin have)"),
    )
}

/// Forward-mode rule of a scan: the tangent `t` of `x`, `y` the scan.
pub(crate) fn scan_jvp(
    op: ReduceOp,
    x: &Array,
    y: &Array,
    t: &Array,
    axis: usize,
    reverse: bool,
    inclusive: bool,
) -> Result<Array> {
    match op {
        ReduceOp::Sum => scan_node(op, t, axis, reverse, inclusive),
        ReduceOp::Max | ReduceOp::Min => {
            let yi = if inclusive {
                y.clone()
            } else {
                scan_node(op, x, axis, reverse, true)?
            };
            let src = running_source(x, &yi, axis, reverse)?;
            let ti = super::index::gather_node(t, &src, axis)?;
            if inclusive {
                Ok(ti)
            } else {
                shift(&ti, axis, !reverse)
            }
        }
        _ => Err(no_rule(op, "jvp")),
    }
}

/// Reverse-mode rule of a scan: the cotangent of `x` from `ct`, `y` the scan.
pub(crate) fn scan_vjp(
    op: ReduceOp,
    x: &Array,
    y: &Array,
    ct: &Array,
    axis: usize,
    reverse: bool,
    inclusive: bool,
) -> Result<Array> {
    match op {
        ReduceOp::Sum => scan_node(op, ct, axis, !reverse, inclusive),
        ReduceOp::Max | ReduceOp::Min => {
            let yi = if inclusive {
                y.clone()
            } else {
                scan_node(op, x, axis, reverse, true)?
            };
            let ci = if inclusive {
                ct.clone()
            } else {
                shift(ct, axis, reverse)?
            };
            let src = running_source(x, &yi, axis, reverse)?;
            super::index::scatter_node(crate::ScatterOp::Add, &zeros_like(x)?, &src, &ci, axis)
        }
        _ => Err(no_rule(op, "vjp")),
    }
}
