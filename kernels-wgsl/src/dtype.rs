//! Element types and how each is stored in `u32` words and computed in WGSL.

/// Element type of a buffer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// One byte per element, 0 or 1.
    Bool,
    /// Unsigned byte.
    U8,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 32-bit integer.
    I32,
    /// IEEE binary16 (needs `SHADER_F16` on the adapter).
    F16,
    /// bfloat16: the upper half of an f32.
    BF16,
    /// IEEE binary32.
    F32,
    /// IEEE binary64 (needs `SHADER_F64` on the adapter; computed by the kernels of
    /// `f64.wgsl`, moved by the others as pairs of `u32` words).
    F64,
}

/// The WGSL type a dtype is computed in.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Ct {
    F32,
    I32,
    U32,
}

impl Ct {
    pub(crate) fn wgsl(self) -> &'static str {
        match self {
            Ct::F32 => "f32",
            Ct::I32 => "i32",
            Ct::U32 => "u32",
        }
    }
}

impl DType {
    /// All dtypes, in a fixed order (used by tests and completeness checks).
    pub const ALL: [DType; 8] = [
        DType::Bool,
        DType::U8,
        DType::U32,
        DType::I32,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The dtypes the word kernels (everything but `f64.wgsl`) compose modules for:
    /// all but `F64`, which [`DType::ALL`] lists last.
    pub const WORDS: [DType; 7] = *Self::ALL.first_chunk::<7>().unwrap();

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::F64 => 8,
        }
    }

    /// Lower-case name (`"f32"`, `"bf16"`, `"bool"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// True for f64, f32, f16 and bf16.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F64 | DType::F32 | DType::F16 | DType::BF16)
    }

    /// True for the integer dtypes (not bool).
    pub fn is_int(self) -> bool {
        matches!(self, DType::U8 | DType::U32 | DType::I32)
    }

    /// The compute type of the word kernels. f64 never reaches them (`compose`
    /// refuses it); it maps to f32 only to keep this total.
    pub(crate) fn ct(self) -> Ct {
        match self {
            DType::F64 | DType::F32 | DType::F16 | DType::BF16 => Ct::F32,
            DType::I32 => Ct::I32,
            DType::U32 | DType::U8 | DType::Bool => Ct::U32,
        }
    }

    /// log2 of the number of elements in one `u32` word.
    pub(crate) fn log_epw(self) -> u32 {
        match self.size() {
            1 => 2,
            2 => 1,
            _ => 0,
        }
    }

    /// Elements per `u32` word.
    pub(crate) fn epw(self) -> usize {
        1 << self.log_epw()
    }

    /// Name of the WGSL extract/store helper suffix (`ex_*`, `st_*` in common.wgsl).
    pub(crate) fn storage(self) -> &'static str {
        self.name()
    }

    /// The 32-bit dtype reductions accumulate in.
    pub(crate) fn acc(self) -> DType {
        match self.ct() {
            Ct::F32 => DType::F32,
            Ct::I32 => DType::I32,
            Ct::U32 => DType::U32,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
