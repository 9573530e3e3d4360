//! Matrix products: the tiled kernel (`matmul.wgsl`) and, when one side is a vector,
//! the bandwidth-bound matrix-vector kernels (`gemv.wgsl`).
//!
//! Operands are read in place through their strides (transposed views cost nothing);
//! batch dims are collapsed first. Everything accumulates in f32; the result is
//! rounded once.

mod family;
pub(crate) mod wide;

pub(crate) use family::vec4_tile;
pub use family::{GEMV, MATMUL, TILES};

use crate::compose::Variant;
use crate::driver::Driver;
use crate::driver::{Batch, Binding, Work};
use crate::dtype::{DType, Words};
use crate::fused::FusedSpec;
use crate::kernels::Kernels;
use crate::layout::{Contig, Strided};
use crate::layout::{check_out, check_view, collapse};
use crate::{Error, Result};
use wmx_spec::{BinaryOp, FusedOp, FusedStep};

/// Workgroups below which the large tile leaves the GPU idle and the small one is
/// used (about two per compute unit of a large GPU).
const LARGE_TILE_MIN_GROUPS: u64 = 256;
/// Compute units of the large GPU the f32 tile and split choices assume (an H100's
/// or H200's 132 SMs: WebGPU does not say how many an adapter has).
const LARGE_GPU_UNITS: u64 = 132;

/// Waves of `tiles` workgroups on [`LARGE_GPU_UNITS`], one a unit at a time: the
/// most tiles one unit runs.
fn waves(tiles: u64) -> u64 {
    tiles.div_ceil(LARGE_GPU_UNITS)
}

/// Longest K the f32 product's 64 x 64 tile takes whatever the output's shape.
const SHORT_K: usize = 64;

/// The tile of an f32 product read in vec4s: 128 x 128 with K steps of 16 (tile 2)
/// where its tiles fill the waves of a large GPU well (one wave at least 70 % full,
/// or several at least 85 %), else 64 x 64 (tile 1). Measured at square sizes and
/// the GPT step's shapes on an H200 (bench/NOTES.md, run 108): tile 2 ran 144 tiles
/// 25 % slower than tile 1 (two waves, the second nearly empty), 96 and 1024 tiles
/// 3-11 % faster. Products of at most [`SHORT_K`] take tile 1 whatever their tiles
/// (attention's scores, K = 64: 7-11 % faster on it, run 229): four K steps of
/// the large tile, one workgroup a unit, leave its loads no products to hide behind.
fn f32_tile(m: usize, n: usize, k: usize, batch: u64) -> usize {
    if m < 128 || n < 128 || k <= SHORT_K {
        return 1;
    }
    let t = (m.div_ceil(128) * n.div_ceil(128)) as u64 * batch;
    let w = waves(t);
    let fill = t as f64 / (w * LARGE_GPU_UNITS) as f64;
    if fill >= if w == 1 { 0.7 } else { 0.85 } {
        2
    } else {
        1
    }
}

/// Workgroup memory of the vec4 cooperative kernel at its largest (tiles of 128 x
/// 128, 64 deep): two staged f16 tiles of 128 x 72 halves and 8 x 256 f32 for the
/// epilogue (`matmul_coop_vec.wgsl`).
const COOP_VEC_WORKGROUP_BYTES: u32 = 2 * 9216 * 2 + 2048 * 4;

/// The columns of the vec4 cooperative kernel's tile (it has 128 rows) for variant
/// bits `i`: bit 2 picks 64 (else 128).
pub(crate) fn coop_vec_cols(i: u8) -> usize {
    if i & 4 != 0 { 64 } else { 128 }
}

/// Products with at most this many tiles of 128 x 128 take the vec4 cooperative
/// kernel's tiles of 128 x 64: twice the workgroups on the GPU's units (1024^3 with
/// 64 tiles: 28 -> 23.5 us on the H200; at 96 tiles the wide tile still won:
/// bench/NOTES.md, run 140).
const COOP_VEC_NARROW_MAX_TILES: u64 = 64;

