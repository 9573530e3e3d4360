//! CPU reductions over any set of axes and any strides.
//!
//! One walk over the input in its own row-major order, each element folded into
//! the accumulator of its output element (reduced axes get output stride 0). Row
//! reductions fold into one slot, column reductions stream through a row of slots:
//! both touch memory in order, with no per-element dynamic dispatch.

use super::scalar::{Accum, Store, Wide, with_store};
use super::{CpuBuffer, output, strided};
use crate::layout::kept_shape;
use crate::{
    ArgReduceOp, Error, ReduceOp, Result, backend::View, layout::numel, layout::row_major_strides,
};

/// Strides that map an input element to its output element: row-major over the
/// kept dims, 0 on reduced ones.
fn out_strides(shape: &[usize], axes: &[usize]) -> Vec<isize> {
    let kept = row_major_strides(&kept_shape(shape, axes));
    let mut k = kept.iter();
    (0..shape.len())
        .map(|i| {
            if axes.contains(&i) {
                0
            } else {
                *k.next().unwrap()
            }
        })
        .collect()
}

pub(super) fn reduce(op: ReduceOp, x: View<'_, CpuBuffer>, axes: &[usize]) -> Result<CpuBuffer> {
    let shape = &x.layout.shape;
    let n_out = numel(&kept_shape(shape, axes));
    if matches!(op, ReduceOp::Max | ReduceOp::Min) && numel(shape) == 0 && n_out > 0 {
        return Err(Error::invalid(
            op.name(),
            "reduction of an empty axis has no identity",
        ));
    }
    let out_dtype = op.out_dtype(x.dtype);
    Ok(
        with_store!(x.dtype, I => with_store!(out_dtype, O => reduce_typed::<I, O>(op, &x, axes, n_out))),
    )
}

fn reduce_typed<I: Store, O: Store>(
    op: ReduceOp,
    x: &View<'_, CpuBuffer>,
    axes: &[usize],
    n_out: usize,
) -> CpuBuffer {
    let src = x.buffer.as_slice::<I>();
    let l = x.layout;
    let ostr = out_strides(&l.shape, axes);
    let init = match op {
        ReduceOp::Sum | ReduceOp::Any => I::Acc::ZERO,
        ReduceOp::Prod | ReduceOp::All => I::Acc::ONE,
        ReduceOp::Max => I::Acc::LOWEST,
        ReduceOp::Min => I::Acc::HIGHEST,
    };
    let mut acc = super::alloc::filled(n_out, init);
    macro_rules! fold {
        (|$a:ident, $v:ident| $e:expr) => {
            strided::walk::<2>(&l.shape, [&l.strides, &ostr], [l.offset, 0], |[i, j]| {
                let $a = acc[j];
                let $v = src[i].to_acc();
                acc[j] = $e;
            })
        };
    }
    match op {
        ReduceOp::Sum => fold!(|a, v| a.add(v)),
        ReduceOp::Prod => fold!(|a, v| a.mul(v)),
        // A NaN accumulator sticks; a NaN value replaces any other.
        ReduceOp::Max => fold!(|a, v| if !a.is_nan() && (v > a || v.is_nan()) {
            v
        } else {
            a
        }),
        ReduceOp::Min => fold!(|a, v| if !a.is_nan() && (v < a || v.is_nan()) {
            v
        } else {
            a
        }),
        ReduceOp::All => fold!(|a, v| if v.nonzero() { a } else { I::Acc::ZERO }),
        ReduceOp::Any => fold!(|a, v| if v.nonzero() { I::Acc::ONE } else { a }),
    }
    output::<O>(n_out, |out| {
        for (o, a) in out.iter_mut().zip(acc) {
            *o = match op {
                ReduceOp::All | ReduceOp::Any => O::from_wide(Wide::I(a.nonzero() as i128)),
                _ => O::from_wide(a.wide()),
            };
        }
    })
}

pub(super) fn arg_reduce(
    op: ArgReduceOp,
    x: View<'_, CpuBuffer>,
    axis: usize,
) -> Result<CpuBuffer> {
    let n_out = numel(&kept_shape(&x.layout.shape, &[axis]));
    if x.layout.shape[axis] == 0 && n_out > 0 {
        return Err(Error::invalid(op.name(), "arg-reduction of an empty axis"));
    }
    Ok(with_store!(x.dtype, I => arg_typed::<I>(op, &x, axis, n_out)))
}

