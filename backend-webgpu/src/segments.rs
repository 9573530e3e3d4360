//! Arrays larger than one buffer (the device's `max_buffer_size`: 4 GiB on NVIDIA
//! through Vulkan, 2 GiB on lavapipe): held in segments, buffers of one size (the
//! largest power of two a buffer may have; the last segment shorter).
//!
//! The ops that compute in pieces through `GpuBackend::record_rows`, the
//! reductions' pieces or concatenation's (elementwise ops, copies, casts, creation,
//! random draws, fused kernels, reductions, scans, sorts, row ops, concatenation),
//! uploads and reads take such arrays: the planner ends pieces at segment boundaries where it can (`split.rs`),
//! and each piece binds its window in the segment that holds it. A window across a
//! boundary is bridged: an input's bytes are copied into a scratch buffer first, an
//! output's written there and copied into place after, all in the same batch. Every
//! other op gives an `Err` naming the limit for a segmented operand.

use crate::pool::Shared;
use crate::{GpuBackend, GpuBuffer, kerr};
use smallvec::SmallVec;
use std::sync::Arc;
use wmx_core::{Error, Result};
use wmx_kernels::{self as k, Driver, DriverBuffer, Window};

/// An array's GPU memory: one buffer, or segments of `seg` bytes each.
#[derive(Clone, Debug)]
pub(crate) struct Mem<B> {
    /// The buffers, in order (inline when one: every dispatch clones its
    /// operands' `Mem`).
    pub parts: SmallVec<[B; 1]>,
    /// Bytes per segment (`u64::MAX` for one buffer).
    pub seg: u64,
}

impl<B: DriverBuffer> Mem<B> {
    /// One buffer.
    pub fn one(b: B) -> Mem<B> {
        Mem {
            parts: smallvec::smallvec![b],
            seg: u64::MAX,
        }
    }

    /// Whether the memory is one buffer.
    pub fn is_one(&self) -> bool {
        self.parts.len() == 1
    }

    /// Bytes addressable through it (the segments' sizes summed).
    pub fn byte_size(&self) -> u64 {
        match self.parts.split_last() {
            Some((last, rest)) => rest.len() as u64 * self.seg + last.byte_size(),
            None => 0,
        }
    }

    /// Each segment with the range of the array's `bytes` it holds.
    pub fn ranges(&self, bytes: u64) -> impl Iterator<Item = (&B, u64, u64)> {
        let seg = self.seg;
        self.parts.iter().enumerate().map(move |(i, b)| {
            let start = (i as u64).saturating_mul(seg).min(bytes);
            (b, start, bytes.min(start.saturating_add(seg)))
        })
    }
}

/// The segment size on a device whose buffers may have `max_buffer` bytes.
pub(crate) fn segment_bytes(max_buffer: u64) -> u64 {
    1 << (63 - max_buffer.max(1 << 20).leading_zeros())
}

/// Where one piece binds a window of an operand or output.
pub(crate) enum Bound<B> {
    /// In one buffer (through a window of it, or whole).
    Direct(B, Option<Window>),
    /// Across segments: through a scratch buffer bound whole, holding the window.
    Bridge { scratch: B, window: Window },
}

impl<B: Clone> Bound<B> {
    /// The buffer and window a kernel binds.
    pub fn binding(&self) -> (&B, Option<Window>) {
        match self {
            Bound::Direct(b, w) => (b, *w),
            Bound::Bridge { scratch, .. } => (scratch, None),
        }
    }
}

impl<D: Driver> GpuBackend<D> {
    /// Whether an array of `bytes` needs more than one buffer here.
    pub(crate) fn segmented(&self, bytes: u64) -> bool {
        bytes.div_ceil(16) * 16 > self.kernels.caps().max_buffer
    }

    /// The GPU memory of `b`, uploading host data first if needed.
    pub(crate) fn mem(&self, b: &GpuBuffer<D>) -> Result<Mem<D::Buffer>> {
        let mut d = b.data.lock().unwrap();
        if let Some(g) = &d.gpu {
            return Ok(g.clone());
        }
        let host = d.host.clone().expect("a buffer has host or GPU data");
        let mem = self.upload_mem(&host)?;
        d.gpu = Some(mem.clone());
        Ok(mem)
    }

    /// Fresh GPU memory holding `host` (written before the next batch runs).
    pub(crate) fn upload_mem(&self, host: &[u8]) -> Result<Mem<D::Buffer>> {
        let len = host.len() as u64;
        let mem = alloc(&self.shared, len, false)?;
        for (part, start, end) in mem.ranges(len) {
            if start < end {
                let bytes = &host[start as usize..end as usize];
                if bytes.len().is_multiple_of(4) {
                    self.kernels.driver().write_buffer(part, 0, bytes);
                } else {
                    let mut padded = bytes.to_vec();
                    padded.resize(bytes.len().div_ceil(4) * 4, 0);
                    self.kernels.driver().write_buffer(part, 0, &padded);
                }
            }
        }
        self.shared.count_upload(len);
        Ok(mem)
    }

