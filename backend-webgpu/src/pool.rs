//! GPU buffer pool, counters and the error slot shared by the backend and its buffers.

use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use wmx_core::backend::size_class;
use wmx_kernels as k;
use wmx_kernels::{Driver, DriverBuffer};

/// Device-side counters and memory figures (like MLX's memory counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Host → GPU transfers.
    pub uploads: u64,
    /// Bytes uploaded.
    pub bytes_uploaded: u64,
    /// GPU → host transfers.
    pub downloads: u64,
    /// Bytes downloaded.
    pub bytes_downloaded: u64,
    /// Kernel dispatches submitted.
    pub dispatches: u64,
    /// Queue submits.
    pub submits: u64,
    /// CPU nanoseconds spent encoding and submitting batches (wgpu's pass
    /// recording, `CommandEncoder::finish` and `Queue::submit`; 0 on wasm).
    pub submit_ns: u64,
    /// Bytes of GPU buffers held by live arrays.
    pub active_bytes: u64,
    /// Highest `active_bytes` seen.
    pub peak_bytes: u64,
    /// Bytes of free buffers kept for reuse.
    pub cached_bytes: u64,
    /// GPU buffers created (pool misses).
    pub buffers_created: u64,
}

/// The size a request of `bytes` is rounded to: its size class, unless that passes
/// the binding limit `limit` or the buffer limit `max` while the request does not.
/// An array that fits one binding gets a buffer that does too, and kernels bind it
/// whole (the class would round 2 GiB - 100 bytes past NVIDIA's 2 GiB - 4); one
/// that fits one buffer gets one.
fn pool_class(bytes: u64, limit: u64, max: u64) -> u64 {
    let class = size_class(bytes);
    let exact = bytes.max(16).div_ceil(16) * 16;
    if (class > limit && exact <= limit) || (class > max && exact <= max) {
        exact
    } else {
        class
    }
}

/// A buffer's identity as a number (its handle's hash).
fn key<B: std::hash::Hash>(b: &B) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(b)
}

/// Free buffers by size class. Buffers released while a batch is being recorded
/// may be reused only as kernel outputs of that batch (ordered by barriers in the
/// pass), never for uploads (`write_buffer` runs before the batch), so they wait
/// in `recent` until the batch is submitted.
///
/// A class hands out its oldest free buffer (lowest creation number), not the
/// last released: a repeated step (a compiled training step, a decode step)
/// then gets mostly the same buffer for each of its arrays every time, so its
/// dispatches bind the same buffers and the driver's bind groups are reused. With
/// the last released first, each step permuted the same buffers and ~80 % of its
/// dispatches made new bind groups (run 83). Within a batch, outputs still reuse
/// the last buffer released in it: oldest-first there too cut the misses further
/// but left lavapipe's out-of-memory recovery test short of memory (run 87).
pub struct Pool<D: Driver> {
    kernels: k::Kernels<D>,
    /// Per class, by creation number, highest first (`pop` takes the oldest).
    free: HashMap<u64, Vec<(u64, D::Buffer)>>,
    /// Per class, in release order (`pop` takes the last released).
    recent: HashMap<u64, Vec<(u64, D::Buffer)>>,
    /// Each pooled buffer's creation number, by its hash (no handle kept: a
    /// handle here would keep a buffer's memory alive after the pool let it go).
    born: HashMap<u64, u64>,
    next: u64,
    /// Order buffers entered `free`, oldest first, for eviction.
    order: Vec<(u64, D::Buffer)>,
    cached: u64,
    /// The cache limit the user set; `None`: [`Pool::cap`]'s default.
    limit: Option<u64>,
    /// The most bytes live arrays have held at once (not reset with the stats).
    high_water: u64,
    /// The default cache limit's floor ([`CACHE_FLOOR`]; smaller in tests).
    floor: u64,
    stats: Stats,
}

/// The cache's floor: 1 GiB.
const CACHE_FLOOR: u64 = 1 << 30;

impl<D: Driver> Pool<D> {
    fn new(kernels: k::Kernels<D>) -> Pool<D> {
        Pool {
            kernels,
            free: HashMap::default(),
            recent: HashMap::default(),
            born: HashMap::default(),
            next: 0,
            order: Vec::new(),
            cached: 0,
            limit: None,
            high_water: 0,
            floor: CACHE_FLOOR,
            stats: Stats::default(),
        }
    }

