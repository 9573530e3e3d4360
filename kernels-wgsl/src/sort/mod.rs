//! Stable argsort along the last axis, entirely on the device, on (key, index)
//! pairs whose u32 keys keep numpy's order.
//!
//! Rows shorter than [`RADIX_MIN`] take a bitonic sort: rows of `n` are padded to a
//! power of two `P`; steps whose compare distance fits a block of 1024 pairs run in
//! workgroup memory (`sort_local`), longer ones one pass each (`sort_global`): about
//! `log2(P/1024)^2 / 4` global passes for long rows (two steps per pass). Longer
//! rows take an LSD radix sort, each pass a histogram per tile, a scan of the
//! histograms and a stable scatter, so the work grows linearly with `n`. Where the
//! adapter has subgroups (`Target::radix_wg`), passes of 8 bits ranked with subgroup
//! ballots (radix8.wgsl): four for 32-bit keys, two for f16 and bf16, one for
//! u8 and bool. Without (the browser), passes of 4 bits ranked in workgroup memory
//! (radix.wgsl): eight, four, four, two and one. `key_shifts` skips the digits that
//! cannot differ.

mod family;
pub(crate) mod wide;

pub use family::SORT;

use crate::compose::{ModuleSpec, Variant};
use crate::driver::Batch;
use crate::driver::Driver;
use crate::dtype::DType;
use crate::dtype::Words;
use crate::dtype::is_wide;
use crate::kernels::Kernels;
use crate::kernels::MAX_GROUPS;
use crate::layout::{Contig, Strided};
use crate::layout::{check_out, check_view};
use crate::{Error, Result};

/// Pairs per `sort_local` workgroup (SORT_BLOCK in sort.wgsl).
const BLOCK: u64 = 1024;

/// Rows at least this long take the radix sort, on workgroups of 256. The bound
/// comes from counting passes over the data (the radix sort's eight against the
/// bitonic sort's ~11 at 2^14), not from a measured crossover.
pub const RADIX_MIN: usize = 1 << 14;
/// Positions per tile of the 4-bit radix sort (RADIX_TILE in radix.wgsl); the 8-bit
/// one's tiles are 8 positions per invocation (R8_PER in radix8.wgsl).
const TILE: usize = 2048;
const R8_PER: usize = 8;

/// The 8-bit radix sort's workgroup size on an adapter whose subgroups are of
/// `min..=max` invocations, with workgroups of at most `wg`: eight subgroups of the
/// smallest size (fewer of larger ones), each whole; 0 where that does not fit
/// radix8.wgsl (at most 8 digits per invocation, subgroups of at most 32 lanes).
pub(crate) fn radix_workgroup(min: u32, max: u32, wg: u32) -> u32 {
    let w = (8 * min).min(wg);
    let ok = min >= 4 && min.is_power_of_two() && max <= w.min(32) && w >= 32;
    if ok { w } else { 0 }
}

impl<D: Driver> Kernels<D> {
    /// Bytes of each (key, index) scratch buffer [`Kernels::argsort`] binds for
    /// `rows` rows of `n`: 8 an element, rows padded to a power of two where the
    /// bitonic sort runs (callers cutting work into pieces size them by it).
    pub fn argsort_scratch_bytes(&self, rows: usize, n: usize) -> u64 {
        let per_row = if self.radix_sorts(n) {
            n
        } else {
            n.next_power_of_two()
        };
        rows as u64 * per_row as u64 * 8
    }

    /// Whether rows of `n` take the radix sort (else the bitonic one).
    fn radix_sorts(&self, n: usize) -> bool {
        n >= RADIX_MIN && self.wg() == 256
    }

