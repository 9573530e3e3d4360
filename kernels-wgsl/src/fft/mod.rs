//! Discrete Fourier transforms of rows: one workgroup transforms a row of a
//! power of two up to [`FFT_MAX_ROW`] f32 pairs in workgroup memory (longer and
//! other lengths are composed by the caller: four-step, Bluestein).

use crate::compose::{Family, Io, ModuleSpec, Variant, check_out as check_dtype};
use crate::driver::{Batch, Driver};
use crate::dtype::DType;
use crate::kernels::{Kernels, MAX_GROUPS};
use crate::layout::{Contig, Strided, check_out, check_view, is_row_major};
use crate::{Error, Result};

const FFT_WGSL: &str = include_str!("fft.wgsl");

/// The longest row [`Kernels::fft_rows`] transforms (16 KiB of workgroup memory,
/// WebGPU's default limit).
pub const FFT_MAX_ROW: usize = 2048;

/// Entries of the twiddle table's first part, `W_4096^k`.
pub const FFT_TABLE: usize = 4096;

/// Rows of an FFT: inputs the f32 pairs and the f32 twiddle table; f32 out.
pub static FFT: Family = Family {
    name: "Fft",
    arity: 2,
    takes: |s| s.inputs.len() == 2,
    entry: |_| "fft_rows",
    raw: |_| false,
    io: Io::rows,
    body: |spec, _| {
        if spec.inputs != [DType::F32, DType::F32]
            || spec.variant != Variant::General
            || spec.op.name() != "fft_rows"
        {
            return Err(Error::Shape(format!(
                "fft reads f32 pairs and an f32 table (general variant), got {:?} ({:?})",
                spec.inputs, spec.variant
            )));
        }
        check_dtype(spec, DType::F32)?;
        Ok(vec![FFT_WGSL])
    },
    specs: |t| {
        let ins = vec![DType::F32, DType::F32];
        vec![ModuleSpec::new(
            &FFT,
            "fft_rows",
            ins,
            DType::F32,
            Variant::General,
            t,
        )]
    },
};

/// What [`Kernels::fft_rows`] computes of each row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FftParams {
    /// Row length in complex elements: a power of two, 2 to [`FFT_MAX_ROW`].
    pub n: usize,
    /// `exp(+2 pi i jk / n)` instead of `exp(-2 pi i jk / n)`.
    pub inverse: bool,
    /// Four-step twiddles `(N, R)`: output `k` of row `r` times `W_N^((r mod R) k)`
    /// (`N` a power of two of at least [`FFT_TABLE`], `R n = N`).
    pub post: Option<(usize, usize)>,
}

impl<D: Driver> Kernels<D> {
    /// The unnormalized DFT of each row of `x` (row-major f32 `[..., n, 2]`: pairs
    /// of real and imaginary parts) into `out`, with the twiddles of `table`
    /// (contiguous f32 pairs: `W_4096^k` for `k < 4096`, then, with `post`,
    /// `W_N^j` for `j < N / 4096`).
    pub fn fft_rows(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        table: &Strided<D::Buffer>,
        p: FftParams,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let total = x.shape.iter().product::<usize>();
        let nd = x.shape.len();
        let entries = table.shape.iter().product::<usize>() / 2;
        let want_entries = FFT_TABLE + p.post.map_or(0, |(big, _)| big / FFT_TABLE);
        let post_ok = p.post.is_none_or(|(big, r)| {
            big.is_power_of_two() && big >= FFT_TABLE && r * p.n == big && r > 0
        });
        let ok = nd >= 2
            && x.shape[nd - 1] == 2
            && x.shape[nd - 2] == p.n
            && p.n.is_power_of_two()
            && (2..=FFT_MAX_ROW).contains(&p.n)
            && post_ok
            && entries >= want_entries
            && x.dtype == DType::F32
            && table.dtype == DType::F32
            && out.dtype == DType::F32
            && out.shape == x.shape
            && is_row_major(x)
            && is_row_major(table);
        if !ok && total > 0 {
            return Err(Error::Shape(format!(
                "fft_rows: x {} {:?} (strides {:?}), table of {entries} entries, {p:?}, out {:?}",
                x.dtype, x.shape, x.strides, out.shape
            )));
        }
        check_view(x, "fft x")?;
        check_view(table, "fft table")?;
        check_out(out)?;
        let spec = self.spec(
            &FFT,
            "fft_rows",
            vec![DType::F32, DType::F32],
            DType::F32,
            Variant::General,
            0,
        );
        if total == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let rows = total / (2 * p.n);
        if total > u32::MAX as usize || x.offset + total > u32::MAX as usize {
            return Err(Error::Shape(format!(
                "fft_rows: {total} words exceed the kernel's u32 indices"
            )));
        }
        let (post, r, lo) = match p.post {
            Some((big, r)) => (1, r, big / FFT_TABLE),
            None => (0, 1, 1),
        };
        let params = vec![
            rows as u32,
            p.n as u32,
            p.n.trailing_zeros(),
            p.inverse as u32,
            post,
            r as u32,
            lo as u32,
            x.offset as u32,
            table.offset as u32,
        ];
        let groups = (rows as u64).min(MAX_GROUPS);
        let buffers = [out.binding(), x.binding(), table.binding()];
        self.record(b, &spec, buffers, params, groups)
    }
}
