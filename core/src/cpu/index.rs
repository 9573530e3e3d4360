//! Concatenate, gather and scatter on the host: strided walks that move elements
//! as bits (NaN payloads kept); scatter_add combines in the dtype's compute type
//! and rounds after each addition, in row-major order of the indices.

use super::scalar::{Compute, Store, with_store};
use super::strided::{self, walk};
use super::{CpuBackend, CpuBuffer};
use crate::layout::{numel, row_major_strides};
use crate::{Backend, Error, Result, ScatterOp, backend::View};

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::invalid("cpu backend", what()))
    }
}

/// `idx` read as an i64, negative values counted from the end of an axis of `n`:
/// `Some` when it addresses an element.
fn wrap(i: i64, n: i64) -> Option<i64> {
    let i = if i < 0 { i + n } else { i };
    (0..n).contains(&i).then_some(i)
}

pub(super) fn concatenate(inputs: &[View<'_, CpuBuffer>], axis: usize) -> Result<CpuBuffer> {
    let first = inputs
        .first()
        .ok_or_else(|| Error::invalid("concatenate", "no inputs"))?;
    let (dtype, nd) = (first.dtype, first.layout.ndim());
    let mut shape = first.layout.shape.clone();
    check(axis < nd, || {
        format!("concatenate axis {axis} of rank {nd}")
    })?;
    shape[axis] = 0;
    for x in inputs {
        let s = &x.layout.shape;
        check(
            x.dtype == dtype && s.len() == nd && (0..nd).all(|d| d == axis || s[d] == shape[d]),
            || {
                format!(
                    "concatenate of {:?} {s:?} onto {dtype:?} {shape:?}",
                    x.dtype
                )
            },
        )?;
        shape[axis] += s[axis];
    }
    let rm = row_major_strides(&shape);
    let mut out = CpuBuffer::uninit(numel(&shape) * dtype.size());
    let mut at = 0;
    for x in inputs {
        let l = x.layout;
        with_store!(dtype, T => {
            let (o, src) = (out.as_mut_slice::<T>(), x.buffer.as_slice::<T>());
            walk::<2>(&l.shape, [&rm, &l.strides], [at * rm[axis] as usize, l.offset],
                |[i, j]| o[i] = src[j]);
        });
        at += l.shape[axis];
    }
    Ok(out)
}

pub(super) fn gather(
    x: View<'_, CpuBuffer>,
    idx: View<'_, CpuBuffer>,
    axis: usize,
) -> Result<CpuBuffer> {
    let (xl, il) = (x.layout, idx.layout);
    let nd = il.ndim();
    check(
        idx.dtype.is_int()
            && xl.ndim() == nd
            && axis < nd
            && (0..nd).all(|d| d == axis || xl.shape[d] == il.shape[d]),
        || format!("gather of {:?} by {:?} {:?}", xl.shape, idx.dtype, il.shape),
    )?;
    let n = xl.shape[axis] as i64;
    let step = xl.strides[axis];
    let mut xs = xl.strides.clone();
    xs[axis] = 0;
    let mut out = CpuBuffer::uninit(il.numel() * x.dtype.size());
    with_store!(x.dtype, T => {
        let fill = T::from_const(crate::gather_fill(x.dtype));
        let (o, src) = (out.as_mut_slice::<T>(), x.buffer.as_slice::<T>());
        with_store!(idx.dtype, I => {
            let ids = idx.buffer.as_slice::<I>();
            let mut k = 0;
            walk::<2>(&il.shape, [&il.strides, &xs], [il.offset, xl.offset], |[i, j]| {
                o[k] = match wrap(ids[i].load().to_f64() as i64, n) {
                    Some(v) => src[(j as isize + v as isize * step) as usize],
                    None => fill,
                };
                k += 1;
            });
        });
    });
    Ok(out)
}

pub(super) fn scatter(
    be: &CpuBackend,
    op: ScatterOp,
    base: View<'_, CpuBuffer>,
    idx: View<'_, CpuBuffer>,
    upd: View<'_, CpuBuffer>,
    axis: usize,
) -> Result<CpuBuffer> {
    let (bl, il, ul) = (base.layout, idx.layout, upd.layout);
    let nd = bl.ndim();
    check(
        idx.dtype.is_int()
            && upd.dtype == base.dtype
            && il.shape == ul.shape
            && il.ndim() == nd
            && axis < nd
            && (0..nd).all(|d| d == axis || bl.shape[d] == il.shape[d]),
        || {
            format!(
                "{op} into {:?} by {:?} {:?} of {:?} {:?}",
                bl.shape, idx.dtype, il.shape, upd.dtype, ul.shape
            )
        },
    )?;
    let mut out = be.copy(base, base.dtype)?;
    let n = bl.shape[axis] as i64;
    let mut os = row_major_strides(&bl.shape);
    let step = os[axis];
    os[axis] = 0;
    with_store!(base.dtype, T => {
        let (o, us) = (out.as_mut_slice::<T>(), upd.buffer.as_slice::<T>());
        with_store!(idx.dtype, I => {
            let ids = idx.buffer.as_slice::<I>();
            walk::<3>(&il.shape, [&os, &il.strides, &ul.strides], [0, il.offset, ul.offset],
                |[t, i, u]| {
                    if let Some(v) = wrap(ids[i].load().to_f64() as i64, n) {
                        let t = (t as isize + v as isize * step) as usize;
                        o[t] = match op {
                            ScatterOp::Set => us[u],
                            ScatterOp::Add => T::store(o[t].load().add(us[u].load())),
                        };
                    }
                });
        });
    });
    Ok(out)
}

/// Stable argsort of each row along the last axis: NaN last, -0 equal to +0.
pub(super) fn argsort(x: View<'_, CpuBuffer>) -> Result<CpuBuffer> {
    use super::scalar::Wide;
    use std::cmp::Ordering;
    let l = x.layout;
    check(l.ndim() > 0, || {
        "argsort of a zero-dimensional array".into()
    })?;
    let nd = l.ndim();
    let n = l.shape[nd - 1];
    let step = l.strides[nd - 1];
    let mut rows = l.shape.clone();
    rows[nd - 1] = 1;
    let mut out = CpuBuffer::uninit(l.numel() * 4);
    let o = out.as_mut_slice::<u32>();
    let order = |a: &Wide, b: &Wide| match (a, b) {
        (Wide::I(a), Wide::I(b)) => a.cmp(b),
        (Wide::F(a), Wide::F(b)) => match (a.is_nan(), b.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => a.partial_cmp(b).unwrap_or(Ordering::Equal),
        },
        _ => Ordering::Equal,
    };
    with_store!(x.dtype, T => {
        let src = x.buffer.as_slice::<T>();
        let mut row_start = 0;
        strided::walk::<1>(&rows, [&l.strides], [l.offset], |[i]| {
            let vals: Vec<Wide> = (0..n)
                .map(|p| src[(i as isize + p as isize * step) as usize].wide())
                .collect();
            let mut idx: Vec<u32> = (0..n as u32).collect();
            idx.sort_by(|&a, &b| order(&vals[a as usize], &vals[b as usize]));
            o[row_start..row_start + n].copy_from_slice(&idx);
            row_start += n;
        });
    });
    Ok(out)
}
