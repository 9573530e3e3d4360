//! Batching rules: a node rebuilt on inputs that carry a leading batch axis.
//!
//! `f` is traced once on one example (views of the first example of each mapped
//! argument); every node that depends on a mapped argument is rebuilt with the
//! batch axis first. Inputs that are not mapped keep their example shape, which
//! numpy broadcasting lines up behind the batch axis for the elementwise families.

use super::jvp::{reshape_to, slice_spec};
use super::{Entry, active_graph, key, needed, trace};
use crate::{Array, Error, Primitive, Result, ViewOp, ops as o};
use rustc_hash::FxHashMap;

/// Moves axis `from` of `x` to position `to` (a view).
fn move_axis(x: &Array, from: usize, to: usize) -> Result<Array> {
    if from == to {
        return Ok(x.clone());
    }
    let mut perm: Vec<isize> = (0..x.ndim() as isize).collect();
    let a = perm.remove(from);
    perm.insert(to, a);
    o::transpose(x, Some(&perm))
}

/// `x` (of an example's shape) repeated along a new leading axis of `b` (a view).
fn broadcast_batch(x: &Array, b: usize) -> Result<Array> {
    let mut shape = vec![b];
    shape.extend_from_slice(x.shape());
    o::broadcast_to(&o::expand_dims(x, 0)?, &shape)
}

fn with_batch(b: usize, rest: &[usize]) -> Vec<usize> {
    let mut s = vec![b];
    s.extend_from_slice(rest);
    s
}

pub(super) fn vmap_impl<F>(
    f: &F,
    in_axes: &[Option<isize>],
    out_axes: &[isize],
    args: &[Array],
) -> Result<Vec<Array>>
where
    F: Fn(&[Array]) -> Result<Vec<Array>>,
{
    if in_axes.len() != args.len() {
        return Err(Error::invalid(
            "vmap",
            format!("{} in_axes for {} arguments", in_axes.len(), args.len()),
        ));
    }
    // Mapped arguments with their batch axis first, and the batch size.
    let mut batch: Option<(usize, usize)> = None; // (size, first argument with it)
    let mut moved: Vec<Option<Array>> = Vec::with_capacity(args.len());
    for (i, (x, ax)) in args.iter().zip(in_axes).enumerate() {
        let Some(ax) = ax else {
            moved.push(None);
            continue;
        };
        let a = crate::layout::normalize_axis("vmap", *ax, x.ndim())?;
        let n = x.shape()[a];
        match batch {
            Some((b, j)) if b != n => {
                return Err(Error::invalid(
                    "vmap",
                    format!(
                        "mapped axes differ in size: argument {j} has {b}, argument {i} has {n} (axis {ax})"
                    ),
                ));
            }
            None => batch = Some((n, i)),
            _ => {}
        }
        moved.push(Some(move_axis(x, a, 0)?));
    }
    let Some((b, _)) = batch else {
        return Err(Error::invalid(
            "vmap",
            "no argument is mapped (every in_axis is None)",
        ));
    };
    // One example per mapped argument: the first (or zeros for an empty batch).
    let examples: Vec<Array> = args
        .iter()
        .zip(&moved)
        .map(|(x, m)| match m {
            None => Ok(x.clone()),
            Some(m) if b > 0 => {
                let nd = m.ndim();
                let mut counts = m.shape().to_vec();
                counts[0] = 1;
                let first = o::slice_region(m, &vec![0; nd], &vec![1; nd], &counts);
                o::squeeze(&first, Some(&[0]))
            }
            Some(m) => crate::with_device(m.device(), || o::zeros(&m.shape()[1..], m.dtype())),
        })
        .collect::<Result<_>>()?;
    let (tracers, outputs) = trace(f, &examples)?;
    if out_axes.len() != outputs.len() && out_axes.len() != 1 {
        return Err(Error::invalid(
            "vmap",
            format!("{} out_axes for {} outputs", out_axes.len(), outputs.len()),
        ));
    }
    let mut batched: FxHashMap<*const (), Array> = FxHashMap::default();
    let mut sources = vec![];
    for (t, m) in tracers.iter().zip(&moved) {
        if let Some(m) = m {
            batched.insert(key(t), m.clone());
            sources.push(t.clone());
        }
    }
    let (order, _) = active_graph(&outputs, &sources);
    let order = needed(order, &outputs, |c| {
        super::custom_function::Node::reads(c, false)
    });
    for e in &order {
        let ins: Vec<(Array, bool)> = e
            .inputs
            .iter()
            .map(|i| match batched.get(&key(i)) {
                Some(bi) => (bi.clone(), true),
                None => (i.clone(), false),
            })
            .collect();
        let out = rule(e, &ins, b)?;
        batched.insert(key(&e.node), out);
    }
    outputs
        .iter()
        .enumerate()
        .map(|(j, y)| {
            let yb = match batched.get(&key(y)) {
                Some(yb) => yb.clone(),
                None => broadcast_batch(y, b)?,
            };
            let ax = out_axes[if out_axes.len() == 1 { 0 } else { j }];
            let to = crate::layout::normalize_axis("vmap", ax, yb.ndim())?;
            move_axis(&yb, 0, to)
        })
        .collect()
}

