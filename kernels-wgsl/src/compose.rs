//! Composing kernel modules: a generated prelude (bindings, type aliases, load/store
//! helpers, op selection) followed by the plain `.wgsl` family files, from which only
//! the functions reachable from the chosen entry point are kept (smaller modules
//! compile faster in naga and in the driver).

use crate::dtype::{Ct, DType, Words};
use crate::ops;
use crate::{Error, Result};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;
use wmx_spec::{ArgReduceOp, BinaryOp, NormOp, ReduceOp, ScatterOp, UnaryOp};

pub(crate) const COMMON: &str = include_str!("wgsl/common.wgsl");
pub(crate) const WORDS: &str = include_str!("wgsl/words.wgsl");
const ELEMENTWISE: &str = include_str!("wgsl/elementwise.wgsl");
pub(crate) const BINARY: &str = include_str!("wgsl/binary.wgsl");
pub(crate) const UNARY: &str = include_str!("wgsl/unary.wgsl");
const COPY: &str = include_str!("wgsl/copy.wgsl");
const REDUCE: &str = include_str!("wgsl/reduce.wgsl");
const SLICE_UPDATE: &str = include_str!("wgsl/slice_update.wgsl");
const MATMUL: &str = include_str!("wgsl/matmul.wgsl");
const MATMUL_COOP: &str = include_str!("wgsl/matmul_coop.wgsl");
const MATMUL_COOP_VEC: &str = include_str!("wgsl/matmul_coop_vec.wgsl");
const MATMUL_TILE: &str = include_str!("wgsl/matmul_tile.wgsl");
const GEMV: &str = include_str!("wgsl/gemv.wgsl");
const NORM: &str = include_str!("wgsl/norm.wgsl");
const INDEX: &str = include_str!("wgsl/index.wgsl");
const SCATTER: &str = include_str!("wgsl/scatter.wgsl");
const RANDOM: &str = include_str!("wgsl/random.wgsl");
const SCAN: &str = include_str!("wgsl/scan.wgsl");
const SORT: &str = include_str!("wgsl/sort.wgsl");
const RADIX: &str = include_str!("wgsl/radix.wgsl");

/// Tile configurations of the tiled kernel: (invocations along N, along M, K depth).
/// Each invocation computes 8 x 8 outputs, so the tile is 8·WY x 8·WX.
/// 0 and 1 are the defaults for large and small products; the others are measured
/// alternatives (`WMX_MATMUL_TILE=i` forces one, for tuning).
pub const TILES: [(u32, u32, u32); 5] = [
    (16, 16, 8),
    (8, 8, 8),
    (16, 16, 16),
    (32, 8, 8),
    (8, 16, 16),
];

/// Whether tile configuration `i` moves whole vec4s of A and B per invocation and
/// K step (the vec4-load variant needs it).
pub(crate) fn vec4_tile(i: usize) -> bool {
    let (wx, wy, bk) = TILES[i];
    (8 * bk / wx).is_multiple_of(4) && (8 * bk / wy).is_multiple_of(4) && bk.is_multiple_of(4)
}

/// Kernel family of a module.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// One input, a [`UnaryOp`].
    Unary,
    /// Two inputs, a [`BinaryOp`].
    Binary,
    /// `cond ? x : y`.
    Select,
    /// Strided copy with cast.
    Copy,
    /// `alpha * x + beta * y`.
    Axpby,
    /// Fill with a constant bit pattern.
    Fill,
    /// `start + i * step`.
    Arange,
    /// Reductions by a [`ReduceOp`].
    Reduce,
    /// Arg reductions by an [`ArgReduceOp`].
    ArgReduce,
    /// A copy of the base (input 0) with the update (input 1) over a strided region.
    SliceUpdate,
    /// Tiled matrix product `alpha * a @ b + beta * c` (c optional).
    Matmul,
    /// Matrix-vector product (variants `Rows`, `RowsVec`, `Cols`, `Finish`).
    Gemv,
    /// Row operations over the last axis, a [`NormOp`] (input x,
    /// then the op's weight and bias).
    Norm,
    /// One input written into its box of a concatenation's output (bits unchanged).
    Place,
    /// `take_along_axis`: input x, then integer indices (bits unchanged).
    Gather,
    /// Set (`"scatter"`) or add (`"scatter_add"`) updates at indices along an axis:
    /// inputs indices and updates; the output, already holding the base, is updated
    /// in place through atomics.
    Scatter,
    /// Threefry-2x32 u32 bits from u32 keys (MLX's layout).
    RandomBits,
    /// Bitonic argsort passes; the op names the entry point (`sort_init` reads the
    /// input, `sort_global`/`sort_local` work in place on the pairs, `sort_finish`
    /// reads the pairs).
    Sort,
}

impl Family {
    /// Number of inputs (products: without the optional `c`).
    fn arity(self) -> usize {
        match self {
            Family::Unary | Family::Copy | Family::Reduce | Family::ArgReduce => 1,
            Family::Place | Family::RandomBits => 1,
            Family::Gather | Family::Scatter => 2,
            Family::Binary | Family::Axpby | Family::SliceUpdate => 2,
            Family::Matmul | Family::Gemv => 2,
            Family::Norm => 1,
            Family::Select => 3,
            Family::Fill | Family::Arange => 0,
            Family::Sort => 1,
        }
    }

    /// Whether `n` inputs fit the family (products take an optional `c`; the gemv
    /// finishing pass takes the partial sums and `c`).
    fn takes(self, n: usize, variant: Variant) -> bool {
        match (self, variant) {
            (Family::Gemv, Variant::Finish) => n == 1 || n == 2,
            (Family::Matmul | Family::Gemv, _) => n == 2 || n == 3,
            (Family::Norm, _) => (1..=3).contains(&n),
            (Family::Reduce, Variant::ScanBlocks) => n == 1 || n == 2,
            (Family::Sort, _) => n <= 2,
            _ => n == self.arity(),
        }
    }
}

/// How a contiguous kernel reads one input.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum InputMode {
    /// Broadcast scalar: every element reads the same value (loaded once).
    Scalar = 0,
    /// Contiguous, 16-byte aligned and packed like the output: one `vec4<u32>` load
    /// per four output words.
    Vec4 = 1,
    /// Contiguous, element loads (unaligned offset or different packing).
    Elem = 2,
}

/// Kernel variant (which entry point and override values).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Every input is contiguous or a broadcast scalar; one mode per input. For binary
    /// ops `[Scalar, Scalar]` is scalar-scalar, `[Scalar, Vec4]` scalar-vector, etc.
    Contig([InputMode; 3]),
    /// Any rank, any strides (including 0 and negative), element offsets.
    General,
    /// Reductions: one workgroup per output (or per output chunk), for reduced
    /// elements that are close together in memory.
    Rows,
    /// Reductions: 32 outputs per workgroup, 8 invocations per output, for outputs
    /// that are close together in memory (coalesced column reduction).
    Cols,
    /// Reductions: as `Rows`, for contiguous reduced elements (one reduced dim of
    /// stride 1) in a 16-byte padded input: `vec4<u32>` loads.
    RowsVec,
    /// Reductions: as `Cols`, for contiguous outputs over one reduced dim, with the
    /// input offset and the reduced stride multiples of a vec4: `vec4<u32>` loads.
    ColsVec,
    /// Matmul: tile configuration `i` of [`TILES`].
    Tiled(u8),
    /// As `Tiled`, with vec4 loads of f32 operands contiguous along K (A) and N (B).
    TiledVec(u8),
    /// Gemv: the pass that adds partial sums and applies the epilogue.
    Finish,
    /// Matmul on cooperative matrices (f16 operands; needs [`Target::coop`]).
    Coop,
    /// Matmul on cooperative matrices, 128 x 128 tiles staged from 16-byte loads of
    /// aligned f16 operands (subgroups of 32). Bit 0: A is read along M (a
    /// transposed view), bit 1: B along K.
    CoopVec(u8),
    /// Reductions as scans: one invocation per line, serial along it.
    ScanLines,
    /// Reductions as scans: one workgroup per block of a contiguous line (an
    /// optional second input holds each block's carry).
    ScanBlocks,
}

