//! Scans: `cumsum`, `cumprod`, `cummax`, `cummin` along any axis, inclusive or
//! exclusive, forwards or reversed (the `Scan` primitive), with their derivatives.

use super::{
    binary, broadcast_to, node, op_device, reshape_exact, slice_region, where_, zeros_like,
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
    // A complex sum is the sums of its parts.
    if x.dtype().is_complex() && op == ReduceOp::Sum {
        return super::complex::on_pairs(x, |r| scan_node(op, r, axis, reverse, inclusive));
    }
    let prim = Primitive::Scan {
        op,
        axis,
        reverse,
        inclusive,
    };
    let d = op_device(x);
    node(prim, vec![x.clone()], x.shape(), op.out_dtype(x.dtype()), d)
}

/// `a` moved one place along `axis`: towards the end (`later`; a zero enters at
/// the start) or towards the start.
fn shift(a: &Array, axis: usize, later: bool) -> Result<Array> {
    shift_by(a, axis, later, 1, 0.0)
}

/// `a` moved `by` places along `axis` (towards the end when `later`), `fill`
/// entering; the shape is kept.
fn shift_by(a: &Array, axis: usize, later: bool, by: usize, fill: f64) -> Result<Array> {
    let n = a.shape()[axis];
    let by = by.min(n);
    if by == 0 {
        return Ok(a.clone());
    }
    let mut widths = vec![(0, 0); a.ndim()];
    widths[axis] = if later { (by, 0) } else { (0, by) };
    let padded = super::pad(a, &widths, super::PadMode::Constant(fill))?;
    let mut starts = vec![0; a.ndim()];
    if !later {
        starts[axis] = by;
    }
    Ok(slice_region(
        &padded,
        &starts,
        &vec![1; a.ndim()],
        a.shape(),
    ))
}

/// Cumulative product as log2(n) multiplies of shifted copies (Hillis–Steele) in
/// plain ops: the transforms differentiate it exactly, zeros included (a rule by
/// division by `x` would not be), so cumprod's jvp and vjp go through it.
fn cumprod_composed(x: &Array, axis: usize, reverse: bool, inclusive: bool) -> Result<Array> {
    let n = x.shape()[axis];
    let mut y = x.clone();
    let mut d = 1;
    while d < n {
        y = binary(
            BinaryOp::Multiply,
            &y,
            &shift_by(&y, axis, !reverse, d, 1.0)?,
        )?;
        d *= 2;
    }
    if inclusive {
        Ok(y)
    } else {
        shift_by(&y, axis, !reverse, 1, 1.0)
    }
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
        format!("cumulative {op} has no {rule} rule (all and any are not scans)"),
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
        ReduceOp::Prod => {
            let f = |a: &[Array]| Ok(vec![cumprod_composed(&a[0], axis, reverse, inclusive)?]);
            let (_, ty) = crate::jvp(f, std::slice::from_ref(x), std::slice::from_ref(t))?;
            Ok(ty[0].clone())
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
        ReduceOp::Prod => {
            let f = |a: &[Array]| Ok(vec![cumprod_composed(&a[0], axis, reverse, inclusive)?]);
            let (_, g) = crate::vjp(f, std::slice::from_ref(x), std::slice::from_ref(ct))?;
            Ok(g[0].clone())
        }
        _ => Err(no_rule(op, "vjp")),
    }
}
