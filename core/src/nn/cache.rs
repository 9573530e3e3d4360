//! A key/value cache for autoregressive decoding (MLX's `KVCache`).

use crate::{Array, Error, Result, Slice};

/// Keys and values of the positions seen so far, `[B, H, L, D]` each, kept in
/// buffers that grow `step` positions at a time; each [`update`](KvCache::update)
/// writes the new positions with `slice_update` and returns views of the filled
/// part. The first update fixes the batch, heads, head sizes and dtype; later
/// ones must match.
///
/// ```
/// # fn main() -> wmx_core::Result<()> {
/// use wmx_core::{nn::KvCache, DType};
/// let mut cache = KvCache::new();
/// let k = wmx_core::ones(&[1, 2, 3, 4], DType::F32)?; // a prompt of 3 positions
/// let (keys, _values) = cache.update(&k, &k)?;
/// assert_eq!(keys.shape(), &[1, 2, 3, 4]);
/// let one = wmx_core::ones(&[1, 2, 1, 4], DType::F32)?; // one decoded position
/// let (keys, _) = cache.update(&one, &one)?;
/// assert_eq!((keys.shape()[2], cache.offset()), (4, 4));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct KvCache {
    keys: Option<Array>,
    values: Option<Array>,
    offset: usize,
    step: usize,
}

impl Default for KvCache {
    fn default() -> Self {
        KvCache::new()
    }
}

impl KvCache {
    /// An empty cache growing 256 positions at a time.
    pub fn new() -> KvCache {
        KvCache::with_step(256)
    }

    /// An empty cache growing `step` positions at a time (at least 1).
    pub fn with_step(step: usize) -> KvCache {
        KvCache {
            keys: None,
            values: None,
            offset: 0,
            step: step.max(1),
        }
    }

    /// Positions held (the next position's index).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Positions the buffers hold before they grow again.
    pub fn capacity(&self) -> usize {
        self.keys.as_ref().map_or(0, |k| k.shape()[2])
    }

    /// Forgets every position (the buffers are dropped).
    pub fn reset(&mut self) {
        *self = KvCache::with_step(self.step);
    }

    /// Appends `keys` `[B, Hkv, L, Dk]` and `values` `[B, Hkv, L, Dv]` (one dtype)
    /// and returns every position's keys and values so far (views, `[B, Hkv,
    /// offset, D]`). Shapes or a dtype that differ from the cache's are an `Err`,
    /// and the cache is left as it was.
    pub fn update(&mut self, keys: &Array, values: &Array) -> Result<(Array, Array)> {
        const OP: &str = "KvCache::update";
        let (ks, vs) = (keys.shape(), values.shape());
        if ks.len() != 4 || vs.len() != 4 || ks[..3] != vs[..3] || keys.dtype() != values.dtype() {
            return Err(Error::invalid(
                OP,
                format!(
                    "keys and values must be [B, H, L, D] of one B, H, L and dtype, got {ks:?} {} \
                     and {vs:?} {}",
                    keys.dtype(),
                    values.dtype()
                ),
            ));
        }
        if let (Some(k), Some(v)) = (&self.keys, &self.values) {
            let fits = |held: &Array, new: &Array| {
                held.shape()[..2] == new.shape()[..2]
                    && held.shape()[3] == new.shape()[3]
                    && held.dtype() == new.dtype()
            };
            if !fits(k, keys) || !fits(v, values) {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "the cache holds keys {:?} and values {:?} of {}; got {ks:?} and {vs:?} of {}",
                        k.shape(),
                        v.shape(),
                        k.dtype(),
                        keys.dtype()
                    ),
                ));
            }
        }
        let (prev, len) = (self.offset, ks[2]);
        let end = prev + len;
        let grow = |held: &Option<Array>, new: &Array| -> Result<Array> {
            let cap = held.as_ref().map_or(0, |h| h.shape()[2]);
            if end <= cap {
                return Ok(held.clone().expect("a cache with capacity has buffers"));
            }
            let steps = (end - prev).div_ceil(self.step);
            let mut shape = new.shape().to_vec();
            shape[2] = steps * self.step;
            let more = crate::broadcast_to(&crate::scalar_like(new, 0.0)?, &shape)?;
            match held {
                // Only the filled part is kept (a shorter last step is trimmed).
                Some(h) => crate::concatenate(
                    &[
                        &h.slice(&[Slice::ALL, Slice::ALL, Slice::range(0, prev as isize)])?,
                        &more,
                    ],
                    2,
                ),
                None => crate::contiguous(&more),
            }
        };
        let span = [
            Slice::ALL,
            Slice::ALL,
            Slice::range(prev as isize, end as isize),
        ];
        let k = crate::slice_update(&grow(&self.keys, keys)?, keys, &span)?;
        let v = crate::slice_update(&grow(&self.values, values)?, values, &span)?;
        let filled = [Slice::ALL, Slice::ALL, Slice::range(0, end as isize)];
        let out = (k.slice(&filled)?, v.slice(&filled)?);
        (self.keys, self.values, self.offset) = (Some(k), Some(v), end);
        Ok(out)
    }
}