impl Variant {
    /// Short name: `ss`, `sv`, `vs`, `vv` (contiguous binary), `s`/`v` (unary),
    /// `general`, `rows`, `cols`.
    pub fn name(&self, arity: usize) -> String {
        match self {
            Variant::Contig(m) => m[..arity.max(1)]
                .iter()
                .map(|m| match m {
                    InputMode::Scalar => 's',
                    InputMode::Vec4 => 'v',
                    InputMode::Elem => 'e',
                })
                .collect(),
            Variant::General => "general".into(),
            Variant::Rows => "rows".into(),
            Variant::Cols => "cols".into(),
            Variant::RowsVec => "rows_vec".into(),
            Variant::ColsVec => "cols_vec".into(),
            Variant::Tiled(i) => format!("tiled{i}"),
            Variant::TiledVec(i) => format!("tiled_vec{i}"),
            Variant::Finish => "finish".into(),
            Variant::Coop => "coop".into(),
            Variant::CoopVec(i) => format!("coop_vec{i}"),
            Variant::ScanLines => "scan_lines".into(),
            Variant::ScanBlocks => "scan_blocks".into(),
        }
    }
}

/// Per-device code-generation choices.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// Use subgroup operations in reductions (adapter has `SUBGROUP`).
    pub subgroups: bool,
    /// Emit `enable subgroups;` (browsers require it; naga rejects it).
    pub subgroup_directive: bool,
    /// Workgroup size (power of two, at most 256).
    pub workgroup_size: u32,
    /// Convert f16 with the hardware (`unpack2x16float`/`pack2x16float`) instead of
    /// by hand. Only set where the adapter has `SHADER_F16` and a probe at device
    /// open found its conversions exact (round to nearest even, subnormals kept,
    /// overflow to inf), so results are identical to the software path's.
    pub f16: bool,
    /// Subgroup size of the cooperative-matrix matmul (16 x 16 x 16, f16 operands,
    /// f32 accumulators), 0 where it is not used: set only where the adapter lists
    /// that configuration, has one fixed subgroup size, and a probe at device open
    /// found the kernel's results exact.
    pub coop: u32,
}

impl Default for Target {
    fn default() -> Self {
        Target {
            subgroups: false,
            subgroup_directive: false,
            workgroup_size: 256,
            f16: false,
            coop: 0,
        }
    }
}

/// What a module computes within its family: one of the workspace's op enums, or,
/// for families whose kernels are not ops of an enum (sorts, products, copies), the
/// kernel's own name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// A unary elementwise op.
    Unary(UnaryOp),
    /// A binary elementwise op.
    Binary(BinaryOp),
    /// A reduction (or, with the scan variants, a scan).
    Reduce(ReduceOp),
    /// An arg reduction.
    ArgReduce(ArgReduceOp),
    /// A row operation.
    Norm(NormOp),
    /// How a scatter combines.
    Scatter(ScatterOp),
    /// A family's own kernel (`"sort_init"`, `"gemv"`, `"place_flat"`, ...).
    Named(&'static str),
}

impl Op {
    /// The op's name (the enum op's, or the kernel's own).
    pub fn name(self) -> &'static str {
        match self {
            Op::Unary(o) => o.name(),
            Op::Binary(o) => o.name(),
            Op::Reduce(o) => o.name(),
            Op::ArgReduce(o) => o.name(),
            Op::Norm(o) => o.name(),
            Op::Scatter(o) => o.name(),
            Op::Named(n) => n,
        }
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

macro_rules! op_from {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for Op {
            fn from(o: $t) -> Op {
                Op::$v(o)
            }
        }
    )*};
}
op_from!(UnaryOp => Unary, BinaryOp => Binary, ReduceOp => Reduce, ArgReduceOp => ArgReduce,
    NormOp => Norm, ScatterOp => Scatter, &'static str => Named);

/// Everything that determines one kernel module and its pipeline.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModuleSpec {
    /// Family.
    pub family: Family,
    /// The op (for families without op enums, the kernel's name).
    pub op: Op,
    /// Input dtypes (as many as the family's arity).
    pub inputs: Vec<DType>,
    /// Output dtype.
    pub output: DType,
    /// Variant.
    pub variant: Variant,
    /// Bit mask of inputs whose loads read the output binding (in-place elementwise
    /// op: a buffer cannot be bound read-only and read-write in one dispatch).
    pub alias: u8,
    /// Code-generation target.
    pub target: Target,
}

impl ModuleSpec {
    /// Entry point name in the composed module.
    pub fn entry_point(&self) -> &'static str {
        let general = self.variant == Variant::General;
        match (self.family, self.family.arity()) {
            (Family::Fill, _) => "fill",
            (Family::Arange, _) => "arange",
            (Family::SliceUpdate, _) => "slice_update",
            (Family::Place, _) => self.op.name(),
            (Family::Gather, _) => "gather",
            (Family::Scatter, _) => "scatter",
            (Family::RandomBits, _) => self.op.name(),
            (Family::Sort, _) => self.op.name(),
            (Family::Matmul, _) if self.variant == Variant::Coop => "matmul_coop",
            (Family::Matmul, _) if matches!(self.variant, Variant::CoopVec(_)) => "matmul_coop_vec",
            (Family::Matmul, _) => "matmul",
            (Family::Norm, _) if self.variant == Variant::RowsVec => "norm_rows_v",
            (Family::Norm, _) => "norm_rows",
            (Family::Gemv, _) => match self.variant {
                Variant::RowsVec => "gemv_rows_v",
                Variant::Cols => "gemv_cols",
                Variant::ColsVec => "gemv_cols_v",
                Variant::Finish => "gemv_fin",
                _ => "gemv_rows",
            },
            (Family::Reduce, _) if self.variant == Variant::ScanLines => "scan_lines",
            (Family::Reduce, _) if self.variant == Variant::ScanBlocks => "scan_blocks",
            (Family::Reduce, _) if self.variant == Variant::Rows => "reduce_rows",
            (Family::Reduce, _) if self.variant == Variant::RowsVec => "reduce_rows_v",
            (Family::Reduce, _) if self.variant == Variant::ColsVec => "reduce_cols_v",
            (Family::Reduce, _) => "reduce_cols",
            (Family::ArgReduce, _) if self.variant == Variant::Rows => "arg_rows",
            (Family::ArgReduce, _) if self.variant == Variant::RowsVec => "arg_rows_v",
            (Family::ArgReduce, _) => "arg_cols",
            (_, 1) if general => "general1",
            (_, 1) => "contig1",
            (_, 2) if general => "general2",
            (_, 2) => "contig2",
            (_, _) if general => "general3",
            _ => "contig3",
        }
    }

    /// Override constants for the pipeline.
    pub fn constants(&self) -> Vec<(&'static str, f64)> {
        let mut c = vec![("WG", self.target.workgroup_size as f64)];
        if let Variant::Contig(m) = self.variant {
            for (i, name) in ["MODE_A", "MODE_B", "MODE_C"].iter().enumerate() {
                c.push((name, m[i] as u8 as f64));
            }
        }
        c
    }

    /// True for modules that move elements as raw bits without converting them
    /// (same-dtype copies and slice updates), so NaN payloads and signalling NaNs
    /// survive.
    pub fn raw_bits(&self) -> bool {
        match self.family {
            Family::Copy | Family::SliceUpdate | Family::Place | Family::Gather => {
                self.inputs.first() == Some(&self.output)
            }
            Family::Scatter => {
                self.op == Op::Scatter(ScatterOp::Set) && self.inputs.get(1) == Some(&self.output)
            }
            _ => false,
        }
    }

    /// Number of input bindings (binding 0 is the parameters, 1 the output, inputs
    /// follow).
    pub fn input_bindings(&self) -> usize {
        match self.family {
            Family::Matmul | Family::Gemv | Family::Norm | Family::Reduce | Family::Sort => {
                self.inputs.len()
            }
            f => f.arity(),
        }
    }
}