/// The one `match` on the primitive for vmap. `ins[i]` is input `i`, with a
/// leading batch axis of size `b` when its flag is set. Returns the node's batched
/// value, batch axis first.
fn rule(e: &Entry, ins: &[(Array, bool)], b: usize) -> Result<Array> {
    let y = &e.node;
    // Inputs of a family that needs every operand batched.
    let all_batched = || -> Result<Vec<Array>> {
        ins.iter()
            .map(|(x, m)| {
                if *m {
                    Ok(x.clone())
                } else {
                    broadcast_batch(x, b)
                }
            })
            .collect()
    };
    let x0 = &ins[0].0;
    let shift = |axes: &[usize]| -> Vec<isize> { axes.iter().map(|&a| a as isize + 1).collect() };
    Ok(match &e.prim {
        // Elementwise: unmapped inputs broadcast behind the batch axis.
        Primitive::Unary(op) => o::unary(*op, x0)?,
        Primitive::Binary(op) => o::binary(*op, x0, &ins[1].0)?,
        Primitive::Select => o::where_(x0, &ins[1].0, &ins[2].0)?,
        Primitive::Axpby { alpha, beta } => o::axpby(x0, &ins[1].0, *alpha, *beta)?,
        Primitive::Fused(k) => {
            // Elementwise over the batch axis; a reduction's axes move past it.
            let mut k = (**k).clone();
            if let Some((_, axes)) = &mut k.reduce {
                axes.iter_mut().for_each(|a| *a += 1);
            }
            let xs: Vec<Array> = ins.iter().map(|(x, _)| x.clone()).collect();
            k.expand(&xs)?
        }
        Primitive::Copy => {
            // Same dtype and device: the copy was for contiguity; keep it a copy.
            let moved = x0.to_device(y.device())?;
            if moved.dtype() == y.dtype() {
                o::contiguous(&moved)?
            } else {
                o::astype(&moved, y.dtype())?
            }
        }
        Primitive::Generate(_) => {
            return Err(Error::invalid("vmap", "a generator has no mapped input"));
        }
        // Batch dims broadcast in a product: an unmapped operand lines up behind
        // the batch axis like an elementwise one.
        Primitive::Matmul { alpha, beta } => {
            let c = ins.get(2).map(|(c, _)| c);
            o::matmul_nd(x0, &ins[1].0, c, *alpha, *beta)?
        }
        // Over the last axis: a batched input keeps it last. Batched parameters
        // ([B, L]) line up with the input through the unfused form.
        Primitive::Normalize { op, eps } => {
            let params: Vec<Array> = ins[1..].iter().map(|(p, _)| p.clone()).collect();
            if ins[1..].iter().all(|(_, m)| !m) {
                o::normalize_last(*op, x0, &params, *eps)?
            } else {
                let nd = x0.ndim().max(y.ndim() + 1);
                let ps: Vec<Array> = ins[1..]
                    .iter()
                    .map(|(p, m)| {
                        if !m {
                            return Ok(p.clone());
                        }
                        let mut s = vec![b as isize];
                        s.extend(std::iter::repeat_n(1, nd - 2));
                        s.push(-1);
                        o::reshape(p, &s)
                    })
                    .collect::<Result<_>>()?;
                o::normalize_composed(*op, x0, &ps, *eps)?
            }
        }
        Primitive::Reduce { op, axes } => o::reduce(*op, x0, Some(&shift(axes)), false)?,
        Primitive::ArgReduce { op, axis } => match op {
            crate::ArgReduceOp::ArgMax => o::argmax(x0, *axis as isize + 1, false)?,
            crate::ArgReduceOp::ArgMin => o::argmin(x0, *axis as isize + 1, false)?,
        },
        Primitive::View(v) => match v {
            ViewOp::Transpose(perm) => {
                let mut p = vec![0isize];
                p.extend(shift(perm));
                o::transpose(x0, Some(&p))?
            }
            ViewOp::Broadcast => {
                // Align the example's rank to the output's behind the batch axis.
                let lead = y.ndim() + 1 - x0.ndim();
                let mut s = vec![b];
                s.extend(std::iter::repeat_n(1, lead));
                s.extend_from_slice(&x0.shape()[1..]);
                o::broadcast_to(&reshape_to(x0, &s)?, &with_batch(b, y.shape()))?
            }
            ViewOp::Slice(spec) => {
                let (mut starts, mut steps) = slice_spec(spec);
                starts.insert(0, 0);
                steps.insert(0, 1);
                o::slice_region(x0, &starts, &steps, &with_batch(b, y.shape()))
            }
            ViewOp::Reshape => reshape_to(x0, &with_batch(b, y.shape()))?,
            ViewOp::StopGradient => o::stop_gradient(x0)?,
            ViewOp::AsReal => o::complex::as_real(x0),
            ViewOp::AsComplex => o::complex::as_complex(x0)?,
        },
        Primitive::SliceUpdate { starts, steps } => {
            let v = all_batched()?;
            let mut st = vec![0];
            st.extend_from_slice(starts);
            let mut sp = vec![1];
            sp.extend_from_slice(steps);
            o::slice_update_region(&v[0], &v[1], &st, &sp)?
        }
        // Every operand batched: shapes stay equal off the (shifted) axis.
        Primitive::Concatenate { axis } => {
            o::concat_node(all_batched()?, axis + 1, &with_batch(b, y.shape()))?
        }
        Primitive::Scan {
            op,
            axis,
            reverse,
            inclusive,
        } => o::scan_node(*op, x0, axis + 1, *reverse, *inclusive)?,
        // The batch axis is first: the last axis stays last.
        Primitive::ArgSort => o::argsort_node(x0)?,
        Primitive::Sort => o::sort_node(x0)?,
        // Batched keys [B, ..., 2] give each example its block of bits.
        Primitive::RandomBits => {
            crate::random::bits_node(x0, &with_batch(b, y.shape()), y.dtype())?
        }
        Primitive::Gather { axis } => {
            let v = all_batched()?;
            o::gather_node(&v[0], &v[1], axis + 1)?
        }
        Primitive::Scatter { op, axis } => {
            let v = all_batched()?;
            o::scatter_node(*op, &v[0], &v[1], &v[2], axis + 1)?
        }
        Primitive::Custom(c) => {
            let xs: Vec<Array> = ins.iter().map(|(x, _)| x.clone()).collect();
            let flags: Vec<bool> = ins.iter().map(|(_, m)| *m).collect();
            let out = c.vmap(&xs, &flags)?;
            let want = with_batch(b, y.shape());
            if out.shape() != want {
                return Err(Error::invalid(
                    "vmap",
                    format!(
                        "custom primitive {}: vmap returned shape {:?}, expected {want:?}",
                        c.name(),
                        out.shape()
                    ),
                ));
            }
            out
        }
    })
}
