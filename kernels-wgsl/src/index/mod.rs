//! Indexing families: concatenate (one `place` dispatch per four inputs), gather
//! (`take_along_axis`) and scatter (set or add at indices along an axis).
//!
//! Index rule: an index `i` into an axis of length `n` means `i + n` when
//! `-n <= i < 0`; any other index outside `0..n` makes a gather write
//! [`gather_fill_bits`] and a scatter drop its update. No read or write leaves a
//! buffer whatever the indices hold.

mod family;
pub(crate) mod wide;

use family::PLACE_INPUTS;
pub use family::{GATHER, PLACE, SCATTER};

use crate::compose::Variant;
use crate::driver::Driver;
use crate::driver::{Batch, Binding};
use crate::dtype::is_wide;
use crate::dtype::{DType, Words};
use crate::kernels::Kernels;
use crate::kernels::MAX_GROUPS;
use crate::layout::{Contig, Strided};
use crate::layout::{check_out, check_view};
use crate::{Error, Result};
use wmx_spec::ScatterOp;

/// What every input of one concatenation shares.
struct Place {
    axis: usize,
    /// Elements between consecutive positions on the axis.
    inner: usize,
    /// Positions before the axis (the product of the leading extents).
    outer: usize,
}

/// One word per slot of a chunk of [`PLACE_INPUTS`] inputs (with their first
/// positions on the axis): `f` of each input, `absent` for slots past the chunk.
fn per_input<B>(
    chunk: &[(&Strided<B>, usize)],
    absent: usize,
    f: impl Fn(&Strided<B>, usize) -> usize,
) -> impl Iterator<Item = u32> {
    (0..PLACE_INPUTS).map(move |k| chunk.get(k).map_or(absent, |(x, lo)| f(x, *lo)) as u32)
}

/// Storage bits a gather writes for an out-of-range index: a quiet NaN for float
/// dtypes, the most negative value for signed integers, the largest for unsigned,
/// `true` for bool (JAX's fill values).
pub fn gather_fill_bits(d: DType) -> u64 {
    match d {
        DType::F32 => 0x7fc0_0000,
        DType::F16 => 0x7e00,
        DType::BF16 => 0x7fc0,
        DType::I32 => 0x8000_0000,
        DType::U32 => u32::MAX as u64,
        DType::U8 => 0xff,
        DType::Bool => 1,
        DType::F64 => u64::MAX,
        DType::C64 => 0x7fc0_0000_7fc0_0000,
        DType::I64 => 1 << 63,
        DType::U64 => u64::MAX,
    }
}

fn strides_bits(s: &[isize]) -> impl Iterator<Item = u32> + '_ {
    s.iter().map(|&s| s as i32 as u32)
}

fn check_index_dtype(op: &str, d: DType) -> Result<()> {
    match d {
        DType::I32 | DType::U32 | DType::U8 => Ok(()),
        _ => Err(Error::OpNotDefined {
            op: format!("{op} indices"),
            dtype: d.name(),
        }),
    }
}