/// f16 element <-> f32 helpers: by the hardware where the device probe passed
/// (`Target::f16`), else by hand (exact everywhere).
pub(crate) fn f16_helpers(hw: bool) -> &'static str {
    if hw {
        "fn ex_f16(w: u32, j: u32) -> f32 { let h = unpack2x16float(w); return select(h.x, h.y, j != 0u); }\n\
         fn st_f16(v: f32) -> u32 { return pack2x16float(vec2<f32>(v, 0.0)); }\n\
         fn x2_f16(w: u32) -> vec2<f32> { return unpack2x16float(w); }\n\
         fn st2_f16(v: vec2<f32>) -> u32 { return pack2x16float(v); }\n"
    } else {
        "fn ex_f16(w: u32, j: u32) -> f32 { return f16_val((w >> (j << 4u)) & 0xffffu); }\n\
         fn st_f16(v: f32) -> u32 { return f16_bits(v); }\n\
         fn x2_f16(w: u32) -> vec2<f32> { return vec2<f32>(f16_val(w & 0xffffu), f16_val(w >> 16u)); }\n\
         fn st2_f16(v: vec2<f32>) -> u32 { return f16_bits(v.x) | (f16_bits(v.y) << 16u); }\n"
    }
}

fn ex_name(d: DType, raw: bool) -> &'static str {
    if raw {
        match d.size() {
            4 => "u32",
            2 => "u16",
            _ => "u8",
        }
    } else {
        d.storage()
    }
}

/// Composes the final WGSL source of a module, or fails if the op is unknown or not
/// defined for the dtypes.
pub fn compose(spec: &ModuleSpec) -> Result<String> {
    compose_with(spec, None)
}

/// Input `a` of a module computed by other code rather than read from binding 2:
/// `code` declares its bindings and defines `ld_a(i)` for element `i` of a
/// row-major input (a fused prologue); `f16`: it needs the f16 conversions.
pub(crate) struct InputCode<'a> {
    pub(crate) code: &'a str,
    pub(crate) f16: bool,
}

