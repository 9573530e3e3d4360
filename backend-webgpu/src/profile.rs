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

/// The dispatches of one kernel on one shape, together ([`Profile::by_shape`]).
#[derive(Clone, Debug, Default)]
pub struct ShapeTime {
    /// The kernel.
    pub name: String,
    /// The shape its dispatches report.
    pub shape: String,
    /// Dispatches.
    pub count: usize,
    /// Their GPU time, in milliseconds.
    pub ms: f64,
    /// Their floating-point operations (0 where not counted).
    pub flop: f64,
    /// The bytes they must move at least.
    pub bytes: f64,
}

impl ShapeTime {
    /// Achieved TFLOP/s.
    pub fn tflops(&self) -> f64 {
        self.flop / (self.ms * 1e9).max(1e-30)
    }
    /// Achieved GB/s of the bytes it must move.
    pub fn gbps(&self) -> f64 {
        self.bytes / (self.ms * 1e6).max(1e-30)
    }
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

    /// Per kernel and shape, for the dispatches that carry their work (products,
    /// fused kernels), largest total first.
    pub fn by_shape(&self) -> Vec<ShapeTime> {
        let mut m: BTreeMap<(&str, &str), ShapeTime> = BTreeMap::new();
        for k in &self.kernels {
            if let Some(w) = &k.work {
                let e = m.entry((&k.name, &w.shape)).or_insert_with(|| ShapeTime {
                    name: k.name.clone(),
                    shape: w.shape.clone(),
                    ..Default::default()
                });
                e.count += 1;
                e.ms += k.dur_ns / 1e6;
                e.flop += w.flop;
                e.bytes += w.bytes;
            }
        }
        let mut v: Vec<_> = m.into_values().collect();
        v.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        v
    }

    /// A table of the kernels by total GPU time: share, count, total and mean;
    /// then the products and fused kernels by shape with their TFLOP/s and GB/s.
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
                "{:>6} {:>6} {:>10} {:>10} {:>9} {:>8}  kernel, shape",
                "%", "count", "total ms", "mean us", "TFLOP/s", "GB/s"
            )
            .unwrap();
        }
        for t in shapes {
            writeln!(
                s,
                "{:>6.1} {:>6} {:>10.3} {:>10.2} {:>9.2} {:>8.0}  {}, {}",
                100.0 * t.ms / total,
                t.count,
                t.ms,
                1e3 * t.ms / t.count as f64,
                t.tflops(),
                t.gbps(),
                t.name,
                t.shape
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