impl<D: Driver> Kernels<D> {
    /// `out` = the `inputs` (one dtype and rank, equal extents off `axis`, any
    /// strides) joined along `axis`. Bits move unchanged. Each input is one
    /// dispatch over the output words its box covers.
    pub fn concatenate(
        &self,
        b: &mut Batch<D>,
        inputs: &[Strided<D::Buffer>],
        axis: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let rank = out.shape.len();
        let len: usize = inputs
            .iter()
            .map(|x| x.shape.get(axis).copied().unwrap_or(0))
            .sum();
        let fits = |x: &Strided<D::Buffer>| {
            x.dtype == out.dtype
                && x.shape.len() == rank
                && (0..rank).all(|d| d == axis || x.shape[d] == out.shape[d])
        };
        if axis >= rank || inputs.iter().any(|x| !fits(x)) || len != out.shape[axis] {
            let shapes: Vec<_> = inputs.iter().map(|x| (x.dtype, x.shape)).collect();
            return Err(Error::Shape(format!(
                "concatenate: inputs {shapes:?} along axis {axis} do not make {} {:?}",
                out.dtype, out.shape
            )));
        }
        self.check_dtype(out.dtype)?;
        check_out(out)?;
        if is_wide(out.dtype) {
            let words: Vec<_> = inputs.iter().map(crate::layout::Pairs::of).collect();
            let views: Vec<_> = words.iter().zip(inputs).map(|(w, x)| w.view(x)).collect();
            let shape = crate::layout::pair_shape(out.shape);
            return self.concatenate(b, &views, axis, &crate::layout::pair_out(out, &shape));
        }
        let spec = self.spec(
            &PLACE,
            "place",
            vec![out.dtype],
            out.dtype,
            Variant::General,
            0,
        );
        let n = out.numel();
        if n == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        // Elements between consecutive positions on `axis`, and the outer count.
        let inner: usize = out.shape[axis + 1..].iter().product();
        let outer: usize = out.shape[..axis].iter().product();
        // The inputs with elements, each with its first position on `axis`.
        let mut placed = Vec::with_capacity(inputs.len());
        let mut lo = 0;
        for x in inputs {
            check_view(x, "concatenate input")?;
            if x.buffer == out.buffer {
                return Err(Error::Shape(
                    "concatenate: an input shares the output buffer".into(),
                ));
            }
            if x.shape[axis] > 0 {
                placed.push((x, lo));
            }
            lo += x.shape[axis];
        }
        let at = Place { axis, inner, outer };
        for chunk in placed.chunks(PLACE_INPUTS) {
            match chunk {
                _ if chunk.iter().all(|(x, lo)| Self::flat(&at, x, *lo, out)) => {
                    self.place_words(b, &at, chunk, out)?
                }
                [(x, lo)] => self.place_one(b, &at, x, *lo, out)?,
                _ => self.place_several(b, &at, chunk, out)?,
            }
        }
        Ok(())
    }

    /// Output words `w0..w1` covering the box of `cnt` positions from `lo` on
    /// `at.axis`.
    fn box_words(at: &Place, lo: usize, cnt: usize, out: &Contig<D::Buffer>) -> (usize, usize) {
        let first = lo * at.inner;
        let last = (at.outer - 1) * out.shape[at.axis] * at.inner + (lo + cnt) * at.inner - 1;
        let sh = out.dtype.log_epw();
        (first >> sh, (last >> sh) + 1)
    }

    /// Whether `x`, starting at `lo` on the axis, is a row-major input whose box is
    /// whole output words in each of the output's rows (`out.shape[axis] * inner`
    /// elements, whole words too), read from whole words.
    fn flat(at: &Place, x: &Strided<D::Buffer>, lo: usize, out: &Contig<D::Buffer>) -> bool {
        let epw = out.dtype.epw();
        [lo, x.shape[at.axis], out.shape[at.axis]]
            .iter()
            .all(|n| (n * at.inner).is_multiple_of(epw))
            && crate::layout::is_row_major(x)
            && x.offset.is_multiple_of(epw)
    }