/// [`compose`], with input `a` given by `input_a` where set (general variants).
pub(crate) fn compose_with(spec: &ModuleSpec, input_a: Option<InputCode<'_>>) -> Result<String> {
    if spec.inputs.contains(&DType::F64) || spec.output == DType::F64 {
        return Err(Error::UnsupportedDType {
            dtype: "f64",
            reason: format!("{:?} '{}' has no f64 kernel", spec.family, spec.op),
        });
    }
    if spec.inputs.contains(&DType::I64) || spec.output == DType::I64 {
        return Err(Error::UnsupportedDType {
            dtype: "i64",
            reason: "WGSL has no 64-bit integers".into(),
        });
    }
    let mut p = String::new();
    let t = &spec.target;
    let reduce = matches!(spec.family, Family::Reduce | Family::ArgReduce);
    let raw = spec.raw_bits();
    let uses_f16 = input_a.as_ref().is_some_and(|c| c.f16)
        || !raw && (spec.inputs.contains(&DType::F16) || spec.output == DType::F16);
    if reduce && t.subgroups && t.subgroup_directive {
        p.push_str("enable subgroups;\n");
    }
    let coop = spec.family == Family::Matmul
        && matches!(spec.variant, Variant::Coop | Variant::CoopVec(_));
    if coop {
        p.push_str("enable f16;\nenable wgpu_cooperative_matrix;\n");
    }
    p.push_str("// ---- generated prelude ----\n");
    // Inputs are read through vec4<u32> except by the general elementwise kernels and
    // the scalar-load reductions; reductions write single words.
    let product = matches!(spec.family, Family::Matmul | Family::Gemv | Family::Norm);
    let general = if reduce || product {
        !matches!(
            spec.variant,
            Variant::RowsVec | Variant::ColsVec | Variant::TiledVec(_) | Variant::CoopVec(_)
        )
    } else {
        spec.variant == Variant::General
    };
    let arr = if general {
        "array<u32>"
    } else {
        "array<vec4<u32>>"
    };
    // The vectorised row ops store a vec4 of words at a time.
    let vec_rows = spec.family == Family::Norm && spec.variant == Variant::RowsVec;
    let out_arr = if spec.family == Family::Scatter {
        "array<atomic<u32>>"
    } else if (reduce || product) && !vec_rows {
        "array<u32>"
    } else {
        arr
    };
    p.push_str("@group(0) @binding(0) var<storage, read> P: array<u32>;\n");
    writeln!(
        p,
        "@group(0) @binding(1) var<storage, read_write> O: {out_arr};"
    )
    .unwrap();
    if !spec.family.takes(spec.inputs.len(), spec.variant) {
        return Err(Error::Shape(format!(
            "{:?} takes {} inputs, got {}",
            spec.family,
            spec.family.arity(),
            spec.inputs.len()
        )));
    }
    let out_ct = if raw { Ct::U32 } else { spec.output.ct() };
    let letters = ['a', 'b', 'c'];
    for (k, d) in spec.inputs.iter().enumerate() {
        let l = letters[k];
        let up = l.to_ascii_uppercase();
        if let (0, Some(c)) = (k, &input_a) {
            let ct = if raw { Ct::U32 } else { d.ct() };
            writeln!(p, "alias CA = {};", ct.wgsl()).unwrap();
            writeln!(p, "const LA: u32 = {}u;", d.log_epw()).unwrap();
            p.push_str(c.code);
            continue;
        }
        let aliased = spec.alias & (1 << k) != 0;
        // Bindings are IA, IB, IC: A, B and C are the cooperative-matrix roles.
        let src = if aliased {
            "O".to_string()
        } else {
            format!("I{up}")
        };
        if !aliased {
            writeln!(
                p,
                "@group(0) @binding({}) var<storage, read> {src}: {arr};",
                k + 2
            )
            .unwrap();
        }
        let ct = if raw { Ct::U32 } else { d.ct() };
        writeln!(p, "alias C{up} = {};", ct.wgsl()).unwrap();
        writeln!(p, "const L{up}: u32 = {}u;", d.log_epw()).unwrap();
        if general {
            writeln!(p, "fn w{l}(w: u32) -> u32 {{ return {src}[w]; }}").unwrap();
            if product {
                // The tiled kernel's vec4 loads, compiled out unless MM_VEC.
                writeln!(
                    p,
                    "fn v{l}(v: u32) -> vec4<u32> {{ return vec4<u32>(w{l}(4u * v), w{l}(4u * v + 1u), w{l}(4u * v + 2u), w{l}(4u * v + 3u)); }}"
                )
                .unwrap();
            }
        } else {
            writeln!(
                p,
                "fn w{l}(w: u32) -> u32 {{ return {src}[w >> 2u][w & 3u]; }}"
            )
            .unwrap();
            writeln!(p, "fn v{l}(v: u32) -> vec4<u32> {{ return {src}[v]; }}").unwrap();
        }
        let ex = ex_name(*d, raw);
        writeln!(
            p,
            "fn x{l}(w: u32, j: u32) -> C{up} {{ return ex_{ex}(w, j); }}"
        )
        .unwrap();
        writeln!(
            p,
            "fn ld_{l}(i: u32) -> C{up} {{ return ex_{ex}(w{l}(i >> L{up}), i & ((1u << L{up}) - 1u)); }}"
        )
        .unwrap();
        // Both elements of a 16-bit word at once (the elementwise kernels' pair path;
        // a placeholder that is never called for other widths).
        if d.log_epw() == 1 {
            writeln!(
                p,
                "fn x2{l}(w: u32) -> vec2<C{up}> {{ return x2_{ex}(w); }}"
            )
            .unwrap();
        } else {
            writeln!(
                p,
                "fn x2{l}(w: u32) -> vec2<C{up}> {{ return vec2<C{up}>(x{l}(w, 0u), x{l}(w, 1u)); }}"
            )
            .unwrap();
        }
    }
    if !reduce {
        writeln!(p, "alias CO = {};", out_ct.wgsl()).unwrap();
        writeln!(p, "const LO: u32 = {}u;", spec.output.log_epw()).unwrap();
        writeln!(
            p,
            "fn st_o(v: CO) -> u32 {{ return st_{}(v); }}",
            ex_name(spec.output, raw)
        )
        .unwrap();
        if spec.output.log_epw() == 1 {
            writeln!(
                p,
                "fn st2_o(v: vec2<CO>) -> u32 {{ return st2_{}(v); }}",
                ex_name(spec.output, raw)
            )
            .unwrap();
        } else {
            p.push_str("fn st2_o(v: vec2<CO>) -> u32 { return st_o(v.x); } // never called\n");
        }
    }
    if uses_f16 {
        p.push_str(f16_helpers(t.f16));
    }
    let undefined = |d: DType| Error::OpNotDefined {
        op: spec.op.to_string(),
        dtype: d.name(),
    };
    let wrong_op = || {
        Error::Validation(format!(
            "a {:?} module cannot compute '{}'",
            spec.family, spec.op
        ))
    };
    let mut files: Vec<&str> = vec![COMMON];
    match spec.family {
        Family::Unary => {
            let Op::Unary(op) = spec.op else {
                return Err(wrong_op());
            };
            let d = spec.inputs[0];
            if !op.supports(d) {
                return Err(undefined(d));
            }
            let want = if op.outputs_bool() { DType::Bool } else { d };
            check_out(spec, want)?;
            writeln!(
                p,
                "fn op(a: CA) -> CO {{ return {}; }}",
                ops::unary_expr(op, d, UNARY)
            )
            .unwrap();
            files.extend([WORDS, ELEMENTWISE, UNARY]);
        }
        Family::Binary => {
            let Op::Binary(op) = spec.op else {
                return Err(wrong_op());
            };
            let d = spec.inputs[0];
            if spec.inputs[1] != d {
                return Err(Error::Shape(format!(
                    "binary '{op}' needs equal input dtypes, got {} and {}",
                    d, spec.inputs[1]
                )));
            }
            if !op.supports(d) {
                return Err(undefined(d));
            }
            let want = if op.outputs_bool() { DType::Bool } else { d };
            check_out(spec, want)?;
            writeln!(
                p,
                "fn op(a: CA, b: CB) -> CO {{ return {}; }}",
                ops::binary_expr(op, d.ct())
            )
            .unwrap();
            files.extend([WORDS, ELEMENTWISE, BINARY]);
        }
        Family::Axpby => {
            let d = spec.inputs[0];
            if !d.is_float() || spec.inputs[1] != d {
                return Err(undefined(d));
            }
            check_out(spec, d)?;
            p.push_str("fn op(a: CA, b: CB) -> CO { return axpby_f32(a, b); }\n");
            files.extend([WORDS, ELEMENTWISE, BINARY]);
        }
        Family::Select => {
            if spec.inputs[0] != DType::Bool || spec.inputs[1] != spec.inputs[2] {
                return Err(Error::Shape(format!(
                    "select needs a bool condition and equal value dtypes, got {:?}",
                    spec.inputs
                )));
            }
            check_out(spec, spec.inputs[1])?;
            p.push_str("fn op(a: CA, b: CB, c: CC) -> CO { return select(c, b, a != 0u); }\n");
            files.extend([WORDS, ELEMENTWISE]);
        }
        Family::Copy => {
            let e = if raw {
                "a".to_string()
            } else {
                ops::cast_expr(spec.inputs[0], spec.output)
            };
            writeln!(p, "fn op(a: CA) -> CO {{ return {e}; }}").unwrap();
            files.extend([WORDS, ELEMENTWISE]);
        }
        Family::SliceUpdate => {
            if !raw || spec.inputs[1] != spec.output {
                return Err(Error::Shape(format!(
                    "slice_update needs base, update and output of one dtype, got {:?} -> {}",
                    spec.inputs, spec.output
                )));
            }
            if spec.variant != Variant::General {
                return Err(Error::Shape(
                    "slice_update has only the general variant".into(),
                ));
            }
            files.extend([WORDS, SLICE_UPDATE]);
        }
        Family::Matmul | Family::Gemv => {
            product_prelude(spec, &mut p)?;
            files.push(match (spec.family, spec.variant) {
                (Family::Matmul, Variant::Coop) => MATMUL_COOP,
                (Family::Matmul, Variant::CoopVec(_)) => MATMUL_COOP_VEC,
                (Family::Matmul, _) => MATMUL,
                _ => GEMV,
            });
            if spec.family == Family::Matmul {
                files.push(MATMUL_TILE);
            }
        }
        Family::Norm => {
            let Op::Norm(op) = spec.op else {
                return Err(wrong_op());
            };
            let k = op as u32;
            let d = spec.inputs[0];
            let params = op.arity() - 1;
            if !d.is_float()
                || spec.inputs.len() != 1 + params
                || spec.inputs.iter().any(|&p| p != d)
                || !(spec.output == d || spec.output == DType::F32)
                || !matches!(spec.variant, Variant::Rows | Variant::RowsVec)
            {
                return Err(Error::Shape(format!(
                    "{} needs x and {params} parameters of one float dtype and the rows variant, got {:?} -> {} ({:?})",
                    spec.op, spec.inputs, spec.output, spec.variant
                )));
            }
            writeln!(p, "const NORM_OP: u32 = {k}u;").unwrap();
            p.push_str(match params {
                0 => "fn ld_w(i: u32) -> f32 { return 1.0; }\nfn ld_b2(i: u32) -> f32 { return 0.0; }\n",
                1 => "fn ld_w(i: u32) -> f32 { return ld_b(i); }\nfn ld_b2(i: u32) -> f32 { return 0.0; }\n",
                _ => "fn ld_w(i: u32) -> f32 { return ld_b(i); }\nfn ld_b2(i: u32) -> f32 { return ld_c(i); }\n",
            });
            // vec4-of-words loads of weight and bias, and word / vec4 stores, for
            // either declaration of O.
            if spec.variant == Variant::RowsVec {
                p.push_str(match params {
                    0 => "fn vw(q: u32) -> vec4<u32> { return vec4<u32>(0u); }\nfn vb2(q: u32) -> vec4<u32> { return vec4<u32>(0u); }\n",
                    1 => "fn vw(q: u32) -> vec4<u32> { return vb(q); }\nfn vb2(q: u32) -> vec4<u32> { return vec4<u32>(0u); }\n",
                    _ => "fn vw(q: u32) -> vec4<u32> { return vb(q); }\nfn vb2(q: u32) -> vec4<u32> { return vc(q); }\n",
                });
                p.push_str("fn nr_store(w: u32, v: u32) { O[w >> 2u][w & 3u] = v; }\nfn nr_store4(q: u32, v: vec4<u32>) { O[q] = v; }\n");
            } else {
                p.push_str("fn vw(q: u32) -> vec4<u32> { return vec4<u32>(0u); }\nfn vb2(q: u32) -> vec4<u32> { return vec4<u32>(0u); }\n");
                p.push_str("fn nr_store(w: u32, v: u32) { O[w] = v; }\nfn nr_store4(q: u32, v: vec4<u32>) { for (var i = 0u; i < 4u; i++) { O[4u * q + i] = v[i]; } }\n");
            }
            files.extend([NORM, UNARY]);
        }
        Family::Place | Family::Gather | Family::Scatter => {
            index_prelude(spec, &mut p)?;
            files.extend([WORDS, INDEX]);
            if spec.family == Family::Scatter {
                files.push(SCATTER);
            }
        }
        Family::Sort => {
            let ok = spec.output == DType::U32
                && spec.variant == Variant::General
                && match spec.op.name() {
                    "sort_init" | "radix_hist" => spec.inputs.len() == 1,
                    "radix_scatter" => spec.inputs.len() == 2 && spec.inputs[1] == DType::U32,
                    "sort_global" | "sort_global2" | "sort_local" => spec.inputs.is_empty(),
                    "sort_finish" => spec.inputs[..] == [DType::U32],
                    _ => false,
                };
            if !ok {
                return Err(Error::Shape(format!(
                    "sort pass '{}' on {:?} -> {} ({:?})",
                    spec.op, spec.inputs, spec.output, spec.variant
                )));
            }
            if matches!(spec.op.name(), "sort_init" | "radix_hist" | "radix_scatter") {
                let key = match spec.inputs[0].ct() {
                    // NaN last (every NaN alike), -0 as +0, then sign-magnitude to
                    // an unsigned order.
                    Ct::F32 => {
                        "let b = bitcast<u32>(v); if ((b & 0x7fffffffu) > 0x7f800000u) { return 0xffffffffu; } let c = select(b, 0u, b == 0x80000000u); return select(c | 0x80000000u, ~c, (c & 0x80000000u) != 0u);"
                    }
                    Ct::I32 => "return bitcast<u32>(v) ^ 0x80000000u;",
                    Ct::U32 => "return v;",
                };
                writeln!(p, "fn sort_key(v: CA) -> u32 {{ {key} }}").unwrap();
            }
            files.push(if spec.op.name().starts_with("radix") {
                RADIX
            } else {
                SORT
            });
        }
        Family::RandomBits => {
            if spec.inputs[..] != [DType::U32]
                || spec.output != DType::U32
                || spec.variant != Variant::General
                || !["random_bits", "random_bits_part"].contains(&spec.op.name())
            {
                return Err(Error::Shape(format!(
                    "random_bits reads u32 keys and writes u32 (general variant), got {} {:?} -> {} ({:?})",
                    spec.op, spec.inputs, spec.output, spec.variant
                )));
            }
            files.push(RANDOM);
        }
        Family::Fill => files.extend([WORDS, COPY]),
        Family::Arange => {
            let e = match spec.output {
                // step = P[3] + P[1] (hi + lo), so long ranges do not drift by i * (step - f32(step)).
                d if d.is_float() => {
                    "bitcast<f32>(P[2]) + (f32(i) * bitcast<f32>(P[3]) + f32(i) * bitcast<f32>(P[1]))"
                }
                DType::I32 => "bitcast<i32>(P[2]) + bitcast<i32>(i) * bitcast<i32>(P[3])",
                DType::Bool => {
                    "select(0u, 1u, (bitcast<i32>(P[2]) + bitcast<i32>(i) * bitcast<i32>(P[3])) != 0i)"
                }
                _ => "P[2] + i * P[3]",
            };
            writeln!(p, "fn arange_val(i: u32) -> CO {{ return {e}; }}").unwrap();
            files.extend([WORDS, COPY]);
        }
        Family::Reduce => {
            let Op::Reduce(op) = spec.op else {
                return Err(wrong_op());
            };
            let d = spec.inputs[0];
            let acc = op.acc_dtype(d);
            // f32 accumulators may be stored rounded to f16/bf16, one value per word
            // (the caller gives each result its own word: single-output reductions).
            let narrow = acc == DType::F32 && matches!(spec.output, DType::F16 | DType::BF16);
            if !narrow {
                check_out(spec, acc)?;
            }
            let a = acc.ct().wgsl();
            writeln!(p, "alias ACC = {a};").unwrap();
            writeln!(
                p,
                "fn acc_init() -> ACC {{ {INF_BITS} return {}; }}",
                identity(op, acc.ct())
            )
            .unwrap();
            let logical = matches!(op, ReduceOp::All | ReduceOp::Any);
            let load = match (logical, d.ct()) {
                (true, Ct::F32) => "select(0u, 1u, nz_f(a))",
                (true, Ct::I32) => "select(0u, 1u, a != 0i)",
                (true, Ct::U32) => "select(0u, 1u, a != 0u)",
                _ => "a",
            };
            writeln!(p, "fn acc_load(a: CA) -> ACC {{ return {load}; }}").unwrap();
            writeln!(
                p,
                "fn combine(a: ACC, b: ACC) -> ACC {{ return r{op}_{a}(a, b); }}"
            )
            .unwrap();
            if narrow {
                writeln!(
                    p,
                    "fn st_acc(v: ACC) -> u32 {{ return st_{}(v); }}",
                    spec.output.storage()
                )
                .unwrap();
            } else {
                writeln!(p, "fn st_acc(v: ACC) -> u32 {{ return bitcast<u32>(v); }}").unwrap();
            }
            let wg = if t.subgroups {
                "wg_reduce_sg"
            } else {
                "wg_reduce_tree"
            };
            writeln!(
                p,
                "fn wg_reduce(v: ACC, lid: u32) -> ACC {{ return {wg}(v, lid); }}"
            )
            .unwrap();
            files.push(REDUCE);
            if matches!(spec.variant, Variant::ScanLines | Variant::ScanBlocks) {
                let carry = spec.inputs.get(1);
                if logical || narrow || carry.is_some_and(|&c| c != acc) {
                    return Err(Error::Shape(format!(
                        "scans write {acc} accumulators of sum/prod/max/min and read {acc} carries, got {op} {:?} -> {}",
                        spec.inputs, spec.output
                    )));
                }
                if carry.is_none() {
                    p.push_str("fn ld_b(i: u32) -> ACC { return acc_init(); } // no carries\n");
                }
                files.push(SCAN);
            }
        }
        Family::ArgReduce => {
            let Op::ArgReduce(op) = spec.op else {
                return Err(wrong_op());
            };
            check_out(spec, DType::U32)?;
            let d = spec.inputs[0];
            let a = d.ct().wgsl();
            writeln!(p, "alias ACC = {a};").unwrap();
            let (id, cmp) = if op == ArgReduceOp::ArgMax {
                (identity(ReduceOp::Max, d.ct()), ">")
            } else {
                (identity(ReduceOp::Min, d.ct()), "<")
            };
            writeln!(
                p,
                "fn arg_init() -> AP {{ {INF_BITS} return AP({id}, 0xffffffffu); }}"
            )
            .unwrap();
            writeln!(
                p,
                "fn arg_better(a: ACC, b: ACC) -> bool {{ return b {cmp} a; }}"
            )
            .unwrap();
            let isnan = if d.is_float() { "isnan_f(v)" } else { "false" };
            writeln!(p, "fn acc_isnan(v: ACC) -> bool {{ return {isnan}; }}").unwrap();
            let wg = if t.subgroups {
                "wg_arg_sg"
            } else {
                "wg_arg_tree"
            };
            writeln!(
                p,
                "fn wg_arg(v: AP, lid: u32) -> AP {{ return {wg}(v, lid); }}"
            )
            .unwrap();
            files.push(REDUCE);
        }
    }
    if spec.family == Family::Select || spec.family == Family::Copy {
        // Input dtype checks done above; the output binding is any dtype.
    }
    if input_a.is_some() {
        // The prologue's steps call the op functions and round through the stores.
        if !files.contains(&WORDS) {
            if reduce {
                p.push_str("const LO: u32 = 2u; // the words helpers' (unused here)\n");
            }
            files.push(WORDS);
        }
        for f in [UNARY, BINARY] {
            if !files.contains(&f) {
                files.push(f);
            }
        }
    }
    p.push_str("// ---- end of prelude ----\n");
    let body: String = files.concat();
    Ok(p.clone() + &tree_shake(&p, &body, spec.entry_point()))
}