    /// A buffer of at least `bytes`; `for_output` allows buffers released during
    /// the batch being recorded.
    pub fn take(&mut self, bytes: u64, for_output: bool) -> k::Result<D::Buffer> {
        let caps = self.kernels.caps();
        let class = pool_class(bytes, caps.max_storage_binding, caps.max_buffer);
        let reused = if for_output {
            self.recent.get_mut(&class).and_then(Vec::pop)
        } else {
            None
        };
        let b = match reused {
            Some((_, b)) => b,
            None => match self.free.get_mut(&class).and_then(Vec::pop) {
                Some((_, b)) => {
                    self.cached -= class;
                    self.order.retain(|(_, o)| o != &b);
                    b
                }
                None => match self.create(class) {
                    // Cached free buffers and the kept read staging hold memory:
                    // give it back and try again.
                    Err(k::Error::OutOfMemory { .. }) => {
                        self.clear();
                        self.kernels.clear_staging();
                        self.create(class)?
                    }
                    r => r?,
                },
            },
        };
        self.stats.active_bytes += class;
        self.stats.peak_bytes = self.stats.peak_bytes.max(self.stats.active_bytes);
        self.high_water = self.high_water.max(self.stats.active_bytes);
        Ok(b)
    }

    fn create(&mut self, class: u64) -> k::Result<D::Buffer> {
        self.stats.buffers_created += 1;
        let b = self.kernels.create_buffer(class, Some("wmx"))?;
        self.born.insert(key(&b), self.next);
        self.next += 1;
        Ok(b)
    }

    /// Files `b` under `class` in `lists`, keeping each list highest number first.
    fn file(&self, lists: &mut HashMap<u64, Vec<(u64, D::Buffer)>>, class: u64, b: D::Buffer) {
        let n = self.born.get(&key(&b)).copied().unwrap_or(u64::MAX);
        let list = lists.entry(class).or_default();
        let at = list.partition_point(|(m, _)| *m > n);
        list.insert(at, (n, b));
    }

    /// Frees `b`'s memory now and forgets it.
    fn destroy(&mut self, b: &D::Buffer) {
        self.born.remove(&key(b));
        b.destroy();
    }

    fn release(&mut self, b: D::Buffer) {
        let class = b.byte_size();
        self.stats.active_bytes = self.stats.active_bytes.saturating_sub(class);
        // An allocation the device refused after handing it out is never reused.
        if self.kernels.driver().refused(&b) {
            self.destroy(&b);
            return;
        }
        let n = self.born.get(&key(&b)).copied().unwrap_or(u64::MAX);
        self.recent.entry(class).or_default().push((n, b));
    }

    /// The batch was submitted: its released buffers become free for any use.
    pub fn batch_done(&mut self) {
        let mut free = std::mem::take(&mut self.free);
        for (class, bufs) in std::mem::take(&mut self.recent) {
            for (_, b) in bufs {
                if self.kernels.driver().refused(&b) {
                    self.destroy(&b);
                    continue;
                }
                self.cached += class;
                self.order.push((class, b.clone()));
                self.file(&mut free, class, b);
            }
        }
        self.free = free;
        self.evict();
    }

    /// Bytes the cache may keep: the user's limit, else (native) the larger of
    /// 1 GiB and twice the most bytes live arrays have held at once (a step
    /// creates more buffers than it holds at its peak: released ones are reused
    /// only by the same size class), so a repeated step's large buffers are
    /// reused instead of created (and zeroed) again each call; in the browser
    /// 1 GiB. A failed allocation empties the cache and tries again
    /// ([`Pool::take`]).
    fn cap(&self) -> u64 {
        match self.limit {
            Some(l) => l,
            None if cfg!(target_arch = "wasm32") => self.floor,
            None => self.floor.max(2 * self.high_water),
        }
    }

    fn evict(&mut self) {
        while self.cached > self.cap() && !self.order.is_empty() {
            let (class, b) = self.order.remove(0);
            if let Some(v) = self.free.get_mut(&class)
                && let Some(i) = v.iter().position(|(_, x)| x == &b)
            {
                v.remove(i);
                self.cached -= class;
                self.destroy(&b);
            }
        }
    }

