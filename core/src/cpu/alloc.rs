//! A cache of freed large host buffers. Fresh multi-megabyte allocations come
//! from the OS as untouched pages, and the first write to each page faults:
//! reusing freed buffers keeps that cost out of every op's output.

use crate::backend::size_class;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Buffers smaller than this come from the allocator directly (it is fast there).
const MIN_CACHED: usize = 64 << 10;
/// Bytes of free buffers kept at most.
const LIMIT: usize = 512 << 20;

struct Cache {
    free: BTreeMap<usize, Vec<Vec<u64>>>,
    bytes: usize,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache {
    free: BTreeMap::new(),
    bytes: 0,
});

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Words for at least `len` bytes. Contents are unspecified (old data or zeros):
/// callers overwrite every byte they use.
pub fn take(len: usize) -> Vec<u64> {
    if len < MIN_CACHED {
        return zeroed_words(len.div_ceil(8));
    }
    let words = size_class(len as u64) as usize / 8;
    let mut c = cache();
    if let Some(v) = c.free.get_mut(&words).and_then(Vec::pop) {
        c.bytes -= words * 8;
        return v;
    }
    drop(c);
    zeroed_words(words)
}

/// Returns a buffer's words to the cache (dropped if the cache is full).
pub fn give(v: Vec<u64>) {
    let bytes = v.len() * 8;
    if bytes < MIN_CACHED || size_class(bytes as u64) as usize != bytes {
        return;
    }
    let mut c = cache();
    if c.bytes + bytes <= LIMIT {
        c.bytes += bytes;
        c.free.entry(v.len()).or_default().push(v);
    }
}

/// Frees every cached buffer.
pub fn clear() {
    let mut c = cache();
    c.free.clear();
    c.bytes = 0;
}

/// What an allocation that failed unwinds with: not a panic (no hook runs), caught
/// by [`catching_oom`] around each node's computation and turned into an `Err`.
pub(crate) struct OutOfMemory {
    bytes: usize,
}

/// `words` zeroed words, or an [`OutOfMemory`] unwind where `vec![0; words]` would
/// abort the process.
fn zeroed_words(words: usize) -> Vec<u64> {
    if words == 0 {
        return Vec::new();
    }
    let oom = || -> ! {
        std::panic::resume_unwind(Box::new(OutOfMemory {
            bytes: words.saturating_mul(8),
        }))
    };
    let Ok(layout) = std::alloc::Layout::array::<u64>(words) else {
        oom()
    };
    // SAFETY: `layout` has a nonzero size; a non-null result holds `words` zeroed
    // u64s allocated with exactly the layout `Vec<u64>` frees with.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut u64;
        if p.is_null() {
            oom()
        }
        Vec::from_raw_parts(p, words, words)
    }
}

/// `vec![value; n]` for scratch space as large as an op's output: an
/// [`OutOfMemory`] unwind where the allocation fails.
pub(crate) fn filled<T: Clone>(n: usize, value: T) -> Vec<T> {
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        std::panic::resume_unwind(Box::new(OutOfMemory {
            bytes: n.saturating_mul(std::mem::size_of::<T>()),
        }));
    }
    v.resize(n, value);
    v
}

/// `Vec::with_capacity(n)` for host copies as large as an array: an
/// [`OutOfMemory`] unwind where the allocation fails.
pub(crate) fn with_capacity<T>(n: usize) -> Vec<T> {
    let mut v = Vec::new();
    if v.try_reserve_exact(n).is_err() {
        std::panic::resume_unwind(Box::new(OutOfMemory {
            bytes: n.saturating_mul(std::mem::size_of::<T>()),
        }));
    }
    v
}

/// Runs `f`, turning a host allocation that failed inside it into an `Err` with
/// the byte count (other panics go on unwinding).
pub(crate) fn catching_oom<T>(
    device: &crate::Device,
    f: impl FnOnce() -> crate::Result<T>,
) -> crate::Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => match p.downcast::<OutOfMemory>() {
            Ok(o) => Err(crate::Error::Backend {
                backend: device.to_string(),
                msg: format!("out of memory: {} bytes could not be allocated", o.bytes),
            }),
            Err(p) => std::panic::resume_unwind(p),
        },
    }
}