/// Gemv chunks: column-mode launches aim for at least this many invocations.
const GEMV_MIN_THREADS: u64 = 1 << 17;
/// Most of K one tiled dispatch takes: longer products go in dispatches over parts
/// of K, summed in f32. Mesa's llvmpipe (lavapipe) stops a shader's loops once one
/// invocation's loops together reach 65 535 iterations, and the tiled kernel's
/// loops run about K / 8 times 10 (wrong from K ~ 52 000 there).
const MM_K_CHUNK: usize = 16384;
/// Rows per workgroup of the vectorised row kernel (`GV_ROWS` in gemv.wgsl).
const GEMV_ROWS: usize = 4;

/// Output tiles (of 128 x 128) below which a product splits K into as many parts as
/// [`SPLIT_K_TILES`] asks: fewer than half a large GPU's compute units (36 tiles,
/// 768 x 768, ran 1.9x faster in 8 parts, run 82).
const SPLIT_K_BELOW: usize = 64;
/// Tiles a split aims for: about two per compute unit, as
/// [`LARGE_TILE_MIN_GROUPS`].
const SPLIT_K_TILES: usize = 256;
/// The shortest part of K a split leaves to each product.
const SPLIT_K_MIN: usize = 256;

/// How many parts of K a 2-D f32 product of `m x k x n` is computed in (`None`: one).
/// Below [`SPLIT_K_BELOW`] output tiles: enough parts for [`SPLIT_K_TILES`]. Up to
/// one wave of a large GPU ([`LARGE_GPU_UNITS`]): the parts that leave its compute
/// units most evenly loaded (most tiles of 128 x 128 on one unit, over the parts), if
/// that is a quarter less than unsplit (a 2048 x 768 output's 96 tiles in 4 parts:
/// 3 waves of a quarter of the work). Each part at least [`SPLIT_K_MIN`] long and a
/// multiple of 8 (so the parts' offsets keep vec4 loads aligned).
/// `WMX_MATMUL_SPLIT=0` turns splitting off (for measuring).
fn split_k(nd: usize, m: usize, k: usize, n: usize) -> Option<usize> {
    static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let off = *OFF.get_or_init(|| std::env::var("WMX_MATMUL_SPLIT").is_ok_and(|v| v == "0"));
    if nd != 2 || off {
        return None;
    }
    let tiles = m.div_ceil(128) * n.div_ceil(128);
    let fits = |s: usize| k.is_multiple_of(s) && (k / s).is_multiple_of(8) && k / s >= SPLIT_K_MIN;
    if tiles < SPLIT_K_BELOW {
        let want = SPLIT_K_TILES.div_ceil(tiles);
        return (2..=want.min(16)).rev().find(|&s| fits(s));
    }
    if tiles as u64 > LARGE_GPU_UNITS {
        return None;
    }
    // Time in units of one tile's whole product: the most tiles one unit runs.
    let cost = |s: usize| waves((tiles * s) as u64) as f64 / s as f64;
    (2..=16)
        .filter(|&s| fits(s) && cost(s) <= 0.75)
        .min_by(|&x, &y| cost(x).total_cmp(&cost(y)).then(x.cmp(&y)))
}

/// A product's shape for profiles: `[batch x] MxK @ KxN`, `ᵀ` after an operand
/// that is a transposed view (read along its other axis).
fn product_work(batch: u64, m: usize, k: usize, n: usize, ta: bool, tb: bool, e: usize) -> Work {
    let t = |x: bool| if x { "ᵀ" } else { "" };
    let lead = if batch > 1 {
        format!("{batch}x")
    } else {
        String::new()
    };
    Work {
        shape: format!("{lead}{m}x{k}{} @ {k}x{n}{}", t(ta), t(tb)),
        flop: 2.0 * (batch as f64) * (m * k * n) as f64,
        bytes: (batch as f64) * ((m * k + k * n + m * n) * e) as f64,
    }
}

/// `buffer` as a dense f32 output of `shape` (partial products).
fn f32_out<'b, B>(buffer: &'b B, shape: &'b [usize]) -> Contig<'b, B> {
    Contig {
        buffer,
        window: None,
        dtype: DType::F32,
        shape,
    }
}

fn i32_bits(s: isize) -> u32 {
    s as i32 as u32
}

