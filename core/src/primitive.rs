//! Primitives: the nodes of the lazy graph, grouped in families.
//!
//! Elementwise ops are data (an enum value per op) inside a family variant, so a
//! backend implements a family once. Each op's `name()` is the key every backend
//! uses (WGSL function names, kernel labels); completeness tests iterate `ALL`.

use crate::{CustomPrimitive, DType};
use std::fmt;
use std::sync::Arc;

macro_rules! op_table {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident => $s:literal, $kind:ident;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $var,)* }
        impl $name {
            /// Every op of this family.
            pub const ALL: &'static [$name] = &[$($name::$var,)*];
            /// The op's name, shared by every backend.
            pub const fn name(self) -> &'static str { match self { $($name::$var => $s,)* } }
            /// The op's dtype rule.
            pub const fn kind(self) -> OpKind { match self { $($name::$var => OpKind::$kind,)* } }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.name()) }
        }
    };
}

/// How an elementwise op chooses its dtypes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// Inputs promoted to a common type; output of that type.
    Arith,
    /// Inputs promoted, then to float (ints → f32); output float.
    FloatMath,
    /// Inputs promoted; output bool.
    Compare,
    /// Any input dtype, nonzero is true; output bool.
    Logical,
    /// Integers and bool only; output the promoted type.
    Bitwise,
    /// A float predicate (isnan, isinf); output bool.
    Predicate,
}

op_table! {
    /// Elementwise ops of one input.
    UnaryOp {
        /// `-x`
        Negative => "negative", Arith;
        /// `|x|`
        Abs => "abs", Arith;
        /// −1, 0 or 1 (±0 and NaN kept)
        Sign => "sign", Arith;
        /// `x*x`
        Square => "square", Arith;
        /// Square root.
        Sqrt => "sqrt", FloatMath;
        /// `1/sqrt(x)`
        Rsqrt => "rsqrt", FloatMath;
        /// `e^x`
        Exp => "exp", FloatMath;
        /// `e^x - 1`, accurate near 0.
        Expm1 => "expm1", FloatMath;
        /// Natural log.
        Log => "log", FloatMath;
        /// `log(1+x)`, accurate near 0.
        Log1p => "log1p", FloatMath;
        /// Base-2 log.
        Log2 => "log2", FloatMath;
        /// Sine.
        Sin => "sin", FloatMath;
        /// Cosine.
        Cos => "cos", FloatMath;
        /// Tangent.
        Tan => "tan", FloatMath;
        /// Hyperbolic tangent.
        Tanh => "tanh", FloatMath;
        /// `1/(1+e^-x)`
        Sigmoid => "sigmoid", FloatMath;
        /// The error function.
        Erf => "erf", FloatMath;
        /// The inverse of erf on (-1, 1) (±inf at ±1, NaN outside).
        Erfinv => "erfinv", FloatMath;
        /// Round down.
        Floor => "floor", Arith;
        /// Round up.
        Ceil => "ceil", Arith;
        /// Round half to even.
        Round => "round", Arith;
        /// `x == 0`
        LogicalNot => "logical_not", Logical;
        /// Is NaN.
        IsNan => "isnan", Predicate;
        /// Is ±inf.
        IsInf => "isinf", Predicate;
    }
}

op_table! {
    /// Elementwise ops of two inputs (broadcast to one shape).
    BinaryOp {
        /// `a + b`
        Add => "add", Arith;
        /// `a - b`
        Subtract => "subtract", Arith;
        /// `a * b`
        Multiply => "multiply", Arith;
        /// True division (ints promote to f32).
        Divide => "divide", FloatMath;
        /// Division rounded toward −∞.
        FloorDivide => "floor_divide", Arith;
        /// Remainder with the divisor's sign.
        Remainder => "remainder", Arith;
        /// `a ^ b`
        Power => "power", Arith;
        /// Larger (NaN propagates).
        Maximum => "maximum", Arith;
        /// Smaller (NaN propagates).
        Minimum => "minimum", Arith;
        /// Angle of (b, a).
        Arctan2 => "arctan2", FloatMath;
        /// `a == b`
        Equal => "equal", Compare;
        /// `a != b`
        NotEqual => "not_equal", Compare;
        /// `a < b`
        Less => "less", Compare;
        /// `a <= b`
        LessEqual => "less_equal", Compare;
        /// `a > b`
        Greater => "greater", Compare;
        /// `a >= b`
        GreaterEqual => "greater_equal", Compare;
        /// Both nonzero.
        LogicalAnd => "logical_and", Logical;
        /// Either nonzero.
        LogicalOr => "logical_or", Logical;
        /// Bitwise and.
        BitwiseAnd => "bitwise_and", Bitwise;
        /// Bitwise or.
        BitwiseOr => "bitwise_or", Bitwise;
        /// Bitwise xor.
        BitwiseXor => "bitwise_xor", Bitwise;
    }
}

