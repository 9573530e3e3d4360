//! The collectives as lazy ops: one custom primitive, [`Collective`], whose CPU
//! code serves every device (a GPU's backend stages it through the host), with its
//! transform rules.

use super::{Group, Reduce, describe, error, header, header_bytes};
use crate::cpu::CpuBuffer;
use crate::{Array, CpuOutput, CustomPrimitive, DType, Result, View};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    All(Reduce),
    Gather,
    ReduceScatter,
    Broadcast(usize),
    Send(usize),
    Recv(usize),
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::All(Reduce::Sum) => "all_sum",
            Kind::All(Reduce::Max) => "all_max",
            Kind::All(Reduce::Min) => "all_min",
            Kind::Gather => "all_gather",
            Kind::ReduceScatter => "reduce_scatter",
            Kind::Broadcast(_) => "broadcast",
            Kind::Send(_) => "send",
            Kind::Recv(_) => "recv",
        }
    }

    fn code(self) -> u64 {
        match self {
            Kind::All(Reduce::Sum) => 1,
            Kind::All(Reduce::Max) => 2,
            Kind::All(Reduce::Min) => 3,
            Kind::Gather => 4,
            Kind::ReduceScatter => 5,
            Kind::Broadcast(_) => 6,
            Kind::Send(_) | Kind::Recv(_) => 7,
        }
    }
}

/// One collective of `group` on this rank.
#[derive(Debug)]
struct Collective {
    kind: Kind,
    group: Group,
}

/// The contiguous bytes of a view.
fn bytes<'a>(v: &'a View<'_, CpuBuffer>) -> &'a [u8] {
    let n = v.layout.shape.iter().product::<usize>() * v.dtype.size();
    &v.buffer.bytes()[v.layout.offset * v.dtype.size()..][..n]
}

impl CustomPrimitive for Collective {
    fn name(&self) -> &str {
        self.kind.name()
    }

    fn eval_on_host(&self) -> bool {
        true
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let Some(c) = self.group.comm() else {
            return Err(error(self.kind.name(), "a group of one has no peers"));
        };
        let op = self.kind.name();
        let n_out = out.buffer.bytes().len();
        let o = &mut out.buffer.bytes_mut()[..n_out];
        if let Kind::Recv(src) = self.kind {
            let want = header(self.kind.code(), out.dtype, out.shape, 0);
            let got = c.recv(src, o, header_bytes);
            if got != want {
                return Err(error(
                    "recv",
                    format!(
                        "rank {} expected {} from rank {src}, which sent {}",
                        self.group.rank(),
                        describe(&want),
                        describe(&got)
                    ),
                ));
            }
            return Ok(());
        }
        let x = &inputs[0];
        let xb = bytes(x);
        if let Kind::Send(dst) = self.kind {
            c.send(
                dst,
                &header(self.kind.code(), x.dtype, &x.layout.shape, 0),
                xb,
            );
            o.copy_from_slice(xb);
            return Ok(());
        }
        let root = match self.kind {
            Kind::Broadcast(r) => r,
            _ => 0,
        };
        let mine = header(self.kind.code(), x.dtype, &x.layout.shape, root);
        let all = c.headers(&mine);
        if all.iter().any(|h| *h != mine) {
            let sides: Vec<String> = all
                .iter()
                .enumerate()
                .map(|(r, h)| {
                    let what = if h[0] == mine[0] {
                        describe(h)
                    } else {
                        format!("another collective ({})", describe(h))
                    };
                    let root = if h[0] == Kind::Broadcast(0).code() {
                        format!(" from root {}", h[2])
                    } else {
                        String::new()
                    };
                    format!("rank {r}: {what}{root}")
                })
                .collect();
            return Err(error(
                op,
                format!("the ranks disagree: {}", sides.join("; ")),
            ));
        }
        match self.kind {
            Kind::All(r) => c.all_reduce(r, x.dtype, xb, o),
            Kind::Gather => c.all_gather(xb, o),
            Kind::ReduceScatter => c.reduce_scatter(x.dtype, xb, o),
            Kind::Broadcast(r) => {
                if self.group.rank() == r {
                    o.copy_from_slice(xb);
                }
                c.broadcast(r, o);
            }
            Kind::Send(_) | Kind::Recv(_) => unreachable!("handled above"),
        }
        Ok(())
    }

