//! [`FusedKernel`]: an elementwise subgraph that a backend computes in one pass
//! ([`crate::Primitive::Fused`]), and its expansion back into plain ops (the
//! transforms' rules and backends without fusion use it).

use crate::{Array, DType, Error, Generator, Primitive, ReduceOp, Result, ops as o};

pub use wmx_spec::{FusedOp, FusedStep};

/// An elementwise subgraph computed in one pass: every input has one shape
/// (broadcast and strided views are read in place), the steps run per element,
/// and the last step is the output, or with `reduce` the reduction of the last
/// step's values (which are then never stored). Intermediate values are rounded to
/// their dtype as separate kernels would store them, so the result is the one the
/// unfused ops give (up to the multiply-add contraction a GPU compiler may apply
/// inside one kernel).
#[derive(Debug, Clone, PartialEq)]
pub struct FusedKernel {
    /// The inputs' dtypes.
    pub inputs: Vec<DType>,
    /// The steps, in order.
    pub steps: Vec<FusedStep>,
    /// A reduction of the last step over these axes (sorted, unique).
    pub reduce: Option<(ReduceOp, Vec<usize>)>,
    /// The values stored (indices counting the inputs, then the steps; empty: the
    /// last step's). With two or more (steps of one dtype, no `reduce`)
    /// the output is `[outputs.len(), ...]`, value `outputs[j]` at index `j`.
    pub outputs: Vec<usize>,
}

impl FusedKernel {
    /// The kernel built from plain ops on `inputs` (lazy; the same values).
    pub fn expand(&self, inputs: &[Array]) -> Result<Array> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::invalid(
                "fused",
                format!(
                    "kernel takes {} inputs, got {}",
                    self.inputs.len(),
                    inputs.len()
                ),
            ));
        }
        let Some(first) = inputs.first() else {
            return Err(Error::invalid("fused", "a kernel without inputs"));
        };
        let shape = first.shape().to_vec();
        let device = first.device().clone();
        let mut vals: Vec<Array> = inputs.to_vec();
        for s in &self.steps {
            let a = |i: usize| &vals[s.args[i]];
            let v = match &s.op {
                FusedOp::Unary(op) => o::unary(*op, a(0))?,
                FusedOp::Binary(op) => o::binary(*op, a(0), a(1))?,
                FusedOp::Select => o::where_(a(0), a(1), a(2))?,
                FusedOp::Cast => o::astype(a(0), s.dtype)?,
                FusedOp::Axpby { alpha, beta } => o::axpby(a(0), a(1), *alpha, *beta)?,
                FusedOp::Const(v) => o::broadcast_to(
                    &o::node(
                        Primitive::Generate(Generator::Fill(*v)),
                        vec![],
                        &[],
                        s.dtype,
                        device.clone(),
                    )?,
                    &shape,
                )?,
            };
            if v.dtype() != s.dtype {
                return Err(Error::invalid(
                    "fused",
                    format!("step {:?} gives {}, recorded {}", s.op, v.dtype(), s.dtype),
                ));
            }
            vals.push(v);
        }
        if self.steps.is_empty() {
            return Err(Error::invalid("fused", "a kernel without steps"));
        }
        if self.outputs.len() > 1 {
            if self.reduce.is_some() {
                return Err(Error::invalid("fused", "a reduced kernel has one output"));
            }
            let outs: Vec<&Array> = self
                .outputs
                .iter()
                .map(|&v| {
                    vals.get(v)
                        .ok_or_else(|| Error::invalid("fused", format!("no value {v}")))
                })
                .collect::<Result<_>>()?;
            return o::stack(&outs, 0);
        }
        let last = match self.outputs.first() {
            Some(&v) => vals
                .get(v)
                .cloned()
                .ok_or_else(|| Error::invalid("fused", format!("no value {v}")))?,
            None => vals.pop().expect("steps checked above"),
        };
        match &self.reduce {
            None => Ok(last),
            Some((op, axes)) => {
                let ax: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
                o::reduce(*op, &last, Some(&ax), false)
            }
        }
    }
}