fn arg_typed<I: Store>(
    op: ArgReduceOp,
    x: &View<'_, CpuBuffer>,
    axis: usize,
    n_out: usize,
) -> CpuBuffer {
    let src = x.buffer.as_slice::<I>();
    let l = x.layout;
    let ostr = out_strides(&l.shape, &[axis]);
    // Position along the axis: stride 1 there, 0 elsewhere.
    let pstr: Vec<isize> = (0..l.ndim()).map(|i| (i == axis) as isize).collect();
    let mut best: Vec<Option<I::Acc>> = super::alloc::filled(n_out, None);
    let mut idx = super::alloc::filled(n_out, 0u32);
    // Input order visits each output's candidates in increasing position, so a
    // strict comparison keeps the first extreme and the first NaN.
    strided::walk::<3>(
        &l.shape,
        [&l.strides, &ostr, &pstr],
        [l.offset, 0, 0],
        |[i, j, p]| {
            let v = src[i].to_acc();
            let better = match best[j] {
                None => true,
                Some(b) if b.is_nan() => false,
                Some(_) if v.is_nan() => true,
                Some(b) => match op {
                    ArgReduceOp::ArgMax => v > b,
                    ArgReduceOp::ArgMin => v < b,
                },
            };
            if better {
                best[j] = Some(v);
                idx[j] = p as u32;
            }
        },
    );
    output::<u32>(n_out, |out| out.copy_from_slice(&idx))
}

/// Cumulative `op` along `axis`: each line walked in order (reversed on request),
/// the f64 or wrapping-i64 accumulator rounded once per output element.
pub(super) fn scan(
    op: ReduceOp,
    x: View<'_, CpuBuffer>,
    axis: usize,
    reverse: bool,
    inclusive: bool,
) -> Result<CpuBuffer> {
    if matches!(op, ReduceOp::All | ReduceOp::Any) || axis >= x.layout.ndim() {
        return Err(Error::invalid(
            "scan",
            format!("cumulative {op} along axis {axis} of {:?}", x.layout.shape),
        ));
    }
    let out_dtype = op.out_dtype(x.dtype);
    Ok(with_store!(x.dtype, I => with_store!(out_dtype, O =>
        scan_typed::<I, O>(op, &x, axis, reverse, inclusive))))
}

fn scan_typed<I: Store, O: Store>(
    op: ReduceOp,
    x: &View<'_, CpuBuffer>,
    axis: usize,
    reverse: bool,
    inclusive: bool,
) -> CpuBuffer {
    let src = x.buffer.as_slice::<I>();
    let l = x.layout;
    let n = l.shape[axis];
    let ostr = row_major_strides(&l.shape);
    let mut lines = l.shape.clone();
    lines[axis] = 1;
    // Exclusive max/min start from the dtype's own extreme (false/true for bool).
    let extreme = |high: bool| {
        let v = match (x.dtype, high) {
            (d, false) if d.is_float() => f64::NEG_INFINITY,
            (d, true) if d.is_float() => f64::INFINITY,
            (crate::DType::Bool | crate::DType::U8 | crate::DType::U32, false) => 0.0,
            (crate::DType::U64, false) => 0.0,
            (crate::DType::U64, true) => u64::MAX as f64,
            (crate::DType::Bool, true) => 1.0,
            (crate::DType::U8, true) => 255.0,
            (crate::DType::U32, true) => u32::MAX as f64,
            (crate::DType::I32, h) => {
                if h {
                    i32::MAX as f64
                } else {
                    i32::MIN as f64
                }
            }
            (_, h) => {
                if h {
                    i64::MAX as f64
                } else {
                    i64::MIN as f64
                }
            }
        };
        I::from_const(v).to_acc()
    };
    type Combine<A> = fn(A, A) -> A;
    let (init, combine): (I::Acc, Combine<I::Acc>) = match op {
        ReduceOp::Sum => (I::Acc::ZERO, |a, v| a.add(v)),
        ReduceOp::Prod => (I::Acc::ONE, |a, v| a.mul(v)),
        ReduceOp::Max => (extreme(false), |a, v| {
            if !a.is_nan() && (v > a || v.is_nan()) {
                v
            } else {
                a
            }
        }),
        _ => (extreme(true), |a, v| {
            if !a.is_nan() && (v < a || v.is_nan()) {
                v
            } else {
                a
            }
        }),
    };
    output::<O>(numel(&l.shape), |out| {
        strided::walk::<2>(&lines, [&l.strides, &ostr], [l.offset, 0], |[i, j]| {
            let mut acc = init;
            for k in 0..n {
                let p = if reverse { n - 1 - k } else { k } as isize;
                let v = src[(i as isize + p * l.strides[axis]) as usize].to_acc();
                let next = combine(acc, v);
                out[j + (p * ostr[axis]) as usize] =
                    O::from_wide(if inclusive { next } else { acc }.wide());
                acc = next;
            }
        });
    })
}
