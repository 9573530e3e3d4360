//! Arrays past the device's storage-binding limit (128 MiB on lavapipe, 2 GiB on
//! NVIDIA) and views of more than 2^30 elements: an op is cut into pieces, each a
//! box of the index space whose every operand fits one bound [`Window`] of its
//! buffer and 32-bit indexing. Pieces are cut along the leading dims, so each
//! piece's output is one contiguous range of the output, written through a window
//! that starts at the device's binding alignment.
//!
//! A piece never reads through a window wider than the binding limit, so what can
//! be split is any layout whose boxes along the leading dims fit: contiguous and
//! sliced arrays, broadcast views, row-wise transposes; a layout that cannot be
//! cut (a transpose whose single row spans more than a binding) is an `Err`.

use crate::segments::{Mem, segment_bytes};
use crate::{GpuBackend, GpuBuffer, In, MAX_BATCH, gpu_dtype, kerr};
use wmx_core::{ArgReduceOp, DType, Error, Layout, ReduceOp, Result, View};
use wmx_kernels::Driver;
use wmx_kernels::{self as k, Window};

/// What one binding may hold.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// `max_storage_buffer_binding_size`.
    pub bytes: u64,
    /// Alignment of a window's start.
    pub align: u64,
}

/// Elements one piece may count or address: the kernels index with 32-bit words
/// (strides signed) and some scale indices by up to 2 in u32 (sort pairs); 2^30
/// keeps every kernel clear of that, and pieces of broadcast views exact in f32.
pub(crate) const MAX_ELEMS: u64 = 1 << 30;

/// More pieces than this is an `Err` (each is at least one dispatch).
const MAX_PIECES: usize = 1 << 16;

/// An input as the planner sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operand<'a> {
    /// Strides in elements, one per dim of the index space.
    pub strides: &'a [isize],
    /// Element offset of index 0 in the buffer.
    pub offset: usize,
    /// Bytes per element.
    pub size: u64,
    /// Bytes of the buffer (of all its segments).
    pub buffer: u64,
    /// Bytes per segment of its memory (`u64::MAX` for one buffer; `segments.rs`).
    pub seg: u64,
}

impl Operand<'_> {
    /// Whether the buffer can be bound whole (then offsets stay absolute).
    fn whole(&self, lim: Limits) -> bool {
        self.buffer <= lim.bytes && self.buffer / self.size <= MAX_ELEMS
    }
}

/// One input's view within a piece.
#[derive(Clone, Debug)]
pub(crate) struct Part {
    /// Strides (0 on dims of extent 1).
    pub strides: Vec<isize>,
    /// Element offset from the window's start (from the buffer's without one).
    pub offset: usize,
    /// The bytes bound, `None` for the whole buffer.
    pub window: Option<Window>,
}

impl Part {
    /// This part as a kernel input of `shape` (its piece's extents).
    pub(crate) fn strided<'a, B>(
        &'a self,
        buffer: &'a B,
        dtype: k::DType,
        shape: &'a [usize],
    ) -> k::Strided<'a, B> {
        k::Strided {
            buffer,
            window: self.window,
            dtype,
            shape,
            strides: &self.strides,
            offset: self.offset,
        }
    }
}

/// A part of a view cut along one dim (`GpuBackend::parts_along`): all of its
/// other dims, a range of that one.
#[derive(Clone, Debug)]
pub(crate) struct AxisPart {
    /// First index of the range along the dim.
    pub lo: usize,
    /// The view's shape, the dim's extent the range's.
    pub shape: Vec<usize>,
    /// The view's strides (0 on dims of extent 1).
    pub strides: Vec<isize>,
    /// Element offset from the window's start (from the buffer's without one).
    pub offset: usize,
    /// The bytes bound, `None` for the whole buffer.
    pub window: Option<Window>,
}

impl AxisPart {
    /// This part as a kernel input.
    pub(crate) fn strided<'a, B>(&'a self, buffer: &'a B, dtype: k::DType) -> k::Strided<'a, B> {
        k::Strided {
            buffer,
            window: self.window,
            dtype,
            shape: &self.shape,
            strides: &self.strides,
            offset: self.offset,
        }
    }
}

/// A box of the index space.
#[derive(Clone, Debug)]
pub(crate) struct Piece {
    /// Extents (the rank of the whole).
    pub shape: Vec<usize>,
    /// Row-major index of the piece's first element among the output dims.
    pub out_start: u64,
    /// One per input.
    pub ins: Vec<Part>,
}

/// Where pieces write.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Out {
    /// Each piece writes its range of one output (of `size`-byte elements over the
    /// cut dims) through a window: the range fits a binding and starts aligned.
    Window(u64),
    /// Each piece writes an output of its own, of its extents over the cut dims
    /// (`size`-byte elements), which fits a binding.
    Own(u64),
    /// Each piece writes an output of its own that the caller checked.
    Unchecked,
}

/// Cuts the index space `shape` into pieces. Cuts fall only within the leading
/// `cut` dims (the others stay whole in every piece: reduced dims). An empty
/// index space gives no pieces.
pub(crate) fn plan(
    shape: &[usize],
    ins: &[Operand<'_>],
    cut: usize,
    out: Out,
    lim: Limits,
) -> Result<Vec<Piece>, String> {
    plan_segmented(shape, ins, cut, out, u64::MAX, lim)
}

/// [`plan`] for an output held in segments of `out_seg` bytes (with
/// [`Out::Window`]; `u64::MAX`: one buffer). Pieces end at a segment boundary of
/// an input or the output that would fall inside them where a shorter piece can
/// (one that cannot is bridged when bound, `segments.rs`).
pub(crate) fn plan_segmented(
    shape: &[usize],
    ins: &[Operand<'_>],
    cut: usize,
    out: Out,
    out_seg: u64,
    lim: Limits,
) -> Result<Vec<Piece>, String> {
    if shape.contains(&0) {
        return Ok(Vec::new());
    }
    let p = Planner {
        shape,
        ins,
        cut,
        out,
        out_seg,
        lim,
    };
    let mut pieces = Vec::new();
    let origin: Vec<i128> = ins.iter().map(|x| x.offset as i128).collect();
    p.cut_at(0, &origin, 0, &mut pieces)?;
    Ok(pieces)
}

struct Planner<'a> {
    shape: &'a [usize],
    ins: &'a [Operand<'a>],
    cut: usize,
    out: Out,
    out_seg: u64,
    lim: Limits,
}

