//! When recorded work is submitted (the crate docs' "Execution").
//!
//! A submit costs 15–60 µs of CPU on the H200's Vulkan driver (wgpu's encoding,
//! `vkQueueSubmit`, the completion poll), while a kernel on 2^10–2^20 elements runs
//! in 2–5 µs. Submitting at the end of every eval that finds the GPU idle therefore
//! locked a stream of small evals into one submit each (the GPU is always idle again
//! by the next eval): 20–60 µs per op against PyTorch's 6–8 µs. So an eval that finds
//! the GPU idle submits only when the previous submit ended at least
//! [`IDLE_SPACING`] times its cost ago (capped at [`MAX_DEFER`]); otherwise, and while
//! the GPU is busy, the batch stays open for the next evals. On native targets a
//! flusher thread submits a batch that nobody picks up (no further eval, read or
//! sync) once the GPU runs dry and the spacing has passed, so an eval followed by
//! unrelated CPU work still runs on the GPU meanwhile.

use crate::pool::Shared;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
#[cfg(not(target_arch = "wasm32"))]
use std::time::Duration;
#[cfg(not(target_arch = "wasm32"))]
use std::time::Instant;
use wmx_kernels as k;
use wmx_kernels::Driver;

/// An idle-GPU eval submits once the last submit ended this many times its own cost
/// ago: submits then take at most about a quarter of a stream's CPU time (8x
/// measured worse on the H200: longer waits, more of them left to the flusher).
#[cfg(not(target_arch = "wasm32"))]
const IDLE_SPACING: u32 = 3;
/// The longest an open batch waits for the spacing.
#[cfg(not(target_arch = "wasm32"))]
const MAX_DEFER: Duration = Duration::from_micros(250);
/// The flusher acts only after evals have stopped deferring for this long: while a
/// stream of evals goes on, they submit themselves (a flusher submitting tiny batches
/// in between measured slower, and its short batches shortened theirs).
#[cfg(not(target_arch = "wasm32"))]
const QUIET: Duration = Duration::from_micros(200);

/// The batch being recorded and the state that decides when it is submitted.
pub(crate) struct Submitter<D: Driver> {
    kernels: k::Kernels<D>,
    shared: Arc<Shared<D>>,
    batch: Mutex<k::Batch<D>>,
    in_flight: Arc<AtomicUsize>,
    last_len: AtomicUsize,
    #[cfg(not(target_arch = "wasm32"))]
    pace: Mutex<Pace>,
    #[cfg(not(target_arch = "wasm32"))]
    flusher: std::sync::OnceLock<Arc<Signal>>,
    /// The dispatches' times while a profile runs (`None`: not profiling).
    pub(crate) profile: Mutex<Option<crate::profile::Profile>>,
}

/// When the last submit ended and what it cost.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Clone, Copy)]
struct Pace {
    end: Option<Instant>,
    cost: Duration,
}

/// Wakes the flusher thread: `Some(t)` asks it to submit the open batch from `t`
/// on (once the GPU is idle); `stop` ends it.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Default)]
struct Signal {
    at: Mutex<(Option<Instant>, bool)>,
    cv: std::sync::Condvar,
}

#[cfg(not(target_arch = "wasm32"))]
impl Signal {
    /// Ends the flusher (it returns at its next wake-up, without touching the driver).
    fn stop(&self) {
        self.at.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.cv.notify_one();
    }
}

impl<D: Driver> Submitter<D> {
    pub(crate) fn new(kernels: k::Kernels<D>, shared: Arc<Shared<D>>) -> Arc<Submitter<D>> {
        let s = Arc::new(Submitter {
            kernels,
            shared,
            batch: Mutex::new(k::Batch::default()),
            in_flight: Arc::new(AtomicUsize::new(0)),
            last_len: AtomicUsize::new(0),
            #[cfg(not(target_arch = "wasm32"))]
            pace: Mutex::new(Pace {
                end: None,
                cost: Duration::ZERO,
            }),
            #[cfg(not(target_arch = "wasm32"))]
            flusher: std::sync::OnceLock::new(),
            profile: Mutex::new(None),
        });
        #[cfg(not(target_arch = "wasm32"))]
        {
            exit_hook::register(&s);
            // Started now, not when first armed: a thread started once memory has
            // run out (an out-of-memory a program recovers from) aborts the process
            // when the runtime cannot map its signal stack.
            s.flusher_signal();
        }
        s
    }

