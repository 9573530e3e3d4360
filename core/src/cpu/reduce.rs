//! CPU reductions over any set of axes and any strides.

use super::scalar::{Accum, Store, Wide, with_store};
use super::{CpuBuffer, kept_shape, output, strided};
use crate::{ArgReduceOp, Error, ReduceOp, Result, backend::View, layout::numel};

/// Splits a layout into (kept shape, kept strides) and (reduced shape, reduced strides).
fn split(x: &View<'_, CpuBuffer>, axes: &[usize]) -> [(Vec<usize>, Vec<isize>); 2] {
    let l = x.layout;
    let pick = |keep: bool| {
        (0..l.ndim())
            .filter(|i| axes.contains(i) != keep)
            .map(|i| (l.shape[i], l.strides[i]))
            .unzip()
    };
    [pick(true), pick(false)]
}

/// Calls `f(k, start)` for each output element `k` with the buffer index of its
/// first input element; `inner` then walks the reduced elements from `start`.
fn for_each_output(
    x: &View<'_, CpuBuffer>,
    axes: &[usize],
    mut f: impl FnMut(usize, &dyn Fn(&mut dyn FnMut(usize))),
) {
    let [(kshape, kstrides), (rshape, rstrides)] = split(x, axes);
    let mut k = 0;
    strided::for_each_index(&kshape, &kstrides, x.layout.offset, |start| {
        let inner = |g: &mut dyn FnMut(usize)| {
            strided::for_each_index(&rshape, &rstrides, start, |i| g(i));
        };
        f(k, &inner);
        k += 1;
    });
}

pub(super) fn reduce(op: ReduceOp, x: View<'_, CpuBuffer>, axes: &[usize]) -> Result<CpuBuffer> {
    let n_out = numel(&kept_shape(&x.layout.shape, axes));
    let n_red = numel(&x.layout.shape) / numel(&kept_shape(&x.layout.shape, axes)).max(1);
    if matches!(op, ReduceOp::Max | ReduceOp::Min) && n_red == 0 && n_out > 0 {
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
    let (zero, one) = (<I::Acc as Accum>::ZERO, <I::Acc as Accum>::ONE);
    output::<O>(n_out, |out| {
        for_each_output(x, axes, |k, inner| {
            let mut acc: I::Acc = match op {
                ReduceOp::Sum | ReduceOp::Any => zero,
                ReduceOp::Prod | ReduceOp::All => one,
                ReduceOp::Max | ReduceOp::Min => {
                    let mut first = None;
                    inner(&mut |i| {
                        if first.is_none() {
                            first = Some(src[i].to_acc());
                        }
                    });
                    first.expect("non-empty checked above")
                }
            };
            inner(&mut |i| {
                let v = src[i].to_acc();
                acc = match op {
                    ReduceOp::Sum => acc.add(v),
                    ReduceOp::Prod => acc.mul(v),
                    ReduceOp::Max if acc.is_nan() || v.is_nan() || v > acc => v_or_nan(acc, v),
                    ReduceOp::Min if acc.is_nan() || v.is_nan() || v < acc => v_or_nan(acc, v),
                    ReduceOp::Max | ReduceOp::Min => acc,
                    ReduceOp::All if !v.nonzero() => zero,
                    ReduceOp::Any if v.nonzero() => one,
                    ReduceOp::All | ReduceOp::Any => acc,
                };
            });
            out[k] = match op {
                ReduceOp::All | ReduceOp::Any => O::from_wide(Wide::I(acc.nonzero() as i64)),
                _ => O::from_wide(acc.wide()),
            };
        });
    })
}

/// NaN if either is NaN, else the new value.
fn v_or_nan<A: Accum>(acc: A, v: A) -> A {
    if acc.is_nan() { acc } else { v }
}

pub(super) fn arg_reduce(
    op: ArgReduceOp,
    x: View<'_, CpuBuffer>,
    axis: usize,
) -> Result<CpuBuffer> {
    let axes = [axis];
    let n_out = numel(&kept_shape(&x.layout.shape, &axes));
    if x.layout.shape[axis] == 0 && n_out > 0 {
        return Err(Error::invalid(op.name(), "arg-reduction of an empty axis"));
    }
    Ok(with_store!(x.dtype, I => arg_typed::<I>(op, &x, &axes, n_out)))
}

fn arg_typed<I: Store>(
    op: ArgReduceOp,
    x: &View<'_, CpuBuffer>,
    axes: &[usize],
    n_out: usize,
) -> CpuBuffer {
    {
        let src = x.buffer.as_slice::<I>();
        output::<u32>(n_out, |out| {
            for_each_output(x, axes, |k, inner| {
                let (mut best, mut best_i, mut i) = (None::<I::Acc>, 0u32, 0u32);
                inner(&mut |j| {
                    let v = src[j].to_acc();
                    let better = match best {
                        None => true,
                        Some(b) if b.is_nan() => false,
                        Some(_) if v.is_nan() => true,
                        Some(b) => match op {
                            ArgReduceOp::ArgMax => v > b,
                            ArgReduceOp::ArgMin => v < b,
                        },
                    };
                    if better {
                        best = Some(v);
                        best_i = i;
                    }
                    i += 1;
                });
                out[k] = best_i;
            });
        })
    }
}
