//! Function transformations over the lazy graph (MLX's and JAX's model):
//! [`vjp`], [`jvp`], [`grad`], [`value_and_grad`], [`vmap`], and
//! [`stop_gradient`](crate::stop_gradient) as the way to cut a path.
//!
//! Each transform calls `f` on *tracers* (identity views of the arrays given: no
//! copy), walks the graph from `f`'s outputs back to the tracers, and applies one
//! rule per primitive: one `match` per transform, in the files `jvp.rs`, `vjp.rs`
//! and `vmap.rs`; the elementwise derivatives both differentiation modes use are in
//! `rules.rs`. `docs/TRANSFORMS.md` is the user's guide (conventions for ties,
//! zeros, integer dtypes). Rules build graph with ordinary ops,
//! so results are lazy, run on the arrays' devices, and can be transformed again
//! (grad of grad, vmap of grad, jvp of vjp).
//!
//! Nodes made while `f` runs keep their primitive and inputs when evaluated, so a
//! function that reads a value (`item`, `eval`) inside a transform is still
//! differentiated through it.

mod custom_function;
mod jvp;
mod rules;
mod vjp;
mod vmap;

pub use custom_function::CustomFunction;
pub(crate) use custom_function::Node as CustomNode;

use crate::{Array, Error, Primitive, Result, ViewOp};
use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::Cell;

thread_local! {
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// Reverse-mode traces (vjp, grad) running on this thread.
    static REVERSE: Cell<usize> = const { Cell::new(0) };
}

/// True while a reverse-mode transform (vjp, grad, value_and_grad) traces a
/// function on this thread: values made now may be read again by its backward
/// pass.
pub(crate) fn differentiating() -> bool {
    REVERSE.with(|d| d.get() > 0)
}

/// [`trace`] for reverse mode ([`differentiating`] holds while `f` runs).
fn trace_reverse(
    f: impl FnOnce(&[Array]) -> Result<Vec<Array>>,
    inputs: &[Array],
) -> Result<(Vec<Array>, Vec<Array>)> {
    counted(&REVERSE, || trace(f, inputs))
}

