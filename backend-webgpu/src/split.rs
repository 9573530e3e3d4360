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
//!
//! This file is the planner and the generic ways to record pieces; each family's
//! own way (products, scans, reductions, joining and indexing) is in `pieces/`.

use crate::segments::Mem;
use crate::{GpuBackend, GpuBuffer, MAX_BATCH, kerr};
use smallvec::SmallVec;
use wmx_core::{DType, Error, Layout, Result, View};
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
    pub strides: Dims<isize>,
    /// Element offset from the window's start (from the buffer's without one).
    pub offset: usize,
    /// The bytes bound, `None` for the whole buffer.
    pub window: Option<Window>,
}

/// Extents or strides of a piece, inline up to six dims: every dispatch plans
/// its pieces, almost always one.
pub(crate) type Dims<T> = SmallVec<[T; 6]>;

/// The pieces of a plan (inline: usually one).
pub(crate) type Pieces = SmallVec<[Piece; 1]>;

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
    pub shape: Dims<usize>,
    /// Row-major index of the piece's first element among the output dims.
    pub out_start: u64,
    /// One per input.
    pub ins: SmallVec<[Part; 4]>,
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
) -> Result<Pieces, String> {
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
) -> Result<Pieces, String> {
    if shape.contains(&0) {
        return Ok(Pieces::new());
    }
    let p = Planner {
        shape,
        ins,
        cut,
        out,
        out_seg,
        lim,
    };
    let mut pieces = Pieces::new();
    let origin: Dims<i128> = ins.iter().map(|x| x.offset as i128).collect();
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
        pieces: &mut Pieces,
    ) -> Result<(), String> {
        let mut ext: Dims<usize> = (0..self.shape.len())
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
                let o: Dims<i128> = origin
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
            let o: Dims<i128> = origin
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
        ext: Dims<usize>,
        origin: &[i128],
        out_start: u64,
        pieces: &mut Pieces,
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
                let strides: Dims<isize> = ext
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

pub(crate) fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The multi-index of row-major position `at` over `dims`.
pub(crate) fn unravel(mut at: u64, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for d in (0..dims.len()).rev() {
        idx[d] = (at % dims[d] as u64) as usize;
        at /= dims[d] as u64;
    }
    idx
}

/// A view's offset moved to index `idx` over its leading dims (`strides` may be
/// negative); `Err` if that falls before its binding's start.
pub(crate) fn moved(offset: usize, strides: &[isize], idx: &[usize]) -> k::Result<usize> {
    let d: isize = idx.iter().zip(strides).map(|(&i, &s)| i as isize * s).sum();
    usize::try_from(offset as isize + d)
        .map_err(|_| k::Error::Shape("a piece's offset falls before its view's start".into()))
}

/// All of `buffer` as a 1-D input of `flat` (`[n]`) elements.
pub(crate) fn dense<'b, B>(buffer: &'b B, dtype: k::DType, flat: &'b [usize]) -> k::Strided<'b, B> {
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
pub(crate) fn out_to<'b, B>(
    buffer: &'b B,
    dtype: k::DType,
    shape: &'b [usize],
) -> k::Contig<'b, B> {
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
        let kd = dtype;
        let mems = views
            .iter()
            .map(|v| self.mem(v.buffer))
            .collect::<Result<Vec<_>>>()?;
        let kds: Vec<DType> = views.iter().map(|v| v.dtype).collect();
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
            size: v.dtype.size() as u64,
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
