//! Rotary position embedding (MLX's `fast.rope`): every element of a row-major input
//! in one pass, the angles computed in the kernel.

use crate::compose::{Family, Io, ModuleSpec, Variant, WORDS, check_out as check_dtype};
use crate::driver::{Batch, Driver};
use crate::dtype::{DType, Words};
use crate::elementwise::UNARY_WGSL;
use crate::kernels::{Kernels, MAX_GROUPS};
use crate::layout::{Contig, Strided, check_out, check_view, is_row_major};
use crate::{Error, Result};

const ROPE_WGSL: &str = include_str!("rope.wgsl");

/// Rotary embedding: inputs x (f32, f16 or bf16), the i32 position offsets and the
/// f32 inverse frequencies; the output has x's dtype.
pub static ROPE: Family = Family {
    name: "Rope",
    arity: 3,
    takes: |s| s.inputs.len() == 3,
    entry: |s| s.op.name(),
    raw: |_| false,
    io: Io::elementwise,
    body: |spec, _| {
        let d = spec.inputs[0];
        let float16 = matches!(d, DType::F16 | DType::BF16);
        if !(d == DType::F32 || float16)
            || spec.inputs[1..] != [DType::I32, DType::F32]
            || spec.variant != Variant::General
            || !matches!(spec.op.name(), "rope" | "rope_elems")
        {
            return Err(Error::Shape(format!(
                "rope reads f32/f16/bf16 x, i32 offsets and f32 frequencies (general variant), got {:?} ({:?})",
                spec.inputs, spec.variant
            )));
        }
        check_dtype(spec, d)?;
        Ok(vec![WORDS, UNARY_WGSL, ROPE_WGSL])
    },
    specs: |t| {
        let ins = |d| vec![d, DType::I32, DType::F32];
        let mut v = Vec::new();
        for d in [DType::F32, DType::F16, DType::BF16] {
            for op in ["rope", "rope_elems"] {
                v.push(ModuleSpec::new(&ROPE, op, ins(d), d, Variant::General, t));
            }
        }
        v
    },
};

/// How [`Kernels::rope`] rotates: MLX's `fast.rope` parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RopeParams {
    /// Rows per sequence: the position of a row is its index modulo `seq_len`.
    pub seq_len: usize,
    /// Leading elements of each row that rotate (even, at most the row's length).
    pub dims: usize,
    /// Pairs `(2k, 2k + 1)` (GPT-J, MLX's `traditional`), else `(k, k + dims / 2)`.
    pub traditional: bool,
    /// Multiplies the positions.
    pub scale: f32,
}

impl<D: Driver> Kernels<D> {
    /// Rotary position embedding of the row-major `x` (`[.., seq_len, row]`) into
    /// `out`: the first `dims` elements of each row rotate in pairs by
    /// `scale * p * inv_freqs[k]`, `p = offsets[i / per] + (row index % seq_len)`
    /// where `i` is the element's index and `per = x.numel() / offsets.numel()`
    /// (one offset, or one per block of rows); the rest of each row is copied.
    /// `offsets` are contiguous i32, `inv_freqs` contiguous f32 of `dims / 2`.
    pub fn rope(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        offsets: &Strided<D::Buffer>,
        inv_freqs: &Strided<D::Buffer>,
        p: RopeParams,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let n = x.shape.iter().product::<usize>();
        let row = x.shape.last().copied().unwrap_or(0);
        let nf: usize = inv_freqs.shape.iter().product();
        let no: usize = offsets.shape.iter().product();
        let rows = p.seq_len * row;
        let ok = x.shape.len() >= 2
            && x.shape[x.shape.len() - 2] == p.seq_len
            && p.dims.is_multiple_of(2)
            && p.dims > 0
            && p.dims <= row
            && nf == p.dims / 2
            && no > 0
            && n.is_multiple_of(no)
            && rows > 0
            && (n / no).is_multiple_of(rows)
            && out.shape == x.shape
            && out.dtype == x.dtype
            && is_row_major(x)
            && is_row_major(offsets)
            && is_row_major(inv_freqs);
        if !ok && n > 0 {
            return Err(Error::Shape(format!(
                "rope: x {:?} (strides {:?}), {no} offsets, {nf} frequencies, {p:?}, out {:?}",
                x.shape, x.strides, out.shape
            )));
        }
        if x.dtype == DType::F64 {
            return Err(Error::UnsupportedDType {
                dtype: "f64",
                reason: "rope has no f64 kernel".into(),
            });
        }
        check_view(x, "rope x")?;
        check_view(offsets, "rope offsets")?;
        check_view(inv_freqs, "rope frequencies")?;
        check_out(out)?;
        // Whole words per row and per pair of words: the word kernel.
        let epw = out.dtype.epw();
        let words = x.offset.is_multiple_of(epw)
            && row.is_multiple_of(epw)
            && p.dims.is_multiple_of(2 * epw);
        let per_row = p.dims / (2 * epw) + row.saturating_sub(p.dims) / epw;
        let rows = n / row.max(1);
        // Items per row rounded up to a power of two: row and item by shifts.
        let shift = per_row.max(1).next_power_of_two().trailing_zeros();
        let (op, count) = if words {
            ("rope", rows << shift)
        } else {
            ("rope_elems", n.div_ceil(epw))
        };
        let inputs = vec![x.dtype, offsets.dtype, inv_freqs.dtype];
        let spec = self.spec(&ROPE, op, inputs, out.dtype, Variant::General, 0);
        if n == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        if count > u32::MAX as usize {
            return Err(Error::Shape(format!(
                "rope: {count} work items exceed the kernel's u32 count"
            )));
        }
        let per = n / no / row.max(1);
        let rcp = |b: usize| (1.0 / b as f32).to_bits();
        let params = vec![
            count as u32,
            per_row as u32,
            p.seq_len as u32,
            row as u32,
            p.dims as u32,
            p.traditional as u32,
            p.scale.to_bits(),
            per as u32,
            x.offset as u32,
            offsets.offset as u32,
            inv_freqs.offset as u32,
            n as u32,
            shift,
            rcp(p.seq_len),
            rcp(per),
            // The reciprocal division is exact for rows below 2^22.
            (rows < 1 << 22) as u32,
        ];
        let groups = (count as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS);
        let buffers = [
            out.binding(),
            x.binding(),
            offsets.binding(),
            inv_freqs.binding(),
        ];
        self.record(b, &spec, buffers, params, groups)
    }
}
