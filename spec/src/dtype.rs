//! Element types and their promotion rules.

use std::fmt;

/// The element type of an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// Boolean, one byte (0 or 1).
    Bool,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer (on the GPU, two 32-bit words computed exactly).
    I64,
    /// Unsigned 64-bit integer (on the GPU, two 32-bit words computed exactly).
    U64,
    /// IEEE half precision.
    F16,
    /// bfloat16: the upper half of an f32.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision (CPU; WebGPU only where the adapter has `SHADER_F64`).
    F64,
    /// Complex numbers of two f32s, the real part first (numpy's `complex64`). Ops
    /// compute on the pairs through f32 ops; backends see only f32.
    C64,
}

impl DType {
    /// Every dtype, in promotion order: the real ones, then complex64.
    pub const ALL: [DType; 11] = {
        let mut all = [DType::C64; 11];
        let mut i = 0;
        while i < DType::REAL.len() {
            all[i] = DType::REAL[i];
            i += 1;
        }
        all
    };

    /// Every real dtype (all but complex64), in promotion order.
    pub const REAL: [DType; 10] = [
        DType::Bool,
        DType::U8,
        DType::U32,
        DType::I32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The dtypes stored in whole 32-bit words or parts of one (the 64-bit ones
    /// are moved as pairs of words and computed by kernels of their own).
    pub const WORDS: [DType; 7] = [
        DType::Bool,
        DType::U8,
        DType::U32,
        DType::I32,
        DType::F16,
        DType::BF16,
        DType::F32,
    ];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 | DType::C64 => 8,
        }
    }

    /// The lowercase name (`"f32"`, `"bool"`, …).
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C64 => "c64",
        }
    }

    /// Parses a name as printed by [`DType::name`] (also accepts numpy spellings).
    pub fn from_name(name: &str) -> Option<DType> {
        Some(match name {
            "bool" => DType::Bool,
            "u8" | "uint8" => DType::U8,
            "u32" | "uint32" => DType::U32,
            "i32" | "int32" => DType::I32,
            "i64" | "int64" => DType::I64,
            "u64" | "uint64" => DType::U64,
            "f16" | "float16" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "f32" | "float32" => DType::F32,
            "f64" | "float64" => DType::F64,
            "c64" | "complex64" => DType::C64,
            _ => return None,
        })
    }

    /// f16, bf16, f32 or f64.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// complex64.
    pub const fn is_complex(self) -> bool {
        matches!(self, DType::C64)
    }

    /// Floats and complex64: the dtypes that carry derivatives.
    pub const fn is_inexact(self) -> bool {
        self.is_float() || self.is_complex()
    }

    /// Any integer type (not bool).
    pub const fn is_int(self) -> bool {
        matches!(
            self,
            DType::U8 | DType::U32 | DType::I32 | DType::I64 | DType::U64
        )
    }

    /// Signed integer types.
    pub const fn is_signed_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// Unsigned integer types.
    pub const fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U32 | DType::U64)
    }

    /// The dtype float math on `self` produces: `self` for floats and c64, f32
    /// otherwise.
    pub const fn to_float(self) -> DType {
        if self.is_inexact() { self } else { DType::F32 }
    }

    /// The type both operands of a binary op are converted to, as in MLX:
    ///
    /// | a \ b | rule |
    /// |---|---|
    /// | bool, X | X |
    /// | unsigned, unsigned / signed, signed | the wider |
    /// | u8, i32 → i32; u8, i64 → i64; u32, i32 → i64; u32, i64 → i64 | smallest signed type holding both |
    /// | u64, i32 / u64, i64 | f32 (no integer type holds both) |
    /// | integer, float | the float |
    /// | f16, bf16 | f32 |
    /// | float, float | the wider (f64 wins) |
    /// | any, c64 | c64 (as MLX: there is no complex128) |
    pub fn promote(a: DType, b: DType) -> DType {
        use DType::*;
        if a == b {
            return a;
        }
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        match (lo, hi) {
            (_, C64) => C64,
            (Bool, x) => x,
            (F16, BF16) => F32,
            (x, y) if x.is_float() && y.is_float() => F32.max(y),
            (_, f) if f.is_float() => f,
            (U8 | U32, U64) => U64,
            (I32 | I64, U64) => F32,
            (U8, U32) => U32,
            (U8, I32) => I32,
            (U32, I32) => I64,
            (_, I64) => I64,
            (I32, _) | (U8, _) | (U32, _) => unreachable!("all integer pairs are listed"),
            _ => hi,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_is_symmetric_and_idempotent() {
        for a in DType::ALL {
            assert_eq!(DType::promote(a, a), a);
            for b in DType::ALL {
                assert_eq!(DType::promote(a, b), DType::promote(b, a), "{a} {b}");
            }
        }
    }

    #[test]
    fn promotion_table() {
        use DType::*;
        let cases = [
            (Bool, U8, U8),
            (U8, U32, U32),
            (U8, I32, I32),
            (U32, I32, I64),
            (U32, I64, I64),
            (I32, I64, I64),
            (I32, F16, F16),
            (I64, BF16, BF16),
            (U8, F32, F32),
            (F16, BF16, F32),
            (F16, F32, F32),
            (BF16, F32, F32),
            (Bool, F16, F16),
            (U32, U64, U64),
            (U8, U64, U64),
            (I32, U64, F32),
            (I64, U64, F32),
            (U64, F16, F16),
            (U64, F64, F64),
            (F64, C64, C64),
            (I64, C64, C64),
            (Bool, C64, C64),
        ];
        for (a, b, want) in cases {
            assert_eq!(DType::promote(a, b), want, "{a} + {b}");
        }
    }

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::from_name("complex64"), Some(DType::C64));
        assert_eq!(DType::from_name("complex128"), None);
    }
}