impl<D: Driver> Kernels<D> {
    /// `out = alpha * a @ bb + beta * c` over matching batch dims: `a` is
    /// `[..., M, K]`, `bb` `[..., K, N]`, `c` (optional) and `out` `[..., M, N]`; one
    /// float dtype, except that 16-bit operands may write an f32 `out` (their f32
    /// accumulation unrounded: partial products summed later). Any strides (0
    /// broadcasts); K may be 0 (then `out = beta * c`).
    #[allow(clippy::too_many_arguments)]
    pub fn matmul(
        &self,
        b: &mut Batch<D>,
        a: &Strided<D::Buffer>,
        bb: &Strided<D::Buffer>,
        c: Option<&Strided<D::Buffer>>,
        alpha: f64,
        beta: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let nd = a.shape.len();
        let bad = || {
            Error::Shape(format!(
                "matmul: a {:?}, b {:?}, c {:?} do not make the output {:?}",
                a.shape,
                bb.shape,
                c.map(|c| c.shape),
                out.shape
            ))
        };
        if nd < 2 || bb.shape.len() != nd || out.shape.len() != nd {
            return Err(bad());
        }
        let (m, k, n) = (a.shape[nd - 2], a.shape[nd - 1], bb.shape[nd - 1]);
        let batch = &out.shape[..nd - 2];
        if a.shape[..nd - 2] != *batch
            || bb.shape[..nd - 2] != *batch
            || bb.shape[nd - 2] != k
            || out.shape[nd - 2..] != [m, n]
            || c.is_some_and(|c| c.shape != out.shape)
        {
            return Err(bad());
        }
        let d = a.dtype;
        let out_ok = out.dtype == d || out.dtype == DType::F32 && d.epw() == 2;
        if !d.is_float() || bb.dtype != d || !out_ok || c.is_some_and(|c| c.dtype != d) {
            return Err(Error::OpNotDefined {
                op: "matmul".into(),
                dtype: d.name(),
            });
        }
        for x in [Some(a), Some(bb), c].into_iter().flatten() {
            self.check_dtype(x.dtype)?;
            check_view(x, "matmul input")?;
            if x.buffer == out.buffer {
                return Err(Error::Shape(
                    "matmul: inputs must not share the output buffer".into(),
                ));
            }
        }
        check_out(out)?;
        if out.numel() == 0 {
            return Ok(());
        }
        let c = c.filter(|_| beta != 0.0);
        if d == DType::F64 {
            return self.f64_matmul(b, a, bb, c, alpha, beta, out);
        }
        if m == 1 || n == 1 {
            self.gemv(b, a, bb, c, alpha, beta, out)
        } else if let Some(s) = split_k(nd, m, k, n).filter(|&s| {
            // f32 only: the 16-bit cooperative kernels are fast enough that the f32
            // partials' traffic costs more than the fuller GPU gains.
            d == DType::F32 && (s * m * n * 4) as u64 <= self.inner.caps.max_storage_binding
        }) {
            self.split_k(b, a, bb, c, alpha, beta, out, s)
        } else if k > MM_K_CHUNK && !self.coop_operands(a) {
            self.k_chunks(b, a, bb, c, alpha, beta, out)
        } else {
            self.tiled(b, a, bb, c, alpha, beta, out)
        }
    }

    /// Whether f16 products may take the cooperative-matrix kernels (no long loops
    /// per invocation to bound: the adapters that have them run loops whole).
    fn coop_operands(&self, a: &Strided<D::Buffer>) -> bool {
        self.target().coop > 0 && a.dtype == DType::F16
    }

