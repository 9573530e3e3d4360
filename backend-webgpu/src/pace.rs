//! When an eval's open batch is submitted (native; the browser schedules submits
//! itself, so there every eval submits).
//!
//! Each submit costs the GPU ~14 µs on its own (wgpu's Vulkan queue chains submits on
//! a semaphore), so while the GPU is busy, evals keep recording into the open batch.
//! It is submitted when the GPU is idle, or when one submit is running and is
//! expected to end within [`LEAD`]: queued just before the GPU runs dry, so a burst
//! of evals takes few submits and the GPU never waits for the host. The expectation
//! comes from the GPU time per dispatch observed on earlier submits (their start is
//! when they were submitted or the previous one ended, their end when a `poll`
//! first saw it); before any is observed, a batch is submitted once it is as long as
//! the running one (batches double).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long before the running submit's expected end the next one is queued: a
/// little over the host's submit cost plus the GPU's pick-up latency.
const LEAD: Duration = Duration::from_micros(40);

#[derive(Default)]
struct State {
    /// Submits not yet seen complete, oldest first: (submitted at, dispatches).
    running: VecDeque<(Instant, usize)>,
    /// When the last completion was seen.
    last_done: Option<Instant>,
    /// Smoothed GPU seconds per dispatch of completed submits.
    per_dispatch: Option<f64>,
}

/// Submit pacing state shared with wgpu's completion callbacks.
#[derive(Clone, Default)]
pub(crate) struct Pacer(Arc<Mutex<State>>);

impl Pacer {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a submit of `len` dispatches that has just been queued; the returned
    /// callback must run when it completes (`Queue::on_submitted_work_done`).
    pub(crate) fn submitted(&self, len: usize) -> impl FnOnce() + Send + 'static {
        self.state().running.push_back((Instant::now(), len));
        let me = self.clone();
        move || me.completed()
    }

    fn completed(&self) {
        let now = Instant::now();
        let mut s = self.state();
        let Some((at, len)) = s.running.pop_front() else {
            return;
        };
        let start = s.last_done.map_or(at, |d| d.max(at));
        s.last_done = Some(now);
        if len > 0 {
            let per = now.saturating_duration_since(start).as_secs_f64() / len as f64;
            s.per_dispatch = Some(s.per_dispatch.map_or(per, |p| 0.5 * (p + per)));
        }
    }

    /// Whether an eval ending with `open` dispatches recorded should submit them now.
    /// Call after `poll`, so that finished submits have been counted.
    pub(crate) fn submit_now(&self, open: usize) -> bool {
        let s = self.state();
        match s.running.len() {
            0 => true,
            1 => {
                let (at, len) = s.running[0];
                match s.per_dispatch {
                    Some(per) => {
                        let start = s.last_done.map_or(at, |d| d.max(at));
                        let end = start + Duration::from_secs_f64(per * len as f64);
                        end.saturating_duration_since(Instant::now()) <= LEAD
                    }
                    None => open >= len,
                }
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_submits_and_two_running_hold() {
        let p = Pacer::default();
        assert!(p.submit_now(1), "idle GPU: submit");
        let a = p.submitted(4);
        // No GPU time observed yet: the next batch goes once it is as long.
        assert!(!p.submit_now(3));
        assert!(p.submit_now(4));
        let b = p.submitted(4);
        assert!(!p.submit_now(100), "two submits running: hold");
        a();
        b();
        assert!(p.submit_now(1), "all done: submit");
    }

    #[test]
    fn the_next_batch_waits_for_the_running_one_to_near_its_end() {
        let p = Pacer::default();
        let done = p.submitted(1);
        std::thread::sleep(Duration::from_millis(5));
        done(); // about 5 ms of GPU time per dispatch
        let _running = p.submitted(10); // expected to run about 50 ms
        assert!(!p.submit_now(1000), "far from its end: hold");
    }
}
