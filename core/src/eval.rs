//! Evaluation of the lazy graph.

use crate::{Array, Buffer, Device, Primitive, Result, array::State, backend::DynView};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

/// Computes `outputs` and everything they need that is not computed yet.
///
/// The graph is walked iteratively (a 200 000-node chain is fine), each node is
/// computed once however many consumers it has, and an intermediate is released
/// as soon as its last consumer in this eval is done (if the user holds no handle
/// to it, its buffer goes back then). Every device used is flushed once at the end.
/// On error, nodes computed so far keep their data and the rest stay pending.
pub fn eval(outputs: &[Array]) -> Result<()> {
    if let Err(e) = crate::compile::env_mode() {
        return Err(e.clone());
    }
    let (mut order, mut index) = topo_order(outputs);
    if order.is_empty() {
        return Ok(());
    }
    if crate::compile::compiling() && order.iter().any(|(n, _)| n.is_traced()) {
        return Err(crate::compile::evaluated_while_compiling());
    }
    // Compiled mode: fuse the pending elementwise chains, then walk the new graph
    // (unless a compiled function's replay made all of it: its plan fused it).
    if order.len() > 1
        && crate::compile::mode() == crate::Mode::Compiled
        && !crate::transforms::tracing()
        && !order.iter().all(|(n, _)| n.0.planned)
        && crate::compile::fuse_pending(&order)
    {
        drop((order, index));
        (order, index) = topo_order(outputs);
    }
    // Pending consumers of each node within this eval; outputs are never released.
    let mut uses = vec![0usize; order.len()];
    for (_, inputs) in &order {
        for inp in inputs {
            if let Some(&j) = index.get(&key(inp)) {
                uses[j] += 1;
            }
        }
    }
    for o in outputs {
        if let Some(&j) = index.get(&key(o)) {
            uses[j] += 1;
        }
    }

    let mut slots: Vec<Option<Step>> = order.into_iter().map(Some).collect();
    let mut devices: Vec<Device> = Vec::new();
    let mut result = Ok(());
    for i in 0..slots.len() {
        let (node, inputs) = slots[i].take().expect("each node visited once");
        if !devices.contains(node.device()) {
            devices.push(node.device().clone());
        }
        if let Err(e) = compute(&node, &inputs) {
            result = Err(e);
            break;
        }
        // Release producers nobody in this eval needs any more.
        for inp in &inputs {
            if let Some(&j) = index.get(&key(inp)) {
                uses[j] -= 1;
                if uses[j] == 0 {
                    slots[j] = None;
                }
            }
        }
        drop(inputs);
        if uses[i] > 0 {
            slots[i] = Some((node, Inputs::new()));
        }
    }
    for d in devices {
        let r = d.backend().flush();
        if result.is_ok() {
            result = r;
        }
    }
    result
}

fn key(a: &Array) -> *const () {
    std::sync::Arc::as_ptr(&a.0) as *const ()
}

/// A pending node and its inputs.
pub(crate) type Step = (Array, Inputs);

/// A node's inputs as eval holds them (inline up to four).
pub(crate) type Inputs = SmallVec<[Array; 4]>;

/// Pending nodes reachable from `outputs`, inputs before consumers, each with its
/// inputs (cloned handles, so computing one node never locks another), and each
/// node's position in that order (pointer-keyed, FxHash: hashed several times per
/// node).
fn topo_order(outputs: &[Array]) -> (Vec<Step>, FxHashMap<*const (), usize>) {
    let mut order = Vec::new();
    // usize::MAX while a node is on the stack, then its position in `order`.
    let mut index: FxHashMap<*const (), usize> = FxHashMap::default();
    // (node, its pending inputs, next input to visit)
    let mut stack: Vec<(Array, Inputs, usize)> = Vec::new();
    for out in outputs {
        if index.contains_key(&key(out)) {
            continue;
        }
        let Some(inputs) = pending_inputs(out) else {
            continue;
        };
        index.insert(key(out), usize::MAX);
        stack.push((out.clone(), inputs, 0));
        while let Some((_, inputs, next)) = stack.last_mut() {
            if *next < inputs.len() {
                let child = &inputs[*next];
                *next += 1;
                if index.contains_key(&key(child)) {
                    continue;
                }
                if let Some(ci) = pending_inputs(child) {
                    let child = child.clone();
                    index.insert(key(&child), usize::MAX);
                    stack.push((child, ci, 0));
                }
            } else {
                let (node, inputs, _) = stack.pop().unwrap();
                index.insert(key(&node), order.len());
                order.push((node, inputs));
            }
        }
    }
    (order, index)
}

fn pending_inputs(a: &Array) -> Option<Inputs> {
    match &*a.lock() {
        State::Pending { inputs, .. } => Some(inputs.iter().cloned().collect()),
        State::Ready { .. } => None,
    }
}

/// The one place a primitive is dispatched to its backend family.
fn compute(node: &Array, inputs: &[Array]) -> Result<()> {
    let prim = match &*node.lock() {
        State::Pending { prim, .. } => prim.clone(),
        State::Ready { .. } => return Ok(()), // another thread computed it
    };
    let device = node.device();
    let be = device.backend();
    // Inline for up to four inputs: a step's evals make hundreds of these.
    let bufs: SmallVec<[Buffer; 4]> = inputs
        .iter()
        .map(|a| {
            if a.device() != device && !matches!(prim, Primitive::Copy) {
                crate::device::count_implicit_move(a.nbytes());
            }
            input_buffer(a, device)
        })
        .collect::<Result<_>>()?;
    let views: SmallVec<[DynView<'_>; 4]> = (0..inputs.len())
        .map(|i| DynView {
            buffer: &bufs[i],
            dtype: inputs[i].dtype(),
            layout: inputs[i].layout(),
        })
        .collect();
    // Inside `catching_oom`: a host allocation that fails is this node's Err.
    let run = || -> Result<Buffer> {
        if node.size() == 0 {
            // Nothing to compute (the other dimensions of an empty array may be
            // huge: no backend sees such shapes).
            return be.from_host(Vec::new(), node.dtype());
        }
        match &prim {
            Primitive::View(_) => Ok(bufs[0].clone()),
            // A custom function's output: the output of its body, as a view is.
            Primitive::Custom(c) => match crate::transforms::CustomNode::forwarded(&**c) {
                Some(k) => Ok(bufs[k].clone()),
                None => be.compute(&prim, &views, node.shape(), node.dtype()),
            },
            _ => be.compute(&prim, &views, node.shape(), node.dtype()),
        }
    };
    let out = crate::cpu::alloc::catching_oom(device, run)?;
    let mut st = node.lock();
    if matches!(*st, State::Pending { .. }) {
        let kept = node.is_traced().then(|| Box::new((prim, inputs.to_vec())));
        *st = State::Ready { buffer: out, kept };
    }
    Ok(())
}

/// An input's buffer on `device`, moved through the host if it lives elsewhere.
fn input_buffer(a: &Array, device: &Device) -> Result<Buffer> {
    let buf = a.buffer().expect("inputs are computed before consumers");
    if a.device() == device {
        return Ok(buf);
    }
    let bytes = a.device().backend().read(&buf)?;
    device.backend().from_host((*bytes).clone(), a.dtype())
}