/// Dtype checks and constants of the product families: float operands of one dtype,
/// output of that dtype or f32 (partial sums, or a 16-bit result rounded later), the
/// tile shape, and `ld_c` for the optional bias.
fn product_prelude(spec: &ModuleSpec, p: &mut String) -> Result<()> {
    let ins = &spec.inputs;
    let fin = spec.variant == Variant::Finish;
    let d = if fin {
        ins.get(1).copied().unwrap_or(spec.output)
    } else {
        ins[0]
    };
    let ok = d.is_float()
        && (fin && ins[0] == DType::F32 || !fin && ins[1] == d)
        && ins.iter().skip(if fin { 1 } else { 2 }).all(|&c| c == d)
        && (spec.output == d || spec.output == DType::F32);
    if !ok {
        return Err(Error::Shape(format!(
            "{:?} needs float operands of one dtype and an output of that dtype or f32, got {ins:?} -> {}",
            spec.family, spec.output
        )));
    }
    if matches!(spec.variant, Variant::Coop | Variant::CoopVec(_)) {
        if spec.target.coop == 0 || ins[0] != DType::F16 {
            return Err(Error::Shape(format!(
                "the cooperative-matrix matmul needs f16 operands and a target with cooperative matrices, got {ins:?} on {:?}",
                spec.target
            )));
        }
        writeln!(p, "const SG: u32 = {}u;", spec.target.coop).unwrap();
        if let Variant::CoopVec(i) = spec.variant {
            // Eight subgroups of 32 share out the 128 x 128 tile.
            if spec.target.coop != 32 || i > 3 {
                return Err(Error::Shape(format!(
                    "the vec4 cooperative matmul needs subgroups of 32 and a layout below 4, got {} and {i}",
                    spec.target.coop
                )));
            }
            writeln!(p, "const A_MFAST: bool = {};", i & 1 != 0).unwrap();
            writeln!(p, "const B_KFAST: bool = {};", i & 2 != 0).unwrap();
        }
    } else if spec.family == Family::Matmul {
        let (Variant::Tiled(i) | Variant::TiledVec(i)) = spec.variant else {
            return Err(Error::Shape("matmul has only tiled variants".into()));
        };
        let vec = matches!(spec.variant, Variant::TiledVec(_));
        if vec && (ins[0] != DType::F32 || !vec4_tile(i as usize)) {
            return Err(Error::Shape(format!(
                "the vec4 matmul reads f32 operands in whole vec4s per invocation, got {ins:?}, tile {i}"
            )));
        }
        writeln!(p, "const MM_VEC: bool = {vec};").unwrap();
        let (wx, wy, bk) = TILES
            .get(i as usize)
            .copied()
            .ok_or_else(|| Error::Shape(format!("no matmul tile configuration {i}")))?;
        writeln!(
            p,
            "const WX: u32 = {wx}u;\nconst WY: u32 = {wy}u;\nconst BK: u32 = {bk}u;"
        )
        .unwrap();
    } else if !matches!(
        spec.variant,
        Variant::Rows | Variant::RowsVec | Variant::Cols | Variant::ColsVec | Variant::Finish
    ) {
        return Err(Error::Shape(format!(
            "gemv has no variant {:?}",
            spec.variant
        )));
    }
    let c = if fin { 1 } else { 2 };
    if ins.len() == c + 1 {
        if fin {
            p.push_str("fn ld_c(i: u32) -> f32 { return ld_b(i); }\n");
        }
    } else {
        p.push_str("fn ld_c(i: u32) -> f32 { return 0.0; } // no c: never read\n");
    }
    Ok(())
}