    /// The one GPU buffer of `b` (uploading host data first): `Err` for an array
    /// held in segments, which only the ops that compute in pieces take.
    pub(crate) fn gpu(&self, b: &GpuBuffer<D>) -> Result<D::Buffer> {
        let mem = self.mem(b)?;
        if mem.is_one() {
            return Ok(mem.parts[0].clone());
        }
        Err(Error::OutOfRange {
            op: "webgpu",
            msg: format!(
                "an array of {} bytes is larger than one buffer of this device ({} bytes) \
                 and is held in {} segments: elementwise ops, copies, casts, creation, \
                 random draws, reductions, concatenation, matmul, gathers, scatters, \
                 slice updates, scans, and sorts and row ops along the last axis compute \
                 such arrays, this op does not (compute it in parts, e.g. \
                 on slices that fit a buffer, or on the CPU)",
                b.bytes,
                self.kernels.caps().max_buffer,
                mem.parts.len()
            ),
        })
    }

    /// Binds window `w` (`None`: all) of `mem` for a piece to read, bridging a
    /// window across segments (the copies are recorded into `batch` now, so they
    /// run before the piece's kernel; [`GpuBackend::unbind_in`] after it).
    pub(crate) fn bind_in(
        &self,
        batch: &mut k::Batch<D>,
        mem: &Mem<D::Buffer>,
        w: Option<Window>,
    ) -> Result<Bound<D::Buffer>> {
        let Some(w) = self.crossing(mem, w)? else {
            return Ok(self.direct(mem, w));
        };
        let scratch = self.shared.pool().take(w.len, true).map_err(kerr)?;
        self.gather_window(batch, mem, w, &scratch)?;
        Ok(Bound::Bridge { scratch, window: w })
    }

    /// Binds window `w` of `mem` for one kernel reading a view (`GpuBackend::input`):
    /// a window across segments is copied into a buffer of its own, freed once the
    /// work using it is done (not the pool's: the op's output is taken after this).
    pub(crate) fn bind_view(
        &self,
        mem: &Mem<D::Buffer>,
        w: Option<Window>,
    ) -> Result<(D::Buffer, Option<Window>)> {
        let Some(w) = self.crossing(mem, w)? else {
            return Ok(match self.direct(mem, w) {
                Bound::Direct(b, w) => (b, w),
                Bound::Bridge { scratch, .. } => (scratch, None),
            });
        };
        let scratch = self
            .kernels
            .create_buffer(w.len, Some("wmx bridge"))
            .map_err(kerr)?;
        self.gather_window(&mut self.lock_batch(), mem, w, &scratch)?;
        Ok((scratch, None))
    }

    /// Records copies of window `w` of `mem` (across segments) into `scratch`.
    fn gather_window(
        &self,
        batch: &mut k::Batch<D>,
        mem: &Mem<D::Buffer>,
        w: Window,
        scratch: &D::Buffer,
    ) -> Result<()> {
        for (part, a, b) in self.pieces_of(mem, w) {
            let at = a - self.seg_start(mem, a);
            self.copy_bytes(batch, (part, at), (scratch, a - w.start), b - a)?;
        }
        Ok(())
    }

    /// Gives back an input's bridge once the piece reading it is recorded (later
    /// outputs of the batch may reuse it: they run after the piece).
    pub(crate) fn unbind_in(&self, bound: Vec<Bound<D::Buffer>>) {
        for b in bound {
            if let Bound::Bridge { scratch, .. } = b {
                self.shared.release(scratch);
            }
        }
    }

    /// Binds window `w` of `mem` for a piece to write its first `len` bytes; a
    /// window across segments is a scratch buffer that [`GpuBackend::unbind_out`]
    /// copies into place once the piece's kernel is recorded.
    pub(crate) fn bind_out(
        &self,
        mem: &Mem<D::Buffer>,
        w: Option<Window>,
        len: u64,
    ) -> Result<Bound<D::Buffer>> {
        let Some(w) = self.crossing(mem, w)? else {
            return Ok(self.direct(mem, w));
        };
        let scratch = self.shared.pool().take(w.len, true).map_err(kerr)?;
        let window = Window {
            start: w.start,
            len: (len.div_ceil(4) * 4).min(w.len),
        };
        Ok(Bound::Bridge { scratch, window })
    }

    /// Records the copies of a bridged output into its segments.
    pub(crate) fn unbind_out(
        &self,
        batch: &mut k::Batch<D>,
        mem: &Mem<D::Buffer>,
        bound: Bound<D::Buffer>,
    ) -> Result<()> {
        let Bound::Bridge { scratch, window: w } = bound else {
            return Ok(());
        };
        for (part, a, b) in self.pieces_of(mem, w) {
            let at = a - self.seg_start(mem, a);
            self.copy_bytes(batch, (&scratch, a - w.start), (part, at), b - a)?;
        }
        self.shared.release(scratch);
        Ok(())
    }