    /// Frees every cached buffer.
    pub fn clear(&mut self) {
        for (_, b) in std::mem::take(&mut self.order) {
            self.destroy(&b);
        }
        self.free.clear();
        self.cached = 0;
    }

    /// Sets the cache limit in bytes and evicts down to it.
    pub fn set_limit(&mut self, bytes: u64) {
        self.limit = Some(bytes);
        self.evict();
    }
}

/// State shared by the backend and every buffer it made.
pub struct Shared<D: Driver> {
    pool: Mutex<Pool<D>>,
    /// The most bytes one array may have (`segments::max_array_bytes`).
    max_array: u64,
    error: Mutex<Option<String>>,
    lost: Mutex<Option<String>>,
    /// Set with `error` or `lost`, so the common check (nothing reported) locks nothing.
    flagged: AtomicBool,
}

impl<D: Driver> Shared<D> {
    pub fn new(kernels: k::Kernels<D>) -> Arc<Shared<D>> {
        Arc::new(Shared {
            max_array: crate::segments::max_array_bytes(kernels.caps().device_type),
            pool: Mutex::new(Pool::new(kernels)),
            error: Mutex::new(None),
            lost: Mutex::new(None),
            flagged: AtomicBool::new(false),
        })
    }

    pub fn pool(&self) -> MutexGuard<'_, Pool<D>> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The largest buffer the device may have (arrays past it are segmented).
    pub fn max_buffer(&self) -> u64 {
        self.pool().kernels.caps().max_buffer
    }

    /// The most bytes one array may have on this device.
    pub fn max_array(&self) -> u64 {
        self.max_array
    }

    pub fn release(&self, b: D::Buffer) {
        self.pool().release(b);
    }

    pub fn stats(&self) -> Stats {
        let p = self.pool();
        Stats {
            cached_bytes: p.cached,
            ..p.stats
        }
    }

    pub fn count_upload(&self, bytes: u64) {
        let mut p = self.pool();
        p.stats.uploads += 1;
        p.stats.bytes_uploaded += bytes;
    }

    pub fn count_download(&self, bytes: u64) {
        let mut p = self.pool();
        p.stats.downloads += 1;
        p.stats.bytes_downloaded += bytes;
    }

    pub fn count_submit(&self, dispatches: usize, ns: u64) {
        let mut p = self.pool();
        p.stats.submits += 1;
        p.stats.dispatches += dispatches as u64;
        p.stats.submit_ns += ns;
    }

    /// Keeps the first error until it is checked: later ones are usually its
    /// consequences ("invalid due to a previous error"), and in the browser several
    /// arrive before anyone checks.
    pub fn set_error(&self, msg: String) {
        self.error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(msg);
        self.flagged.store(true, Ordering::Release);
    }

    pub fn set_lost(&self, msg: String) {
        *self.lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(msg);
        self.flagged.store(true, Ordering::Release);
    }

    /// `Err` if the device was lost (every later call fails) or an error was
    /// reported since the last check (reported once).
    pub fn check(&self) -> Result<(), String> {
        if !self.flagged.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Some(m) = &*self.lost.lock().unwrap_or_else(|e| e.into_inner()) {
            return Err(m.clone());
        }
        match self.error.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(m) => Err(m),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pool_class;

    #[test]
    fn buffers_of_arrays_that_fit_a_binding_fit_it() {
        let limit = (1u64 << 31) - 4;
        let max = 4_292_870_144; // NVIDIA's max_buffer_size through Vulkan
        for bytes in [(1u64 << 31) - 100, (1 << 31) - 16, 1_900_000_000] {
            let c = pool_class(bytes, limit, max);
            assert!(c >= bytes && c <= limit, "{bytes} -> {c}");
        }
        // Past the limit, or far below it, the size classes stay.
        assert_eq!(pool_class((1 << 31) - 2, limit, max), 1 << 31);
        assert_eq!(pool_class(1000, limit, max), 1024);
        assert_eq!(pool_class(3 << 30, limit, max), 3 << 30);
        // Within a buffer, a buffer (the class of 4 GiB - 1 MiB is 4 GiB).
        assert_eq!(pool_class(max - (1 << 20), limit, max), max - (1 << 20));
    }
}

/// Buffers the device refused after handing them out (the browser's asynchronous
/// out of memory, simulated) never come back from the pool.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod refused {
    use wmx_core::{Backend, DType};