impl Planner<'_> {
    /// Cuts the box whose dims before `d` are fixed (offsets `origin`, output
    /// index `out_start`) and whose others are whole.
    fn cut_at(
        &self,
        d: usize,
        origin: &[i128],
        out_start: u64,
        pieces: &mut Vec<Piece>,
    ) -> Result<(), String> {
        let mut ext: Vec<usize> = (0..self.shape.len())
            .map(|k| if k < d { 1 } else { self.shape[k] })
            .collect();
        if self.fits(&ext) {
            return self.emit(ext, origin, out_start, pieces);
        }
        if d >= self.cut || d >= self.shape.len() {
            return Err(self.unsplittable());
        }
        let inner: u64 = self.shape[d + 1..self.cut.max(d + 1)]
            .iter()
            .map(|&e| e as u64)
            .product();
        // Pieces start at multiples of `q` along dim d so their outputs start aligned.
        let q = match self.out {
            Out::Window(size) => {
                let rem = (inner as u128 * size as u128 % self.lim.align as u128) as u64;
                if rem == 0 {
                    1
                } else {
                    self.lim.align / gcd(rem, self.lim.align)
                }
            }
            Out::Own(_) | Out::Unchecked => 1,
        };
        let extent = self.shape[d] as u64;
        // The largest multiple of q whose box fits (fitting is monotone in c).
        let (mut lo, mut hi) = (0u64, extent / q);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            ext[d] = (mid * q) as usize;
            if self.fits(&ext) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        let stride = |k: usize| self.ins.iter().map(move |x| x.strides[k] as i128);
        if lo > 0 {
            let c = lo * q;
            let mut i = 0;
            while i < extent {
                let o: Vec<i128> = origin
                    .iter()
                    .zip(stride(d))
                    .map(|(o, s)| o + i as i128 * s)
                    .collect();
                let at = out_start + i * inner;
                let mut n = c.min(extent - i);
                ext[d] = n as usize;
                if self.crosses(&ext, &o, at) {
                    // The longest run of multiples of q from i that crosses no
                    // boundary (crossing is monotone in the run's length).
                    let (mut a, mut b) = (0u64, (n - 1) / q);
                    while a < b {
                        let mid = a + (b - a).div_ceil(2);
                        ext[d] = (mid * q) as usize;
                        if self.crosses(&ext, &o, at) {
                            b = mid - 1;
                        } else {
                            a = mid;
                        }
                    }
                    if a > 0 {
                        n = a * q;
                    }
                    ext[d] = n as usize;
                }
                self.emit(ext.clone(), &o, at, pieces)?;
                i += n;
            }
            return Ok(());
        }
        if q != 1 {
            return Err(self.unsplittable());
        }
        for i in 0..extent {
            let o: Vec<i128> = origin
                .iter()
                .zip(stride(d))
                .map(|(o, s)| o + i as i128 * s)
                .collect();
            self.cut_at(d + 1, &o, out_start + i * inner, pieces)?;
        }
        Ok(())
    }

    /// Whether a box of extents `ext` fits wherever it lies (a window's start is
    /// rounded down to the alignment: counted as slack).
    fn fits(&self, ext: &[usize]) -> bool {
        let count: u128 = ext.iter().map(|&e| e as u128).product();
        if count > MAX_ELEMS as u128 {
            return false;
        }
        if let Out::Window(size) | Out::Own(size) = self.out {
            let n: u128 = ext[..self.cut].iter().map(|&e| e as u128).product();
            if (n * size as u128).div_ceil(16) * 16 > self.lim.bytes as u128 {
                return false;
            }
        }
        self.ins.iter().all(|x| {
            if x.whole(self.lim) {
                return true;
            }
            let span: u128 = ext
                .iter()
                .zip(x.strides)
                .map(|(&e, &s)| (e as u128 - 1) * s.unsigned_abs() as u128)
                .sum();
            let bytes = (span + 1) * x.size as u128 + self.lim.align as u128 + 16;
            bytes <= self.lim.bytes as u128 && bytes / x.size as u128 <= MAX_ELEMS as u128
        })
    }

    fn emit(
        &self,
        ext: Vec<usize>,
        origin: &[i128],
        out_start: u64,
        pieces: &mut Vec<Piece>,
    ) -> Result<(), String> {
        if pieces.len() >= MAX_PIECES {
            return Err(format!(
                "more than {MAX_PIECES} pieces of at most {} bytes would be needed",
                self.lim.bytes
            ));
        }
        let ins = self
            .ins
            .iter()
            .zip(origin)
            .map(|(x, &o)| {
                let strides: Vec<isize> = ext
                    .iter()
                    .zip(x.strides)
                    .map(|(&e, &s)| if e == 1 { 0 } else { s })
                    .collect();
                if x.whole(self.lim) {
                    return Part {
                        strides,
                        offset: o as usize,
                        window: None,
                    };
                }
                let w = self.window(x, &ext, o);
                Part {
                    strides,
                    offset: (o - w.start as i128 / x.size as i128) as usize,
                    window: Some(w),
                }
            })
            .collect();
        pieces.push(Piece {
            shape: ext,
            out_start,
            ins,
        });
        Ok(())
    }

    /// The window of `x` a box of extents `ext` at element offset `o` binds: from
    /// its lowest element (rounded down to the alignment) to past its highest
    /// (rounded up to 16 bytes, within the buffer).
    fn window(&self, x: &Operand<'_>, ext: &[usize], o: i128) -> Window {
        let (mut lo, mut hi) = (o, o);
        for (&e, &s) in ext.iter().zip(x.strides) {
            let span = (e as i128 - 1) * s as i128;
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        let size = x.size as i128;
        let align = self.lim.align as i128;
        let start = (lo * size) / align * align;
        let end = ((hi + 1) * size + 15) / 16 * 16;
        let end = end.min(x.buffer as i128);
        Window {
            start: start as u64,
            len: (end - start) as u64,
        }
    }

    /// Whether a box of extents `ext` at element offsets `origin` (output index
    /// `out_start`) binds a window across a segment boundary of an input or the
    /// output.
    fn crosses(&self, ext: &[usize], origin: &[i128], out_start: u64) -> bool {
        let across = |start: u64, len: u64, seg: u64| start / seg != (start + len - 1) / seg;
        let ins = self.ins.iter().zip(origin).any(|(x, &o)| {
            if x.seg >= x.buffer || x.whole(self.lim) {
                return false;
            }
            let w = self.window(x, ext, o);
            across(w.start, w.len, x.seg)
        });
        let out = match self.out {
            Out::Window(size) if self.out_seg != u64::MAX => {
                let n: u64 = ext[..self.cut].iter().map(|&e| e as u64).product();
                across(out_start * size, (n * size).div_ceil(16) * 16, self.out_seg)
            }
            _ => false,
        };
        ins || out
    }

    fn unsplittable(&self) -> String {
        format!(
            "the layout cannot be cut into pieces of at most {} bytes and 2^30 elements \
             (a single row along the leading dims is larger; make the array contiguous \
             in parts first)",
            self.lim.bytes
        )
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The multi-index of row-major position `at` over `dims`.
fn unravel(mut at: u64, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for d in (0..dims.len()).rev() {
        idx[d] = (at % dims[d] as u64) as usize;
        at /= dims[d] as u64;
    }
    idx
}

/// A view's offset moved to index `idx` over its leading dims (`strides` may be
/// negative); `Err` if that falls before its binding's start.
fn moved(offset: usize, strides: &[isize], idx: &[usize]) -> k::Result<usize> {
    let d: isize = idx.iter().zip(strides).map(|(&i, &s)| i as isize * s).sum();
    usize::try_from(offset as isize + d)
        .map_err(|_| k::Error::Shape("a piece's offset falls before its view's start".into()))
}

/// All of `buffer` as a 1-D input of `flat` (`[n]`) elements.
fn dense<'b, B>(buffer: &'b B, dtype: k::DType, flat: &'b [usize]) -> k::Strided<'b, B> {
    k::Strided {
        buffer,
        window: None,
        dtype,
        shape: flat,
        strides: &[1],
        offset: 0,
    }
}

/// All of `buffer` as an output of `shape`.
fn out_to<'b, B>(buffer: &'b B, dtype: k::DType, shape: &'b [usize]) -> k::Contig<'b, B> {
    k::Contig {
        buffer,
        window: None,
        dtype,
        shape,
    }
}

/// The window a piece writes its output through: `None` when the whole output is
/// one piece that fits a binding.
pub(crate) fn out_window(
    pieces: usize,
    piece: &Piece,
    cut: usize,
    size: u64,
    buffer: u64,
    lim: Limits,
) -> Option<Window> {
    if pieces == 1 && buffer <= lim.bytes {
        return None;
    }
    let n: u64 = piece.shape[..cut].iter().map(|&e| e as u64).product();
    let start = piece.out_start * size;
    debug_assert!(start.is_multiple_of(lim.align));
    Some(Window {
        start,
        len: ((n * size).div_ceil(16) * 16).min(buffer - start),
    })
}

impl<D: Driver> GpuBackend<D> {
    /// Records an elementwise op over `shape` (every input has `shape`, broadcast
    /// through its strides) into a fresh output, cut into pieces when an operand is
    /// larger than a binding or than 2^30 elements (see `split.rs`). `f` gets each
    /// piece's inputs and output and the piece's first output element (row-major);
    /// the pieces' shapes may merge dims of `shape` (for ops that need its dims,
    /// [`GpuBackend::record_rows`]).
    pub(crate) fn record_pieces(
        &self,
        shape: &[usize],
        dtype: DType,
        views: &[&View<'_, GpuBuffer<D>>],
        f: impl Fn(
            &mut k::Batch<D>,
            &[k::Strided<'_, D::Buffer>],
            &k::Contig<'_, D::Buffer>,
            u64,
        ) -> k::Result<()>,
    ) -> Result<GpuBuffer<D>> {
        // Where memory is segmented, contiguous dims are merged first, so pieces can
        // end where segments do (a row of 12 bytes never does at a power of two).
        let n = wmx_core::layout::numel(shape) as u64;
        let segmented = self.segmented(n.saturating_mul(dtype.size() as u64))
            || views.iter().any(|v| self.segmented(v.buffer.bytes));
        if !segmented || n == 0 {
            return self.record_rows(shape, shape.len(), 1, dtype, views, f);
        }
        let out = Layout::contiguous(shape);
        let mut all: Vec<&[isize]> = views.iter().map(|v| &v.layout.strides[..]).collect();
        all.push(&out.strides);
        let (flat, strides) = wmx_core::layout::collapse_dims(shape, &all);
        let layouts: Vec<Layout> = views
            .iter()
            .zip(strides)
            .map(|(v, strides)| Layout {
                shape: flat.clone(),
                strides,
                offset: v.layout.offset,
            })
            .collect();
        let merged: Vec<View<'_, GpuBuffer<D>>> = views
            .iter()
            .zip(&layouts)
            .map(|(v, layout)| View {
                buffer: v.buffer,
                dtype: v.dtype,
                layout,
            })
            .collect();
        let refs: Vec<&View<'_, GpuBuffer<D>>> = merged.iter().collect();
        self.record_rows(&flat, flat.len(), 1, dtype, &refs, f)
    }

    /// [`GpuBackend::record_pieces`] for ops whose output has `shape` too but that
    /// need the dims from `cut` on whole in every piece (a scan's axis and those
    /// after it, a sort's rows): pieces are boxes of the leading `cut` dims. `f`'s
    /// last argument is the piece's first row (index over the leading dims).
    /// Pieces are planned for `1 / share` of a binding (a sort's scratch pairs take
    /// twice its output's bytes).
    pub(crate) fn record_rows(
        &self,
        shape: &[usize],
        cut: usize,
        share: u64,
        dtype: DType,
        views: &[&View<'_, GpuBuffer<D>>],
        f: impl Fn(
            &mut k::Batch<D>,
            &[k::Strided<'_, D::Buffer>],
            &k::Contig<'_, D::Buffer>,
            u64,
        ) -> k::Result<()>,
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let kd = gpu_dtype(dtype)?;
        let mems = views
            .iter()
            .map(|v| self.mem(v.buffer))
            .collect::<Result<Vec<_>>>()?;
        let kds = views
            .iter()
            .map(|v| gpu_dtype(v.dtype))
            .collect::<Result<Vec<_>>>()?;
        let ops: Vec<Operand<'_>> = views
            .iter()
            .zip(&mems)
            .zip(&kds)
            .map(|((v, m), d)| Operand {
                strides: &v.layout.strides,
                offset: v.layout.offset,
                size: d.size() as u64,
                buffer: m.byte_size(),
                seg: m.seg,
            })
            .collect();
        let mut lim = self.limits();
        lim.bytes = lim.bytes / share / lim.align * lim.align;
        // The output as rows over the leading dims: bytes per row.
        let row: u64 = shape[cut..].iter().map(|&e| e as u64).product();
        let size = kd.size() as u64 * row;
        let n = wmx_core::layout::numel(shape);
        let (out, g) = self.output_mem(n, dtype)?;
        let pieces = plan_segmented(shape, &ops, cut, Out::Window(size), g.seg, lim)
            .map_err(|msg| self.cannot_split(shape, dtype, &msg))?;
        let mut batch = self.lock_batch();
        for p in &pieces {
            let bound = p
                .ins
                .iter()
                .zip(&mems)
                .map(|(part, m)| self.bind_in(&mut batch, m, part.window))
                .collect::<Result<Vec<_>>>()?;
            let ins: Vec<k::Strided<'_, D::Buffer>> = p
                .ins
                .iter()
                .zip(&bound)
                .zip(&kds)
                .map(|((part, b), &dtype)| {
                    let (buffer, window) = b.binding();
                    k::Strided {
                        window,
                        ..part.strided(buffer, dtype, &p.shape)
                    }
                })
                .collect();
            let w = out_window(pieces.len(), p, cut, size, g.byte_size(), lim);
            let bytes = wmx_core::layout::numel(&p.shape[..cut]) as u64 * size;
            let o_bound = self.bind_out(&g, w, bytes)?;
            let (buffer, window) = o_bound.binding();
            let o = k::Contig {
                buffer,
                window,
                dtype: kd,
                shape: &p.shape,
            };
            f(&mut batch, &ins, &o, p.out_start).map_err(kerr)?;
            self.unbind_out(&mut batch, &g, o_bound)?;
            drop(ins);
            self.unbind_in(bound);
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
        }
        Ok(out)
    }

    /// Concatenation whose output or an input is larger than a binding (or 2^30
    /// elements). The output is seen as `[rows, A, inner]` (rows: the dims before
    /// `axis`, inner: those after) and cut into pieces of whole rows, or, when one
    /// row is larger than a binding, a single row into ranges of the axis; each
    /// piece starts aligned, so it writes a window of the one output. Inputs are
    /// made row-major first (a copy, itself in pieces) and each piece binds the
    /// window of each input it reads.
    pub(crate) fn concatenate_pieces(
        &self,
        inputs: &[View<'_, GpuBuffer<D>>],
        axis: usize,
        shape: &[usize],
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let dtype = inputs[0].dtype;
        let kd = gpu_dtype(dtype)?;
        let size = kd.size() as u64;
        let lim = self.limits();
        let rows: usize = shape[..axis].iter().product();
        let slots = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        if rows == 1 && inner > 1 {
            // One row: the inputs follow each other, so they are joined as flat
            // arrays (cut anywhere, not only between slots of `inner`).
            let mut held = Vec::new();
            for v in inputs {
                if !v.layout.is_row_contiguous() {
                    held.push(wmx_core::Backend::copy(self, *v, dtype)?);
                }
            }
            let mut copies = held.iter();
            let flat: Vec<(Layout, &GpuBuffer<D>)> = inputs
                .iter()
                .map(|v| {
                    let n = wmx_core::layout::numel(&v.layout.shape);
                    match v.layout.is_row_contiguous() {
                        true => (
                            Layout {
                                offset: v.layout.offset,
                                ..Layout::contiguous(&[n])
                            },
                            v.buffer,
                        ),
                        false => (
                            Layout::contiguous(&[n]),
                            copies.next().expect("a copy each"),
                        ),
                    }
                })
                .collect();
            let views: Vec<View<'_, GpuBuffer<D>>> = flat
                .iter()
                .map(|(layout, buffer)| View {
                    buffer: *buffer,
                    dtype,
                    layout,
                })
                .collect();
            let n = wmx_core::layout::numel(shape);
            return self.concatenate_pieces(&views, 0, &[n]);
        }
        let unit = inner as u64 * size;
        // Less one alignment: an input's window starts up to that far before its part.
        let max_slots = (lim.bytes.saturating_sub(lim.align) / unit).min(MAX_ELEMS / inner as u64);
        let cannot = |msg: &str| self.cannot_split(shape, dtype, msg);
        // Pieces (rows r0..r1, axis slots a0..a1) with aligned starts.
        let mut pieces = Vec::new();
        if slots as u64 <= max_slots {
            let step = lim.align / gcd(lim.align, slots as u64 * unit);
            let r = (max_slots / slots as u64) / step * step;
            if r == 0 {
                return Err(cannot("no aligned run of whole rows fits a binding"));
            }
            for r0 in (0..rows).step_by(r as usize) {
                pieces.push((r0, (r0 + r as usize).min(rows), 0, slots));
            }
        } else if rows == 1 {
            let step = lim.align / gcd(lim.align, unit);
            let p = max_slots / step * step;
            if p == 0 {
                return Err(cannot("no aligned range of the axis fits a binding"));
            }
            for a0 in (0..slots).step_by(p as usize) {
                pieces.push((0, 1, a0, (a0 + p as usize).min(slots)));
            }
        } else {
            return Err(cannot(
                "each row of the output is larger than a binding (concatenate along the \
                 first axis, or in parts)",
            ));
        }
        // Row-major inputs: (memory, offset in elements, extent along the axis).
        let mut held = Vec::new();
        let mut ins = Vec::new();
        for v in inputs {
            let n_i = v.layout.shape[axis];
            if v.layout.is_row_contiguous() {
                ins.push((self.mem(v.buffer)?, v.layout.offset, n_i));
            } else {
                let c = wmx_core::Backend::copy(self, *v, dtype)?;
                ins.push((self.mem(&c)?, 0, n_i));
                held.push(c);
            }
        }
        let n = wmx_core::layout::numel(shape);
        let (out, g) = self.output_mem(n, dtype)?;
        let window = |first: u64, end: u64, buffer: u64| -> Result<(Window, usize)> {
            // Bytes [first, end) of a buffer, through a window starting aligned below.
            let start = first / lim.align * lim.align;
            let len = (end.div_ceil(4) * 4).min(buffer) - start;
            if len > lim.bytes {
                return Err(cannot("an input's part is larger than a binding"));
            }
            Ok((Window { start, len }, ((first - start) / size) as usize))
        };
        let mut batch = self.lock_batch();
        for (r0, r1, a0, a1) in pieces {
            let mut parts = Vec::new();
            let mut c = 0;
            for (mem, off, n_i) in &ins {
                let (lo, hi) = (a0.max(c), a1.min(c + n_i));
                if lo < hi {
                    let row = (n_i * inner) as u64;
                    let first = *off as u64 + r0 as u64 * row + ((lo - c) * inner) as u64;
                    let last = *off as u64 + (r1 - 1) as u64 * row + ((hi - c) * inner) as u64;
                    let (w, offset) = window(first * size, last * size, mem.byte_size())?;
                    let bound = self.bind_in(&mut batch, mem, Some(w))?;
                    let strides = [row as isize, inner as isize, 1];
                    parts.push((bound, [r1 - r0, hi - lo, inner], strides, offset));
                }
                c += n_i;
            }
            let views: Vec<k::Strided<'_, D::Buffer>> = parts
                .iter()
                .map(|(bound, shape, strides, offset)| {
                    let (buffer, window) = bound.binding();
                    k::Strided {
                        buffer,
                        window,
                        dtype: kd,
                        shape,
                        strides,
                        offset: *offset,
                    }
                })
                .collect();
            let o_shape = [r1 - r0, a1 - a0, inner];
            let first = (r0 * slots + a0) as u64 * unit;
            let end = first + ((r1 - r0) * (a1 - a0)) as u64 * unit;
            let (w, _) = window(first, end, g.byte_size())?;
            let o_bound = self.bind_out(&g, Some(w), end - first)?;
            let (buffer, window) = o_bound.binding();
            let o = k::Contig {
                buffer,
                window,
                dtype: kd,
                shape: &o_shape,
            };
            self.kernels
                .concatenate(&mut batch, &views, 1, &o)
                .map_err(kerr)?;
            self.unbind_out(&mut batch, &g, o_bound)?;
            drop(views);
            self.unbind_in(parts.into_iter().map(|p| p.0).collect());
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
        }
        drop(held);
        Ok(out)
    }

    /// A matmul whose A or output is larger than a binding: pieces of A's rows
    /// (boxes of its batch and M dims, K whole), each writing its rows of the
    /// output through a window; B (and C) must fit a binding and are bound whole,
    /// offset to each piece's batch (and rows).
    pub(crate) fn matmul_pieces(
        &self,
        a: View<'_, GpuBuffer<D>>,
        b: View<'_, GpuBuffer<D>>,
        c: Option<View<'_, GpuBuffer<D>>>,
        alpha: f64,
        beta: f64,
        shape: &[usize],
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let (y, z) = (self.input(&b)?, c.map(|c| self.input(&c)).transpose()?);
        let nd = shape.len();
        let (k_len, n) = (a.layout.shape[nd - 1], shape[nd - 1]);
        let kd = gpu_dtype(a.dtype)?;
        let size = kd.size() as u64;
        let amem = self.mem(a.buffer)?;
        let op = Operand {
            strides: &a.layout.strides,
            offset: a.layout.offset,
            size,
            buffer: amem.byte_size(),
            seg: amem.seg,
        };
        let lim = self.limits();
        let row = size * n as u64;
        let (out, g) = self.output_mem(wmx_core::layout::numel(shape), a.dtype)?;
        let pieces = plan_segmented(&a.layout.shape, &[op], nd - 1, Out::Window(row), g.seg, lim)
            .map_err(|msg| self.cannot_split(shape, a.dtype, &msg))?;
        let mut batch = self.lock_batch();
        for p in &pieces {
            let idx = unravel(p.out_start, &shape[..nd - 1]);
            let part = &p.ins[0];
            let a_bound = self.bind_in(&mut batch, &amem, part.window)?;
            let (buffer, window) = a_bound.binding();
            let av = k::Strided {
                window,
                ..part.strided(buffer, kd, &p.shape)
            };
            let b_shape: Vec<usize> = p.shape[..nd - 2]
                .iter()
                .copied()
                .chain([k_len, n])
                .collect();
            let bv = k::Strided {
                shape: &b_shape,
                offset: moved(y.offset, &y.strides, &idx[..nd - 2]).map_err(kerr)?,
                ..y.strided()
            };
            let o_shape: Vec<usize> = p.shape[..nd - 1].iter().copied().chain([n]).collect();
            let cv = match &z {
                Some(z) => Some(k::Strided {
                    shape: &o_shape,
                    offset: moved(z.offset, &z.strides, &idx).map_err(kerr)?,
                    ..z.strided()
                }),
                None => None,
            };
            let w = out_window(pieces.len(), p, nd - 1, row, g.byte_size(), lim);
            let rows = wmx_core::layout::numel(&p.shape[..nd - 1]) as u64;
            let o_bound = self.bind_out(&g, w, rows * row)?;
            let (buffer, window) = o_bound.binding();
            let o = k::Contig {
                buffer,
                window,
                dtype: kd,
                shape: &o_shape,
            };
            self.kernels
                .matmul(&mut batch, &av, &bv, cv.as_ref(), alpha, beta, &o)
                .map_err(kerr)?;
            self.unbind_out(&mut batch, &g, o_bound)?;
            self.unbind_in(vec![a_bound]);
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
        }
        Ok(out)
    }

    /// Whether one line along `axis` of `shape` (with the dims after it) fits a
    /// piece, in elements of `size` bytes.
    pub(crate) fn line_fits(&self, shape: &[usize], axis: usize, size: usize) -> bool {
        let n: u128 = shape[axis..].iter().map(|&e| e as u128).product();
        let lim = self.limits();
        n <= MAX_ELEMS as u128 && n * size as u128 + lim.align as u128 + 16 <= lim.bytes as u128
    }

    /// A scan whose lines are larger than a binding (a cumsum over a 1-D array past
    /// one), line by line: the line cut into blocks `[nb, B, inner]` and a tail of
    /// `len - nb * B`, all in the accumulator dtype. Blocks are scanned along B (in
    /// pieces of whole blocks), their totals scanned exclusively along nb (small),
    /// and each block combined with its carry; the tail is scanned with the carry of
    /// every block before it (a reverse scan: after it). Every step is an op that
    /// computes in pieces, so `x` may also be held in segments.
    pub(crate) fn scan_blocked(
        &self,
        op: ReduceOp,
        x: View<'_, GpuBuffer<D>>,
        axis: usize,
        reverse: bool,
        inclusive: bool,
    ) -> Result<GpuBuffer<D>> {
        use wmx_core::Backend;
        let out_dtype = op.out_dtype(x.dtype);
        let acc = match x.dtype {
            DType::F16 | DType::BF16 => DType::F32,
            DType::Bool | DType::U8 => DType::U32,
            d => d,
        };
        if matches!(op, ReduceOp::Any | ReduceOp::All) {
            return Err(Error::invalid("scan", "any/all have no cumulative form"));
        }
        let combine = op.combiner();
        let shape = x.layout.shape.clone();
        let outer: usize = shape[..axis].iter().product();
        let len = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        if outer > 1 {
            // Line by line (each larger than a binding, so few): a tail view across
            // rows would be rows of any length, which pieces may not be able to cut.
            let line = Layout::contiguous(&[1, len, inner]);
            let mut held = Vec::with_capacity(outer);
            for o in 0..outer {
                let l = Layout {
                    offset: x.layout.offset + o * len * inner,
                    ..line.clone()
                };
                let v = View {
                    buffer: x.buffer,
                    dtype: x.dtype,
                    layout: &l,
                };
                held.push(self.scan_blocked(op, v, 1, reverse, inclusive)?);
            }
            let views: Vec<View<'_, GpuBuffer<D>>> = held
                .iter()
                .map(|buffer| View {
                    buffer,
                    dtype: out_dtype,
                    layout: &line,
                })
                .collect();
            return Backend::concatenate(self, &views, 0);
        }
        // Blocks of a power of two positions whose [B, inner] takes at most a quarter
        // of a binding (room for a piece's slack, and several blocks a piece).
        let per = (self.limits().bytes / 4 / (inner as u64 * 8).max(1)).min(1 << 24);
        if per < 2 {
            return Err(self.cannot_split(
                &shape,
                x.dtype,
                "the dims after the scanned axis are larger than a binding",
            ));
        }
        let block = 1usize << (63 - per.leading_zeros());
        let nb = len / block;
        let tail = len - nb * block;
        fn view<'a, B>(buffer: &'a B, dtype: DType, layout: &'a Layout) -> View<'a, B> {
            View {
                buffer,
                dtype,
                layout,
            }
        }
        let dense = |shape: &[usize]| Layout::contiguous(shape);
        // x in the accumulator dtype, row-major [outer, len, inner] (x itself when
        // it is in that dtype).
        let xl = dense(&[outer, len, inner]);
        let held;
        let (xa, base) = if x.dtype == acc {
            (x.buffer, x.layout.offset)
        } else {
            let xv = Layout {
                offset: x.layout.offset,
                ..xl.clone()
            };
            held = Backend::copy(self, view(x.buffer, x.dtype, &xv), acc)?;
            (&held, 0)
        };
        // The blocks, scanned, and their totals.
        let bl = Layout {
            shape: vec![outer, nb, block, inner],
            strides: vec![
                (len * inner) as isize,
                (block * inner) as isize,
                inner as isize,
                1,
            ],
            offset: base,
        };
        let blocks = view(xa, acc, &bl);
        let mut parts = Vec::new();
        let tl = Layout {
            shape: vec![outer, tail, inner],
            strides: vec![(len * inner) as isize, inner as isize, 1],
            offset: base + nb * block * inner,
        };
        let tail_in = view(xa, acc, &tl);
        let tail_total = if tail > 0 {
            Some(Backend::reduce(self, op, tail_in, &[1])?)
        } else {
            None
        };
        let mut block_total = None;
        if nb > 0 {
            let scanned = Backend::scan(self, op, blocks, 2, reverse, inclusive)?;
            let totals = Backend::reduce(self, op, blocks, &[2])?;
            let tot_l = dense(&[outer, nb, inner]);
            let carries = Backend::scan(self, op, view(&totals, acc, &tot_l), 1, reverse, false)?;
            // A reverse scan's blocks come after the tail: its total joins their carries.
            let carries = match (&tail_total, reverse) {
                (Some(t), true) => Backend::binary(
                    self,
                    combine,
                    view(&carries, acc, &tot_l),
                    view(
                        t,
                        acc,
                        &Layout {
                            shape: vec![outer, nb, inner],
                            strides: vec![inner as isize, 0, 1],
                            offset: 0,
                        },
                    ),
                    acc,
                )?,
                _ => carries,
            };
            let cl = Layout {
                shape: vec![outer, nb, block, inner],
                strides: vec![(nb * inner) as isize, inner as isize, 0, 1],
                offset: 0,
            };
            let sl = dense(&[outer, nb, block, inner]);
            let out = Backend::binary(
                self,
                combine,
                view(&carries, acc, &cl),
                view(&scanned, acc, &sl),
                acc,
            )?;
            if tail > 0 && !reverse {
                // The tail's carry: every block's total.
                block_total = Some(Backend::reduce(self, op, view(&totals, acc, &tot_l), &[1])?);
            }
            parts.push((out, nb * block));
        }
        if tail > 0 {
            let t_dense = dense(&[outer, tail, inner]);
            let scanned = Backend::scan(self, op, tail_in, 1, reverse, inclusive)?;
            let out = match &block_total {
                Some(t) => {
                    let tb = Layout {
                        shape: vec![outer, tail, inner],
                        strides: vec![inner as isize, 0, 1],
                        offset: 0,
                    };
                    Backend::binary(
                        self,
                        combine,
                        view(t, acc, &tb),
                        view(&scanned, acc, &t_dense),
                        acc,
                    )?
                }
                None => scanned,
            };
            parts.push((out, tail));
        }
        let layouts: Vec<Layout> = parts
            .iter()
            .map(|(_, n)| dense(&[outer, *n, inner]))
            .collect();
        let views: Vec<View<'_, GpuBuffer<D>>> = parts
            .iter()
            .zip(&layouts)
            .map(|((b, _), l)| view(b, acc, l))
            .collect();
        let joined = if views.len() == 1 {
            None
        } else {
            Some(Backend::concatenate(self, &views, 1)?)
        };
        let result = joined.as_ref().unwrap_or(&parts[0].0);
        if acc == out_dtype {
            // One part: it is the result already.
            return match joined {
                Some(j) => Ok(j),
                None => Ok(parts.swap_remove(0).0),
            };
        }
        Backend::copy(self, view(result, acc, &xl), out_dtype)
    }

    /// A gather whose `x` and indices have one shape (`sort` takes along its
    /// `argsort`), past a binding or one buffer: pieces of whole lines along `axis`
    /// (boxes of the dims before it), each reading the same lines of both.
    pub(crate) fn gather_lines(
        &self,
        x: View<'_, GpuBuffer<D>>,
        indices: View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        let shape = indices.layout.shape.clone();
        self.record_rows(&shape, axis, 1, x.dtype, &[&indices, &x], |b, s, o, _| {
            self.kernels.gather(b, &s[1], &s[0], axis, o)
        })
    }

    /// A gather (`take_along_axis`) whose indices or output are larger than a
    /// binding: pieces of the indices' index space, each writing its range of the
    /// output through a window; `x` (as one input, `xi`, of `dtype`) fits a binding and is bound
    /// whole, offset to each piece's start off `axis` (all of `axis` stays readable).
    pub(crate) fn gather_pieces(
        &self,
        xi: In<'_, D::Buffer>,
        dtype: DType,
        indices: View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        let shape = indices.layout.shape.clone();
        let x_axis = xi.layout.shape[axis];
        self.record_rows(
            &shape,
            shape.len(),
            1,
            dtype,
            &[&indices],
            |b, s, o, start| {
                // x moved to the piece's first index, off `axis`.
                let mut idx = unravel(start, &shape);
                idx[axis] = 0;
                let mut x_shape = s[0].shape.to_vec();
                x_shape[axis] = x_axis;
                let xv = k::Strided {
                    shape: &x_shape,
                    offset: moved(xi.offset, &xi.strides, &idx)?,
                    ..xi.strided()
                };
                self.kernels.gather(b, &xv, &s[0], axis, o)
            },
        )
    }

    /// A matmul whose B is larger than a binding (A, C and the output fit one): B is
    /// cut along N into parts that each fit, K whole (a transposed view of a
    /// row-major weight, `x @ w.t()`: the output layer of a large vocabulary); each
    /// part's product goes to an output of its own, and the parts are placed side
    /// by side along the last axis. A B whose column blocks each span more than a
    /// binding (row-major with long rows) is an `Err` naming the pieces.
    pub(crate) fn matmul_b_parts(
        &self,
        a: View<'_, GpuBuffer<D>>,
        b: View<'_, GpuBuffer<D>>,
        c: Option<View<'_, GpuBuffer<D>>>,
        alpha: f64,
        beta: f64,
        shape: &[usize],
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let (x, z) = (self.input(&a)?, c.map(|c| self.input(&c)).transpose()?);
        let nd = shape.len();
        let kd = gpu_dtype(a.dtype)?;
        let (bmem, parts) = self.parts_along(&b, nd - 1)?;
        let mut outs = Vec::with_capacity(parts.len());
        for p in &parts {
            let (nb, n0) = (p.shape[nd - 1], p.lo);
            let b_bound = self.bind_in(&mut self.lock_batch(), &bmem, p.window)?;
            let (buffer, window) = b_bound.binding();
            let bv = k::Strided {
                window,
                ..p.strided(buffer, kd)
            };
            let mut o_shape = shape.to_vec();
            o_shape[nd - 1] = nb;
            let mut at = vec![0; nd];
            at[nd - 1] = n0;
            let cv = match &z {
                Some(z) => Some(k::Strided {
                    shape: &o_shape,
                    offset: moved(z.offset, &z.strides, &at).map_err(kerr)?,
                    ..z.strided()
                }),
                None => None,
            };
            let (part_out, g) = self.output(wmx_core::layout::numel(&o_shape), a.dtype)?;
            let o = k::Contig {
                buffer: &g,
                window: None,
                dtype: kd,
                shape: &o_shape,
            };
            let mut batch = self.lock_batch();
            self.kernels
                .matmul(&mut batch, &x.strided(), &bv, cv.as_ref(), alpha, beta, &o)
                .map_err(kerr)?;
            self.unbind_in(vec![b_bound]);
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
            let strides = wmx_core::Layout::contiguous(&o_shape).strides;
            outs.push((part_out, g, o_shape, strides));
        }
        let (out, g) = self.output(wmx_core::layout::numel(shape), a.dtype)?;
        let views: Vec<k::Strided<'_, D::Buffer>> = outs
            .iter()
            .map(|(_, g, shape, strides)| k::Strided {
                buffer: g,
                window: None,
                dtype: kd,
                shape,
                strides,
                offset: 0,
            })
            .collect();
        let o = k::Contig {
            buffer: &g,
            window: None,
            dtype: kd,
            shape,
        };
        let mut batch = self.lock_batch();
        self.kernels
            .concatenate(&mut batch, &views, nd - 1, &o)
            .map_err(kerr)?;
        Ok(out)
    }

    /// A matmul whose B is larger than a binding and cut along K (a row-major B,
    /// whose column blocks each span all of it; A, C and the output fit a binding):
    /// `Kernels::matmul_parts` over parts of K, each part of B bound through its
    /// window.
    pub(crate) fn matmul_k_parts(
        &self,
        a: View<'_, GpuBuffer<D>>,
        b: View<'_, GpuBuffer<D>>,
        c: Option<View<'_, GpuBuffer<D>>>,
        alpha: f64,
        beta: f64,
        shape: &[usize],
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let (x, z) = (self.input(&a)?, c.map(|c| self.input(&c)).transpose()?);
        let nd = shape.len();
        let kd = gpu_dtype(a.dtype)?;
        let (bmem, parts) = self.parts_along(&b, nd - 2)?;
        let a_shapes: Vec<Vec<usize>> = parts
            .iter()
            .map(|p| {
                let mut s = a.layout.shape.clone();
                s[nd - 1] = p.shape[nd - 2];
                s
            })
            .collect();
        let mut batch = self.lock_batch();
        let bound = parts
            .iter()
            .map(|p| self.bind_in(&mut batch, &bmem, p.window))
            .collect::<Result<Vec<_>>>()?;
        let mut views = Vec::with_capacity(parts.len());
        for ((p, a_shape), b) in parts.iter().zip(&a_shapes).zip(&bound) {
            let mut at = vec![0; nd];
            at[nd - 1] = p.lo;
            let av = k::Strided {
                shape: a_shape,
                offset: moved(x.offset, &x.strides, &at).map_err(kerr)?,
                ..x.strided()
            };
            let (buffer, window) = b.binding();
            views.push((
                av,
                k::Strided {
                    window,
                    ..p.strided(buffer, kd)
                },
            ));
        }
        drop(batch);
        let (out, g) = self.output(wmx_core::layout::numel(shape), a.dtype)?;
        let o = out_to(&g, kd, shape);
        let zs = z.as_ref().map(|z| z.strided());
        let mut batch = self.lock_batch();
        self.kernels
            .matmul_parts(&mut batch, &views, zs.as_ref(), alpha, beta, &o)
            .map_err(kerr)?;
        drop(views);
        self.unbind_in(bound);
        Ok(out)
    }

    /// A gather whose `x` is larger than a binding (the indices and the output fit
    /// one): `x` is cut along `axis` into parts that each fit (its other dims
    /// whole), and each part gathers the indices that fall in it into the one
    /// output (`Kernels::gather_rows`). The embedding lookup of a large table.
    pub(crate) fn gather_parts(
        &self,
        x: View<'_, GpuBuffer<D>>,
        indices: View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        self.check()?;
        let ii = self.input(&indices)?;
        let out_shape = indices.layout.shape.clone();
        if !self.fits_one(&out_shape, x.dtype) {
            return Err(self.cannot_split(
                &out_shape,
                x.dtype,
                "a gather whose array and indices are both past a binding",
            ));
        }
        let kd = gpu_dtype(x.dtype)?;
        let (xm, parts) = self.parts_along(&x, axis)?;
        let axis_len = x.layout.shape[axis];
        let (out, g) = self.output(wmx_core::layout::numel(&out_shape), x.dtype)?;
        let o = k::Contig {
            buffer: &g,
            window: None,
            dtype: kd,
            shape: &out_shape,
        };
        let mut batch = self.lock_batch();
        for p in &parts {
            let bound = self.bind_in(&mut batch, &xm, p.window)?;
            let (buffer, window) = bound.binding();
            let xv = k::Strided {
                window,
                ..p.strided(buffer, kd)
            };
            self.kernels
                .gather_rows(&mut batch, &xv, &ii.strided(), axis, axis_len, p.lo, &o)
                .map_err(kerr)?;
            self.unbind_in(vec![bound]);
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
        }
        Ok(out)
    }

    /// A slice update whose base is larger than a binding: pieces of the base
    /// (record_pieces), each writing its range of the output with the part of the
    /// update that falls inside it (a copy where none does). The update must fit a
    /// binding.
    pub(crate) fn slice_update_pieces(
        &self,
        base: View<'_, GpuBuffer<D>>,
        update: View<'_, GpuBuffer<D>>,
        starts: &[usize],
        steps: &[isize],
    ) -> Result<GpuBuffer<D>> {
        let ui = self.input(&update)?;
        let shape = base.layout.shape.clone();
        let rank = shape.len();
        let counts = &update.layout.shape;
        self.record_rows(
            &shape,
            shape.len(),
            1,
            base.dtype,
            &[&base],
            |b, s, o, start| {
                let lo = unravel(start, &shape);
                let (mut first, mut count, mut at) = (vec![], vec![], vec![]);
                for d in 0..rank {
                    let (a, st, c) = (starts[d] as i64, steps[d] as i64, counts[d] as i64);
                    let (plo, phi) = (lo[d] as i64, (lo[d] + s[0].shape[d]) as i64);
                    // The update's indices i with a + i * st in [plo, phi).
                    let (i0, i1) = if st > 0 {
                        let ceil = |x: i64| -((-x).div_euclid(st));
                        (ceil(plo - a).max(0), ceil(phi - a).min(c))
                    } else {
                        let m = -st;
                        (
                            ((a - phi).div_euclid(m) + 1).max(0),
                            ((a - plo).div_euclid(m) + 1).min(c),
                        )
                    };
                    if i0 >= i1 {
                        return self.kernels.copy(b, &s[0], o);
                    }
                    first.push(i0 as usize);
                    count.push((i1 - i0) as usize);
                    at.push((a + i0 * st - plo) as usize);
                }
                let uv = k::Strided {
                    shape: &count,
                    offset: moved(ui.offset, &ui.strides, &first)?,
                    ..ui.strided()
                };
                self.kernels.slice_update(b, &s[0], &uv, &at, steps, o)
            },
        )
    }

    /// A scatter into a base larger than a binding: pieces of the base's dims
    /// before `axis` (record_rows; `axis` and the dims after it whole, since an
    /// index may land anywhere along `axis`), each with the same rows of the
    /// indices and updates, which must fit a binding. Where a row from `axis` on is
    /// itself past a binding (a scatter along the first axis of a large table: an
    /// embedding's gradient), pieces cut `axis` too, and each takes the updates
    /// whose index falls in its range of it (`Kernels::scatter_rows`; not f64).
    pub(crate) fn scatter_pieces(
        &self,
        op: wmx_core::ScatterOp,
        base: View<'_, GpuBuffer<D>>,
        indices: View<'_, GpuBuffer<D>>,
        updates: View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        match self.scatter_cut(op, base, indices, updates, axis, axis) {
            Err(Error::OutOfRange { .. }) if base.dtype != DType::F64 => {
                self.scatter_cut(op, base, indices, updates, axis, axis + 1)
            }
            r => r,
        }
    }

    /// [`GpuBackend::scatter_pieces`] with pieces cut within the dims before `cut`
    /// (`axis` or `axis + 1`).
    fn scatter_cut(
        &self,
        op: wmx_core::ScatterOp,
        base: View<'_, GpuBuffer<D>>,
        indices: View<'_, GpuBuffer<D>>,
        updates: View<'_, GpuBuffer<D>>,
        axis: usize,
        cut: usize,
    ) -> Result<GpuBuffer<D>> {
        let (ii, ui) = (self.input(&indices)?, self.input(&updates)?);
        let shape = base.layout.shape.clone();
        let lead = &shape[..cut];
        let own = &indices.layout.shape;
        self.record_rows(&shape, cut, 1, base.dtype, &[&base], |b, s, o, start| {
            let mut idx = unravel(start, lead);
            // The piece's range of `axis` (all of it unless cut), and the rows of
            // the indices and updates it reads (all of them along `axis`).
            let lo = idx.get(axis).copied().unwrap_or(0);
            idx.truncate(axis);
            let part_shape: Vec<usize> = s[0].shape[..axis]
                .iter()
                .chain(&own[axis..])
                .copied()
                .collect();
            let iv = k::Strided {
                shape: &part_shape,
                offset: moved(ii.offset, &ii.strides, &idx)?,
                ..ii.strided()
            };
            let uv = k::Strided {
                shape: &part_shape,
                offset: moved(ui.offset, &ui.strides, &idx)?,
                ..ui.strided()
            };
            self.kernels
                .scatter_rows(b, op, &s[0], &iv, &uv, axis, shape[axis], lo, o)
        })
    }

    /// `v` cut along `dim` into parts that each fit a binding, its other dims
    /// whole (an `Err` naming the pieces when one index of `dim` does not fit),
    /// with its GPU buffer.
    pub(crate) fn parts_along(
        &self,
        v: &View<'_, GpuBuffer<D>>,
        dim: usize,
    ) -> Result<(Mem<D::Buffer>, Vec<AxisPart>)> {
        let buf = self.mem(v.buffer)?;
        let (shape, strides) = (&v.layout.shape, &v.layout.strides);
        // The index space with `dim` first, so that pieces are ranges of it.
        let order: Vec<usize> = std::iter::once(dim)
            .chain((0..shape.len()).filter(|&d| d != dim))
            .collect();
        let shape_p: Vec<usize> = order.iter().map(|&d| shape[d]).collect();
        let strides_p: Vec<isize> = order.iter().map(|&d| strides[d]).collect();
        let op = Operand {
            strides: &strides_p,
            offset: v.layout.offset,
            size: gpu_dtype(v.dtype)?.size() as u64,
            buffer: buf.byte_size(),
            seg: buf.seg,
        };
        let pieces = plan(&shape_p, &[op], 1, Out::Unchecked, self.limits())
            .map_err(|msg| self.cannot_split(shape, v.dtype, &msg))?;
        let parts = pieces
            .into_iter()
            .map(|p| {
                let part = p.ins.into_iter().next().expect("one operand");
                let mut shape = shape.clone();
                shape[dim] = p.shape[0];
                let mut strides = vec![0; shape.len()];
                for (j, &d) in order.iter().enumerate() {
                    strides[d] = part.strides[j];
                }
                AxisPart {
                    lo: p.out_start as usize,
                    shape,
                    strides,
                    offset: part.offset,
                    window: part.window,
                }
            })
            .collect();
        Ok((buf, parts))
    }

    pub(crate) fn cannot_split(&self, shape: &[usize], dtype: DType, msg: &str) -> Error {
        Error::OutOfRange {
            op: "webgpu",
            msg: format!("an op over shape {shape:?} ({dtype}) in pieces: {msg}"),
        }
    }

    /// `op` over `axes` of `x`, in pieces when `x` is larger than a binding or
    /// than 2^30 elements. Tried in order: pieces of whole output rows writing
    /// windows of the output; pieces of whole rows each writing an output of its
    /// own, then placed (few rows, each large); partial results over pieces of the
    /// reduced dims, in the accumulator dtype, combined by the op (a reduction
    /// whose every output reads more than a binding).
    pub(crate) fn reduce_pieces(
        &self,
        op: ReduceOp,
        x: &View<'_, GpuBuffer<D>>,
        axes: &[usize],
    ) -> Result<GpuBuffer<D>> {
        let out_dtype = op.out_dtype(x.dtype);
        let kept: Vec<usize> = (0..x.layout.shape.len())
            .filter(|d| !axes.contains(d))
            .collect();
        let out_shape: Vec<usize> = kept.iter().map(|&d| x.layout.shape[d]).collect();
        let whole =
            |b: &mut k::Batch<D>,
             s: &k::Strided<'_, D::Buffer>,
             raxes: &[usize],
             o: &k::Contig<'_, D::Buffer>| { self.kernels.reduce(b, op, s, raxes, o) };
        if let Some(out) = self.rows_in_pieces(x, &kept, axes, out_dtype, &whole)? {
            return Ok(out);
        }
        self.partials_in_pieces(op, x, &kept, axes, &out_shape)
    }

    /// `argmax`/`argmin` along `axis` in pieces of whole rows.
    pub(crate) fn arg_reduce_pieces(
        &self,
        op: ArgReduceOp,
        x: &View<'_, GpuBuffer<D>>,
        axis: usize,
    ) -> Result<GpuBuffer<D>> {
        let kept: Vec<usize> = (0..x.layout.shape.len()).filter(|&d| d != axis).collect();
        let f = |b: &mut k::Batch<D>,
                 s: &k::Strided<'_, D::Buffer>,
                 raxes: &[usize],
                 o: &k::Contig<'_, D::Buffer>| {
            self.kernels.arg_reduce(b, op, s, raxes[0], o)
        };
        match self.rows_in_pieces(x, &kept, &[axis], DType::U32, &f)? {
            Some(out) => Ok(out),
            None => Err(self.cannot_split(
                &x.layout.shape,
                x.dtype,
                &format!("{} of a row larger than one binding", op.name()),
            )),
        }
    }

    /// Runs `f` (a reduction over the trailing `raxes` of a view whose kept dims
    /// lead) on pieces of whole rows; `None` when a row does not fit a binding.
    #[allow(clippy::type_complexity)]
    fn rows_in_pieces(
        &self,
        x: &View<'_, GpuBuffer<D>>,
        kept: &[usize],
        axes: &[usize],
        out_dtype: DType,
        f: &dyn Fn(
            &mut k::Batch<D>,
            &k::Strided<'_, D::Buffer>,
            &[usize],
            &k::Contig<'_, D::Buffer>,
        ) -> k::Result<()>,
    ) -> Result<Option<GpuBuffer<D>>> {
        let (shape, strides, buf, kd) = self.permuted(x, kept, axes)?;
        let od = gpu_dtype(out_dtype)?;
        let operand = || Operand {
            strides: &strides,
            offset: x.layout.offset,
            size: kd.size() as u64,
            buffer: buf.byte_size(),
            seg: buf.seg,
        };
        let lim = self.limits();
        let cut = kept.len();
        let raxes: Vec<usize> = (cut..shape.len()).collect();
        let size = od.size() as u64;
        let n = wmx_core::layout::numel(&shape[..cut]);
        let out_seg = match self.segmented(n as u64 * size) {
            true => segment_bytes(self.kernels.caps().max_buffer),
            false => u64::MAX,
        };
        if let Ok(pieces) =
            plan_segmented(&shape, &[operand()], cut, Out::Window(size), out_seg, lim)
        {
            let (out, g) = self.output_mem(n, out_dtype)?;
            let mut batch = self.lock_batch();
            for p in &pieces {
                let b = self.bind_in(&mut batch, &buf, p.ins[0].window)?;
                let (buffer, window) = b.binding();
                let s = k::Strided {
                    window,
                    ..p.ins[0].strided(buffer, kd, &p.shape)
                };
                let w = out_window(pieces.len(), p, cut, size, g.byte_size(), lim);
                let bytes = wmx_core::layout::numel(&p.shape[..cut]) as u64 * size;
                let o_bound = self.bind_out(&g, w, bytes)?;
                let (buffer, window) = o_bound.binding();
                let o = k::Contig {
                    buffer,
                    window,
                    dtype: od,
                    shape: &p.shape[..cut],
                };
                f(&mut batch, &s, &raxes, &o).map_err(kerr)?;
                self.unbind_out(&mut batch, &g, o_bound)?;
                self.unbind_in(vec![b]);
                if batch.len() >= MAX_BATCH {
                    self.submit(&mut batch)?;
                }
            }
            return Ok(Some(out));
        }
        // Few large rows: each piece writes its own output, then they are placed
        // side by side (the output is small: each of its elements reads a lot).
        let fits_out =
            (n as u64) <= MAX_ELEMS && ((n as u64) * size).div_ceil(16) * 16 <= lim.bytes;
        let Ok(pieces) = plan(&shape, &[operand()], cut, Out::Own(size), lim) else {
            return Ok(None);
        };
        if !fits_out {
            return Ok(None);
        }
        let mut parts = Vec::with_capacity(pieces.len());
        for p in &pieces {
            let np = wmx_core::layout::numel(&p.shape[..cut]);
            let (part, g) = self.output(np, out_dtype)?;
            let mut batch = self.lock_batch();
            let b = self.bind_in(&mut batch, &buf, p.ins[0].window)?;
            let (buffer, window) = b.binding();
            let s = k::Strided {
                window,
                ..p.ins[0].strided(buffer, kd, &p.shape)
            };
            let o = k::Contig {
                buffer: &g,
                window: None,
                dtype: od,
                shape: &p.shape[..cut],
            };
            f(&mut batch, &s, &raxes, &o).map_err(kerr)?;
            self.unbind_in(vec![b]);
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
            parts.push((part, g, np));
        }
        let (out, g) = self.output(n, out_dtype)?;
        let shapes: Vec<[usize; 1]> = parts.iter().map(|p| [p.2]).collect();
        let views: Vec<k::Strided<'_, D::Buffer>> = parts
            .iter()
            .zip(&shapes)
            .map(|((_, g, _), shape)| k::Strided {
                buffer: g,
                window: None,
                dtype: od,
                shape,
                strides: &[1],
                offset: 0,
            })
            .collect();
        let o = k::Contig {
            buffer: &g,
            window: None,
            dtype: od,
            shape: &[n],
        };
        let mut batch = self.lock_batch();
        self.kernels
            .concatenate(&mut batch, &views, 0, &o)
            .map_err(kerr)?;
        Ok(Some(out))
    }

    /// `x`'s dims `first` then `then` (shape and strides), its GPU memory and dtype.
    #[allow(clippy::type_complexity)] // four named parts, used once
    fn permuted(
        &self,
        x: &View<'_, GpuBuffer<D>>,
        first: &[usize],
        then: &[usize],
    ) -> Result<(Vec<usize>, Vec<isize>, Mem<D::Buffer>, k::DType)> {
        let l = x.layout;
        let order = first.iter().chain(then);
        let shape = order.clone().map(|&d| l.shape[d]).collect();
        let strides = order.map(|&d| l.strides[d]).collect();
        Ok((shape, strides, self.mem(x.buffer)?, gpu_dtype(x.dtype)?))
    }

    /// A reduction whose rows are each larger than a binding: partial results of
    /// the whole output over pieces of the reduced dims, in the accumulator dtype,
    /// combined by the op, then cast.
    fn partials_in_pieces(
        &self,
        op: ReduceOp,
        x: &View<'_, GpuBuffer<D>>,
        kept: &[usize],
        axes: &[usize],
        out_shape: &[usize],
    ) -> Result<GpuBuffer<D>> {
        let l = x.layout;
        let (shape, strides, buf, kd) = self.permuted(x, axes, kept)?;
        let out_dtype = op.out_dtype(x.dtype);
        let od = gpu_dtype(out_dtype)?;
        let acc = op.acc_dtype(kd);
        let lim = self.limits();
        let n = wmx_core::layout::numel(out_shape);
        let fail = |msg: &str| self.cannot_split(&l.shape, x.dtype, msg);
        if n as u64 > MAX_ELEMS || (n as u64 * 4).div_ceil(16) * 16 > lim.bytes {
            return Err(fail(
                "both the output and each of its rows are larger than one binding",
            ));
        }
        let operand = Operand {
            strides: &strides,
            offset: l.offset,
            size: kd.size() as u64,
            buffer: buf.byte_size(),
            seg: buf.seg,
        };
        let cut = axes.len();
        let pieces = plan(&shape, &[operand], cut, Out::Unchecked, lim).map_err(|m| fail(&m))?;
        let combine = op.combiner();
        let raxes: Vec<usize> = (0..cut).collect();
        // The running total alternates between two buffers (a one-element total would
        // not be combined in place: the kernels read it as a broadcast scalar).
        let bytes = n as u64 * 4;
        let make = |what| self.kernels.create_buffer(bytes, Some(what)).map_err(kerr);
        let mut totals = [make("wmx partials")?, make("wmx partials")?];
        let part = make("wmx partial")?;
        let flat = [n];
        for (i, p) in pieces.iter().enumerate() {
            let mut batch = self.lock_batch();
            let b = self.bind_in(&mut batch, &buf, p.ins[0].window)?;
            let (buffer, window) = b.binding();
            let s = k::Strided {
                window,
                ..p.ins[0].strided(buffer, kd, &p.shape)
            };
            let target = if i == 0 { &totals[0] } else { &part };
            let o = k::Contig {
                buffer: target,
                window: None,
                dtype: acc,
                shape: &p.shape[cut..],
            };
            self.kernels
                .reduce(&mut batch, op, &s, &raxes, &o)
                .map_err(kerr)?;
            self.unbind_in(vec![b]);
            if i > 0 {
                let [cur, next] = totals.clone();
                self.kernels
                    .binary(
                        &mut batch,
                        combine,
                        &dense(&cur, acc, &flat),
                        &dense(&part, acc, &flat),
                        &out_to(&next, acc, &flat),
                    )
                    .map_err(kerr)?;
                totals.swap(0, 1);
            }
            if batch.len() >= MAX_BATCH {
                self.submit(&mut batch)?;
            }
        }
        let (out, g) = self.output(n, out_dtype)?;
        let mut batch = self.lock_batch();
        self.kernels
            .copy(
                &mut batch,
                &dense(&totals[0], acc, &flat),
                &out_to(&g, od, &flat),
            )
            .map_err(kerr)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: Limits = Limits {
        bytes: 1 << 12,
        align: 256,
    };

    /// An f32 (4-byte) operand of `elems` elements in its buffer.
    fn f32s(strides: &[isize], offset: usize, elems: u64) -> Operand<'_> {
        Operand {
            strides,
            offset,
            size: 4,
            buffer: elems * 4,
            seg: u64::MAX,
        }
    }

    /// Every output element lies in exactly one piece, in order, and every input
    /// element a piece reads lies inside its window.
    fn check(shape: &[usize], ins: &[Operand<'_>], pieces: &[Piece]) {
        let n: u64 = shape.iter().map(|&e| e as u64).product();
        let mut next = 0;
        for p in pieces {
            assert_eq!(p.out_start, next);
            next += p.shape.iter().map(|&e| e as u64).product::<u64>();
            for (x, part) in ins.iter().zip(&p.ins) {
                let w = part.window.unwrap_or(Window {
                    start: 0,
                    len: x.buffer,
                });
                assert!(w.len <= LIM.bytes && w.start % LIM.align == 0);
                let mut hi = part.offset as i128;
                for (&e, &s) in p.shape.iter().zip(&part.strides) {
                    assert!(s >= 0);
                    hi += (e as i128 - 1) * s as i128;
                }
                assert!((hi + 1) * x.size as i128 <= w.len as i128);
            }
        }
        assert_eq!(next, n);
    }

    #[test]
    fn contiguous_arrays_split_into_aligned_ranges() {
        let shape = [3001];
        let x = f32s(&[1], 5, 3008);
        let p = plan(&shape, &[x], 1, Out::Window(4), LIM).unwrap();
        assert!(p.len() > 2);
        assert!(p.iter().all(|p| (p.out_start * 4) % 256 == 0));
        check(&shape, &[x], &p);
    }

    #[test]
    fn rows_of_odd_width_and_broadcasts() {
        // [70, 33] f32 plus a broadcast row: rows start aligned every 64 rows only.
        let shape = [70, 33];
        let (a, row) = (f32s(&[33, 1], 0, 70 * 33), f32s(&[0, 1], 0, 33));
        let p = plan(&shape, &[a, row], 2, Out::Window(4), LIM);
        // 64 rows of 33 f32 exceed 4 KiB: no aligned cut exists.
        assert!(p.is_err());
        let shape = [70, 32];
        let (a, row) = (f32s(&[32, 1], 0, 70 * 32), f32s(&[0, 1], 0, 32));
        let p = plan(&shape, &[a, row], 2, Out::Window(4), LIM).unwrap();
        assert!(p.len() >= 3);
        check(&shape, &[a, row], &p);
    }

    #[test]
    fn huge_broadcast_counts_split_into_2_pow_30() {
        let shape = [1usize << 33];
        let x = Operand {
            strides: &[0],
            offset: 0,
            size: 4,
            buffer: 16,
            seg: u64::MAX,
        };
        let lim = Limits {
            bytes: 1 << 40,
            align: 256,
        };
        let p = plan(&shape, &[x], 1, Out::Unchecked, lim).unwrap();
        assert_eq!(p.len(), 8);
        assert!(
            p.iter()
                .all(|p| p.shape[0] as u64 <= MAX_ELEMS && p.ins[0].window.is_none())
        );
    }

    #[test]
    fn a_transpose_beside_a_row_major_operand_cannot_be_cut() {
        // [60, 60] f32 in 4 KiB bindings: output rows start aligned every 4 rows, and
        // 4 rows of the transpose read 4 columns spanning the whole buffer.
        let (a, t) = (f32s(&[60, 1], 0, 3600), f32s(&[1, 60], 0, 3600));
        let e = plan(&[60, 60], &[a, t], 2, Out::Window(4), LIM).unwrap_err();
        assert!(e.contains("cannot be cut"), "{e}");
    }

    #[test]
    fn reductions_keep_reduced_dims_whole() {
        // [8, 3000] u8 rows reduced: cuts only along the 8, one row each, so the
        // outputs cannot start aligned within one buffer.
        let shape = [8, 3000];
        let x = Operand {
            strides: &[3000, 1],
            offset: 0,
            size: 1,
            buffer: 24000,
            seg: u64::MAX,
        };
        assert!(plan(&shape, &[x], 1, Out::Window(4), LIM).is_err());
        let p = plan(&shape, &[x], 1, Out::Own(4), LIM).unwrap();
        assert_eq!(p.len(), 8);
        assert!(p.iter().all(|p| p.shape[1] == 3000));
        // A row larger than a binding cannot stay whole.
        let shape = [2, 5000];
        let x = Operand {
            strides: &[5000, 1],
            offset: 0,
            size: 1,
            buffer: 10000,
            seg: u64::MAX,
        };
        assert!(plan(&shape, &[x], 1, Out::Window(4), LIM).is_err());
    }
}
