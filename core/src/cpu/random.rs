//! Threefry-2x32 random bits on the host, in MLX's layout (see `crate::random`).

use super::CpuBuffer;
use super::scalar::{Store, Wide, with_store};
use crate::{DType, Error, Result, backend::View};

/// Threefry-2x32 with 20 rounds: the hash of counter `x` under `key`.
pub fn threefry2x32(key: [u32; 2], x: [u32; 2]) -> [u32; 2] {
    const ROT: [[u32; 4]; 2] = [[13, 15, 26, 6], [17, 29, 16, 24]];
    let ks = [key[0], key[1], key[0] ^ key[1] ^ 0x1BD1_1BDA];
    let (mut a, mut b) = (x[0].wrapping_add(ks[0]), x[1].wrapping_add(ks[1]));
    for i in 0..5 {
        for r in ROT[i % 2] {
            a = a.wrapping_add(b);
            b = b.rotate_left(r) ^ a;
        }
        a = a.wrapping_add(ks[(i + 1) % 3]);
        b = b.wrapping_add(ks[(i + 2) % 3]).wrapping_add(i as u32 + 1);
    }
    [a, b]
}

/// The largest value below 1 in a float dtype (MLX's cap of uniform draws).
pub fn below_one(dtype: DType) -> f32 {
    match dtype {
        DType::F16 => 1.0 - 2f32.powi(-11),
        DType::BF16 => 1.0 - 2f32.powi(-8),
        _ => 1.0 - 2f32.powi(-24),
    }
}

/// Bits, or for a float `dtype` their unit-interval values (see
/// `Primitive::RandomBits`).
pub(super) fn random_bits(
    keys: View<'_, CpuBuffer>,
    len: usize,
    dtype: DType,
) -> Result<CpuBuffer> {
    let words = bits(keys, len)?;
    if dtype == DType::U32 {
        return Ok(words);
    }
    if !dtype.is_float() {
        return Err(Error::invalid(
            "random_bits",
            format!("{dtype} output (u32 bits or a float dtype)"),
        ));
    }
    let cap = below_one(dtype);
    let w = words.as_slice::<u32>();
    Ok(with_store!(dtype, T => super::output::<T>(len, |out| {
        for (o, &b) in out.iter_mut().zip(w) {
            let u = (b as f32 * 2f32.powi(-32)).min(cap);
            *o = T::from_wide(Wide::F(u as f64));
        }
    })))
}

fn bits(keys: View<'_, CpuBuffer>, len: usize) -> Result<CpuBuffer> {
    let nk = keys.layout.numel() / 2;
    if keys.dtype != DType::U32
        || !keys.layout.is_row_contiguous()
        || nk == 0
        || !keys.layout.numel().is_multiple_of(2)
        || !len.is_multiple_of(nk)
    {
        return Err(Error::invalid(
            "random_bits",
            format!(
                "keys {} {:?} for {len} elements",
                keys.dtype, keys.layout.shape
            ),
        ));
    }
    let k = &keys.buffer.as_slice::<u32>()[keys.layout.offset..];
    let e = len / nk;
    let (h, odd) = (e / 2, e % 2);
    let mut out = CpuBuffer::uninit(len * 4);
    let o = out.as_mut_slice::<u32>();
    for (i, block) in o.chunks_mut(e.max(1)).enumerate().take(nk) {
        let key = [k[2 * i], k[2 * i + 1]];
        for c in 0..h {
            let r = threefry2x32(key, [c as u32, (c + h + odd) as u32]);
            block[c] = r[0];
            block[c + h + odd] = r[1];
        }
        if odd == 1 {
            block[h] = threefry2x32(key, [h as u32, 0])[0];
        }
    }
    Ok(out)
}