    #[test]
    fn a_buffer_the_device_refused_is_never_reused() {
        let Some(be) = wmx_reference::gpu::opened(crate::WebGpuBackend::new()) else {
            return;
        };
        let upload = |byte: u8| {
            let a = be.from_host(vec![byte; 4096], DType::F32).unwrap();
            let g = be.mem(&a).unwrap().parts[0].clone();
            (a, g)
        };
        // A released buffer is free for uploads once a batch is submitted after it
        // (a fill too large to be made on the host: a dispatch).
        let submit = || {
            let n = crate::KERNEL_FILL_F32;
            let _k = be.generate(wmx_core::Generator::Fill(0.0), DType::F32, n);
            be.synchronize().unwrap();
        };
        // The control: a released buffer is reused by the next upload of its size.
        let (a, first) = upload(1);
        drop(a);
        submit();
        let (b, second) = upload(2);
        assert_eq!(first, second, "the pool reuses a released buffer");
        // Refused: destroyed on release, and the next upload gets another.
        be.kernels().driver().refuse_for_test(&second);
        drop(b);
        submit();
        let (c, third) = upload(3);
        assert_ne!(third, second);
        assert_eq!(be.read(&c).unwrap()[..4], [3, 3, 3, 3]);
    }
}

/// The default cache limit grows to the most bytes live arrays have held: a
/// repeated step larger than the floor reuses its buffers.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod high_water {
    use wmx_core::{Backend, DType};

    #[test]
    fn a_repeated_step_past_the_floor_creates_no_buffers() {
        let Some(be) = wmx_reference::gpu::opened(crate::WebGpuBackend::new()) else {
            return;
        };
        be.shared.pool().floor = 1 << 20;
        let mib = 1usize << 20;
        // Three 1 MiB arrays live at once, then released: all three stay cached.
        let step = || {
            let held: Vec<_> = (0..3)
                .map(|i| be.generate(wmx_core::Generator::Fill(i as f64), DType::F32, mib / 4))
                .collect();
            drop(held);
            let n = crate::KERNEL_FILL_F32;
            let _k = be.generate(wmx_core::Generator::Fill(0.0), DType::F32, n);
            be.synchronize().unwrap();
        };
        step();
        let created = be.stats().buffers_created;
        assert!(
            be.stats().cached_bytes >= 3 * mib as u64,
            "{:?}",
            be.stats()
        );
        step();
        assert_eq!(be.stats().buffers_created, created, "{:?}", be.stats());
        // A limit the user sets holds.
        be.set_cache_limit(mib as u64);
        assert!(be.stats().cached_bytes <= mib as u64, "{:?}", be.stats());
    }
}

#[cfg(test)]
mod reuse {
    use super::Pool;

    /// Whatever order a step releases its buffers in, the next step's takes get
    /// the same buffers in the same order (the oldest free first), so repeated
    /// steps bind the same buffers.
    #[test]
    fn a_repeated_step_takes_the_same_buffers_whatever_the_release_order() {
        let Some(be) = wmx_reference::gpu::opened(crate::WebGpuBackend::new()) else {
            return;
        };
        let mut pool = Pool::new(be.kernels().clone());
        let step = |pool: &mut Pool<_>, reverse: bool| {
            let taken: Vec<_> = (0..6).map(|_| pool.take(4096, false).unwrap()).collect();
            let mut back = taken.clone();
            if reverse {
                back.reverse();
            } else {
                back.swap(1, 4);
            }
            for b in back {
                pool.release(b);
            }
            pool.batch_done();
            taken
        };
        let first = step(&mut pool, false);
        let second = step(&mut pool, true);
        let third = step(&mut pool, false);
        assert_eq!(first, second);
        assert_eq!(second, third);
        // Within a batch, outputs reuse the last buffer released in it (here the
        // newer of the two: oldest-first would give `a`).
        let a = pool.take(4096, false).unwrap();
        let b = pool.take(4096, false).unwrap();
        pool.release(a.clone());
        pool.release(b.clone());
        assert_eq!(pool.take(4096, true).unwrap(), b);
    }
}