    /// `out` (u32, `x`'s shape) = for each row along the last axis of the row-major
    /// `x`, the indices that sort it ascending, stably; NaN sorts last and -0 equals
    /// +0 (numpy's order).
    pub fn argsort(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let needs = "a row-major input of at least one dimension and a u32 output";
        self.check_sort_io(("argsort", needs), x, out, DType::U32, true)?;
        if is_wide(x.dtype) {
            return self.wide_argsort(b, x, out);
        }
        let g = Variant::General;
        let init = self.spec(&SORT, "sort_init", vec![x.dtype], DType::U32, g, 0);
        let n = *x.shape.last().unwrap();
        let rows: usize = x.shape[..x.shape.len() - 1].iter().product();
        if n == 0 || rows == 0 {
            crate::compose::compose(&init)?;
            return Ok(());
        }
        if self.radix_sorts(n) {
            return self.radix_sort(b, x, rows, n, out, false);
        }
        let p2 = n.next_power_of_two() as u64;
        let total = rows as u64 * p2;
        if total * 2 > u32::MAX as u64 {
            return Err(Error::Shape(format!(
                "argsort: {rows} rows of {n} (padded to {p2}) exceed 2^31 pairs"
            )));
        }
        let pairs = self.scratch(2, self.argsort_scratch_bytes(rows, n))?;
        let params = |k: u64, j: u64, kmax: u64| {
            vec![
                total as u32,
                p2 as u32,
                n as u32,
                k as u32,
                j as u32,
                x.offset as u32,
                kmax as u32,
                0,
            ]
        };
        let wg = self.wg() as u64;
        let spread = |items: u64| items.div_ceil(wg).min(MAX_GROUPS);
        self.record(
            b,
            &init,
            [pairs.clone().into(), x.binding()],
            params(0, 0, 0),
            spread(total),
        )?;
        let local = self.spec(&SORT, "sort_local", vec![], DType::U32, g, 0);
        let global = self.spec(&SORT, "sort_global", vec![], DType::U32, g, 0);
        let global2 = self.spec(&SORT, "sort_global2", vec![], DType::U32, g, 0);
        let blocks = total.div_ceil(BLOCK);
        // Every merge whose sequences fit a block, then each longer merge: its long
        // steps one pass each, its short ones in one local pass.
        let first = p2.min(BLOCK);
        self.record(b, &local, [pairs.clone()], params(2, 0, first), blocks)?;
        let mut k = first * 2;
        while k <= p2 {
            let mut j = k / 2;
            while j >= BLOCK {
                // Two steps per pass while both are long.
                let (spec, steps) = if j / 2 >= BLOCK {
                    (&global2, 4)
                } else {
                    (&global, 2)
                };
                let p = params(k, j, 0);
                self.record(b, spec, [pairs.clone()], p, spread(total / steps))?;
                j /= steps;
            }
            self.record(b, &local, [pairs.clone()], params(k, 0, k), blocks)?;
            k *= 2;
        }
        let finish = self.spec(&SORT, "sort_finish", vec![DType::U32], DType::U32, g, 0);
        let count = (rows * n) as u64;
        self.record(
            b,
            &finish,
            [out.binding(), pairs.into()],
            params(0, 0, 0),
            spread(count),
        )
    }
}

/// The shifts of the radix passes over `dtype`'s u32 keys: the digits that can
/// differ. f16 keys are 16-bit (its own bits, family.rs); bf16's f32 key has 16 low
/// bits that only repeat its sign, which a higher digit holds: an LSD sort skips them.
fn key_shifts(dtype: DType, bits_per_pass: u32) -> Vec<u32> {
    let bits = match dtype {
        DType::F16 => 0..16,
        DType::BF16 => 16..32,
        DType::U8 => 0..8,
        DType::Bool => 0..4,
        _ => 0..32,
    };
    bits.step_by(bits_per_pass as usize).collect()
}

impl<D: Driver> Kernels<D> {
    /// `op`'s input and output: a row-major `x` of at least one dimension on this
    /// adapter, `out` of its shape in `dtype`, and `ok` (the op's own condition);
    /// else an error saying what `op` `needs`.
    fn check_sort_io(
        &self,
        (op, needs): (&str, &str),
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
        dtype: DType,
        ok: bool,
    ) -> Result<()> {
        let dense = crate::layout::is_row_major(x);
        if !ok || x.shape.is_empty() || out.shape != x.shape || out.dtype != dtype || !dense {
            return Err(Error::Shape(format!(
                "{op}: {} {:?} (strides {:?}) into {} {:?} (needs {needs})",
                x.dtype, x.shape, x.strides, out.dtype, out.shape
            )));
        }
        self.check_dtype(x.dtype)?;
        check_view(x, &format!("{op} input"))?;
        check_out(out)
    }

    /// Whether [`Kernels::sort_values`] sorts rows of `n` of `dtype`: rows long
    /// enough for the radix sort, which carries the elements in place of their
    /// indices, of a dtype of at most 32 bits (other rows: [`Kernels::argsort`], then
    /// a gather).
    pub fn sorts_values(&self, dtype: DType, n: usize) -> bool {
        self.radix_sorts(n) && !is_wide(dtype)
    }

    /// `out` (`x`'s dtype and shape) = each row along the last axis of the row-major
    /// `x` sorted in [`Kernels::argsort`]'s order, where [`Kernels::sorts_values`].
    pub fn sort_values(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let n = x.shape.last().copied().unwrap_or(0);
        let radix = self.sorts_values(x.dtype, n);
        let needs = format!(
            "row-major rows of at least {RADIX_MIN} elements of at most 32 bits and an output like them"
        );
        self.check_sort_io(("sort_values", &needs), x, out, x.dtype, radix)?;
        let rows: usize = x.shape[..x.shape.len() - 1].iter().product();
        if rows == 0 {
            return Ok(());
        }
        self.radix_sort(b, x, rows, n, out, true)
    }