/// Dtype checks of the indexing families and their helpers: `index_a`/`index_b`
/// (the index input's value made to count from the end when negative, `NO_INDEX`
/// outside the axis) and the scatter's `combine`.
fn index_prelude(spec: &ModuleSpec, p: &mut String) -> Result<()> {
    let ins = &spec.inputs;
    let raw = spec.raw_bits();
    let bad = |why: &str| {
        Err(Error::Shape(format!(
            "{:?} '{}' {why}, got {ins:?} -> {} ({:?})",
            spec.family, spec.op, spec.output, spec.variant
        )))
    };
    if spec.variant != Variant::General {
        return bad("has only the general variant");
    }
    let idx = match spec.family {
        Family::Place if raw && matches!(spec.op.name(), "place" | "place_flat") => return Ok(()),
        Family::Place => return bad("moves bits of one dtype"),
        Family::Gather if !raw => return bad("moves bits of one dtype"),
        Family::Gather => (1, ins[1]),
        _ => {
            let add = match spec.op {
                Op::Scatter(ScatterOp::Set) => false,
                Op::Scatter(ScatterOp::Add) => true,
                _ => return bad("combines by set or add"),
            };
            if ins[1] != spec.output || (add && spec.output == DType::Bool) {
                return bad("needs updates of the output's dtype (add: not bool)");
            }
            let e = if add {
                format!("st_o(ex_{}(w, j) + u)", spec.output.storage())
            } else {
                "st_o(u)".to_string()
            };
            writeln!(
                p,
                "fn combine(w: u32, j: u32, u: CB) -> u32 {{ return {e}; }}"
            )
            .unwrap();
            (0, ins[0])
        }
    };
    let l = ['a', 'b'][idx.0];
    let body = match idx.1 {
        DType::I32 => {
            let v = if raw {
                format!("bitcast<i32>(ld_{l}(p))")
            } else {
                format!("ld_{l}(p)")
            };
            format!(
                "let v = {v}; let k = select(v, v + i32(n), v < 0i); \
                 return select(NO_INDEX, u32(k), k >= 0i && u32(k) < n);"
            )
        }
        DType::U32 | DType::U8 => {
            format!("let v = ld_{l}(p); return select(NO_INDEX, v, v < n);")
        }
        _ => return bad("takes i32, u32 or u8 indices"),
    };
    writeln!(p, "fn index_{l}(p: u32, n: u32) -> u32 {{ {body} }}").unwrap();
    Ok(())
}

