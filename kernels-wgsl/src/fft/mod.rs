//! Discrete Fourier transforms of rows: one workgroup transforms a row of a
//! power of two up to [`FFT_MAX_ROW`] f32 pairs in workgroup memory (longer and
//! other lengths are composed by the caller: four-step, Bluestein); and the pass
//! that turns a complex transform of n / 2 points into a real one of n
//! ([`FftReal`]).

use crate::compose::{Family, Io, ModuleSpec, Variant, check_out as check_dtype};
use crate::driver::{Batch, Driver};
use crate::dtype::DType;
use crate::kernels::{Kernels, MAX_GROUPS};
use crate::layout::{Contig, Strided, check_out, check_view, is_row_major};
use crate::{Error, Result};
use std::fmt::Write;

const FFT_WGSL: &str = include_str!("fft.wgsl");
const REAL_WGSL: &str = include_str!("real.wgsl");
const REAL_STEP_WGSL: &str = include_str!("real_step.wgsl");
pub use wmx_spec::{FFT_MAX_ROW, FFT_TABLE, FftPass, FftReal};

/// The FFT's two passes, `fft_rows` (rows of an FFT) and `fft_real` (a real
/// transform from a complex one of half the length): inputs the f32 pairs and
/// the f32 twiddle table; f32 out.
pub static FFT: Family = Family {
    name: "Fft",
    arity: 2,
    takes: |s| s.inputs.len() == 2,
    entry: |s| {
        if s.op.name() == "fft_real" {
            "fft_real"
        } else {
            "fft_rows"
        }
    },
    raw: |_| false,
    io: Io::pairs,
    body: |spec, p| {
        let sources = match (spec.op.name(), spec.variant) {
            ("fft_rows", Variant::Fft { swizzle, real }) => {
                // Constants, so that a pass without them compiles without their
                // instructions and registers: the swizzle cost 2-6 % where a
                // workgroup holds more than two rows (runs 208-209), the real
                // step's branches 30-47 % of the complex passes (run 211).
                let mask = if swizzle { 15 } else { 0 };
                writeln!(p, "const FFT_SWIZZLE: u32 = {mask}u;").unwrap();
                writeln!(p, "const FFT_REAL: bool = {real};").unwrap();
                // The workgroup size as a constant, not the override WG: the 2-D
                // rfft 10 % faster (run 216).
                writeln!(p, "const FFT_WG: u32 = {}u;", spec.target.workgroup_size).unwrap();
                vec![REAL_STEP_WGSL, FFT_WGSL]
            }
            ("fft_real", Variant::General) => vec![REAL_STEP_WGSL, REAL_WGSL],
            _ => vec![],
        };
        if spec.inputs != [DType::F32, DType::F32] || sources.is_empty() {
            return Err(Error::Shape(format!(
                "fft reads f32 pairs and an f32 table (rows: an Fft variant, real: general), got {:?} ({:?}, {})",
                spec.inputs,
                spec.variant,
                spec.op.name()
            )));
        }
        check_dtype(spec, DType::F32)?;
        Ok(sources)
    },
    specs: |t| {
        let rows = |swizzle, real| ("fft_rows", Variant::Fft { swizzle, real });
        [
            rows(false, false),
            rows(true, false),
            rows(false, true),
            rows(true, true),
            ("fft_real", Variant::General),
        ]
        .into_iter()
        .map(|(op, v)| {
            let ins = vec![DType::F32, DType::F32];
            ModuleSpec::new(&FFT, op, ins, DType::F32, v, t)
        })
        .collect()
    },
};

