//! Composing kernel modules: a generated prelude (bindings, type aliases, load/store
//! helpers, op selection) followed by the plain `.wgsl` family files, from which only
//! the functions reachable from the chosen entry point are kept (smaller modules
//! compile faster in naga and in the driver).
//!
//! What is particular to a family (its checks, its prelude lines, its files, its entry
//! points, the modules it builds) is in the family's folder, as a [`Family`] value
//! that each [`ModuleSpec`] carries: nothing here names a family.

use crate::dtype::{Ct, DType, Words};
use crate::{Error, Result};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;
use wmx_spec::{ArgReduceOp, BinaryOp, NormOp, ReduceOp, ScatterOp, UnaryOp};

pub(crate) const COMMON: &str = include_str!("common.wgsl");
pub(crate) const WORDS: &str = include_str!("words.wgsl");
/// `mul_wide`, the full product of two words: for every composed module and the
/// 64-bit kernels.
pub(crate) const MUL_WIDE: &str = include_str!("mul_wide.wgsl");

/// A kernel family: what composition needs to know of it. Each is a `static` in
/// its folder (`elementwise/family.rs`, `matmul/family.rs`, ...), listed once in
/// `lib.rs`'s `FAMILIES`; two families are equal when their names are.
pub struct Family {
    /// The family's name (kernel labels, errors).
    pub name: &'static str,
    /// Inputs of its modules (without an optional bias or carry).
    pub(crate) arity: usize,
    /// Whether a module's number of inputs fits its variant.
    pub(crate) takes: fn(&ModuleSpec) -> bool,
    /// A module's entry point.
    pub(crate) entry: fn(&ModuleSpec) -> &'static str,
    /// Whether a module moves raw bits ([`ModuleSpec::raw_bits`]).
    pub(crate) raw: fn(&ModuleSpec) -> bool,
    /// How a module declares and reads its buffers.
    pub(crate) io: fn(&ModuleSpec) -> Io,
    /// The family's checks and prelude lines (appended to the prelude), and the
    /// WGSL files its entry points live in.
    pub(crate) body: fn(&ModuleSpec, &mut String) -> Result<Vec<&'static str>>,
    /// Every module the family builds for a target (the completeness tests).
    pub(crate) specs: fn(Target) -> Vec<ModuleSpec>,
}

impl Family {
    /// An elementwise-like family of `arity` inputs: contiguous variants (`contigN`)
    /// and the strided one (`generalN`), vec4 loads, converting values.
    pub(crate) const fn elementwise(
        name: &'static str,
        arity: usize,
        body: fn(&ModuleSpec, &mut String) -> Result<Vec<&'static str>>,
        specs: fn(Target) -> Vec<ModuleSpec>,
    ) -> Family {
        Family {
            name,
            arity,
            takes: |s| s.inputs.len() == s.family.arity,
            entry: elementwise_entry,
            raw: |_| false,
            io: Io::elementwise,
            body,
            specs,
        }
    }
}

impl std::fmt::Debug for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Family {
    fn eq(&self, other: &Family) -> bool {
        self.name == other.name
    }
}

impl Eq for Family {}

impl std::hash::Hash for Family {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.name.hash(h)
    }
}

/// The entry point of an elementwise-like module: `contig1`..`contig3` by arity,
/// or the strided loop `general`.
pub(crate) fn elementwise_entry(spec: &ModuleSpec) -> &'static str {
    if spec.variant == Variant::General {
        return "general";
    }
    match spec.family.arity {
        1 => "contig1",
        2 => "contig2",
        _ => "contig3",
    }
}

/// How a module declares and reads its buffers.
pub(crate) struct Io {
    /// Lines before the prelude (`enable ...;`).
    pub(crate) enable: &'static str,
    /// Inputs are bound as `array<u32>` (word loads), else as `array<vec4<u32>>`
    /// (or pairs, below).
    pub(crate) words: bool,
    /// Inputs and the output are bound as `array<vec2<u32>>` (8-byte loads and
    /// stores; `p{l}` reads pair `i`), with `words` false.
    pub(crate) pairs: bool,
    /// With word loads, also define `v{l}` (a vec4 of four word loads): the
    /// product kernels' vec4 path, compiled out unless used.
    pub(crate) vec_of_words: bool,
    /// The output binding's type.
    pub(crate) out: &'static str,
    /// The prelude defines the output's element type and stores (`CO`, `st_o`).
    pub(crate) store: bool,
}

