//! The GPU profiler: [`crate::WebGpuBackend::profile`] times every dispatch with
//! GPU timestamps written between dispatches (each dispatch in its own compute
//! pass, and a wait for the timestamps after each submit: a profiled run is slower
//! than a plain one, its proportions are what it shows). Kernels are named by
//! their pipelines' labels (`Binary:add:[F32, F32]->f32:Contig(..)`, `wmx fused`,
//! a user kernel's label).

use std::collections::BTreeMap;
use std::fmt::Write;

/// One dispatch's GPU time.
#[derive(Clone, Debug)]
pub struct KernelTime {
    /// The kernel (its pipeline's label).
    pub name: String,
    /// Workgroups launched.
    pub groups: [u32; 3],
    /// Its shape and FLOP, where the kernel says (products).
    pub work: Option<wmx_kernels::Work>,
    /// Start, in nanoseconds from the profile's first timestamp.
    pub start_ns: f64,
    /// Duration in nanoseconds.
    pub dur_ns: f64,
    /// The submit it ran in (0 first).
    pub submit: usize,
}

/// What [`crate::WebGpuBackend::profile`] recorded.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// Every dispatch, in order.
    pub kernels: Vec<KernelTime>,
    /// Submits made.
    pub submits: usize,
    /// Wall time of the profiled closure, in milliseconds (host and GPU).
    pub wall_ms: f64,
    /// The first timestamp (the origin of `start_ns`).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub(crate) origin_ns: f64,
}

impl Profile {
    /// GPU time of all dispatches, in milliseconds.
    pub fn gpu_ms(&self) -> f64 {
        self.kernels.iter().map(|k| k.dur_ns).sum::<f64>() / 1e6
    }

    /// Per-kernel totals, largest first: `(name, count, total ms)`.
    pub fn by_kernel(&self) -> Vec<(String, usize, f64)> {
        let mut m: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
        for k in &self.kernels {
            let e = m.entry(&k.name).or_default();
            e.0 += 1;
            e.1 += k.dur_ns / 1e6;
        }
        let mut v: Vec<(String, usize, f64)> = m
            .into_iter()
            .map(|(n, (c, t))| (n.to_string(), c, t))
            .collect();
        v.sort_by(|a, b| b.2.total_cmp(&a.2));
        v
    }

    /// Per kernel and shape, for the dispatches that carry their work (products):
    /// `(name, shape, count, total ms, TFLOP/s)`, largest total first.
    pub fn by_shape(&self) -> Vec<(String, String, usize, f64, f64)> {
        let mut m: BTreeMap<(&str, &str), (usize, f64, f64)> = BTreeMap::new();
        for k in &self.kernels {
            if let Some(w) = &k.work {
                let e = m.entry((&k.name, &w.shape)).or_default();
                e.0 += 1;
                e.1 += k.dur_ns / 1e6;
                e.2 += w.flop;
            }
        }
        let mut v: Vec<_> = m
            .into_iter()
            .map(|((n, s), (c, t, f))| {
                (n.to_string(), s.to_string(), c, t, f / (t * 1e9).max(1e-30))
            })
            .collect();
        v.sort_by(|a, b| b.3.total_cmp(&a.3));
        v
    }

    /// A table of the kernels by total GPU time: share, count, total and mean;
    /// then the products by shape with their TFLOP/s.
    pub fn table(&self) -> String {
        let total = self.gpu_ms().max(1e-12);
        let mut s = format!(
            "{} dispatches in {} submits: {:.3} ms of GPU time, {:.3} ms wall\n",
            self.kernels.len(),
            self.submits,
            self.gpu_ms(),
            self.wall_ms
        );
        writeln!(
            s,
            "{:>6} {:>6} {:>10} {:>10}  kernel",
            "%", "count", "total ms", "mean us"
        )
        .unwrap();
        for (name, count, ms) in self.by_kernel() {
            writeln!(
                s,
                "{:>6.1} {:>6} {:>10.3} {:>10.2}  {name}",
                100.0 * ms / total,
                count,
                ms,
                1e3 * ms / count as f64
            )
            .unwrap();
        }
        let shapes = self.by_shape();
        if !shapes.is_empty() {
            writeln!(
                s,
                "{:>6} {:>6} {:>10} {:>10} {:>9}  kernel, shape",
                "%", "count", "total ms", "mean us", "TFLOP/s"
            )
            .unwrap();
        }
        for (name, shape, count, ms, tflops) in shapes {
            writeln!(
                s,
                "{:>6.1} {:>6} {:>10.3} {:>10.2} {:>9.2}  {name}, {shape}",
                100.0 * ms / total,
                count,
                ms,
                1e3 * ms / count as f64,
                tflops
            )
            .unwrap();
        }
        s
    }

    /// The dispatches as a Chrome trace (`chrome://tracing`, Perfetto): one
    /// complete event each, microseconds.
    pub fn chrome_trace(&self) -> String {
        let mut s = String::from("[\n");
        for (i, k) in self.kernels.iter().enumerate() {
            let name = k.name.replace('\\', "\\\\").replace('"', "\\\"");
            write!(
                s,
                "{{\"name\": \"{name}\", \"ph\": \"X\", \"pid\": 0, \"tid\": {}, \"ts\": {:.3}, \"dur\": {:.3}, \"args\": {{\"groups\": \"{:?}\", \"shape\": \"{}\"}}}}",
                k.submit,
                k.start_ns / 1e3,
                k.dur_ns / 1e3,
                k.groups,
                k.work.as_ref().map_or("", |w| w.shape.as_str())
            )
            .unwrap();
            s.push_str(if i + 1 < self.kernels.len() {
                ",\n"
            } else {
                "\n"
            });
        }
        s.push(']');
        s
    }
}