impl<D: Driver> Kernels<D> {
    /// One pass of an unnormalized DFT over rows of `x` (f32 pairs, `[.., 2]`
    /// contiguous, addressed by `p`) into `out` (the same number of pairs, or
    /// as [`FftPass::widths`] says where a real transform is folded in), with
    /// the twiddles of `table` (contiguous f32 pairs: `W_4096^k` for `k < 4096`,
    /// then, for a twiddle of `N > 4096`, `W_N^j` for `j < N / 4096`). Every
    /// output pair must be written by exactly one row (the caller's plan).
    pub fn fft_rows(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        table: &Strided<D::Buffer>,
        p: FftPass,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let total = x.shape.iter().product::<usize>();
        let pairs = total / 2;
        let (in_width, width) = p.widths();
        let out_pairs = out.shape.iter().product::<usize>() / 2;
        let entries = table.shape.iter().product::<usize>() / 2;
        let rows = pairs / in_width.max(1);
        let big = |t: usize| if t > FFT_TABLE { t / FFT_TABLE } else { 0 };
        let want_entries = FFT_TABLE + p.twiddle.map_or(0, |(_, t)| big(t));
        // The last point any row reads or writes, to bound the addressing.
        let last = |h: [usize; 3], step: usize, width: usize| -> Option<u64> {
            let w = |v: usize| v as u64;
            let r2 = w(rows.checked_sub(1)?) / (w(p.radix[0]) * w(p.radix[1])).max(1);
            let (r0, r1) = (w(p.radix[0].min(rows)) - 1, w(p.radix[1]) - 1);
            let far = w(h[0]) * r0 + w(h[1]) * r1 + w(h[2]) * r2;
            Some(far + w(step) * w(width - 1))
        };
        // A folded real transform's step: no twiddles, unit point strides, and
        // W_2n^k from the table's first part.
        let real_ok = p.real.is_none()
            || p.twiddle.is_none() && p.in_step == 1 && p.out_step == 1 && 2 * p.n <= FFT_TABLE;
        let ok = x.shape.last() == Some(&2)
            && p.n.is_power_of_two()
            && (2..=FFT_MAX_ROW).contains(&p.n)
            && p.cols.is_power_of_two()
            && p.cols <= 64
            && p.cols <= self.wg() as usize
            && p.cols * p.n <= FFT_MAX_ROW
            && p.radix[0] > 0
            && p.radix[1] > 0
            && rows * in_width == pairs
            && p.twiddle.is_none_or(|(d, t)| d < 3 && t.is_power_of_two())
            && real_ok
            && entries >= want_entries
            && x.dtype == DType::F32
            && table.dtype == DType::F32
            && out.dtype == DType::F32
            && out_pairs == rows * width
            && out.shape.last() == Some(&2)
            && is_row_major(x)
            && is_row_major(table)
            && (rows == 0
                || last(p.ih, p.in_step, in_width).is_some_and(|l| l < pairs as u64)
                    && last(p.oh, p.out_step, width).is_some_and(|l| l < out_pairs as u64))
            && x.offset.is_multiple_of(2)
            && table.offset.is_multiple_of(2);
        if !ok && total > 0 {
            return Err(Error::Shape(format!(
                "fft_rows: x {} {:?} (strides {:?}), table of {entries} entries, {p:?}, out {:?}",
                x.dtype, x.shape, x.strides, out.shape
            )));
        }
        let variant = Variant::Fft {
            swizzle: p.cols <= 2,
            real: p.real.is_some(),
        };
        let spec = self.fft_spec("fft_rows", variant, x, table, out)?;
        if total == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        if x.offset + total > u32::MAX as usize || 2 * out_pairs > u32::MAX as usize {
            return Err(Error::Shape(format!(
                "fft_rows: {total} words exceed the kernel's u32 indices"
            )));
        }
        // mul (N <= 4096: the table's stride), else lo = log2(N / 4096).
        let (digit, mul, lo) = match p.twiddle {
            Some((d, t)) if t > FFT_TABLE => (d, 0, (t / FFT_TABLE).trailing_zeros() as usize),
            Some((d, t)) => (d, FFT_TABLE / t, 0),
            None => (3, 0, 0),
        };
        // x's offset counts f32s: a whole number of pairs for row-major pairs.
        let params: Vec<u32> = [
            rows,
            p.n,
            p.n.trailing_zeros() as usize,
            p.inverse as usize,
            digit,
            mul,
            lo,
            p.cols,
            p.radix[0],
            p.radix[1],
            x.offset / 2,
            p.ih[0],
            p.ih[1],
            p.ih[2],
            p.in_step,
            p.oh[0],
            p.oh[1],
            p.oh[2],
            p.out_step,
            table.offset / 2,
            p.real.unwrap_or(0) as usize,
        ]
        .iter()
        .map(|&v| u32::try_from(v))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::Shape(format!("fft_rows: {p:?} past the kernel's u32 parameters")))?;
        let groups = (rows.div_ceil(p.cols) as u64).min(MAX_GROUPS);
        let buffers = [out.binding(), x.binding(), table.binding()];
        self.record(b, &spec, buffers, params, groups)
    }

    /// The real transform's pass `p` ([`FftReal`]) over rows of `x` (contiguous f32
    /// pairs: `m` a row forward, `m + 1` inverse, `m = p.n / 2`) into `out` (`m + 1`
    /// pairs a row forward, `m` inverse), with `table` as for [`Kernels::fft_rows`]
    /// with the twiddle `(0, p.n)`.
    pub fn fft_real(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        table: &Strided<D::Buffer>,
        p: FftReal,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let m = p.n / 2;
        let (width, in_width) = if p.inverse { (m, m + 1) } else { (m + 1, m) };
        let pairs_in = x.shape.iter().product::<usize>() / 2;
        let total = out.shape.iter().product::<usize>() / 2;
        let rows = total / width.max(1);
        let entries = table.shape.iter().product::<usize>() / 2;
        let want_entries = FFT_TABLE + if p.n > FFT_TABLE { p.n / FFT_TABLE } else { 0 };
        let ok = p.n.is_power_of_two()
            && p.n >= 2
            && x.shape.last() == Some(&2)
            && out.shape.last() == Some(&2)
            && rows * width == total
            && rows * in_width == pairs_in
            && entries >= want_entries
            && x.dtype == DType::F32
            && table.dtype == DType::F32
            && out.dtype == DType::F32
            && is_row_major(x)
            && is_row_major(table)
            && x.offset.is_multiple_of(2)
            && table.offset.is_multiple_of(2);
        if !ok && total > 0 {
            return Err(Error::Shape(format!(
                "fft_real: x {} {:?}, table of {entries} entries, {p:?}, out {:?}",
                x.dtype, x.shape, out.shape
            )));
        }
        let spec = self.fft_spec("fft_real", Variant::General, x, table, out)?;
        if total == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        if x.offset + 2 * pairs_in > u32::MAX as usize || 2 * total > u32::MAX as usize {
            return Err(Error::Shape(format!(
                "fft_real: {total} pairs exceed the kernel's u32 indices"
            )));
        }
        let (mul, lo) = if p.n > FFT_TABLE {
            (0, (p.n / FFT_TABLE).trailing_zeros() as usize)
        } else {
            (FFT_TABLE / p.n, 0)
        };
        let params: Vec<u32> = [
            rows,
            m,
            p.inverse as usize,
            mul,
            lo,
            p.scale.to_bits() as usize,
            x.offset / 2,
            table.offset / 2,
        ]
        .iter()
        .map(|&v| u32::try_from(v))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| Error::Shape(format!("fft_real: {p:?} past the kernel's u32 parameters")))?;
        let groups = (total.div_ceil(self.wg() as usize) as u64).min(MAX_GROUPS);
        let buffers = [out.binding(), x.binding(), table.binding()];
        self.record(b, &spec, buffers, params, groups)
    }

    /// The module of the pass `op` after the views' checks.
    fn fft_spec(
        &self,
        op: &'static str,
        variant: Variant,
        x: &Strided<D::Buffer>,
        table: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<ModuleSpec> {
        check_view(x, "fft x")?;
        check_view(table, "fft table")?;
        check_out(out)?;
        let ins = vec![DType::F32, DType::F32];
        Ok(self.spec(&FFT, op, ins, DType::F32, variant, 0))
    }
}