    /// One input of a concatenation into its box of the output.
    fn place_one(
        &self,
        b: &mut Batch<D>,
        at: &Place,
        x: &Strided<D::Buffer>,
        lo: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let (rank, axis, cnt) = (out.shape.len(), at.axis, x.shape[at.axis]);
        let (w0, w1) = Self::box_words(at, lo, cnt, out);
        let epw = out.dtype.epw();
        let spec = |op: &'static str| {
            self.spec(&PLACE, op, vec![out.dtype], out.dtype, Variant::General, 0)
        };
        // A box that is a small part of its word range (a column block): one
        // invocation per element of the input, for one-element words.
        let boxed = x.shape.iter().product::<usize>();
        if epw == 1 && at.outer > 1 && boxed < w1 - w0 {
            let mut params = vec![
                boxed as u32,
                rank as u32,
                axis as u32,
                x.offset as u32,
                lo as u32,
                cnt as u32,
            ];
            params.extend(out.shape.iter().map(|&d| d as u32));
            params.extend(strides_bits(x.strides));
            let groups = (boxed as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS);
            return self.record(
                b,
                &spec("place_box"),
                [out.binding(), x.binding()],
                params,
                groups,
            );
        }
        let mut params = vec![
            w0 as u32,
            w1 as u32,
            rank as u32,
            axis as u32,
            x.offset as u32,
            lo as u32,
            cnt as u32,
            out.numel() as u32,
        ];
        params.extend(out.shape.iter().map(|&d| d as u32));
        params.extend(strides_bits(x.strides));
        let groups = ((w1 - w0) as u64)
            .div_ceil(self.wg() as u64)
            .min(MAX_GROUPS);
        self.record(
            b,
            &spec("place"),
            [out.binding(), x.binding()],
            params,
            groups,
        )
    }

    /// Up to [`PLACE_INPUTS`] consecutive inputs of a concatenation (with their
    /// first positions on the axis), each [`Self::flat`]: word copies, one
    /// dispatch.
    fn place_words(
        &self,
        b: &mut Batch<D>,
        at: &Place,
        chunk: &[(&Strided<D::Buffer>, usize)],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let epw = out.dtype.epw();
        let words = |n: usize| n * at.inner / epw;
        let row = words(out.shape[at.axis]);
        let (first, last) = (chunk[0], chunk[chunk.len() - 1]);
        let end = words(last.1 + last.0.shape[at.axis]);
        let (w0, w1) = (words(first.1), (at.outer - 1) * row + end);
        let mut params = vec![w0 as u32, w1 as u32, row as u32, end as u32];
        params.extend(per_input(chunk, end, |_, lo| words(lo)));
        params.extend(per_input(chunk, 0, |x, _| x.offset / epw));
        params.extend(per_input(chunk, 0, |x, _| words(x.shape[at.axis])));
        let spec = self.spec(
            &PLACE,
            "place_flat4",
            vec![out.dtype; PLACE_INPUTS],
            out.dtype,
            Variant::General,
            0,
        );
        let groups = ((w1 - w0) as u64)
            .div_ceil(4 * self.wg() as u64)
            .min(MAX_GROUPS);
        self.record(b, &spec, self.place_bindings(chunk, out), params, groups)
    }

    /// The output and a chunk's inputs, absent ones bound to a placeholder that is
    /// never read.
    fn place_bindings<'a>(
        &'a self,
        chunk: &'a [(&Strided<D::Buffer>, usize)],
        out: &Contig<D::Buffer>,
    ) -> impl Iterator<Item = Binding<D::Buffer>> + 'a {
        let bind = |k: usize| match chunk.get(k) {
            Some((x, _)) => x.binding(),
            None => self.inner.dummy.clone().into(),
        };
        std::iter::once(out.binding()).chain((0..PLACE_INPUTS).map(bind))
    }

    /// Two to [`PLACE_INPUTS`] consecutive inputs of a concatenation (with their
    /// first positions on the axis) in one dispatch over the output words they
    /// cover, element by element through strides.
    fn place_several(
        &self,
        b: &mut Batch<D>,
        at: &Place,
        chunk: &[(&Strided<D::Buffer>, usize)],
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let (rank, d) = (out.shape.len(), out.dtype);
        let (first, last) = (chunk[0], chunk[chunk.len() - 1]);
        let (w0, _) = Self::box_words(at, first.1, first.0.shape[at.axis], out);
        let (_, w1) = Self::box_words(at, last.1, last.0.shape[at.axis], out);
        let words = (w1 - w0) as u64;
        let mut params = vec![
            w0 as u32,
            w1 as u32,
            rank as u32,
            at.axis as u32,
            out.numel() as u32,
        ];
        // Absent inputs: an empty box that holds no position.
        params.extend(per_input(chunk, 0, |_, lo| lo));
        params.extend(per_input(chunk, 0, |x, _| x.shape[at.axis]));
        params.extend(per_input(chunk, 0, |x, _| x.offset));
        params.extend(out.shape.iter().map(|&d| d as u32));
        for k in 0..PLACE_INPUTS {
            match chunk.get(k) {
                Some((x, _)) => params.extend(strides_bits(x.strides)),
                None => params.extend(std::iter::repeat_n(0, rank)),
            }
        }
        let groups = words.div_ceil(self.wg() as u64).min(MAX_GROUPS);
        let spec = self.spec(
            &PLACE,
            "place4",
            vec![d; PLACE_INPUTS],
            d,
            Variant::General,
            0,
        );
        self.record(b, &spec, self.place_bindings(chunk, out), params, groups)
    }

    /// `out[p] = x[p with p[axis] = indices[p]]` (`take_along_axis`): `x` and the
    /// integer `indices` (i32, u32 or u8) have `out`'s rank and extents off `axis`,
    /// `indices` has `out`'s shape. Index rule: negative indices count from the end; others out of range read [`crate::gather_fill_bits`] (gathers) or are dropped (scatters).
    pub fn gather(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        indices: &Strided<D::Buffer>,
        axis: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let n = x.shape.get(axis).copied().unwrap_or(0);
        self.gather_rows(b, x, indices, axis, n, 0, out)
    }

    /// [`Kernels::gather`] from one part of `x` along `axis`: `x` holds rows
    /// `lo .. lo + x.shape[axis]` of an axis of `axis_len` (indices count in
    /// `0..axis_len`, negative ones from its end). Output elements whose index lies
    /// in another part keep their value, so gathering part by part, into one
    /// output, reads an `x` larger than one binding. Out-of-range indices write
    /// the fill in every part.
    #[allow(clippy::too_many_arguments)]
    pub fn gather_rows(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        indices: &Strided<D::Buffer>,
        axis: usize,
        axis_len: usize,
        lo: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let fill = gather_fill_bits(out.dtype);
        let words = if is_wide(out.dtype) {
            [fill as u32, (fill >> 32) as u32]
        } else {
            [fill as u32; 2]
        };
        self.gather_filled(b, x, indices, axis, axis_len, lo, out, words)
    }

    /// [`Kernels::gather_rows`] with the fill of even and odd output elements
    /// (the two words of a 64-bit fill when gathering pairs of words).
    #[allow(clippy::too_many_arguments)]
    fn gather_filled(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        indices: &Strided<D::Buffer>,
        axis: usize,
        axis_len: usize,
        lo: usize,
        out: &Contig<D::Buffer>,
        fill: [u32; 2],
    ) -> Result<()> {
        let rank = out.shape.len();
        if x.dtype != out.dtype
            || indices.shape != out.shape
            || x.shape.len() != rank
            || axis >= rank
            || (0..rank).any(|d| d != axis && x.shape[d] != out.shape[d])
            || lo.checked_add(x.shape[axis]).is_none_or(|hi| hi > axis_len)
            || axis_len > u32::MAX as usize
        {
            return Err(Error::Shape(format!(
                "gather: {} {:?} at indices {:?} along axis {axis} for {} {:?}",
                x.dtype, x.shape, indices.shape, out.dtype, out.shape
            )));
        }
        if matches!(indices.dtype, DType::I64 | DType::U64) {
            let t = self.i64_indices(b, indices, axis_len)?;
            return self.gather_filled(b, x, &t.view(), axis, axis_len, lo, out, fill);
        }
        check_index_dtype("gather", indices.dtype)?;
        if is_wide(x.dtype) {
            let (xw, iw) = (
                crate::layout::Pairs::of(x),
                crate::layout::Pairs::spread(indices),
            );
            let words = crate::layout::pair_shape(out.shape);
            let o = crate::layout::pair_out(out, &words);
            let (xv, iv) = (xw.view(x), iw.view(indices));
            return self.gather_filled(b, &xv, &iv, axis, axis_len, lo, &o, fill);
        }
        let Some(spec) = self.gathering_module(&GATHER, "gather", &[x, indices], out)? else {
            return Ok(());
        };
        let n = out.numel();
        let mut params = vec![
            n as u32,
            rank as u32,
            axis as u32,
            axis_len as u32,
            x.offset as u32,
            indices.offset as u32,
            fill[0],
            lo as u32,
            x.shape[axis] as u32,
        ];
        params.extend(out.shape.iter().map(|&d| d as u32));
        params.extend(strides_bits(x.strides));
        params.extend(strides_bits(indices.strides));
        params.push(fill[1]);
        let items = n.div_ceil(out.dtype.epw()) as u64;
        let groups = items.div_ceil(self.wg() as u64).min(MAX_GROUPS);
        let buffers = [out.binding(), x.binding(), indices.binding()];
        self.record(b, &spec, buffers, params, groups)
    }

    /// `out` = `base` with `updates` combined at `indices` along `axis`: `op` is
    /// [`ScatterOp::Set`] or [`ScatterOp::Add`] (not for bool; floats computed in
    /// f32 and rounded after each addition). `indices` (i32, u32 or u8) and
    /// `updates` have one shape, equal to `base`'s (and `out`'s) off `axis`.
    /// Duplicate indices: one update wins (set) or all accumulate in an unspecified
    /// order (add). Index rule: negative indices count from the end; others out of range read [`crate::gather_fill_bits`] (gathers) or are dropped (scatters).
    #[allow(clippy::too_many_arguments)]
    pub fn scatter(
        &self,
        b: &mut Batch<D>,
        op: ScatterOp,
        base: &Strided<D::Buffer>,
        indices: &Strided<D::Buffer>,
        updates: &Strided<D::Buffer>,
        axis: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let n = out.shape.get(axis).copied().unwrap_or(0);
        self.scatter_rows(b, op, base, indices, updates, axis, n, 0, out)
    }

    /// [`Kernels::scatter`] into one part of a base along `axis`: `base` and `out`
    /// hold rows `lo .. lo + out.shape[axis]` of an axis of `axis_len` (indices
    /// count in `0..axis_len`, negative ones from its end); updates whose index
    /// falls in another part are left to that part. Scattering part by part, each
    /// into its range of one output, writes a base larger than one binding. Not
    /// for 64-bit parts (their scatter_add is computed per output element).
    #[allow(clippy::too_many_arguments)]
    pub fn scatter_rows(
        &self,
        b: &mut Batch<D>,
        op: ScatterOp,
        base: &Strided<D::Buffer>,
        indices: &Strided<D::Buffer>,
        updates: &Strided<D::Buffer>,
        axis: usize,
        axis_len: usize,
        lo: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let rows = out.shape.get(axis).copied().unwrap_or(0);
        let whole = lo == 0 && rows == axis_len;
        if lo.checked_add(rows).is_none_or(|hi| hi > axis_len)
            || axis_len > u32::MAX as usize
            || (!whole && is_wide(out.dtype))
        {
            return Err(Error::Shape(format!(
                "scatter: rows {lo}.. of {rows} in an axis of {axis_len} ({})",
                out.dtype
            )));
        }
        let rank = out.shape.len();
        if base.dtype != out.dtype
            || updates.dtype != out.dtype
            || base.shape != out.shape
            || indices.shape != updates.shape
            || indices.shape.len() != rank
            || axis >= rank
            || (0..rank).any(|d| d != axis && indices.shape[d] != out.shape[d])
        {
            return Err(Error::Shape(format!(
                "{op}: {} {:?} at indices {:?} of {} {:?} along axis {axis} into {} {:?}",
                base.dtype,
                base.shape,
                indices.shape,
                updates.dtype,
                updates.shape,
                out.dtype,
                out.shape
            )));
        }
        if matches!(indices.dtype, DType::I64 | DType::U64) {
            let t = self.i64_indices(b, indices, axis_len)?;
            let t = t.view();
            return self.scatter_rows(b, op, base, &t, updates, axis, axis_len, lo, out);
        }
        check_index_dtype(op.name(), indices.dtype)?;
        if op == ScatterOp::Add && out.dtype == DType::Bool {
            return Err(Error::OpNotDefined {
                op: op.name().into(),
                dtype: out.dtype.name(),
            });
        }
        for v in [indices, updates] {
            self.check_dtype(v.dtype)?;
            check_view(v, "scatter input")?;
        }
        let spec = self.spec(
            &SCATTER,
            op,
            vec![indices.dtype, updates.dtype],
            out.dtype,
            Variant::General,
            0,
        );
        if indices.buffer == out.buffer || updates.buffer == out.buffer {
            return Err(Error::Shape(format!(
                "{op}: inputs must not share the output buffer"
            )));
        }
        if is_wide(out.dtype) {
            check_view(base, "scatter input")?;
            if op == ScatterOp::Add {
                return self.wide_scatter_add(b, base, indices, updates, axis, out);
            }
            use crate::layout::{Pairs, pair_out, pair_shape};
            let (bw, iw, uw) = (Pairs::of(base), Pairs::spread(indices), Pairs::of(updates));
            let shape = pair_shape(out.shape);
            let o = pair_out(out, &shape);
            return self.scatter(
                b,
                op,
                &bw.view(base),
                &iw.view(indices),
                &uw.view(updates),
                axis,
                &o,
            );
        }
        self.copy(b, base, out)?;
        let n = indices.shape.iter().product::<usize>();
        if n == 0 || out.numel() == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let out_strides = crate::layout::contiguous_strides(out.shape);
        let mut params = vec![
            n as u32,
            rank as u32,
            axis as u32,
            axis_len as u32,
            indices.offset as u32,
            updates.offset as u32,
            lo as u32,
            rows as u32,
        ];
        params.extend(indices.shape.iter().map(|&d| d as u32));
        params.extend(strides_bits(indices.strides));
        params.extend(strides_bits(updates.strides));
        params.extend(strides_bits(&out_strides));
        let groups = (n as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS);
        let buffers = [out.binding(), indices.binding(), updates.binding()];
        self.record(b, &spec, buffers, params, groups)
    }
}
