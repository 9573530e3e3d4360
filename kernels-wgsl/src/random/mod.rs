//! Random bits: Threefry-2x32 from u32 keys in MLX's layout.

mod family;

pub use family::RANDOM_BITS;

use crate::compose::Variant;
use crate::driver::Batch;
use crate::driver::Driver;
use crate::dtype::DType;
use crate::kernels::Kernels;
use crate::kernels::MAX_GROUPS;
use crate::layout::{Contig, Strided};
use crate::layout::{check_out, check_view};
use crate::{Error, Result};

impl<D: Driver> Kernels<D> {
    /// Threefry-2x32 bits into `out` from the row-major u32 `keys` (an even number
    /// of words, at least 2; `out`'s length a multiple of the key count): each key
    /// fills its contiguous block of `out` in MLX's `RandomBits` layout. A u32 `out`
    /// gets the bits; an f32 `out` gets `min(f32(bits) * 2^-32, cap)` (`cap` below 1:
    /// MLX's uniform draws).
    pub fn random_bits(
        &self,
        b: &mut Batch<D>,
        keys: &Strided<D::Buffer>,
        cap: f32,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let nk_words = keys.shape.iter().product::<usize>();
        let nk = nk_words / 2;
        let len = out.numel();
        let contiguous = crate::layout::is_row_major(keys);
        if keys.dtype != DType::U32
            || !matches!(out.dtype, DType::U32 | DType::F32)
            || !(cap > 0.0 && cap < 1.0)
            || nk == 0
            || nk_words % 2 != 0
            || !len.is_multiple_of(nk)
            || !contiguous
        {
            return Err(Error::Shape(format!(
                "random_bits: keys {} {:?} (strides {:?}) for {} {:?}",
                keys.dtype, keys.shape, keys.strides, out.dtype, out.shape
            )));
        }
        check_view(keys, "random_bits keys")?;
        check_out(out)?;
        let spec = self.spec(
            &RANDOM_BITS,
            "random_bits",
            vec![DType::U32],
            DType::U32,
            Variant::General,
            0,
        );
        if len == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let e = len / nk;
        let (h, odd) = (e / 2, e % 2);
        let items = nk * (h + odd);
        let params = vec![
            items as u32,
            (h + odd) as u32,
            h as u32,
            odd as u32,
            e as u32,
            keys.offset as u32,
            (out.dtype == DType::F32) as u32,
            cap.to_bits(),
        ];
        let groups = (items as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS);
        self.record(b, &spec, [out.binding(), keys.binding()], params, groups)
    }

    /// Elements `[start, start + out.numel())` of the `len` draws
    /// [`Kernels::random_bits`] would write, into `out`: how an output larger than
    /// one binding is drawn in parts, each bound through a window. The whole
    /// output (`start` 0, `len` elements) is [`Kernels::random_bits`] itself.
    pub fn random_bits_part(
        &self,
        b: &mut Batch<D>,
        keys: &Strided<D::Buffer>,
        cap: f32,
        len: usize,
        start: usize,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let count = out.numel();
        if start == 0 && count == len {
            return self.random_bits(b, keys, cap, out);
        }
        let nk = keys.shape.iter().product::<usize>() / 2;
        let end = start.checked_add(count);
        if keys.dtype != DType::U32
            || !matches!(out.dtype, DType::U32 | DType::F32)
            || !(cap > 0.0 && cap < 1.0)
            || nk == 0
            || !len.is_multiple_of(nk)
            || end.is_none_or(|e| e > len)
            || len > u32::MAX as usize
            || !crate::layout::is_row_major(keys)
        {
            return Err(Error::Shape(format!(
                "random_bits_part: elements {start}.. ({count}) of {len} from keys {} {:?} \
                 into {} {:?}",
                keys.dtype, keys.shape, out.dtype, out.shape
            )));
        }
        check_view(keys, "random_bits keys")?;
        check_out(out)?;
        let spec = self.spec(
            &RANDOM_BITS,
            "random_bits_part",
            vec![DType::U32],
            DType::U32,
            Variant::General,
            0,
        );
        if count == 0 {
            crate::compose::compose(&spec)?;
            return Ok(());
        }
        let e = len / nk;
        let (h, odd) = (e / 2, e % 2);
        let params = vec![
            count as u32,
            start as u32,
            h as u32,
            (h + odd) as u32,
            e as u32,
            keys.offset as u32,
            (out.dtype == DType::F32) as u32,
            cap.to_bits(),
        ];
        let groups = (count as u64).div_ceil(self.wg() as u64).min(MAX_GROUPS);
        self.record(b, &spec, [out.binding(), keys.binding()], params, groups)
    }
}
