//! The 64-bit dtypes' kernel core: f64 on adapters with `SHADER_F64`, and i64/u64
//! on every adapter as pairs of `u32` words with their arithmetic written out
//! (`int64.wgsl`). It holds what every family's 64-bit path shares: the element
//! types ([`Ty`]), a module's prelude and sources, the pipeline cache, scratch
//! arrays, the f64 math (`f64.wgsl`) and the word arithmetic. The families' 64-bit
//! kernels are in their folders (`<family>/wide.rs` and `wide.wgsl`: elementwise
//! ops and casts, reductions and scans, sort keys, scatter-add, f64 products and
//! row ops); the word kernels move the data as pairs of words (copies, select,
//! gather, scatter, concatenate, slice updates), a view of `[.., n]` 64-bit
//! elements being a view of `[.., n, 2]` words.
//!
//! Each public family method of [`Kernels`] sends 64-bit dtypes to its `wide.rs`
//! after its own checks.

use crate::compose::{MUL_WIDE, tree_shake};
use crate::driver::Driver;
use crate::driver::{Batch, Binding};
use crate::dtype::DType;
use crate::kernels::Kernels;
use crate::kernels::MAX_GROUPS;
use crate::layout::{Contig, Strided, contiguous_strides};
use crate::{Error, Result};
use std::sync::Arc;

const WIDE_WGSL: &str = include_str!("wide.wgsl");
const F64_WGSL: &str = include_str!("f64.wgsl");
const INT64_WGSL: &str = include_str!("int64.wgsl");

/// WGSL element type of a binding, or of a module's elements (`E`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Ty {
    F64,
    I64,
    U64,
    U32,
}

impl Ty {
    pub(crate) fn of(d: DType) -> Ty {
        match d {
            DType::F64 => Ty::F64,
            DType::I64 => Ty::I64,
            DType::U64 => Ty::U64,
            _ => Ty::U32,
        }
    }
    /// The dtype of an element type.
    pub(crate) fn dtype(self) -> DType {
        match self {
            Ty::F64 => DType::F64,
            Ty::I64 => DType::I64,
            Ty::U64 => DType::U64,
            Ty::U32 => DType::U32,
        }
    }
    pub(crate) fn wgsl(self) -> &'static str {
        match self {
            Ty::F64 => "f64",
            Ty::I64 | Ty::U64 => "vec2<u32>",
            Ty::U32 => "u32",
        }
    }
    /// Suffix of the ops' functions on this type (`add_d`, `add_l`, `add_ul`).
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Ty::F64 => "d",
            Ty::U64 => "ul",
            _ => "l",
        }
    }
}

/// One 64-bit module: its entry point in the family's WGSL (`src`), the element
/// type `E`, the types of the output and the inputs (bound at 2..), and the
/// prelude's code (`op`, `ident`, ...).
pub(crate) struct Module<'a> {
    pub entry: &'static str,
    pub elem: Ty,
    pub out: Ty,
    pub ins: &'a [Ty],
    pub code: &'a str,
    /// The family's WGSL files (its kernels, and the op forms they call).
    pub src: &'static [&'static str],
}

impl Module<'_> {
    /// Whether the module computes in f64 (the adapter needs `SHADER_F64`).
    fn f64(&self) -> bool {
        self.elem == Ty::F64 || self.out == Ty::F64 || self.ins.contains(&Ty::F64)
    }

    /// The module's WGSL for workgroups of `wg`: the prelude, then what it calls of
    /// the family's files, the shared kernels, the 64-bit integer words and, where
    /// it computes in f64, the f64 math (tree-shaking keeps what is called).
    fn source(&self, prelude: &str) -> String {
        let mut all = self.src.concat();
        all.push_str(WIDE_WGSL);
        all.push_str(INT64_WGSL);
        all.push_str(MUL_WIDE);
        if self.f64() {
            all.push_str(F64_WGSL);
        }
        format!("{prelude}{}", tree_shake(prelude, &all, self.entry))
    }
}

/// A module as a family lists it for the naga tests (owned [`Module`] fields).
pub(crate) struct Listed {
    pub entry: &'static str,
    pub elem: Ty,
    pub out: Ty,
    pub ins: Vec<Ty>,
    pub code: String,
    pub src: &'static [&'static str],
}

/// `(label, WGSL source, entry point, whether it computes in f64)` of each listed
/// module, for workgroups of `wg` invocations.
pub(crate) fn composed(listed: Vec<Listed>, wg: u32) -> Vec<(String, String, &'static str, bool)> {
    listed
        .into_iter()
        .map(|l| {
            let m = Module {
                entry: l.entry,
                elem: l.elem,
                out: l.out,
                ins: &l.ins,
                code: &l.code,
                src: l.src,
            };
            let p = prelude(&m, wg);
            let label = format!("{} {}: {}", l.elem.wgsl(), l.entry, l.code.trim());
            (label, m.source(&p), l.entry, m.f64())
        })
        .collect()
}

/// A contiguous scratch array: written through [`Temp::out`], read through
/// [`Temp::view`].
pub(crate) struct Temp<B> {
    buffer: B,
    dtype: DType,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

impl<B> Temp<B> {
    pub(crate) fn out(&self) -> Contig<'_, B> {
        Contig {
            buffer: &self.buffer,
            window: None,
            dtype: self.dtype,
            shape: &self.shape,
        }
    }
    pub(crate) fn view(&self) -> Strided<'_, B> {
        Strided {
            buffer: &self.buffer,
            window: None,
            dtype: self.dtype,
            shape: &self.shape,
            strides: &self.strides,
            offset: 0,
        }
    }
    /// Sub-array `i` along the first axis.
    pub(crate) fn part(&self, i: usize) -> Strided<'_, B> {
        Strided {
            shape: &self.shape[1..],
            strides: &self.strides[1..],
            offset: i * self.strides[0] as usize,
            ..self.view()
        }
    }
}