fn check_out(spec: &ModuleSpec, want: DType) -> Result<()> {
    if spec.output != want {
        return Err(Error::Shape(format!(
            "{:?} '{}' on {:?} writes {}, but the output is {}",
            spec.family, spec.op, spec.inputs, want, spec.output
        )));
    }
    Ok(())
}

/// Declares the bits of ±inf for [`identity`]. WGSL forbids const-expressions
/// that evaluate to inf or NaN (browsers reject `bitcast<f32>(0xff800000u)`; naga
/// accepts it): a bitcast of a `let` is a runtime expression.
const INF_BITS: &str = "let ninf_bits = 0xff800000u; let pinf_bits = 0x7f800000u;";

fn identity(op: ReduceOp, ct: Ct) -> &'static str {
    use ReduceOp::*;
    match (op, ct) {
        (Sum, Ct::F32) => "0.0",
        (Sum, Ct::I32) => "0i",
        (Sum, Ct::U32) | (Any, _) => "0u",
        (Prod, Ct::F32) => "1.0",
        (Prod, Ct::I32) => "1i",
        (Prod, Ct::U32) | (All, _) => "1u",
        (Max, Ct::F32) => "bitcast<f32>(ninf_bits)",
        (Max, Ct::I32) => "(-2147483647i - 1i)",
        (Max, Ct::U32) => "0u",
        (Min, Ct::F32) => "bitcast<f32>(pinf_bits)",
        (Min, Ct::I32) => "2147483647i",
        (Min, Ct::U32) => "0xffffffffu",
    }
}

/// Splits WGSL source (comments removed) into top-level items; returns
/// (function name or None, item text).
fn items(src: &str) -> Vec<(Option<String>, String)> {
    let mut clean = String::with_capacity(src.len());
    for line in src.lines() {
        let l = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        if !l.trim().is_empty() {
            clean.push_str(l.trim_end());
            clean.push('\n');
        }
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    for ch in clean.chars() {
        cur.push(ch);
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    out.push(std::mem::take(&mut cur));
                }
            }
            ';' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => {}
        }
    }
    out.into_iter()
        .map(|s| s.trim_start_matches('\n').to_string())
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let name = fn_name(&s);
            (name, s)
        })
        .collect()
}

fn fn_name(item: &str) -> Option<String> {
    let mut toks = idents(item);
    while let Some(t) = toks.next() {
        if t == "fn" {
            return toks.next().map(str::to_string);
        }
        if matches!(
            t,
            "const" | "var" | "override" | "alias" | "struct" | "enable"
        ) {
            return None;
        }
    }
    None
}

fn idents(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
}

/// Keeps the non-function items of `body` and the functions reachable from `entry`
/// (through the prelude's functions too).
pub(crate) fn tree_shake(prelude: &str, body: &str, entry: &str) -> String {
    let body_items = items(body);
    let prelude_items = items(prelude);
    let mut fns: HashMap<&str, &str> = HashMap::new();
    for (name, text) in prelude_items.iter().chain(body_items.iter()) {
        if let Some(n) = name {
            fns.insert(n.as_str(), text.as_str());
        }
    }
    let mut keep: BTreeSet<&str> = BTreeSet::new();
    // Roots: the entry point and every prelude function (the prelude is emitted whole).
    let mut stack: Vec<&str> = vec![entry];
    stack.extend(prelude_items.iter().filter_map(|(n, _)| n.as_deref()));
    while let Some(f) = stack.pop() {
        if !keep.insert(f) {
            continue;
        }
        if let Some(text) = fns.get(f) {
            for id in idents(text) {
                if fns.contains_key(id) && !keep.contains(id) {
                    stack.push(id);
                }
            }
        }
    }
    let mut out = String::new();
    for (name, text) in &body_items {
        match name {
            Some(n) if !keep.contains(n.as_str()) => {}
            _ => {
                out.push_str(text);
                out.push('\n');
            }
        }
    }
    out
}

/// Runs `check` on every spec across a few threads and returns the failures as
/// `"{spec:?}: {message}"`: the completeness tests' driver (naga's translations here,
/// wmx-metal's MSL), which otherwise take minutes one module at a time.
pub fn check_specs(
    specs: &[ModuleSpec],
    check: impl Fn(&ModuleSpec) -> std::result::Result<(), String> + Sync,
) -> Vec<String> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(4);
    let check = &check;
    std::thread::scope(|s| {
        let handles: Vec<_> = specs
            .chunks(specs.len().div_ceil(threads).max(1))
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|spec| check(spec).err().map(|e| format!("{spec:?}: {e}")))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec!["a checking thread panicked".into()])
            })
            .collect()
    })
}