    /// The radix sort of `rows` row-major rows of `n`: into `out` their indices, or
    /// with `values` their elements (narrower than 32 bits: carried as their 32-bit
    /// computing value, the last pass into scratch, then cast).
    fn radix_sort(
        &self,
        b: &mut Batch<D>,
        x: &Strided<D::Buffer>,
        rows: usize,
        n: usize,
        out: &Contig<D::Buffer>,
        values: bool,
    ) -> Result<()> {
        let count = rows as u64 * n as u64;
        if count * 2 > u32::MAX as u64 {
            return Err(Error::Shape(format!(
                "argsort: {rows} rows of {n} exceed 2^31 pairs"
            )));
        }
        // 8-bit passes where the adapter's subgroups rank them, else 4-bit ones.
        let t = self.inner.target;
        let (bits, tile, t) = if t.subgroups && t.radix_wg > 0 {
            (8, R8_PER * t.radix_wg as usize, family::radix8_target(t))
        } else {
            (4, TILE, t)
        };
        let tiles = n.div_ceil(tile);
        let groups = (rows * tiles) as u64;
        let table = groups << bits;
        let counts = self.create_buffer(table * 4, Some("wmx radix counts"))?;
        let offsets = self.create_buffer(table * 4, Some("wmx radix offsets"))?;
        let bytes = self.argsort_scratch_bytes(rows, n);
        let pairs = [self.scratch(2, bytes)?, self.scratch(3, bytes)?];
        let g = Variant::General;
        let (hist, scatter) = if bits == 8 {
            ("radix8_hist", "radix8_scatter")
        } else {
            ("radix_hist", "radix_scatter")
        };
        let hist = ModuleSpec::new(&SORT, hist, vec![x.dtype], DType::U32, g, t);
        let inputs = vec![x.dtype, DType::U32];
        let scatter = ModuleSpec::new(&SORT, scatter, inputs, DType::U32, g, t);
        let shifts = key_shifts(x.dtype, bits);
        let staged = values && x.dtype.size() < 4;
        for (pass, &shift) in shifts.iter().enumerate() {
            let (first, last) = (pass == 0, pass + 1 == shifts.len());
            let flags = u32::from(first) | (u32::from(last) << 1) | (u32::from(values) << 2);
            let params = vec![
                rows as u32,
                n as u32,
                tiles as u32,
                shift,
                x.offset as u32,
                flags,
                0,
                0,
            ];
            let src = if first {
                x.binding()
            } else {
                pairs[(pass + 1) % 2].clone().into()
            };
            let dst = if last && !staged {
                out.binding()
            } else {
                pairs[pass % 2].clone().into()
            };
            self.record(
                b,
                &hist,
                [counts.clone().into(), src.clone()],
                params.clone(),
                groups,
            )?;
            self.scan_rows(
                b,
                wmx_spec::ReduceOp::Sum,
                (counts.clone().into(), DType::U32, 0),
                rows,
                tiles << bits,
                crate::reduce::EXCLUSIVE,
                &offsets.clone().into(),
            )?;
            let bufs = [dst.clone(), src.clone(), offsets.clone().into()];
            self.record(b, &scatter, bufs, params, groups)?;
        }
        if staged {
            // The 32-bit values the last pass wrote, in the output's dtype (exactly:
            // each is an element's own value).
            let strides = [n as isize, 1];
            let sorted = Strided {
                buffer: &pairs[(shifts.len() - 1) % 2],
                window: None,
                dtype: x.dtype.acc(),
                shape: &[rows, n],
                strides: &strides,
                offset: 0,
            };
            let shape = [rows, n];
            let out = Contig {
                shape: &shape,
                ..*out
            };
            self.copy(b, &sorted, &out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::radix_workgroup;

    /// Eight subgroups of the smallest size, every size the adapter runs whole
    /// within it and at most 32 lanes; else none (the 4-bit passes).
    #[test]
    fn radix_workgroup_by_subgroup_sizes() {
        for ((min, max), want) in [
            ((32, 32), 256), // NVIDIA
            ((8, 8), 64),    // lavapipe
            ((4, 4), 32),
            ((16, 32), 128), // Intel
            ((32, 64), 0),   // AMD: waves of 64 do not fit one-word ballots
            ((64, 64), 0),
            ((4, 128), 0),
            ((2, 2), 0),
            ((0, 0), 0),
        ] {
            assert_eq!(radix_workgroup(min, max, 256), want, "{min}..={max}");
        }
        assert_eq!(
            radix_workgroup(32, 32, 128),
            128,
            "capped by the workgroup limit"
        );
    }
}
