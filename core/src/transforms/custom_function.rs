//! Functions of arrays with derivative and batching rules of their own: MLX's
//! `custom_function`, JAX's `custom_vjp`/`custom_jvp`.
//!
//! Calling one runs `f`, then wraps each output in a node that is the output
//! itself when evaluated (no copy, like a view) but whose transform rules are the
//! user's. The node's inputs are `f`'s inputs followed by `f`'s outputs, so a
//! missing rule falls back to differentiating (or batching) `f` as written.

use crate::{Array, CustomPrimitive, Error, Primitive, Result, ops as o};
use std::fmt;
use std::sync::Arc;

type Fun = dyn Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync;
type VjpRule = dyn Fn(&[Array], &[Array], &[Array]) -> Result<Vec<Option<Array>>> + Send + Sync;
type JvpRule = dyn Fn(&[Array], &[Option<Array>]) -> Result<Vec<Array>> + Send + Sync;
type VmapRule = dyn Fn(&[Array], &[bool]) -> Result<Vec<Array>> + Send + Sync;

/// A function of arrays with its own `vjp`, `jvp` and `vmap` rules.
///
/// ```
/// use wmx_core::{Array, CustomFunction, Device, Result};
/// # fn main() -> Result<()> {
/// // log(1 + exp(x)) with a gradient that stays finite for large x.
/// let softplus = CustomFunction::new(|x: &[Array]| {
///     Ok(vec![wmx_core::log1p(&wmx_core::exp(&x[0])?)?])
/// })
/// .vjp(|x, _out, ct| Ok(vec![Some(wmx_core::multiply(&ct[0], &wmx_core::sigmoid(&x[0])?)?)]));
/// let x = Array::from_slice_on(&[0.0f32, 200.0], &[2], &Device::cpu())?;
/// let g = wmx_core::grad(|a: &[Array]| Ok(vec![wmx_core::sum(&softplus.call(a)?[0], None, false)?]), &[0])(&[x])?;
/// assert_eq!(g[0].to_vec::<f32>()?, vec![0.5, 1.0]);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CustomFunction {
    name: String,
    f: Arc<Fun>,
    vjp: Option<Arc<VjpRule>>,
    jvp: Option<Arc<JvpRule>>,
    vmap: Option<Arc<VmapRule>>,
}

impl fmt::Debug for CustomFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustomFunction")
            .field("name", &self.name)
            .field("vjp", &self.vjp.is_some())
            .field("jvp", &self.jvp.is_some())
            .field("vmap", &self.vmap.is_some())
            .finish()
    }
}

impl CustomFunction {
    /// Wraps `f` (its inputs to its outputs). Without rules it behaves as `f`.
    pub fn new<F>(f: F) -> CustomFunction
    where
        F: Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync + 'static,
    {
        CustomFunction {
            name: "custom_function".into(),
            f: Arc::new(f),
            vjp: None,
            jvp: None,
            vmap: None,
        }
    }

    /// Names the function in errors.
    pub fn name(mut self, name: &str) -> CustomFunction {
        self.name = name.into();
        self
    }

    /// Reverse mode: `rule(primals, outputs, cotangents)` gives each primal's
    /// cotangent (`None`: zero). With several outputs it is called once per output
    /// that receives a cotangent, the others' cotangents zero (their sum is the
    /// full vjp, by linearity).
    pub fn vjp<R>(mut self, rule: R) -> CustomFunction
    where
        R: Fn(&[Array], &[Array], &[Array]) -> Result<Vec<Option<Array>>> + Send + Sync + 'static,
    {
        self.vjp = Some(Arc::new(rule));
        self
    }

    /// Forward mode: `rule(primals, tangents)` gives each output's tangent
    /// (`tangents[i]` `None`: zero).
    pub fn jvp<R>(mut self, rule: R) -> CustomFunction
    where
        R: Fn(&[Array], &[Option<Array>]) -> Result<Vec<Array>> + Send + Sync + 'static,
    {
        self.jvp = Some(Arc::new(rule));
        self
    }

    /// Both derivative rules from `reference`: a function of the same inputs that
    /// computes the same outputs with differentiable ops (a fused kernel's
    /// composed form). Its vjp and jvp are the function's, so derived graphs of
    /// any order differentiate `reference`, never the fused code.
    pub fn rules_from<R>(self, reference: R) -> CustomFunction
    where
        R: Fn(&[Array]) -> Result<Vec<Array>> + Send + Sync + Clone + 'static,
    {
        let r = reference.clone();
        self.vjp(move |x, _, ct| {
            let (_, g) = crate::vjp(&r, x, ct)?;
            Ok(g.into_iter().map(Some).collect())
        })
        .jvp(move |x, t| {
            let t: Vec<Array> = x
                .iter()
                .zip(t)
                .map(|(x, t)| t.clone().map_or_else(|| o::zeros_like(x), Ok))
                .collect::<Result<_>>()?;
            Ok(crate::jvp(&reference, x, &t)?.1)
        })
    }