op_table! {
    /// Reductions over a set of axes.
    ReduceOp {
        /// Sum.
        Sum => "sum", Arith;
        /// Product.
        Prod => "prod", Arith;
        /// Largest (NaN propagates).
        Max => "max", Arith;
        /// Smallest (NaN propagates).
        Min => "min", Arith;
        /// All nonzero.
        All => "all", Logical;
        /// Any nonzero.
        Any => "any", Logical;
    }
}

op_table! {
    /// Index-of-extreme reductions over one axis (output u32).
    ArgReduceOp {
        /// Index of the largest (first NaN wins).
        ArgMax => "argmax", Compare;
        /// Index of the smallest (first NaN wins).
        ArgMin => "argmin", Compare;
    }
}

impl ReduceOp {
    /// Output dtype for an input dtype (docs/SEMANTICS.md).
    pub fn out_dtype(self, input: DType) -> DType {
        match self {
            ReduceOp::All | ReduceOp::Any => DType::Bool,
            ReduceOp::Max | ReduceOp::Min => input,
            ReduceOp::Sum | ReduceOp::Prod => match input {
                DType::Bool | DType::U8 | DType::U32 => DType::U32,
                d => d,
            },
        }
    }
}

op_table! {
    /// Fused row operations over the last axis (`Primitive::Normalize`).
    NormOp {
        /// `exp(x - max) / sum(exp(x - max))`.
        Softmax => "softmax", FloatMath;
        /// `x - max - log(sum(exp(x - max)))`.
        LogSoftmax => "log_softmax", FloatMath;
        /// `(x - mean) / sqrt(var + eps) * weight + bias`; inputs x, weight, bias.
        LayerNorm => "layer_norm", FloatMath;
        /// `x / sqrt(mean(x²) + eps) * weight`; inputs x, weight.
        RmsNorm => "rms_norm", FloatMath;
    }
}

op_table! {
    /// How [`Primitive::Scatter`] combines an update with the element it lands on.
    ScatterOp {
        /// The update replaces the element.
        Set => "scatter", Arith;
        /// The update is added to the element.
        Add => "scatter_add", Arith;
    }
}

/// Values made from nothing: `full` and `arange`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Generator {
    /// Every element `value` (cast to the dtype).
    Fill(f64),
    /// `start + i * step`, computed in f64 and cast.
    Arange {
        /// First value.
        start: f64,
        /// Increment.
        step: f64,
    },
}

/// Which view a `View` node is (eval shares the input's buffer; the node's
/// layout already says where its elements are). Kept for transforms.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewOp {
    /// Axes permuted.
    Transpose(Vec<usize>),
    /// Broadcast to the node's shape.
    Broadcast,
    /// Strided slice: start, stop, step per axis.
    Slice(Vec<(isize, isize, isize)>),
    /// Same elements, new shape (expand_dims, squeeze, reshape without copy).
    Reshape,
    /// The same array with a zero derivative ([`crate::stop_gradient`]).
    StopGradient,
}