/// Runs `f` with the thread's count `depth` one higher (lowered again on return
/// and on unwind).
pub(crate) fn counted<R>(
    depth: &'static std::thread::LocalKey<Cell<usize>>,
    f: impl FnOnce() -> R,
) -> R {
    struct Leave(&'static std::thread::LocalKey<Cell<usize>>);
    impl Drop for Leave {
        fn drop(&mut self) {
            self.0.with(|d| d.set(d.get() - 1));
        }
    }
    depth.with(|d| d.set(d.get() + 1));
    let _leave = Leave(depth);
    f()
}

/// True while a transform is tracing a function on this thread.
pub(crate) fn tracing() -> bool {
    DEPTH.with(|d| d.get() > 0)
}

pub(crate) fn key(a: &Array) -> *const () {
    std::sync::Arc::as_ptr(&a.0) as *const ()
}

/// Calls `f` on fresh tracers for `inputs`; returns the tracers and the outputs.
pub(crate) fn trace(
    f: impl FnOnce(&[Array]) -> Result<Vec<Array>>,
    inputs: &[Array],
) -> Result<(Vec<Array>, Vec<Array>)> {
    // Nested traces count.
    counted(&DEPTH, || {
        let tracers: Vec<Array> = inputs
            .iter()
            .map(|x| {
                Array::from_op(
                    Primitive::View(ViewOp::Reshape),
                    vec![x.clone()],
                    x.layout().clone(),
                    x.dtype(),
                    x.device().clone(),
                )
            })
            .collect();
        let outputs = f(&tracers)?;
        Ok((tracers, outputs))
    })
}

/// One node between the sources and the outputs, with how it was made.
pub(crate) struct Entry {
    pub(crate) node: Array,
    pub(crate) prim: Primitive,
    pub(crate) inputs: Vec<Array>,
}

/// The nodes that depend on a source and lead to an output, inputs first, and the
/// set of every node that depends on a source (the sources included).
pub(crate) fn active_graph(
    outputs: &[Array],
    sources: &[Array],
) -> (Vec<Entry>, FxHashSet<*const ()>) {
    let mut active: FxHashSet<*const ()> = sources.iter().map(key).collect();
    let mut seen: FxHashSet<*const ()> = active.clone();
    let mut order = Vec::new();
    // (node, its primitive and inputs, next input to visit); iterative for deep graphs.
    let mut stack: Vec<(Array, Primitive, Vec<Array>, usize)> = Vec::new();
    let expand = |a: &Array| -> Option<(Primitive, Vec<Array>)> {
        // A node made before tracing began cannot depend on a tracer.
        if a.is_traced() { a.tape() } else { None }
    };
    for out in outputs {
        if !seen.insert(key(out)) {
            continue;
        }
        let Some((p, i)) = expand(out) else { continue };
        stack.push((out.clone(), p, i, 0));
        while let Some((_, _, inputs, next)) = stack.last_mut() {
            if *next < inputs.len() {
                let child = inputs[*next].clone();
                *next += 1;
                if seen.insert(key(&child))
                    && let Some((p, i)) = expand(&child)
                {
                    stack.push((child, p, i, 0));
                }
            } else {
                let (node, prim, inputs, _) = stack.pop().expect("non-empty");
                if inputs.iter().any(|i| active.contains(&key(i))) {
                    active.insert(key(&node));
                    order.push(Entry { node, prim, inputs });
                }
            }
        }
    }
    (order, active)
}

/// The entries of `order` (from [`active_graph`]) that `outputs` need in a
/// forward transform: a custom function with a rule for it (`reads` gives how many
/// leading inputs, its primals, that rule reads) does not need the nodes of its
/// forward computation, whose primitives may have no rule (a GPU kernel's).
pub(crate) fn needed(
    order: Vec<Entry>,
    outputs: &[Array],
    reads: impl Fn(&dyn crate::CustomPrimitive) -> Option<usize>,
) -> Vec<Entry> {
    let mut need: FxHashSet<*const ()> = outputs.iter().map(key).collect();
    let mut keep = vec![false; order.len()];
    for (i, e) in order.iter().enumerate().rev() {
        if !need.contains(&key(&e.node)) {
            continue;
        }
        keep[i] = true;
        let n = match &e.prim {
            Primitive::Custom(c) => reads(&**c).unwrap_or(e.inputs.len()),
            _ => e.inputs.len(),
        };
        need.extend(e.inputs[..n].iter().map(key));
    }
    order
        .into_iter()
        .zip(keep)
        .filter_map(|(e, k)| k.then_some(e))
        .collect()
}

/// A fused kernel as a function of its float inputs (the others held fixed), for
/// its rules: each transform differentiates the kernel's plain-op expansion.
fn fused_fn<'a>(
    k: &'a crate::FusedKernel,
    x: &'a [Array],
) -> (Vec<usize>, impl Fn(&[Array]) -> Result<Vec<Array>> + 'a) {
    let floats: Vec<usize> = (0..x.len()).filter(|&i| x[i].dtype().is_float()).collect();
    let at = floats.clone();
    let f = move |xs: &[Array]| {
        let mut all = x.to_vec();
        for (j, &i) in at.iter().enumerate() {
            all[i] = xs[j].clone();
        }
        Ok(vec![k.expand(&all)?])
    };
    (floats, f)
}

fn check_float(op: &'static str, what: &str, x: &Array) -> Result<()> {
    if x.dtype().is_inexact() {
        Ok(())
    } else {
        Err(Error::invalid(
            op,
            format!(
                "cannot differentiate with respect to {what} of dtype {} (only float arrays have derivatives)",
                x.dtype()
            ),
        ))
    }
}

fn check_seed(op: &'static str, what: &str, out: &Array, seed: &Array) -> Result<Array> {
    if seed.shape() != out.shape() {
        return Err(Error::invalid(
            op,
            format!(
                "{what} has shape {:?}, its primal {:?}",
                seed.shape(),
                out.shape()
            ),
        ));
    }
    crate::astype(&seed.to_device(out.device())?, out.dtype())
}

fn accumulate(map: &mut FxHashMap<*const (), Array>, at: &Array, g: Array) -> Result<()> {
    let k = key(at);
    let g = match map.remove(&k) {
        Some(prev) => crate::add(&prev, &g)?,
        None => g,
    };
    map.insert(k, g);
    Ok(())
}