/// The (low, high) words of `v`.
pub(crate) fn bits(v: f64) -> [u32; 2] {
    let b = v.to_bits();
    [b as u32, (b >> 32) as u32]
}

/// The error of an op without a kernel for `dtype`.
pub(crate) fn unsupported(dtype: DType, what: &str) -> Error {
    Error::UnsupportedDType {
        dtype: dtype.name(),
        reason: format!("{what} has no {dtype} kernel"),
    }
}

/// Elementwise parameters: `[n, rank, off_a, off_b, s0, s1, s2, s3, shape,
/// strides...]` for views of `shape` (collapsed by the caller or not).
pub(crate) fn map_params<B>(shape: &[usize], views: &[&Strided<B>], scalars: [f64; 2]) -> Vec<u32> {
    let [a, b] = scalars.map(bits);
    let mut p = vec![
        crate::layout::numel(shape) as u32,
        shape.len() as u32,
        views.first().map_or(0, |v| v.offset as u32),
        views.get(1).map_or(0, |v| v.offset as u32),
        a[0],
        a[1],
        b[0],
        b[1],
    ];
    p.extend(shape.iter().map(|&d| d as u32));
    for v in views {
        p.extend(v.strides.iter().map(|&s| s as i32 as u32));
    }
    p
}

/// The generated head of module `m`: workgroup size, element type, bindings and
/// op code.
fn prelude(m: &Module, wg: u32) -> String {
    let mut p = format!(
        "const WG: u32 = {wg}u;\nalias E = {};\n\
         @group(0) @binding(0) var<storage, read> P: array<u32>;\n\
         @group(0) @binding(1) var<storage, read_write> O: array<{}>;\n",
        m.elem.wgsl(),
        m.out.wgsl()
    );
    for (i, t) in m.ins.iter().enumerate() {
        p.push_str(&format!(
            "@group(0) @binding({}) var<storage, read> {}: array<{}>;\n",
            i + 2,
            ["A", "B", "C"][i],
            t.wgsl()
        ));
    }
    p.push_str(m.code);
    p
}

impl<D: Driver> Kernels<D> {
    /// Whether f64 buffers can be computed on here (`SHADER_F64`).
    pub(crate) fn has_f64(&self) -> bool {
        self.inner.caps.f64
    }

    /// The compiled module `m`, cached by its prelude and entry point.
    pub(crate) fn wide_pipe(&self, m: &Module) -> Result<Arc<D::Pipeline>> {
        if m.f64() && !self.has_f64() {
            return Err(Error::UnsupportedDType {
                dtype: "f64",
                reason: format!(
                    "adapter '{}' lacks the SHADER_F64 feature",
                    self.inner.caps.adapter_name
                ),
            });
        }
        let prelude = prelude(m, self.wg());
        let key = format!("{}\n{prelude}", m.entry);
        if let Some(p) = self.inner.wide_pipes.lock().unwrap().get(&key) {
            return Ok(p.clone());
        }
        let source = m.source(&prelude);
        let label = format!("{} {}", m.elem.wgsl(), m.entry);
        let bindings = (1, m.ins.len());
        let pipe =
            Arc::new(self.compile_module(&label, &source, m.entry, bindings, &[], m.f64())?);
        self.inner
            .wide_pipes
            .lock()
            .unwrap()
            .insert(key, pipe.clone());
        Ok(pipe)
    }

    pub(crate) fn wide_record(
        &self,
        b: &mut Batch<D>,
        m: &Module,
        buffers: Vec<Binding<D::Buffer>>,
        params: Vec<u32>,
        groups: u64,
    ) -> Result<()> {
        let pipe = self.wide_pipe(m)?;
        self.record_pipe(b, pipe, buffers, params, groups.max(1))
    }

    /// Workgroups for `n` items of a grid-stride kernel.
    pub(crate) fn wide_groups(&self, n: usize) -> u64 {
        (n as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS)
    }

    /// A contiguous scratch array of `shape` and `dtype` (freed when the batch
    /// that uses it is done).
    pub(crate) fn wide_temp(&self, shape: &[usize], dtype: DType) -> Result<Temp<D::Buffer>> {
        let n: usize = shape.iter().product();
        let bytes = (n.max(1) * dtype.size()).div_ceil(16) * 16;
        Ok(Temp {
            buffer: self.create_buffer(bytes as u64, Some("wmx 64-bit temporary"))?,
            dtype,
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
        })
    }

    /// `x` copied (cast) into a contiguous scratch array of `dtype`.
    pub(crate) fn wide_widen(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        dtype: DType,
    ) -> Result<Temp<D::Buffer>> {
        let t = self.wide_temp(x.shape, dtype)?;
        self.copy(b, x, &t.out())?;
        Ok(t)
    }

    /// An `Err` where an invocation of `what` would loop `iterations` times on an
    /// adapter that stops longer loops (lavapipe), instead of a wrong answer.
    pub(crate) fn within_loop_budget(&self, iterations: usize, what: &str) -> Result<()> {
        match self.inner.caps.loop_budget {
            Some(budget) if iterations >= budget as usize => Err(Error::UnsupportedDType {
                dtype: "64-bit",
                reason: format!(
                    "{what} would loop {iterations} times in one invocation; adapter '{}' stops \
                     loops after {budget}",
                    self.inner.caps.adapter_name
                ),
            }),
            _ => Ok(()),
        }
    }
}