    /// Batching: `rule(inputs, batched)` gives the outputs for inputs whose batch
    /// axis (where `batched[i]`) is first, each output with its batch axis first.
    /// Without it, vmap batches `f` as written (and the custom vjp/jvp are not
    /// used inside that vmap).
    pub fn vmap<R>(mut self, rule: R) -> CustomFunction
    where
        R: Fn(&[Array], &[bool]) -> Result<Vec<Array>> + Send + Sync + 'static,
    {
        self.vmap = Some(Arc::new(rule));
        self
    }

    /// Runs the function: its outputs, which carry the rules into transforms.
    pub fn call(&self, inputs: &[Array]) -> Result<Vec<Array>> {
        let outs = (self.f)(inputs)?;
        if self.vjp.is_none() && self.jvp.is_none() && self.vmap.is_none() {
            return Ok(outs);
        }
        let mut node_inputs = inputs.to_vec();
        node_inputs.extend(outs.iter().cloned());
        let fun = Arc::new(self.clone());
        outs.iter()
            .enumerate()
            .map(|(i, y)| {
                let node = Node {
                    fun: fun.clone(),
                    primals: inputs.len(),
                    outputs: outs.len(),
                    index: i,
                };
                // Eager mode computes it at once, as every op.
                crate::compile::made(Array::from_op(
                    Primitive::Custom(Arc::new(node)),
                    node_inputs.clone(),
                    y.layout().clone(),
                    y.dtype(),
                    y.device().clone(),
                ))
            })
            .collect()
    }
}

/// Output `index` of a custom function: in eval, input `primals + index` itself.
#[derive(Debug)]
pub(crate) struct Node {
    fun: Arc<CustomFunction>,
    primals: usize,
    outputs: usize,
    index: usize,
}

impl Node {
    /// The input whose buffer (and layout) this node is, if `c` is such a node.
    pub(crate) fn forwarded(c: &dyn CustomPrimitive) -> Option<usize> {
        (c as &dyn std::any::Any)
            .downcast_ref::<Node>()
            .map(|n| n.primals + n.index)
    }

    /// How many leading inputs (the primals) the jvp (`jvp`) or vmap rule of
    /// `c` reads, if `c` is a node of a function with that rule.
    pub(crate) fn reads(c: &dyn CustomPrimitive, jvp: bool) -> Option<usize> {
        let n = (c as &dyn std::any::Any).downcast_ref::<Node>()?;
        let has = if jvp {
            n.fun.jvp.is_some()
        } else {
            n.fun.vmap.is_some()
        };
        has.then_some(n.primals)
    }

    fn count(&self, rule: &str, got: usize, want: usize) -> Result<()> {
        if got == want {
            return Ok(());
        }
        Err(Error::Invalid {
            op: "custom_function",
            msg: format!(
                "{}: the {rule} rule returned {got} arrays, expected {want}",
                self.fun.name
            ),
        })
    }
}

impl CustomPrimitive for Node {
    fn name(&self) -> &str {
        &self.fun.name
    }

    fn jvp(&self, x: &[Array], _y: &Array, t: &[Option<Array>]) -> Result<Option<Array>> {
        let Some(rule) = &self.fun.jvp else {
            return Ok(t[self.primals + self.index].clone());
        };
        let ts = rule(&x[..self.primals], &t[..self.primals])?;
        self.count("jvp", ts.len(), self.outputs)?;
        Ok(Some(ts[self.index].clone()))
    }

    fn vjp(&self, x: &[Array], _y: &Array, ct: &Array) -> Result<Vec<Option<Array>>> {
        let mut g = vec![None; x.len()];
        let Some(rule) = &self.fun.vjp else {
            g[self.primals + self.index] = Some(ct.clone());
            return Ok(g);
        };
        let outs = &x[self.primals..];
        let cts = outs
            .iter()
            .enumerate()
            .map(|(i, y)| {
                if i == self.index {
                    Ok(ct.clone())
                } else {
                    o::zeros_like(y)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let gs = rule(&x[..self.primals], outs, &cts)?;
        self.count("vjp", gs.len(), self.primals)?;
        for (slot, v) in g.iter_mut().zip(gs) {
            *slot = v;
        }
        Ok(g)
    }

    fn vmap(&self, x: &[Array], batched: &[bool]) -> Result<Array> {
        let k = self.primals + self.index;
        let Some(rule) = &self.fun.vmap else {
            if batched[k] {
                return Ok(x[k].clone());
            }
            // The output does not depend on the batch: every example gets it.
            let b = (0..x.len())
                .find(|&i| batched[i])
                .map_or(1, |i| x[i].shape()[0]);
            let mut shape = vec![b];
            shape.extend_from_slice(x[k].shape());
            return o::broadcast_to(&x[k], &shape);
        };
        let ys = rule(&x[..self.primals], &batched[..self.primals])?;
        self.count("vmap", ys.len(), self.outputs)?;
        Ok(ys[self.index].clone())
    }
}