/// Reverse mode: `f`'s outputs and the vector-Jacobian products of `cotangents`
/// (one per output, its shape) with respect to every primal.
///
/// Every primal must be a float array. A primal the outputs do not depend on gets
/// zeros. The results are lazy and on the primals' devices.
pub fn vjp<F>(f: F, primals: &[Array], cotangents: &[Array]) -> Result<(Vec<Array>, Vec<Array>)>
where
    F: FnOnce(&[Array]) -> Result<Vec<Array>>,
{
    for (i, p) in primals.iter().enumerate() {
        check_float("vjp", &format!("primal {i}"), p)?;
    }
    let (tracers, outputs) = trace_reverse(f, primals)?;
    let seeds: Vec<Option<Array>> = cotangents.iter().cloned().map(Some).collect();
    let grads = backward(&tracers, primals, &outputs, &seeds, "vjp")?;
    Ok((outputs, grads))
}

/// The reverse pass: cotangents of `tracers` given `seeds` for `outputs` (`None`:
/// no cotangent); zeros for tracers the seeded outputs do not depend on.
fn backward(
    tracers: &[Array],
    primals: &[Array],
    outputs: &[Array],
    seeds: &[Option<Array>],
    op: &'static str,
) -> Result<Vec<Array>> {
    if seeds.len() != outputs.len() {
        return Err(Error::invalid(
            op,
            format!("{} cotangents for {} outputs", seeds.len(), outputs.len()),
        ));
    }
    let (order, active) = active_graph(outputs, tracers);
    let mut cts: FxHashMap<*const (), Array> = FxHashMap::default();
    for (i, (o, s)) in outputs.iter().zip(seeds).enumerate() {
        if let Some(s) = s {
            let s = check_seed(op, &format!("cotangent {i}"), o, s)?;
            if active.contains(&key(o)) {
                accumulate(&mut cts, o, s)?;
            }
        }
    }
    // The cotangents of unit-step slices of an array, kept apart until the array's
    // turn: when they tile it along one axis (a split's backward) they are one
    // concatenation, not a zero array updated and added per piece.
    let mut pieces: FxHashMap<*const (), Vec<Piece>> = FxHashMap::default();
    for e in order.iter().rev() {
        let k = key(&e.node);
        let ct = match pieces.remove(&k) {
            Some(p) => Some(join_pieces(&e.node, cts.remove(&k), p)?),
            None => cts.remove(&k),
        };
        let Some(ct) = ct else {
            continue;
        };
        if let Primitive::View(ViewOp::Slice(spec)) = &e.prim
            && spec.iter().all(|s| s.2 == 1)
            && active.contains(&key(&e.inputs[0]))
        {
            let (starts, _) = jvp::slice_spec(spec);
            pieces
                .entry(key(&e.inputs[0]))
                .or_default()
                .push((starts, ct));
            continue;
        }
        let want: Vec<bool> = e.inputs.iter().map(|i| active.contains(&key(i))).collect();
        let grads = vjp::rule(e, &ct, &want)?;
        for ((inp, g), w) in e.inputs.iter().zip(grads).zip(&want) {
            if let (Some(g), true) = (g, *w) {
                accumulate(&mut cts, inp, g)?;
            }
        }
    }
    tracers
        .iter()
        .zip(primals)
        .map(|(t, p)| {
            let k = key(t);
            let g = match pieces.remove(&k) {
                Some(ps) => Some(join_pieces(t, cts.remove(&k), ps)?),
                None => cts.remove(&k),
            };
            g.map_or_else(|| crate::zeros_like(p), Ok)
        })
        .collect()
}

/// The cotangent of a unit-step slice starting at `.0`.
type Piece = (Vec<usize>, Array);