impl Io {
    /// Elementwise modules: vec4 loads and stores but in the general variant.
    pub(crate) fn elementwise(spec: &ModuleSpec) -> Io {
        let words = spec.variant == Variant::General;
        Io {
            enable: "",
            words,
            pairs: false,
            vec_of_words: false,
            out: if words {
                "array<u32>"
            } else {
                "array<vec4<u32>>"
            },
            store: true,
        }
    }

    /// Modules that write single words (reductions, products): word loads except
    /// in the vec4 variants.
    pub(crate) fn rows(spec: &ModuleSpec) -> Io {
        let words = !matches!(
            spec.variant,
            Variant::RowsVec
                | Variant::ColsVec
                | Variant::TiledVec(_)
                | Variant::CoopVec(_)
                | Variant::ScanBlocksVec
                | Variant::ScanTotalsVec
        );
        Io {
            enable: "",
            words,
            pairs: false,
            vec_of_words: false,
            out: "array<u32>",
            store: true,
        }
    }

    /// Modules that read and write f32 pairs (complex numbers): 8-byte loads
    /// and stores.
    pub(crate) fn pairs(_: &ModuleSpec) -> Io {
        Io {
            enable: "",
            words: false,
            pairs: true,
            vec_of_words: false,
            out: "array<vec2<u32>>",
            store: false,
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
    /// Matmul: tile configuration `i` of [`TILES`](crate::TILES).
    Tiled(u8),
    /// As `Tiled`, with vec4 loads of f32 operands contiguous along K (A) and N (B).
    TiledVec(u8),
    /// Gemv: the pass that adds partial sums and applies the epilogue.
    Finish,
    /// Matmul on cooperative matrices (f16 operands; needs [`Target::coop`]).
    Coop,
    /// Matmul on cooperative matrices, tiles of 128 rows staged from 16-byte loads of
    /// aligned f16 operands (subgroups of 32). Bit 0: A is read along M (a
    /// transposed view), bit 1: B along K; bit 2: tiles of 64 columns, not 128
    /// (`matmul::coop_vec_cols`).
    CoopVec(u8),
    /// Reductions as scans: one invocation per line, serial along it.
    ScanLines,
    /// Reductions as scans: one workgroup per block of a contiguous line (an
    /// optional second input holds each block's carry).
    ScanBlocks,
    /// As `ScanBlocks`, for 32-bit elements in rows that start on a vec4, in a
    /// 16-byte padded input and output: `vec4<u32>` loads and stores; the optional
    /// second input holds the row's block totals (each block combines those before
    /// it).
    ScanBlocksVec,
    /// The block totals of `ScanBlocksVec` (the first of its two passes).
    ScanTotalsVec,
    /// Flash attention: head dimension `dim`, `split` invocations per row,
    /// `rows` rows and `keys` keys per tile.
    Attention {
        /// Head dimension (a multiple of 4 * split).
        dim: u16,
        /// Invocations per row (a power of two; above 1 needs subgroups).
        split: u8,
        /// Rows (query positions times grouped heads) per workgroup.
        rows: u8,
        /// Keys per tile in workgroup memory.
        keys: u8,
    },
    /// Flash attention on cooperative matrices (f16; needs [`Target::coop`] of 32):
    /// head dimension `dim` (a multiple of 16 up to 128), 64 rows a workgroup.
    AttentionCoop {
        /// Head dimension.
        dim: u16,
    },
    /// Attention for at most four rows per key head (decoding) over 16-bit k and v
    /// read in 16-byte loads: head dimension `dim` (32, 64 or 128; needs subgroups
    /// of at least `dim / 8`).
    AttentionDecode {
        /// Head dimension.
        dim: u16,
    },
    /// FFT rows: workgroup-memory slots swizzled (for one or two rows a
    /// workgroup, whose first radix-16 step would meet bank conflicts) or not;
    /// a real transform's step folded in or not.
    Fft {
        /// Slots swizzled.
        swizzle: bool,
        /// The real transform's step ([`crate::FftPass::real`]).
        real: bool,
    },
    /// Affine quantization: `bits` per value, `group` values per scale and bias,
    /// and (matrix-vector products) at most `rows` rows of x (0 elsewhere).
    Quant {
        /// Bits per quantized value (2 to 8, not 7).
        bits: u8,
        /// Values per group (32, 64 or 128).
        group: u8,
        /// The product's most rows of x (1 or 8; 0 for the other kernels).
        rows: u8,
    },
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
            Variant::ScanBlocksVec => "scan_blocks_vec".into(),
            Variant::ScanTotalsVec => "scan_totals_vec".into(),
            Variant::Attention {
                dim,
                split,
                rows,
                keys,
            } => format!("d{dim}_s{split}_r{rows}_k{keys}"),
            Variant::Quant { bits, group, rows } => format!("b{bits}_g{group}_m{rows}"),
            Variant::AttentionCoop { dim } => format!("coop_d{dim}"),
            Variant::AttentionDecode { dim } => format!("decode_d{dim}"),
            Variant::Fft { swizzle, real } => {
                format!(
                    "fft{}{}",
                    if *swizzle { "_swizzled" } else { "" },
                    if *real { "_real" } else { "" }
                )
            }
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
    /// Add f32 with `atomicAdd` on `atomic<f32>` (scatter_add) instead of a
    /// compare-exchange loop: the adapter has `SHADER_FLOAT32_ATOMIC` (Vulkan's
    /// `VK_EXT_shader_atomic_float`).
    pub atomic_f32: bool,
    /// Workgroup size of the 8-bit radix sort (radix8.wgsl): eight subgroups of the
    /// adapter's smallest size, with every subgroup size it runs whole within it; 0
    /// where that sort is not used (no subgroups: the 4-bit passes).
    pub radix_wg: u32,
}

impl Default for Target {
    fn default() -> Self {
        Target {
            subgroups: false,
            subgroup_directive: false,
            workgroup_size: 256,
            f16: false,
            coop: 0,
            atomic_f32: false,
            radix_wg: 0,
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
    /// A family's own kernel (`"sort_init"`, `"gemv"`, `"place4"`, ...).
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
    pub family: &'static Family,
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
        (self.family.entry)(self)
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
        (self.family.raw)(self)
    }

    /// Number of input bindings (binding 0 is the parameters, 1 the output, inputs
    /// follow).
    pub fn input_bindings(&self) -> usize {
        self.inputs.len()
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
    /// WGSL files the code calls into, added where the family's lack them.
    pub(crate) files: &'a [&'static str],
}

/// [`compose`], with input `a` given by `input_a` where set (general variants).
pub(crate) fn compose_with(spec: &ModuleSpec, input_a: Option<InputCode<'_>>) -> Result<String> {
    // The 64-bit dtypes have kernels of their own (`wide`) for the families that
    // take them.
    if let Some(d) = spec
        .inputs
        .iter()
        .chain([&spec.output])
        .find(|d| crate::dtype::is_wide(**d))
    {
        return Err(Error::UnsupportedDType {
            dtype: d.name(),
            reason: format!("{:?} '{}' has no {d} kernel", spec.family, spec.op),
        });
    }
    let io = (spec.family.io)(spec);
    let mut p = String::new();
    let raw = spec.raw_bits();
    let uses_f16 = input_a.as_ref().is_some_and(|c| c.f16)
        || !raw && (spec.inputs.contains(&DType::F16) || spec.output == DType::F16);
    p.push_str(io.enable);
    p.push_str("// ---- generated prelude ----\n");
    let arr = if io.words {
        "array<u32>"
    } else if io.pairs {
        "array<vec2<u32>>"
    } else {
        "array<vec4<u32>>"
    };
    p.push_str("@group(0) @binding(0) var<storage, read> P: array<u32>;\n");
    writeln!(
        p,
        "@group(0) @binding(1) var<storage, read_write> O: {};",
        io.out
    )
    .unwrap();
    if !(spec.family.takes)(spec) {
        return Err(Error::Shape(format!(
            "{:?} takes {} inputs, got {}",
            spec.family,
            spec.family.arity,
            spec.inputs.len()
        )));
    }
    let out_ct = if raw { Ct::U32 } else { spec.output.ct() };
    let letters = ['a', 'b', 'c', 'd', 'e'];
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
        let ct = if raw { Ct::U32 } else { d.ct() };
        if !aliased {
            writeln!(
                p,
                "@group(0) @binding({}) var<storage, read> {src}: {arr};",
                k + 2
            )
            .unwrap();
        }
        writeln!(p, "alias C{up} = {};", ct.wgsl()).unwrap();
        writeln!(p, "const L{up}: u32 = {}u;", d.log_epw()).unwrap();
        if io.words {
            writeln!(p, "fn w{l}(w: u32) -> u32 {{ return {src}[w]; }}").unwrap();
            if io.vec_of_words {
                writeln!(
                    p,
                    "fn v{l}(v: u32) -> vec4<u32> {{ return vec4<u32>(w{l}(4u * v), w{l}(4u * v + 1u), w{l}(4u * v + 2u), w{l}(4u * v + 3u)); }}"
                )
                .unwrap();
            }
        } else if io.pairs {
            writeln!(
                p,
                "fn w{l}(w: u32) -> u32 {{ return {src}[w >> 1u][w & 1u]; }}"
            )
            .unwrap();
            writeln!(p, "fn p{l}(i: u32) -> vec2<u32> {{ return {src}[i]; }}").unwrap();
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
    if io.store {
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
        p.push_str(f16_helpers(spec.target.f16));
    }
    let mut files: Vec<&str> = vec![COMMON, MUL_WIDE];
    files.extend((spec.family.body)(spec, &mut p)?);
    if let Some(input) = input_a {
        // The prologue's steps call the op functions and round through the stores.
        if !files.contains(&WORDS) {
            if !io.store {
                p.push_str("const LO: u32 = 2u; // the words helpers' (unused here)\n");
            }
            files.push(WORDS);
        }
        for f in input.files {
            if !files.contains(f) {
                files.push(f);
            }
        }
    }
    p.push_str("// ---- end of prelude ----\n");
    let body: String = files.concat();
    Ok(p.clone() + &tree_shake(&p, &body, spec.entry_point()))
}

/// The error of a module whose spec names an op of another family.
pub(crate) fn wrong_op(spec: &ModuleSpec) -> Error {
    Error::Validation(format!(
        "a {:?} module cannot compute '{}'",
        spec.family, spec.op
    ))
}

/// The error of an op not defined for a dtype.
pub(crate) fn undefined(spec: &ModuleSpec, d: DType) -> Error {
    Error::OpNotDefined {
        op: spec.op.to_string(),
        dtype: d.name(),
    }
}

pub(crate) fn check_out(spec: &ModuleSpec, want: DType) -> Result<()> {
    if spec.output != want {
        return Err(Error::Shape(format!(
            "{:?} '{}' on {:?} writes {}, but the output is {}",
            spec.family, spec.op, spec.inputs, want, spec.output
        )));
    }
    Ok(())
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

impl ModuleSpec {
    /// The spec of a module without aliased inputs.
    pub(crate) fn new(
        family: &'static Family,
        op: impl Into<Op>,
        inputs: Vec<DType>,
        output: DType,
        variant: Variant,
        target: Target,
    ) -> ModuleSpec {
        ModuleSpec {
            family,
            op: op.into(),
            inputs,
            output,
            variant,
            alias: 0,
            target,
        }
    }
}
