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
        return vec![0; len.div_ceil(8)];
    }
    let words = size_class(len as u64) as usize / 8;
    let mut c = cache();
    if let Some(v) = c.free.get_mut(&words).and_then(Vec::pop) {
        c.bytes -= words * 8;
        return v;
    }
    drop(c);
    vec![0; words]
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