    /// Records a copy of `len` bytes (a multiple of 4) from `src` at its offset to
    /// `dst` at its offset (both aligned as windows must be), as u32 words.
    fn copy_bytes(
        &self,
        batch: &mut k::Batch<D>,
        src: (&D::Buffer, u64),
        dst: (&D::Buffer, u64),
        len: u64,
    ) -> Result<()> {
        let n = [(len / 4) as usize];
        let from = k::Strided {
            buffer: src.0,
            window: Some(Window { start: src.1, len }),
            dtype: k::DType::U32,
            shape: &n,
            strides: &[1],
            offset: 0,
        };
        let to = k::Contig {
            buffer: dst.0,
            window: Some(Window { start: dst.1, len }),
            dtype: k::DType::U32,
            shape: &n,
        };
        self.kernels.copy(batch, &from, &to).map_err(kerr)
    }

    /// `w` when it crosses a segment boundary of `mem` (then it is a window:
    /// segmented memory is larger than any binding), else `None`.
    fn crossing(&self, mem: &Mem<D::Buffer>, w: Option<Window>) -> Result<Option<Window>> {
        if mem.is_one() {
            return Ok(None);
        }
        let w = w.ok_or_else(|| {
            Error::invalid("webgpu", "segmented memory bound whole (a planner bug)")
        })?;
        let first = w.start / mem.seg;
        let last = (w.start + w.len - 1) / mem.seg;
        Ok((first != last).then_some(w))
    }

    /// A window within one segment, relative to that segment.
    fn direct(&self, mem: &Mem<D::Buffer>, w: Option<Window>) -> Bound<D::Buffer> {
        match w {
            Some(w) if !mem.is_one() => {
                let i = (w.start / mem.seg) as usize;
                let start = w.start - i as u64 * mem.seg;
                Bound::Direct(mem.parts[i].clone(), Some(Window { start, len: w.len }))
            }
            _ => Bound::Direct(mem.parts[0].clone(), w),
        }
    }

    /// The start of the segment holding byte `at`.
    fn seg_start(&self, mem: &Mem<D::Buffer>, at: u64) -> u64 {
        at / mem.seg * mem.seg
    }

    /// The segments `w` spans, each with the part of `w` in it (absolute bytes).
    fn pieces_of<'m>(
        &self,
        mem: &'m Mem<D::Buffer>,
        w: Window,
    ) -> impl Iterator<Item = (&'m D::Buffer, u64, u64)> {
        let end = w.start + w.len;
        mem.ranges(u64::MAX)
            .filter(move |&(_, a, b)| a < end && b > w.start)
            .map(move |(part, a, b)| (part, a.max(w.start), b.min(end)))
    }
}

/// The most bytes one array held in segments may have: the host's memory on a CPU
/// adapter (lavapipe, SwiftShader: their memory is the host's, and allocations
/// past it are not refused until pages are touched), else 1 TiB (past any GPU's
/// memory today; drivers refuse allocations past theirs).
pub(crate) fn max_array_bytes(device_type: wgpu::DeviceType) -> u64 {
    const TIB: u64 = 1 << 40;
    if device_type != wgpu::DeviceType::Cpu {
        return TIB;
    }
    #[cfg(all(unix, not(target_arch = "wasm32")))]
    {
        // SAFETY: sysconf only reads system configuration.
        let (pages, page) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && page > 0 {
            return (pages as u64).saturating_mul(page as u64).min(TIB);
        }
    }
    TIB
}

/// Fresh GPU memory for `bytes` from the pool: one buffer, or segments where one
/// buffer would pass the device's limit (`for_output`: see `Pool::take`). On
/// failure the segments already taken go back.
pub(crate) fn alloc<D: Driver>(
    shared: &Arc<Shared<D>>,
    bytes: u64,
    for_output: bool,
) -> Result<Mem<D::Buffer>> {
    let max = shared.max_buffer();
    if bytes.div_ceil(16) * 16 <= max {
        let g = shared.pool().take(bytes, for_output).map_err(kerr)?;
        return Ok(Mem::one(g));
    }
    let most = shared.max_array();
    if bytes > most {
        return Err(Error::Backend {
            backend: D::NAME.into(),
            msg: format!(
                "out of memory: an array of {bytes} bytes is larger than this device's \
                 memory allows one array ({most} bytes)"
            ),
        });
    }
    let seg = segment_bytes(max);
    let mut parts = SmallVec::with_capacity(bytes.div_ceil(seg) as usize);
    let mut at = 0;
    while at < bytes {
        // Taken in a statement of its own: the pool's guard must be gone before a
        // refusal releases the parts taken so far (release locks the pool too).
        let taken = shared.pool().take(seg.min(bytes - at), for_output);
        match taken {
            Ok(b) => parts.push(b),
            Err(e) => {
                for b in parts {
                    shared.release(b);
                }
                return Err(kerr(e));
            }
        }
        at += seg;
    }
    Ok(Mem { parts, seg })
}

#[cfg(test)]
mod tests {
    use super::segment_bytes;

    #[test]
    fn segments_are_the_largest_power_of_two_a_buffer_may_have() {
        assert_eq!(segment_bytes(4_292_870_144), 1 << 31);
        assert_eq!(segment_bytes(1 << 31), 1 << 31);
        assert_eq!(segment_bytes((1 << 23) + 256), 1 << 23);
    }
}