    /// An f32 product as `s` products over equal parts of K, run as one batched
    /// product (the parts are batch elements of the same operands) into partials
    /// `[s, M, N]`, then summed with `beta * c` in one elementwise pass. For products
    /// whose output tiles alone would leave the GPU idle ([`split_k`]).
    #[allow(clippy::too_many_arguments)]
    fn split_k(
        &self,
        b: &mut Batch<D>,
        a: &Strided<D::Buffer>,
        bb: &Strided<D::Buffer>,
        c: Option<&Strided<D::Buffer>>,
        alpha: f64,
        beta: f64,
        out: &Contig<D::Buffer>,
        s: usize,
    ) -> Result<()> {
        let (m, k, n) = (a.shape[0], a.shape[1], bb.shape[1]);
        let kc = (k / s) as isize;
        // Scratch buffers (kept between calls): a product per call here would make
        // and clear new buffers each time (run 81: 3-25x slower).
        let mn = (m * n) as u64 * 4;
        let parts = self.scratch(4, s as u64 * mn)?;
        let (a_shape, b_shape, p_shape) = ([s, m, k / s], [s, k / s, n], [s, m, n]);
        let a_strides = [kc * a.strides[1], a.strides[0], a.strides[1]];
        let b_strides = [kc * bb.strides[0], bb.strides[0], bb.strides[1]];
        let a3 = Strided {
            shape: &a_shape,
            strides: &a_strides,
            ..*a
        };
        let b3 = Strided {
            shape: &b_shape,
            strides: &b_strides,
            ..*bb
        };
        self.tiled(b, &a3, &b3, None, alpha, 0.0, &f32_out(&parts, &p_shape))?;
        // One elementwise pass sums the parts (and adds beta * c): a column
        // reduction over so few rows ran at a tenth of the bandwidth (run 82).
        let mn_strides = [n as isize, 1];
        let part = |j: usize| Strided {
            buffer: &parts,
            window: None,
            dtype: DType::F32,
            shape: out.shape,
            strides: &mn_strides,
            offset: j * m * n,
        };
        let mut views: Vec<Strided<D::Buffer>> = (0..s).map(part).collect();
        views.extend(c.copied());
        // Values 0..ni are the inputs (the parts, then c); step i's is ni + i.
        let ni = views.len();
        let mut steps: Vec<FusedStep> = (1..s)
            .map(|j| FusedStep {
                op: FusedOp::Binary(BinaryOp::Add),
                args: vec![if j == 1 { 0 } else { ni + j - 2 }, j],
                dtype: DType::F32,
            })
            .collect();
        if c.is_some() {
            steps.push(FusedStep {
                op: FusedOp::Axpby { alpha: 1.0, beta },
                args: vec![ni + s - 2, s],
                dtype: DType::F32,
            });
        }
        let spec = std::sync::Arc::new(FusedSpec {
            inputs: vec![DType::F32; views.len()],
            steps,
            outputs: Vec::new(),
        });
        let refs: Vec<&Strided<D::Buffer>> = views.iter().collect();
        self.fused(b, &spec, &refs, out)
    }

    /// The tiled product over parts of K of at most [`MM_K_CHUNK`]
    /// ([`Kernels::matmul_parts`]).
    #[allow(clippy::too_many_arguments)]
    fn k_chunks(
        &self,
        b: &mut Batch<D>,
        a: &Strided<D::Buffer>,
        bb: &Strided<D::Buffer>,
        c: Option<&Strided<D::Buffer>>,
        alpha: f64,
        beta: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let nd = a.shape.len();
        let k = a.shape[nd - 1];
        let parts = k.div_ceil(MM_K_CHUNK);
        let kc = k.div_ceil(parts);
        let moved = |x: &Strided<D::Buffer>, d: usize, by: usize| {
            usize::try_from(x.offset as isize + by as isize * x.strides[d])
                .map_err(|_| Error::Shape("matmul: a part of K before its view".into()))
        };
        let mut shapes = Vec::with_capacity(parts);
        for j in 0..parts {
            let len = kc.min(k - j * kc);
            let mut a_shape = a.shape.to_vec();
            a_shape[nd - 1] = len;
            let mut b_shape = bb.shape.to_vec();
            b_shape[nd - 2] = len;
            shapes.push((a_shape, b_shape));
        }
        let mut views = Vec::with_capacity(parts);
        for (j, (a_shape, b_shape)) in shapes.iter().enumerate() {
            let aj = Strided {
                shape: a_shape,
                offset: moved(a, nd - 1, j * kc)?,
                ..*a
            };
            let bj = Strided {
                shape: b_shape,
                offset: moved(bb, nd - 2, j * kc)?,
                ..*bb
            };
            views.push((aj, bj));
        }
        self.matmul_parts(b, &views, c, alpha, beta, out)
    }

