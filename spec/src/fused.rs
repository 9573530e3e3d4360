//! The steps of a fused elementwise kernel: what `compile` plans in core and the
//! kernel library composes into one WGSL module, in one type.

use crate::{BinaryOp, DType, UnaryOp};
use std::hash::{Hash, Hasher};

/// One operation of a fused kernel.
#[derive(Debug, Clone, Copy)]
pub enum FusedOp {
    /// A unary op (argument of the step's input dtype, see [`UnaryOp::kind`]).
    Unary(UnaryOp),
    /// A binary op on two arguments of one dtype.
    Binary(BinaryOp),
    /// `args[0] ? args[1] : args[2]` (a bool condition).
    Select,
    /// The argument converted to the step's dtype (the cast rules of `astype`).
    Cast,
    /// `alpha * args[0] + beta * args[1]`.
    Axpby {
        /// Scale of the first argument.
        alpha: f64,
        /// Scale of the second argument.
        beta: f64,
    },
    /// A constant of the step's dtype (the value `full` would store).
    Const(f64),
}

impl FusedOp {
    // Floats compare and hash by their bits: one program shape, one key.
    fn key(&self) -> (u8, u64, u64) {
        match *self {
            FusedOp::Unary(op) => (0, op as u64, 0),
            FusedOp::Binary(op) => (1, op as u64, 0),
            FusedOp::Select => (2, 0, 0),
            FusedOp::Cast => (3, 0, 0),
            FusedOp::Axpby { alpha, beta } => (4, alpha.to_bits(), beta.to_bits()),
            FusedOp::Const(v) => (5, v.to_bits(), 0),
        }
    }
}

impl PartialEq for FusedOp {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for FusedOp {}

impl Hash for FusedOp {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}

/// A step: `op` on earlier values, giving a value of `dtype`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FusedStep {
    /// The operation.
    pub op: FusedOp,
    /// Value indices: `0..inputs` are the kernel's inputs, `inputs + k` is step
    /// `k`'s result.
    pub args: Vec<usize>,
    /// The result's dtype.
    pub dtype: DType,
}