/// The computation that produces an array from its inputs.
#[derive(Debug, Clone)]
pub enum Primitive {
    /// One input, elementwise.
    Unary(UnaryOp),
    /// Two inputs of one dtype, broadcast to one shape.
    Binary(BinaryOp),
    /// `where(cond, x, y)`: cond bool, x and y of the output dtype.
    Select,
    /// Copy into a fresh row-major buffer, converting to the node's dtype.
    Copy,
    /// Fill or arange, no inputs.
    Generate(Generator),
    /// `alpha * x + beta * y` in one pass.
    Axpby {
        /// Scale of x.
        alpha: f64,
        /// Scale of y.
        beta: f64,
    },
    /// Reduce `axes` (sorted, unique) away.
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// Axes removed.
        axes: Vec<usize>,
    },
    /// Index of the extreme along one axis, which is removed.
    ArgReduce {
        /// argmax or argmin.
        op: ArgReduceOp,
        /// The axis.
        axis: usize,
    },
    /// `alpha * a @ b + beta * c` over matching batch dims: inputs `a` `[..., M, K]`,
    /// `b` `[..., K, N]` and, when `beta` is nonzero, `c` of the output's shape
    /// `[..., M, N]`; one float dtype, accumulated in f32.
    Matmul {
        /// Scale of the product.
        alpha: f64,
        /// Scale of `c` (0 when there is no third input).
        beta: f64,
    },
    /// A row operation over the last axis of input 0; the other inputs (weight,
    /// bias) have the shape `[L]` of that axis.
    Normalize {
        /// Which operation.
        op: NormOp,
        /// Added to the variance (layer_norm) or mean square (rms_norm).
        eps: f64,
    },
    /// A view of input 0: no computation, no copy.
    View(ViewOp),
    /// A row-major copy of input 0 (base) with input 1 (update) written over the
    /// strided region that starts at `starts` and steps by `steps` per axis (its
    /// extent is the update's shape).
    SliceUpdate {
        /// First index of the region on each axis.
        starts: Vec<usize>,
        /// Step of the region on each axis (nonzero; negative walks backwards).
        steps: Vec<isize>,
    },
    /// The inputs (one dtype, equal extents off `axis`) joined along `axis`.
    Concatenate {
        /// The joining axis.
        axis: usize,
    },
    /// `take_along_axis`: input 0 `x`, input 1 integer indices of `x`'s rank and
    /// equal extents off `axis`; `out[p] = x[p with p[axis] = idx[p]]` (negative
    /// indices count from the end; out of range gives the dtype's fill value,
    /// [`crate::gather_fill`]). The output has the indices' shape.
    Gather {
        /// The indexed axis.
        axis: usize,
    },
    /// `put_along_axis` / `scatter_add`: a row-major copy of input 0 (base, the
    /// output's shape) with input 2 (updates, of the indices' shape) combined by `op`
    /// at `p with p[axis] = idx[p]` for every position `p` of input 1 (integer
    /// indices, base's rank, equal extents to base off `axis`). Out-of-range
    /// indices are dropped.
    Scatter {
        /// Set or add.
        op: ScatterOp,
        /// The indexed axis.
        axis: usize,
    },
    /// Cumulative `op` (sum, prod, max, min) along `axis`; output dtype per
    /// [`ReduceOp::out_dtype`].
    Scan {
        /// The combining reduction.
        op: ReduceOp,
        /// The scanned axis.
        axis: usize,
        /// From the end of the axis.
        reverse: bool,
        /// Whether element `i` includes input `i` (else the identity comes first).
        inclusive: bool,
    },
    /// The u32 indices that sort input 0 along its last axis, stably (NaN last, -0
    /// equal to +0: numpy's order).
    ArgSort,
    /// Threefry-2x32 random bits, MLX's layout: input 0 holds row-major u32 keys
    /// `[..., 2]`; the output `[..., *shape]` gives each key a contiguous block
    /// ([`crate::random::bits`]). A u32 output holds the bits; a float output holds
    /// MLX's unit-interval value of each word, `min(f32(bits) * 2^-32, the largest
    /// value below 1 in the dtype)` rounded to the dtype (one pass for `uniform`).
    RandomBits,
    /// A primitive defined outside core.
    Custom(Arc<dyn CustomPrimitive>),
    /// An elementwise subgraph computed in one pass (made by [`crate::compile()`]):
    /// inputs of the output's shape, read in place.
    Fused(Arc<crate::FusedKernel>),
}