    /// `out = alpha * sum_j a_j @ b_j + beta * c` over parts of K (`parts`: each
    /// `(a_j, b_j)` as [`Kernels::matmul`]'s operands): each part's product in f32
    /// (alpha applied, beta * C added to the first), summed in f32, rounded once
    /// into `out`. Long products (K past a loop budget) and operands bound part by
    /// part (a B larger than one binding) go this way.
    #[allow(clippy::type_complexity)]
    pub fn matmul_parts(
        &self,
        b: &mut Batch<D>,
        parts: &[(Strided<D::Buffer>, Strided<D::Buffer>)],
        c: Option<&Strided<D::Buffer>>,
        alpha: f64,
        beta: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let n = out.numel();
        let flat = [n];
        fn dense<'b, B>(buffer: &'b B, flat: &'b [usize]) -> Strided<'b, B> {
            Strided {
                buffer,
                window: None,
                dtype: DType::F32,
                shape: flat,
                strides: &[1],
                offset: 0,
            }
        }
        let mut sum: Option<D::Buffer> = None;
        for (j, (aj, bj)) in parts.iter().enumerate() {
            let part = self.create_buffer(n as u64 * 4, Some("wmx matmul part of K"))?;
            let cj = c.filter(|_| j == 0);
            self.matmul(b, aj, bj, cj, alpha, beta, &f32_out(&part, out.shape))?;
            sum = Some(match sum {
                None => part,
                Some(prev) => {
                    let total = self.create_buffer(n as u64 * 4, Some("wmx matmul sum"))?;
                    let (x, y) = (dense(&prev, &flat), dense(&part, &flat));
                    self.binary(b, wmx_spec::BinaryOp::Add, &x, &y, &f32_out(&total, &flat))?;
                    total
                }
            });
        }
        let Some(sum) = sum else {
            return Err(Error::Shape("matmul_parts: no parts of K".into()));
        };
        let o = Contig {
            buffer: out.buffer,
            window: out.window,
            dtype: out.dtype,
            shape: &flat,
        };
        self.copy(b, &dense(&sum, &flat), &o)
    }