/// The cotangent of `x` from its slices' cotangents `ps` (and `dense`, the rest):
/// one concatenation where the slices tile `x` along one axis, else each slice's
/// cotangent placed in zeros and added.
fn join_pieces(x: &Array, dense: Option<Array>, mut ps: Vec<Piece>) -> Result<Array> {
    let shape = x.shape();
    // The one axis along which every piece is partial (whole along the others).
    let partial = |(st, ct): &Piece| -> Vec<usize> {
        (0..shape.len())
            .filter(|&d| st[d] != 0 || ct.shape()[d] != shape[d])
            .collect()
    };
    let axis = match partial(&ps[0])[..] {
        [a] => Some(a),
        _ => None,
    };
    let tiles = dense.is_none()
        && axis.is_some_and(|a| {
            ps.sort_by_key(|p| p.0[a]);
            let mut at = 0;
            ps.iter().all(|p| {
                let ok = partial(p) == [a] && p.0[a] == at;
                at += p.1.shape()[a];
                ok
            }) && at == shape[a]
        });
    if let (true, Some(a)) = (tiles, axis) {
        let parts: Vec<&Array> = ps.iter().map(|p| &p.1).collect();
        return crate::concatenate(&parts, a as isize);
    }
    let ones = vec![1isize; shape.len()];
    let mut acc = dense;
    for (st, ct) in ps {
        let g = crate::ops::slice_update_region(&crate::zeros_like(x)?, &ct, &st, &ones)?;
        acc = Some(match acc {
            Some(a) => crate::add(&a, &g)?,
            None => g,
        });
    }
    acc.ok_or_else(|| Error::invalid("vjp", "a cotangent with no part"))
}

/// Forward mode: `f`'s outputs and the Jacobian-vector products with `tangents`
/// (one per primal, its shape). Every primal must be a float array; an output that
/// does not depend on the primals gets zeros.
pub fn jvp<F>(f: F, primals: &[Array], tangents: &[Array]) -> Result<(Vec<Array>, Vec<Array>)>
where
    F: FnOnce(&[Array]) -> Result<Vec<Array>>,
{
    if tangents.len() != primals.len() {
        return Err(Error::invalid(
            "jvp",
            format!("{} tangents for {} primals", tangents.len(), primals.len()),
        ));
    }
    for (i, p) in primals.iter().enumerate() {
        check_float("jvp", &format!("primal {i}"), p)?;
    }
    let (tracers, outputs) = trace(f, primals)?;
    let mut tans: FxHashMap<*const (), Array> = FxHashMap::default();
    for (i, (t, v)) in tracers.iter().zip(tangents).enumerate() {
        tans.insert(key(t), check_seed("jvp", &format!("tangent {i}"), t, v)?);
    }
    let (order, _) = active_graph(&outputs, &tracers);
    let order = needed(order, &outputs, |c| custom_function::Node::reads(c, true));
    for e in &order {
        let ins: Vec<Option<Array>> = e
            .inputs
            .iter()
            .map(|i| tans.get(&key(i)).cloned())
            .collect();
        if let Some(t) = jvp::rule(e, &ins)? {
            tans.insert(key(&e.node), t);
        }
    }
    let out_t = outputs
        .iter()
        .map(|o| match tans.get(&key(o)) {
            Some(t) => Ok(t.clone()),
            None => crate::zeros_like(o),
        })
        .collect::<Result<_>>()?;
    Ok((outputs, out_t))
}

fn check_argnums(op: &'static str, argnums: &[usize], n: usize) -> Result<()> {
    if argnums.is_empty() {
        return Err(Error::invalid(op, "argnums is empty"));
    }
    for (k, &a) in argnums.iter().enumerate() {
        if a >= n {
            return Err(Error::invalid(
                op,
                format!("argnum {a} for a call with {n} arguments"),
            ));
        }
        if argnums[..k].contains(&a) {
            return Err(Error::invalid(op, format!("argnum {a} given twice")));
        }
    }
    Ok(())
}

/// `f(args)` and the gradient of its first output (a float array of one element)
/// with respect to `args[argnums]`. Further outputs ride along (auxiliary values).
fn value_and_grad_impl<F>(
    f: &F,
    argnums: &[usize],
    args: &[Array],
    op: &'static str,
) -> Result<(Vec<Array>, Vec<Array>)>
where
    F: Fn(&[Array]) -> Result<Vec<Array>>,
{
    check_argnums(op, argnums, args.len())?;
    for &a in argnums {
        check_float(op, &format!("argument {a}"), &args[a])?;
    }
    let primals: Vec<Array> = argnums.iter().map(|&a| args[a].clone()).collect();
    let call = |ps: &[Array]| -> Result<Vec<Array>> {
        let mut full = args.to_vec();
        for (&a, p) in argnums.iter().zip(ps) {
            full[a] = p.clone();
        }
        f(&full)
    };
    let (tracers, outputs) = trace_reverse(call, &primals)?;
    let Some(first) = outputs.first() else {
        return Err(Error::invalid(op, "the function returned no outputs"));
    };
    if first.size() != 1 || !first.dtype().is_float() {
        return Err(Error::invalid(
            op,
            format!(
                "the function's first output must be a float array of one element (a loss), got shape {:?} of {}",
                first.shape(),
                first.dtype()
            ),
        ));
    }
    let mut seeds = vec![None; outputs.len()];
    seeds[0] = Some(crate::ones_like(first)?);
    let grads = backward(&tracers, &primals, &outputs, &seeds, op)?;
    Ok((outputs, grads))
}