    pub(crate) fn lock_batch(&self) -> MutexGuard<'_, k::Batch<D>> {
        self.batch.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Submits `batch` (if not empty); `Err` carries wgpu's message.
    pub(crate) fn submit(&self, batch: &mut k::Batch<D>) -> std::result::Result<(), String> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut b = std::mem::take(batch);
        let len = b.len();
        let stamps = self.profile_stamps(&mut b);
        self.last_len.store(len, Ordering::Relaxed);
        #[cfg(not(target_arch = "wasm32"))]
        let t = Instant::now();
        let submitted = self.kernels.submit(b);
        #[cfg(not(target_arch = "wasm32"))]
        let ns = {
            let end = Instant::now();
            let cost = end - t;
            *self.pace.lock().unwrap_or_else(|e| e.into_inner()) = Pace {
                end: Some(end),
                cost,
            };
            cost.as_nanos() as u64
        };
        #[cfg(target_arch = "wasm32")]
        let ns = 0;
        self.shared.count_submit(len, ns);
        submitted.map_err(|e| e.to_string())?;
        if let Some((set, names)) = stamps {
            self.profile_read(&set, names)?;
        }
        let in_flight = self.in_flight.clone();
        in_flight.fetch_add(1, Ordering::AcqRel);
        self.kernels.driver().on_done(Box::new(move || {
            in_flight.fetch_sub(1, Ordering::AcqRel);
        }));
        self.shared.pool().batch_done();
        Ok(())
    }

    /// While profiling: a timestamp before every dispatch and after the last, and
    /// the dispatches' names and sizes.
    #[allow(clippy::type_complexity)]
    fn profile_stamps(&self, b: &mut k::Batch<D>) -> Option<(D::Timestamps, Vec<Named>)> {
        if self
            .profile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
        {
            return None;
        }
        let n = b.dispatches.len();
        let set = self.kernels.driver().timestamps(n as u32 + 1)?;
        let names = b
            .dispatches
            .iter()
            .map(|d| Named {
                name: D::pipeline_label(&d.pipe).to_string(),
                groups: d.groups,
                work: d.work.clone(),
            })
            .collect();
        let theirs = std::mem::take(&mut b.stamps);
        let mut stamps: Vec<k::Stamp<D>> = (0..=n)
            .map(|i| k::Stamp {
                at: i,
                set: set.clone(),
                index: i as u32,
            })
            .collect();
        stamps.extend(theirs);
        stamps.sort_by_key(|s| s.at);
        b.stamps = stamps;
        Some((set, names))
    }

    /// Reads a profiled submit's timestamps into the profile.
    fn profile_read(
        &self,
        set: &D::Timestamps,
        names: Vec<Named>,
    ) -> std::result::Result<(), String> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let t = self
                .kernels
                .driver()
                .read_timestamps(set, names.len() as u32 + 1)
                .map_err(|e| e.to_string())?;
            let mut guard = self.profile.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(p) = guard.as_mut() {
                if p.kernels.is_empty() {
                    p.origin_ns = t[0];
                }
                let origin = p.origin_ns;
                let submit = p.submits;
                for (i, d) in names.into_iter().enumerate() {
                    p.kernels.push(crate::profile::KernelTime {
                        name: d.name,
                        groups: d.groups,
                        work: d.work,
                        start_ns: t[i] - origin,
                        dur_ns: (t[i + 1] - t[i]).max(0.0),
                        submit,
                    });
                }
                p.submits += 1;
            }
        }
        #[cfg(target_arch = "wasm32")]
        let _ = (set, names);
        Ok(())
    }

    /// The end of an eval: submits the open batch if the policy says so (always on
    /// wasm, where the browser schedules submits itself), else leaves it for later
    /// evals or the flusher.
    pub(crate) fn end_of_eval(self: &Arc<Self>) -> std::result::Result<(), String> {
        let mut batch = self.lock_batch();
        if batch.is_empty() {
            return Ok(());
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            if batch.len() < crate::MAX_BATCH {
                if let Some(wait_until) = self.defer(batch.len()) {
                    drop(batch);
                    self.arm(wait_until);
                    return Ok(());
                }
            }
        }
        self.submit(&mut batch)
    }

    /// `None`: submit now. `Some(t)`: keep the batch open; submit from `t` on if no
    /// one else does. Now when the GPU is idle and the spacing has passed, or when it
    /// runs one submit no longer than this batch (queued behind it, so the GPU does
    /// not run dry; batches double).
    #[cfg(not(target_arch = "wasm32"))]
    fn defer(&self, open: usize) -> Option<Instant> {
        // Runs the completion callbacks of finished submits.
        self.kernels.driver().poll();
        let now = Instant::now();
        let pace = *self.pace.lock().unwrap_or_else(|e| e.into_inner());
        let spaced = match pace.end {
            Some(end) => end + (pace.cost * IDLE_SPACING).min(MAX_DEFER),
            None => now,
        };
        match self.in_flight.load(Ordering::Acquire) {
            0 if now >= spaced => None,
            0 => Some(spaced),
            1 if open >= self.last_len.load(Ordering::Relaxed) => None,
            _ => Some(spaced.max(now)),
        }
    }

    /// The flusher thread's signal, the thread started on the first call.
    #[cfg(not(target_arch = "wasm32"))]
    fn flusher_signal(self: &Arc<Self>) -> &Arc<Signal> {
        self.flusher.get_or_init(|| {
            let signal = Arc::new(Signal::default());
            let (s, me) = (signal.clone(), Arc::downgrade(self));
            let spawned = std::thread::Builder::new()
                .name("wmx-webgpu flusher".into())
                .spawn(move || flusher(&s, &me));
            if spawned.is_err() {
                // No thread: reads, syncs and later evals still submit the batch.
                signal.stop();
            }
            signal
        })
    }

    /// Asks the flusher thread (started with the backend) to submit the open batch from
    /// `at` (or [`QUIET`] from now, whichever is later) on, once the GPU is idle; a
    /// later call moves the time on.
    #[cfg(not(target_arch = "wasm32"))]
    fn arm(self: &Arc<Self>, at: Instant) {
        let signal = self.flusher_signal();
        let at = at.max(Instant::now() + QUIET);
        let mut st = signal.at.lock().unwrap_or_else(|e| e.into_inner());
        match st.0 {
            // The flusher sleeps until the earlier time, then finds this one.
            Some(t) if t >= at => {}
            Some(_) => st.0 = Some(at),
            None => {
                st.0 = Some(at);
                signal.cv.notify_one();
            }
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl<D: Driver> Drop for Submitter<D> {
    fn drop(&mut self) {
        if let Some(s) = self.flusher.get() {
            s.stop();
        }
    }
}

/// The flusher thread: waits to be armed, sleeps until the time asked, then submits
/// the open batch once no submit is in flight (checking after 20 µs, then less
/// often). It touches the driver only while a batch is open, never in a blocking
/// call; at process exit [`exit_hook`] stops it before the driver is torn down.
#[cfg(not(target_arch = "wasm32"))]
fn flusher<D: Driver>(signal: &Signal, sub: &std::sync::Weak<Submitter<D>>) {
    loop {
        // Sleep until the time asked, which later evals may move on.
        {
            let mut st = signal.at.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if st.1 {
                    return;
                }
                match st.0 {
                    Some(at) if at <= Instant::now() => {
                        st.0 = None;
                        break;
                    }
                    Some(at) => {
                        let wait = at - Instant::now();
                        st = signal
                            .cv
                            .wait_timeout(st, wait)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                    None => st = signal.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
                }
            }
        }
        let mut nap = Duration::from_micros(20);
        loop {
            let Some(s) = sub.upgrade() else { return };
            s.kernels.driver().poll();
            let mut batch = s.lock_batch();
            if batch.is_empty() {
                break;
            }
            if s.in_flight.load(Ordering::Acquire) == 0 {
                if let Err(msg) = s.submit(&mut batch) {
                    // Surfaces as an Err from the backend's next call.
                    s.shared.set_error(msg);
                }
                break;
            }
            drop(batch);
            drop(s);
            // A long kernel in flight: check less and less often (up to every 1 ms).
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(1));
        }
    }
}

/// Quiet GPUs at process exit. A process that ends right after an eval used to
/// crash in about 1 of 3 runs on lavapipe (SIGSEGV, or "pure virtual method called"
/// with an abort): the driver's threads were still running its kernels, or the
/// flusher was submitting, while Mesa's exit handlers tore the driver down. An
/// `atexit` handler registered after the driver's (so it runs before them) stops
/// every flusher, keeps every batch lock so nothing more is submitted (open batches
/// stay unsubmitted: nobody can read them any more) and waits for the work in flight.
#[cfg(not(target_arch = "wasm32"))]
mod exit_hook {
    use super::Submitter;
    use std::sync::{Arc, Mutex, Once, Weak};
    use wmx_kernels::Driver;

    /// A submitter of any driver, as the exit handler sees it.
    trait Quiesce: Send + Sync {
        /// Stops the flusher, keeps the batch lock and waits for the work in flight.
        fn quiesce(&self);
    }

    impl<D: Driver> Quiesce for Submitter<D> {
        fn quiesce(&self) {
            if let Some(sig) = self.flusher.get() {
                sig.stop();
            }
            std::mem::forget(self.lock_batch());
            self.kernels.poll_wait();
        }
    }

    static LIVE: Mutex<Vec<Weak<dyn Quiesce>>> = Mutex::new(Vec::new());
    static HOOK: Once = Once::new();

    pub(super) fn register<D: Driver>(s: &Arc<Submitter<D>>) {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|w| w.strong_count() > 0);
        let s: Arc<dyn Quiesce> = s.clone();
        live.push(Arc::downgrade(&s));
        drop(live);
        HOOK.call_once(|| {
            // SAFETY: `quiesce` is an `extern "C" fn()` that does not unwind.
            unsafe { libc::atexit(quiesce) };
        });
    }

    /// Runs on a thread of its own: the exiting thread's thread-locals (which wgpu
    /// uses) are already destroyed when exit handlers run.
    extern "C" fn quiesce() {
        if let Ok(t) = std::thread::Builder::new().spawn(quiesce_all) {
            let _ = t.join();
        }
    }

    fn quiesce_all() {
        let live = LIVE.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for w in live {
            let Some(s) = w.upgrade() else { continue };
            s.quiesce();
            // The process is ending: keep the submitter (and its device) alive.
            std::mem::forget(s);
        }
    }
}

/// A profiled dispatch before its times are read (the browser reads none).
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub(crate) struct Named {
    name: String,
    groups: [u32; 3],
    work: Option<k::Work>,
}