    #[allow(clippy::too_many_arguments)]
    fn tiled(
        &self,
        b: &mut Batch<D>,
        a: &Strided<D::Buffer>,
        bb: &Strided<D::Buffer>,
        c: Option<&Strided<D::Buffer>>,
        alpha: f64,
        beta: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let nd = a.shape.len();
        let (m, k, n) = (a.shape[nd - 2], a.shape[nd - 1], bb.shape[nd - 1]);
        let zeros = vec![0isize; nd];
        let cs = c.map_or(&zeros[..], |c| c.strides);
        let (bshape, bst) = collapse(
            &out.shape[..nd - 2],
            &[&a.strides[..nd - 2], &bb.strides[..nd - 2], &cs[..nd - 2]],
        );
        let nbatch: u64 = bshape.iter().map(|&x| x as u64).product();
        let tiles = |i: usize| {
            let (wx, wy, _) = TILES[i];
            let (tm, tn) = (m.div_ceil(8 * wy as usize), n.div_ceil(8 * wx as usize));
            (tm as u64, tn as u64)
        };
        let (tm0, tn0) = tiles(0);
        static FORCED: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
        let forced = *FORCED.get_or_init(|| {
            std::env::var("WMX_MATMUL_TILE")
                .ok()
                .and_then(|s| s.parse::<usize>().ok())
                .filter(|&i| i < TILES.len())
        });
        // The large tile wastes most of its work on matrices narrower than it
        // (256 x 64^3 ran in 27 us with it, 19 us with the small one on the H200).
        let large = m >= 128 && n >= 128 && tm0 * tn0 * nbatch >= LARGE_TILE_MIN_GROUPS;
        // f16 on cooperative matrices where the device has them. Aligned operands
        // (rows along their contiguous dimension starting on 16 bytes, M, N, K
        // multiples of 8) take 128 x 128 tiles staged from 16-byte loads; the rest
        // take 64 x 64 tiles staged element by element, for the products the large
        // plain tile does not take (that kernel ran only ~10 TFLOP/s at 2048^3 on the
        // H200, where the plain one runs 22-26: bench/NOTES.md, runs 25-26).
        let coop_any = self.target().coop > 0 && a.dtype == DType::F16 && forced.is_none();
        let a_mfast = a.strides[nd - 2] == 1 && a.strides[nd - 1] != 1;
        let b_kfast = bb.strides[nd - 2] == 1 && bb.strides[nd - 1] != 1;
        // The row stride of an operand as staged: positive, a multiple of 8 elements.
        let rows8 = |s: isize| s > 0 && s % 8 == 0;
        let a_ok = if a_mfast {
            rows8(a.strides[nd - 1])
        } else {
            a.strides[nd - 1] == 1 && rows8(a.strides[nd - 2])
        };
        let b_ok = if b_kfast {
            rows8(bb.strides[nd - 1])
        } else {
            bb.strides[nd - 1] == 1 && rows8(bb.strides[nd - 2])
        };
        let coop_vec = coop_any
            && self.target().coop == 32
            && self.inner.caps.max_workgroup_storage >= COOP_VEC_WORKGROUP_BYTES
            && (m > 64 || n > 64)
            && [m, n, k].iter().all(|x| x.is_multiple_of(8))
            && a_ok
            && b_ok
            && a.offset.is_multiple_of(8)
            && bb.offset.is_multiple_of(8)
            && bst[..2].iter().flatten().all(|s| s % 8 == 0)
            && [Some(a), Some(bb), c]
                .iter()
                .flatten()
                .all(|x| x.bytes().is_multiple_of(16));
        let coop = coop_any && (coop_vec || !large);
        // vec4 loads: f32 operands read four elements at a time along their
        // contiguous axis (of a length that is a multiple of four), every row start
        // and batch offset a multiple of four elements.
        let a4 = |x: &Strided<D::Buffer>, rows: usize, cols: usize, batch: &[isize]| {
            let (sr, sc) = (x.strides[nd - 2], x.strides[nd - 1]);
            let along = |s: isize, len: usize, other: isize| {
                s == 1 && len.is_multiple_of(4) && other % 4 == 0
            };
            (along(sc, cols, sr) || along(sr, rows, sc))
                && x.offset.is_multiple_of(4)
                && batch.iter().all(|s| s % 4 == 0)
                && x.bytes().is_multiple_of(16)
        };
        let vec4_ok =
            !coop && a.dtype == DType::F32 && a4(a, m, k, &bst[0]) && a4(bb, k, n, &bst[1]);
        let cfg = forced.unwrap_or(if vec4_ok {
            f32_tile(m, n, k, nbatch)
        } else if large {
            0
        } else {
            1
        });
        let vec4 = vec4_ok && vec4_tile(cfg);
        // tm0 x tn0: the product's tiles of 128 x 128.
        let narrow = coop_vec && tm0 * tn0 * nbatch <= COOP_VEC_NARROW_MAX_TILES;
        let coop_bits = a_mfast as u8 | (b_kfast as u8) << 1 | (narrow as u8) << 2;
        let (tm, tn) = if coop_vec {
            (tm0, n.div_ceil(coop_vec_cols(coop_bits)) as u64)
        } else if coop {
            (m.div_ceil(64) as u64, n.div_ceil(64) as u64)
        } else {
            tiles(cfg)
        };
        let groups = tm * tn * nbatch;
        if groups > u32::MAX as u64 {
            return Err(Error::Shape(format!(
                "matmul: {groups} tiles are more than one launch can address"
            )));
        }
        // 16-bit results of odd width would share words between invocations: compute
        // them in f32 and round in a copy.
        let tmp = self.f32_result(out, out.dtype.epw() == 2 && n % 2 == 1)?;
        let target = tmp.as_ref().map_or_else(|| out.binding(), Binding::from);
        let odt = if tmp.is_some() { DType::F32 } else { out.dtype };
        let mut inputs = vec![a.dtype, bb.dtype];
        if let Some(c) = c {
            inputs.push(c.dtype);
        }
        let spec = self.spec(
            &MATMUL,
            "matmul",
            inputs,
            odt,
            if coop_vec {
                Variant::CoopVec(coop_bits)
            } else if coop {
                Variant::Coop
            } else if vec4 {
                Variant::TiledVec(cfg as u8)
            } else {
                Variant::Tiled(cfg as u8)
            },
            0,
        );
        let flags = (a.strides[nd - 2] == 1 && a.strides[nd - 1] != 1) as u32
            | ((bb.strides[nd - 1] == 1) as u32) << 1
            | (c.is_some() as u32) << 2;
        let mut params = vec![
            m as u32,
            n as u32,
            k as u32,
            groups as u32,
            bshape.len() as u32,
            tn as u32,
            tm as u32,
            a.offset as u32,
            i32_bits(a.strides[nd - 2]),
            i32_bits(a.strides[nd - 1]),
            bb.offset as u32,
            i32_bits(bb.strides[nd - 2]),
            i32_bits(bb.strides[nd - 1]),
            c.map_or(0, |c| c.offset as u32),
            i32_bits(cs[nd - 2]),
            i32_bits(cs[nd - 1]),
            (alpha as f32).to_bits(),
            (beta as f32).to_bits(),
            flags,
        ];
        params.extend(bshape.iter().map(|&x| x as u32));
        for s in &bst {
            params.extend(s.iter().map(|&x| i32_bits(x)));
        }
        let mut buffers = vec![target.clone(), a.binding(), bb.binding()];
        if let Some(c) = c {
            buffers.push(c.binding());
        }
        self.record(b, &spec, buffers, params, groups)?;
        self.describe(b, || {
            product_work(nbatch, m, k, n, a_mfast, b_kfast, a.dtype.size())
        });
        if let Some(t) = &tmp {
            self.round_from_f32(b, t, out)?;
        }
        Ok(())
    }