/// Every module the library can build for `target`: each (family, op, dtype,
/// variant) combination that the op tables define. Used by the completeness tests.
pub fn module_specs(target: Target) -> Vec<ModuleSpec> {
    use InputMode::*;
    let mut v = Vec::new();
    let spec = |family, op: Op, inputs: Vec<DType>, output, variant| ModuleSpec {
        family,
        op,
        inputs,
        output,
        variant,
        alias: 0,
        target,
    };
    let one = [
        Contig([Scalar, Scalar, Scalar]),
        Contig([Vec4, Scalar, Scalar]),
        Contig([Elem, Scalar, Scalar]),
        Variant::General,
    ];
    let two = [
        Contig([Scalar, Scalar, Scalar]),
        Contig([Scalar, Vec4, Scalar]),
        Contig([Vec4, Scalar, Scalar]),
        Contig([Vec4, Vec4, Scalar]),
        Contig([Elem, Elem, Scalar]),
        Variant::General,
    ];
    for d in DType::WORDS {
        for &op in UnaryOp::ALL {
            if op.supports(d) {
                let o = if op.outputs_bool() { DType::Bool } else { d };
                for var in one {
                    v.push(spec(Family::Unary, op.into(), vec![d], o, var));
                }
            }
        }
        for &op in BinaryOp::ALL {
            if op.supports(d) {
                let o = if op.outputs_bool() { DType::Bool } else { d };
                for var in two {
                    v.push(spec(Family::Binary, op.into(), vec![d, d], o, var));
                }
            }
        }
        if d.is_float() {
            for var in two {
                v.push(spec(Family::Axpby, Op::Named("axpby"), vec![d, d], d, var));
            }
        }
        for var in [
            Contig([Vec4, Vec4, Vec4]),
            Contig([Scalar, Elem, Scalar]),
            Variant::General,
        ] {
            v.push(spec(
                Family::Select,
                Op::Named("select"),
                vec![DType::Bool, d, d],
                d,
                var,
            ));
        }
        for o in DType::WORDS {
            for var in [
                Contig([Vec4, Scalar, Scalar]),
                Contig([Elem, Scalar, Scalar]),
                Variant::General,
            ] {
                v.push(spec(Family::Copy, Op::Named("copy"), vec![d], o, var));
            }
        }
        v.push(spec(
            Family::SliceUpdate,
            Op::Named("slice_update"),
            vec![d, d],
            d,
            Variant::General,
        ));
        v.push(spec(
            Family::Place,
            Op::Named("place"),
            vec![d],
            d,
            Variant::General,
        ));
        v.push(spec(
            Family::Place,
            Op::Named("place_flat"),
            vec![d],
            d,
            Variant::General,
        ));
        let g = Variant::General;
        if d == DType::U32 {
            for op in ["random_bits", "random_bits_part"] {
                v.push(spec(Family::RandomBits, Op::Named(op), vec![d], d, g));
            }
            for op in ["sort_global", "sort_global2", "sort_local"] {
                v.push(spec(Family::Sort, Op::Named(op), vec![], d, g));
            }
            v.push(spec(Family::Sort, Op::Named("sort_finish"), vec![d], d, g));
        }
        v.push(spec(
            Family::Sort,
            Op::Named("sort_init"),
            vec![d],
            DType::U32,
            g,
        ));
        v.push(spec(
            Family::Sort,
            Op::Named("radix_hist"),
            vec![d],
            DType::U32,
            g,
        ));
        v.push(spec(
            Family::Sort,
            Op::Named("radix_scatter"),
            vec![d, DType::U32],
            DType::U32,
            g,
        ));
        for i in [DType::I32, DType::U32, DType::U8] {
            v.push(spec(
                Family::Gather,
                Op::Named("gather"),
                vec![d, i],
                d,
                Variant::General,
            ));
            v.push(spec(
                Family::Scatter,
                ScatterOp::Set.into(),
                vec![i, d],
                d,
                Variant::General,
            ));
            if d != DType::Bool {
                let op = ScatterOp::Add.into();
                v.push(spec(Family::Scatter, op, vec![i, d], d, Variant::General));
            }
        }
        v.push(spec(
            Family::Fill,
            Op::Named("fill"),
            vec![],
            d,
            Contig([Scalar; 3]),
        ));
        v.push(spec(
            Family::Arange,
            Op::Named("arange"),
            vec![],
            d,
            Contig([Scalar; 3]),
        ));
        for &op in ReduceOp::ALL {
            let acc = op.acc_dtype(d);
            for var in [
                Variant::Rows,
                Variant::Cols,
                Variant::RowsVec,
                Variant::ColsVec,
            ] {
                v.push(spec(Family::Reduce, op.into(), vec![d], acc, var));
            }
            // Single f16/bf16 results stored by the final row pass itself.
            if d.is_float() && d != DType::F32 && acc == DType::F32 {
                for (input, var) in [
                    (d, Variant::Rows),
                    (d, Variant::RowsVec),
                    (acc, Variant::RowsVec),
                ] {
                    v.push(spec(Family::Reduce, op.into(), vec![input], d, var));
                }
            }
        }
        let scans = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];
        for op in scans.map(Op::Reduce) {
            let acc = d.acc();
            v.push(spec(Family::Reduce, op, vec![d], acc, Variant::ScanLines));
            v.push(spec(Family::Reduce, op, vec![d], acc, Variant::ScanBlocks));
            let var = Variant::ScanBlocks;
            v.push(spec(Family::Reduce, op, vec![d, acc], acc, var));
        }
        for &op in ArgReduceOp::ALL {
            for var in [Variant::Rows, Variant::Cols, Variant::RowsVec] {
                v.push(spec(Family::ArgReduce, op.into(), vec![d], DType::U32, var));
            }
        }
        if d.is_float() {
            for out in [d, DType::F32] {
                for ins in [vec![d, d], vec![d, d, d]] {
                    for i in 0..TILES.len() {
                        let var = Variant::Tiled(i as u8);
                        v.push(spec(
                            Family::Matmul,
                            Op::Named("matmul"),
                            ins.clone(),
                            out,
                            var,
                        ));
                        if d == DType::F32 && vec4_tile(i) {
                            let var = Variant::TiledVec(i as u8);
                            v.push(spec(
                                Family::Matmul,
                                Op::Named("matmul"),
                                ins.clone(),
                                out,
                                var,
                            ));
                        }
                    }
                    for var in [
                        Variant::Rows,
                        Variant::RowsVec,
                        Variant::Cols,
                        Variant::ColsVec,
                    ] {
                        v.push(spec(Family::Gemv, Op::Named("gemv"), ins.clone(), out, var));
                    }
                    if target.coop > 0 && d == DType::F16 {
                        let vecs = (0..4).map(Variant::CoopVec);
                        for var in std::iter::once(Variant::Coop).chain(vecs) {
                            v.push(spec(
                                Family::Matmul,
                                Op::Named("matmul"),
                                ins.clone(),
                                out,
                                var,
                            ));
                        }
                    }
                }
            }
            for ins in [vec![DType::F32], vec![DType::F32, d]] {
                v.push(spec(
                    Family::Gemv,
                    Op::Named("gemv"),
                    ins,
                    d,
                    Variant::Finish,
                ));
            }
            for &op in NormOp::ALL {
                for out in [d, DType::F32] {
                    for var in [Variant::Rows, Variant::RowsVec] {
                        v.push(spec(Family::Norm, op.into(), vec![d; op.arity()], out, var));
                    }
                }
            }
        }
    }
    v
}

use Variant::Contig;

/// naga's verdict on a WGSL module: `Err` with its message, pointing into the source.
pub fn validate_wgsl(label: &str, source: &str, entry: &str) -> Result<()> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| Error::Validation(format!("{label}: {}", e.emit_to_string(source))))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::all(),
    )
    .validate(&module)
    .map_err(|e| Error::Validation(format!("{label}: {}", e.emit_to_string(source))))?;
    if !module
        .entry_points
        .iter()
        .any(|e| e.name == entry && e.stage == naga::ShaderStage::Compute)
    {
        return Err(Error::Validation(format!(
            "{label}: no @compute entry point named `{entry}`"
        )));
    }
    Ok(())
}