    fn jvp(
        &self,
        primals: &[Array],
        output: &Array,
        tangents: &[Option<Array>],
    ) -> Result<Option<Array>> {
        let Some(t) = tangents.first().cloned().flatten() else {
            return Ok(None);
        };
        let g = &self.group;
        Ok(Some(match self.kind {
            Kind::All(Reduce::Sum) => all_sum(&t, g)?,
            Kind::All(_) => {
                let (mask, count) = extremes(&primals[0], output, g)?;
                crate::divide(&all_sum(&crate::multiply(&t, &mask)?, g)?, &count)?
            }
            Kind::Gather => all_gather(&t, g)?,
            Kind::ReduceScatter => reduce_scatter(&t, g)?,
            Kind::Broadcast(root) => broadcast(&t, root, g)?,
            Kind::Send(_) | Kind::Recv(_) => return Err(no_rule(self.kind, "jvp")),
        }))
    }

    fn vjp(&self, primals: &[Array], output: &Array, ct: &Array) -> Result<Vec<Option<Array>>> {
        let g = &self.group;
        let x = &primals[0];
        let grad = match self.kind {
            Kind::All(Reduce::Sum) => all_sum(ct, g)?,
            Kind::All(_) => {
                let (mask, count) = extremes(x, output, g)?;
                crate::divide(&crate::multiply(&all_sum(ct, g)?, &mask)?, &count)?
            }
            Kind::Gather => {
                let s = reduce_scatter(ct, g)?;
                crate::reshape(&s, &signed(x.shape()))?
            }
            Kind::ReduceScatter => all_gather(ct, g)?,
            Kind::Broadcast(root) => {
                // Every rank takes part in the sum; only the root keeps it.
                let s = all_sum(ct, g)?;
                let keep = crate::full(&[], (g.rank() == root) as u8 as f64, DType::Bool)?;
                crate::where_(&keep, &s, &crate::zeros_like(&s)?)?
            }
            Kind::Send(_) | Kind::Recv(_) => return Err(no_rule(self.kind, "vjp")),
        };
        Ok(vec![Some(grad)])
    }

    fn vmap(&self, inputs: &[Array], _batched: &[bool]) -> Result<Array> {
        let g = &self.group;
        let x = &inputs[0];
        match self.kind {
            Kind::All(r) => reduce(x, g, r),
            Kind::Broadcast(root) => broadcast(x, root, g),
            Kind::Send(dst) => send(x, dst, g),
            // The batch axis goes second, out of the way of the rank blocks.
            Kind::Gather | Kind::ReduceScatter => {
                let f = if self.kind == Kind::Gather {
                    all_gather
                } else {
                    reduce_scatter
                };
                if x.ndim() == 1 {
                    let y = f(&crate::reshape(x, &[1, -1])?, g)?;
                    return crate::transpose(&y, None);
                }
                crate::swapaxes(&f(&crate::swapaxes(x, 0, 1)?, g)?, 0, 1)
            }
            Kind::Recv(_) => Err(no_rule(self.kind, "vmap")),
        }
    }
}

/// Where `x` holds the group's extreme `y`, as `x`'s dtype, and how many ranks do.
fn extremes(x: &Array, y: &Array, g: &Group) -> Result<(Array, Array)> {
    let mask = crate::astype(&crate::equal(x, y)?, x.dtype())?;
    let count = all_sum(&mask, g)?;
    Ok((mask, count))
}

fn no_rule(kind: Kind, rule: &str) -> crate::Error {
    error(
        "transform",
        format!(
            "{} has no {rule} rule: point-to-point messages are not differentiated \
             (use all_gather or all_sum)",
            kind.name()
        ),
    )
}

fn signed(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&d| d as isize).collect()
}

/// `x`'s collective `kind` over `g`, of result shape `shape`, on `x`'s device (a
/// GPU's backend runs it on the host: [`CustomPrimitive::eval_on_host`]).
fn run(kind: Kind, x: &Array, g: &Group, shape: &[usize]) -> Result<Array> {
    if x.dtype().is_complex() {
        let mut pairs = shape.to_vec();
        pairs.push(2);
        return crate::ops::complex::on_pairs(x, |r| run(kind, r, g, &pairs));
    }
    let prim = Arc::new(Collective {
        kind,
        group: g.clone(),
    });
    crate::with_device(x.device(), || {
        crate::custom(prim, &[crate::contiguous(x)?], shape, x.dtype())
    })
}

fn reduce(x: &Array, g: &Group, r: Reduce) -> Result<Array> {
    if x.dtype().is_complex() && r != Reduce::Sum {
        return Err(crate::ops::complex::unsupported(Kind::All(r).name()));
    }
    if g.size() == 1 {
        return Ok(x.clone());
    }
    run(Kind::All(r), x, g, x.shape())
}

