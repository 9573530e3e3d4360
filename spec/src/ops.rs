//! The ops of each elementwise and reduction family, as data: one enum value an op,
//! with its name, its dtype rule ([`OpKind`]) and the rules derived from it. Core
//! and the kernel library both speak these types, so an op missing from a `match`
//! anywhere is a compile error, not a run-time lookup.

use crate::DType;
use std::fmt;

macro_rules! op_table {
    ($d:tt $(#[$m:meta])* $name:ident, $each:ident {
        $($(#[$vm:meta])* $var:ident => $f:ident $(/ $js:literal)?, $kind:ident;)*
    }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $var,)* }
        impl $name {
            /// Every op of this family.
            pub const ALL: &'static [$name] = &[$($name::$var,)*];
            /// The op's name: the public function's, and the key of its kernels (WGSL
            /// functions are `{name}_{f32|i32|u32}`).
            pub const fn name(self) -> &'static str {
                match self { $($name::$var => stringify!($f),)* }
            }
            /// The op's dtype rule.
            pub const fn kind(self) -> OpKind { match self { $($name::$var => OpKind::$kind,)* } }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.name()) }
        }
        #[doc = concat!("Calls the macro `cb` with the table of [`", stringify!($name), "`]: for each op, its doc \
            comment, `Variant => function_name`, an optional `/ \"jsName\"` where the JavaScript \
            name is not the function's, and its [`OpKind`]. The public functions, their `Array` \
            methods and the JavaScript API are generated from it, so a new op needs no list \
            of its own there.")]
        #[macro_export]
        macro_rules! $each {
            ($d cb:ident) => {
                $d cb! { $($(#[$vm])* $var => $f $(/ $js)?, $kind;)* }
            };
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
    $
    /// Elementwise ops of one input.
    UnaryOp, for_each_unary_op {
        /// `-x`
        Negative => negative, Arith;
        /// `|x|`
        Abs => abs, Arith;
        /// −1, 0 or 1 (±0 and NaN kept)
        Sign => sign, Arith;
        /// `x*x`
        Square => square, Arith;
        /// Square root.
        Sqrt => sqrt, FloatMath;
        /// `1/sqrt(x)`
        Rsqrt => rsqrt, FloatMath;
        /// Real cube root (negative for negative `x`).
        Cbrt => cbrt, FloatMath;
        /// `e^x`
        Exp => exp, FloatMath;
        /// `e^x - 1`, accurate near 0.
        Expm1 => expm1, FloatMath;
        /// Natural log.
        Log => log, FloatMath;
        /// `log(1+x)`, accurate near 0.
        Log1p => log1p, FloatMath;
        /// Base-2 log.
        Log2 => log2, FloatMath;
        /// Sine.
        Sin => sin, FloatMath;
        /// Cosine.
        Cos => cos, FloatMath;
        /// Tangent.
        Tan => tan, FloatMath;
        /// Hyperbolic tangent.
        Tanh => tanh, FloatMath;
        /// `1/(1+e^-x)`
        Sigmoid => sigmoid, FloatMath;
        /// The error function.
        Erf => erf, FloatMath;
        /// The inverse of erf on (-1, 1) (±inf at ±1, NaN outside).
        Erfinv => erfinv, FloatMath;
        /// Round down.
        Floor => floor, Arith;
        /// Round up.
        Ceil => ceil, Arith;
        /// Round half to even.
        Round => round, Arith;
        /// `x == 0`
        LogicalNot => logical_not / "logicalNot", Logical;
        /// Is NaN.
        IsNan => isnan, Predicate;
        /// Is ±inf.
        IsInf => isinf, Predicate;
    }
}

op_table! {
    $
    /// Elementwise ops of two inputs (broadcast to one shape).
    BinaryOp, for_each_binary_op {
        /// `a + b`
        Add => add, Arith;
        /// `a - b`
        Subtract => subtract, Arith;
        /// `a * b`
        Multiply => multiply, Arith;
        /// True division (ints promote to f32).
        Divide => divide, FloatMath;
        /// Division rounded toward −∞.
        FloorDivide => floor_divide / "floorDivide", Arith;
        /// Remainder with the divisor's sign.
        Remainder => remainder, Arith;
        /// `a ^ b`
        Power => power, Arith;
        /// Larger (NaN propagates).
        Maximum => maximum, Arith;
        /// Smaller (NaN propagates).
        Minimum => minimum, Arith;
        /// Angle of (b, a).
        Arctan2 => arctan2, FloatMath;
        /// `sqrt(a² + b²)`, without overflow or underflow on the way (inf if either
        /// is infinite, even beside a NaN).
        Hypot => hypot, FloatMath;
        /// `a == b`
        Equal => equal, Compare;
        /// `a != b`
        NotEqual => not_equal / "notEqual", Compare;
        /// `a < b`
        Less => less, Compare;
        /// `a <= b`
        LessEqual => less_equal / "lessEqual", Compare;
        /// `a > b`
        Greater => greater, Compare;
        /// `a >= b`
        GreaterEqual => greater_equal / "greaterEqual", Compare;
        /// Both nonzero.
        LogicalAnd => logical_and / "logicalAnd", Logical;
        /// Either nonzero.
        LogicalOr => logical_or / "logicalOr", Logical;
        /// Bitwise and.
        BitwiseAnd => bitwise_and / "bitwiseAnd", Bitwise;
        /// Bitwise or.
        BitwiseOr => bitwise_or / "bitwiseOr", Bitwise;
        /// Bitwise xor.
        BitwiseXor => bitwise_xor / "bitwiseXor", Bitwise;
        /// `a << b`: 0 where `b` is negative or at least the bit width.
        LeftShift => left_shift / "leftShift", Bitwise;
        /// `a >> b`, arithmetic for signed `a`: past the bit width (or for a
        /// negative `b`) 0, or -1 for a negative `a`.
        RightShift => right_shift / "rightShift", Bitwise;
    }
}

op_table! {
    $
    /// Reductions over a set of axes.
    ReduceOp, for_each_reduce_op {
        /// Sum.
        Sum => sum, Arith;
        /// Product.
        Prod => prod, Arith;
        /// Largest (NaN propagates).
        Max => max, Arith;
        /// Smallest (NaN propagates).
        Min => min, Arith;
        /// All nonzero.
        All => all, Logical;
        /// Any nonzero.
        Any => any, Logical;
    }
}

op_table! {
    $
    /// Index-of-extreme reductions over one axis (output u32).
    ArgReduceOp, for_each_arg_reduce_op {
        /// Index of the largest (first NaN wins).
        ArgMax => argmax, Compare;
        /// Index of the smallest (first NaN wins).
        ArgMin => argmin, Compare;
    }
}

op_table! {
    $
    /// Fused row operations over the last axis (`wmx_core::Primitive::Normalize`).
    NormOp, for_each_norm_op {
        /// `exp(x - max) / sum(exp(x - max))`.
        Softmax => softmax, FloatMath;
        /// `x - max - log(sum(exp(x - max)))`.
        LogSoftmax => log_softmax / "logSoftmax", FloatMath;
        /// `(x - mean) / sqrt(var + eps) * weight + bias`; inputs x, weight, bias.
        LayerNorm => layer_norm / "layerNorm", FloatMath;
        /// `x / sqrt(mean(x²) + eps) * weight`; inputs x, weight.
        RmsNorm => rms_norm / "rmsNorm", FloatMath;
    }
}

op_table! {
    $
    /// How a scatter (`wmx_core::Primitive::Scatter`) combines an update with the
    /// element it lands on.
    ScatterOp, for_each_scatter_op {
        /// The update replaces the element.
        Set => scatter, Arith;
        /// The update is added to the element.
        Add => scatter_add / "scatterAdd", Arith;
    }
}

impl OpKind {
    /// Whether the op's output is bool whatever its inputs.
    pub const fn outputs_bool(self) -> bool {
        matches!(self, OpKind::Compare | OpKind::Logical | OpKind::Predicate)
    }
}

impl UnaryOp {
    /// Whether the op is defined on inputs of `dtype` (after promotion: float math
    /// promotes integers to f32 first, so it is defined on floats only).
    pub const fn supports(self, dtype: DType) -> bool {
        match self.kind() {
            OpKind::FloatMath => dtype.is_float(),
            OpKind::Logical | OpKind::Compare | OpKind::Predicate => true,
            OpKind::Arith | OpKind::Bitwise => !matches!(dtype, DType::Bool),
        }
    }

    /// Whether the output is bool (`logical_not`, `isnan`, `isinf`).
    pub const fn outputs_bool(self) -> bool {
        self.kind().outputs_bool()
    }
}

impl BinaryOp {
    /// Whether the op is defined on two inputs of `dtype` (after promotion).
    pub const fn supports(self, dtype: DType) -> bool {
        match self.kind() {
            OpKind::Arith => {
                matches!(self, BinaryOp::Maximum | BinaryOp::Minimum)
                    || !matches!(dtype, DType::Bool)
            }
            OpKind::FloatMath => dtype.is_float(),
            OpKind::Bitwise => !dtype.is_float(),
            OpKind::Compare | OpKind::Logical | OpKind::Predicate => true,
        }
    }

    /// Whether the output is bool (comparisons, `logical_and`, `logical_or`).
    pub const fn outputs_bool(self) -> bool {
        self.kind().outputs_bool()
    }
}

impl ReduceOp {
    /// Output dtype for an input dtype (docs/SEMANTICS.md): sums and products of
    /// bool, u8 and u32 give u32, `all`/`any` bool, the rest the input's.
    pub const fn out_dtype(self, input: DType) -> DType {
        match self {
            ReduceOp::All | ReduceOp::Any => DType::Bool,
            ReduceOp::Max | ReduceOp::Min => input,
            ReduceOp::Sum | ReduceOp::Prod => match input {
                DType::Bool | DType::U8 | DType::U32 => DType::U32,
                d => d,
            },
        }
    }

    /// The dtype the GPU kernels accumulate in: u32 0/1 for `all`/`any`, else f32
    /// for floats narrower than f64 and the input's sign's 32-bit integer for the
    /// rest (64-bit inputs keep their dtype).
    pub const fn acc_dtype(self, input: DType) -> DType {
        match (self, input) {
            (ReduceOp::All | ReduceOp::Any, _) => DType::U32,
            (_, DType::F16 | DType::BF16 | DType::F32) => DType::F32,
            (_, DType::F64) => DType::F64,
            (_, DType::C64) => DType::C64,
            (_, DType::I64) => DType::I64,
            (_, DType::U64) => DType::U64,
            (_, DType::I32) => DType::I32,
            (_, DType::Bool | DType::U8 | DType::U32) => DType::U32,
        }
    }

    /// The binary op that combines two partial results held in the
    /// [`acc_dtype`](Self::acc_dtype): sum → add, max → maximum (NaN kept), and
    /// `all`/`any`, whose partials are u32 0/1, → minimum/maximum.
    pub const fn combiner(self) -> BinaryOp {
        match self {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Multiply,
            ReduceOp::Max | ReduceOp::Any => BinaryOp::Maximum,
            ReduceOp::Min | ReduceOp::All => BinaryOp::Minimum,
        }
    }
}

impl NormOp {
    /// How many inputs the op takes: x, then weight (and bias for layer_norm).
    pub const fn arity(self) -> usize {
        match self {
            NormOp::Softmax | NormOp::LogSoftmax => 1,
            NormOp::LayerNorm => 3,
            NormOp::RmsNorm => 2,
        }
    }
}