    /// M == 1 or N == 1: `y[i] = sum_k mat[i, k] v[k]` with `mat` A (N == 1) or Bᵀ.
    #[allow(clippy::too_many_arguments)]
    fn gemv(
        &self,
        b: &mut Batch<D>,
        a: &Strided<D::Buffer>,
        bb: &Strided<D::Buffer>,
        c: Option<&Strided<D::Buffer>>,
        alpha: f64,
        beta: f64,
        out: &Contig<D::Buffer>,
    ) -> Result<()> {
        let nd = a.shape.len();
        let (m, k, n) = (a.shape[nd - 2], a.shape[nd - 1], bb.shape[nd - 1]);
        let zeros = vec![0isize; nd];
        let cs = c.map_or(&zeros[..], |c| c.strides);
        // (matrix, vector, rows I, matrix strides (i, k), vector stride, c stride)
        let (mat, vec, rows_i, (si, sk), vk, ci) = if n == 1 {
            let s = (a.strides[nd - 2], a.strides[nd - 1]);
            (a, bb, m, s, bb.strides[nd - 2], cs[nd - 2])
        } else {
            let s = (bb.strides[nd - 1], bb.strides[nd - 2]);
            (bb, a, n, s, a.strides[nd - 1], cs[nd - 1])
        };
        let (bshape, bst) = collapse(
            &out.shape[..nd - 2],
            &[
                &mat.strides[..nd - 2],
                &vec.strides[..nd - 2],
                &cs[..nd - 2],
            ],
        );
        let nbatch: u64 = bshape.iter().map(|&x| x as u64).product();
        let rows = nbatch * rows_i as u64;
        if rows > u32::MAX as u64 {
            return Err(Error::Shape(format!(
                "matmul: {rows} output rows are more than one launch can address"
            )));
        }
        let d = a.dtype;
        let cols = si == 1 && sk != 1;
        // vec4-of-words loads: k contiguous in both, everything aligned to a vec4.
        let e4 = 4 * d.epw() as isize;
        let aligned = |x: &Strided<D::Buffer>, inner: isize, outer: &[isize]| {
            x.offset as isize % e4 == 0
                && inner == 1
                && outer.iter().all(|s| s % e4 == 0)
                && x.bytes().is_multiple_of(16)
        };
        let vec4 = !cols
            && k as isize % e4 == 0
            && aligned(mat, sk, &[&[si][..], &bst[0]].concat())
            && aligned(vec, vk, &bst[1]);
        // Column mode with one vec4 of words per k: rows i contiguous and aligned.
        let cols_vec = cols
            && rows_i as isize % e4 == 0
            && mat.offset as isize % e4 == 0
            && sk % e4 == 0
            && bst[0].iter().all(|s| s % e4 == 0)
            && mat.bytes().is_multiple_of(16);
        let narrow = out.dtype.epw() == 2;
        let wg = self.wg() as u64;
        // Invocations of the column kernels: one per row, or per vec4 of rows.
        let col_items = if cols_vec { rows / e4 as u64 } else { rows };
        let chunks = if cols {
            let blocks = col_items.div_ceil(wg);
            (GEMV_MIN_THREADS.div_ceil(blocks * wg)).clamp(1, k.max(1) as u64)
        } else {
            1
        };
        let kc = (k as u64).div_ceil(chunks).max(1);
        let chunks = (k as u64).div_ceil(kc).max(1);
        // Vectorised rows take GEMV_ROWS rows of one batch per workgroup where they
        // can (whole output words, so 16-bit results are stored directly).
        let multi = !cols && vec4 && rows_i % GEMV_ROWS == 0;
        // Partial sums (or the raw sums of 16-bit rows) go through f32 scratch.
        let via_scratch = cols || narrow && !multi;
        let flags = (c.is_some() as u32) << 2 | (via_scratch as u32) << 3 | (multi as u32) << 4;
        let mut params = vec![
            rows_i as u32,
            k as u32,
            rows as u32,
            bshape.len() as u32,
            mat.offset as u32,
            i32_bits(si),
            i32_bits(sk),
            vec.offset as u32,
            i32_bits(vk),
            c.map_or(0, |c| c.offset as u32),
            i32_bits(ci),
            (alpha as f32).to_bits(),
            (beta as f32).to_bits(),
            flags,
            chunks as u32,
            kc as u32,
        ];
        params.extend(bshape.iter().map(|&x| x as u32));
        for s in &bst {
            params.extend(s.iter().map(|&x| i32_bits(x)));
        }
        let scratch = if via_scratch {
            Some(self.scratch(0, chunks * rows * 4)?)
        } else {
            None
        };
        let first_out = scratch
            .as_ref()
            .map_or_else(|| out.binding(), Binding::from);
        let mut inputs = vec![d, d];
        let mut buffers = vec![first_out.clone(), mat.binding(), vec.binding()];
        if let Some(c) = c {
            inputs.push(d);
            buffers.push(c.binding());
        }
        let (variant, groups) = if cols_vec {
            (Variant::ColsVec, col_items.div_ceil(wg) * chunks)
        } else if cols {
            (Variant::Cols, rows.div_ceil(wg) * chunks)
        } else if multi {
            (Variant::RowsVec, rows / GEMV_ROWS as u64)
        } else if vec4 {
            (Variant::RowsVec, rows)
        } else {
            (Variant::Rows, rows)
        };
        let odt = if via_scratch { DType::F32 } else { out.dtype };
        let spec = self.spec(&GEMV, "gemv", inputs, odt, variant, 0);
        self.record(b, &spec, buffers, params.clone(), groups)?;
        if let Some(s) = scratch {
            let mut inputs = vec![DType::F32];
            let mut buffers = vec![out.binding(), s.into()];
            if let Some(c) = c {
                inputs.push(d);
                buffers.push(c.binding());
            }
            let spec = self.spec(&GEMV, "gemv", inputs, out.dtype, Variant::Finish, 0);
            let words = rows.div_ceil(out.dtype.epw() as u64);
            let groups = words.div_ceil(wg).min(1 << 14);
            self.record(b, &spec, buffers, params, groups)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::f32_tile;

    #[test]
    fn split_k_by_waves() {
        use super::split_k;
        // (M, K, N) -> parts: 96 tiles in 4 parts; a K too short to split; 144 tiles
        // (more than a wave); few tiles as before.
        for (m, k, n, want) in [
            (2048, 3072, 768, Some(4)),
            (2048, 8192, 768, Some(4)),
            (2048, 2304, 768, Some(4)),
            (2048, 768, 768, None),
            (3072, 2048, 768, None),
            (768, 2048, 768, Some(8)),
            (4096, 4096, 4096, None),
        ] {
            assert_eq!(split_k(2, m, k, n), want, "{m} x {k} x {n}");
        }
    }

    #[test]
    fn f32_tile_fills_waves() {
        // (M, N, batch) -> tile, the shapes of run 108.
        for (m, n, batch, want) in [
            (4096, 4096, 1, 2), // 1024 tiles: 8 waves, 97 % full
            (2048, 2048, 1, 2), // 256: 2 waves, 97 %
            (2048, 768, 1, 2),  // 96: one wave, 73 %
            (1024, 1024, 1, 1), // 64: one wave, 48 %
            (3072, 768, 1, 1),  // 144: 2 waves, 55 %
            (2048, 2304, 1, 1), // 288: 3 waves, 73 %
            (768, 768, 4, 1),   // a split K: 144
            (100, 4096, 8, 1),  // narrower than a tile
        ] {
            assert_eq!(f32_tile(m, n, 768, batch), want, "{m} x {n} x {batch}");
        }
        // Attention's scores (K = 64): 384 tiles, but four K steps.
        for (k, want) in [(64, 1), (128, 2)] {
            assert_eq!(f32_tile(256, 256, k, 96), want, "K = {k}");
        }
    }
}