/// The elementwise sum of `x` over every rank of `group`, on every rank (MPI's
/// all-reduce). Booleans saturate (a logical or); integers wrap; f16 and bf16 are
/// summed in f32 and rounded once.
pub fn all_sum(x: &Array, group: &Group) -> Result<Array> {
    reduce(x, group, Reduce::Sum)
}

/// The elementwise maximum of `x` over every rank of `group` (NaN as MPI's
/// `MPI_MAX` treats it: unspecified).
pub fn all_max(x: &Array, group: &Group) -> Result<Array> {
    reduce(x, group, Reduce::Max)
}

/// The elementwise minimum of `x` over every rank of `group`.
pub fn all_min(x: &Array, group: &Group) -> Result<Array> {
    reduce(x, group, Reduce::Min)
}

/// Every rank's `x` (the same shape on each), concatenated along axis 0 in rank
/// order; a scalar gathers to shape `[size]`.
pub fn all_gather(x: &Array, group: &Group) -> Result<Array> {
    let mut shape = x.shape().to_vec();
    if shape.is_empty() {
        shape.push(group.size());
    } else {
        shape[0] *= group.size();
    }
    if group.size() == 1 {
        return crate::reshape(x, &signed(&shape));
    }
    run(Kind::Gather, x, group, &shape)
}

/// The sum of every rank's `x`, split along axis 0 into `size` blocks; rank `r`
/// gets block `r`. Axis 0 must divide evenly by the group's size.
pub fn reduce_scatter(x: &Array, group: &Group) -> Result<Array> {
    let n = group.size();
    let Some(&d0) = x.shape().first() else {
        return Err(error(
            "reduce_scatter",
            "a scalar cannot be split among ranks",
        ));
    };
    if !d0.is_multiple_of(n) {
        return Err(error(
            "reduce_scatter",
            format!(
                "axis 0 of shape {:?} does not split into {n} equal blocks",
                x.shape()
            ),
        ));
    }
    if n == 1 {
        return Ok(x.clone());
    }
    let mut shape = x.shape().to_vec();
    shape[0] = d0 / n;
    run(Kind::ReduceScatter, x, group, &shape)
}

/// Rank `root`'s `x` on every rank (the others' `x` gives the shape and dtype, which
/// must match the root's).
pub fn broadcast(x: &Array, root: usize, group: &Group) -> Result<Array> {
    check_rank("broadcast", root, group, false)?;
    if group.size() == 1 {
        return Ok(x.clone());
    }
    run(Kind::Broadcast(root), x, group, x.shape())
}

/// Sends `x` to rank `dst` when the result is evaluated; the result is `x` (keep
/// it and evaluate it: an unevaluated send sends nothing). The evaluation returns
/// once MPI has buffered the message or the receiver has taken it, so pair sends
/// and receives so that each meets its partner (in a ring, even ranks send first
/// and odd ranks receive first).
pub fn send(x: &Array, dst: usize, group: &Group) -> Result<Array> {
    check_rank("send", dst, group, true)?;
    run(Kind::Send(dst), x, group, x.shape())
}

/// An array of `shape` and `dtype` received from rank `src` when evaluated, on
/// the default device. The sender's shape and dtype must match (an `Err` otherwise).
pub fn recv(shape: &[usize], dtype: DType, src: usize, group: &Group) -> Result<Array> {
    check_rank("recv", src, group, true)?;
    if dtype.is_complex() {
        let mut pairs = shape.to_vec();
        pairs.push(2);
        return crate::ops::complex::as_complex(&recv(&pairs, DType::F32, src, group)?);
    }
    let prim = Arc::new(Collective {
        kind: Kind::Recv(src),
        group: group.clone(),
    });
    crate::custom(prim, &[], shape, dtype)
}

/// [`recv`] of `like`'s shape and dtype, onto `like`'s device.
pub fn recv_like(like: &Array, src: usize, group: &Group) -> Result<Array> {
    crate::with_device(like.device(), || {
        recv(like.shape(), like.dtype(), src, group)
    })
}

fn check_rank(op: &'static str, r: usize, g: &Group, not_self: bool) -> Result<()> {
    if r >= g.size() {
        return Err(error(
            op,
            format!("rank {r} is not in a group of {}", g.size()),
        ));
    }
    if not_self && r == g.rank() {
        return Err(error(op, format!("rank {r} cannot message itself")));
    }
    Ok(())
}