/// The gradient of `f`'s first output (a float array of one element, e.g. a loss)
/// with respect to the arguments at `argnums`, as a function of the arguments.
/// Further outputs of `f` are ignored; see [`value_and_grad`] to keep them.
///
/// ```
/// use wmx_core::{Array, Device, grad};
/// # fn main() -> wmx_core::Result<()> {
/// let x = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &Device::cpu())?;
/// // d/dx sum(x^2) = 2x
/// let df = grad(|a: &[Array]| Ok(vec![wmx_core::square(&a[0])?.sum(None, false)?]), &[0]);
/// assert_eq!(df(&[x])?[0].to_vec::<f32>()?, vec![2.0, 4.0, 6.0]);
/// # Ok(()) }
/// ```
pub fn grad<F>(f: F, argnums: &[usize]) -> impl Fn(&[Array]) -> Result<Vec<Array>> + use<F>
where
    F: Fn(&[Array]) -> Result<Vec<Array>>,
{
    let argnums = argnums.to_vec();
    move |args| Ok(value_and_grad_impl(&f, &argnums, args, "grad")?.1)
}

/// `f`'s outputs together with the gradient of its first output (see [`grad`]).
pub fn value_and_grad<F>(
    f: F,
    argnums: &[usize],
) -> impl Fn(&[Array]) -> Result<(Vec<Array>, Vec<Array>)> + use<F>
where
    F: Fn(&[Array]) -> Result<Vec<Array>>,
{
    let argnums = argnums.to_vec();
    move |args| value_and_grad_impl(&f, &argnums, args, "value_and_grad")
}

/// [`grad`] for a function of one array to a one-element float array.
pub fn grad1<F>(f: F) -> impl Fn(&Array) -> Result<Array> + use<F>
where
    F: Fn(&Array) -> Result<Array>,
{
    let g = grad(move |a: &[Array]| Ok(vec![f(&a[0])?]), &[0]);
    move |x| Ok(g(std::slice::from_ref(x))?.remove(0))
}

/// [`value_and_grad`] for a function of one array to a one-element float array.
pub fn value_and_grad1<F>(f: F) -> impl Fn(&Array) -> Result<(Array, Array)> + use<F>
where
    F: Fn(&Array) -> Result<Array>,
{
    let g = value_and_grad(move |a: &[Array]| Ok(vec![f(&a[0])?]), &[0]);
    move |x| {
        let (mut v, mut d) = g(std::slice::from_ref(x))?;
        Ok((v.remove(0), d.remove(0)))
    }
}

/// Vectorises `f` over an axis: `in_axes[i]` is the mapped axis of argument `i`
/// (`None`: not mapped, the same array for every example; negative counts from the
/// end), `out_axes[j]` where output `j` gets the mapped axis (one entry applies to
/// every output). Every mapped argument must have the same size on its axis.
///
/// `f` is traced once on one example and the graph is rewritten to run on the
/// whole batch at once (no loop).
pub fn vmap<F>(
    f: F,
    in_axes: &[Option<isize>],
    out_axes: &[isize],
) -> impl Fn(&[Array]) -> Result<Vec<Array>> + use<F>
where
    F: Fn(&[Array]) -> Result<Vec<Array>>,
{
    let (in_axes, out_axes) = (in_axes.to_vec(), out_axes.to_vec());
    move |args| vmap::vmap_impl(&f, &in_axes, &out_axes, args)
}

/// [`vmap`] for a function of one array to one array.
pub fn vmap1<F>(f: F, in_axis: isize, out_axis: isize) -> impl Fn(&Array) -> Result<Array> + use<F>
where
    F: Fn(&Array) -> Result<Array>,
{
    let g = vmap(
        move |a: &[Array]| Ok(vec![f(&a[0])?]),
        &[Some(in_axis)],
        &[out_axis],
    );
    move |x| Ok(g(std::slice::from_ref(x))?.remove(0))
}
