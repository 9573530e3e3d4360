//! The GPU path of Cholesky, triangular solves and (n ≤ 64) LU solves and
//! inverses (f32): blocked algorithms whose diagonal blocks (n ≤ 64) go to the
//! kernel library's block kernels
//! ([`Block`], one workgroup per matrix) and whose updates are matrix products,
//! so every matrix of a batch factors in one pass of a few dispatches per block
//! column. Wrapped in a [`crate::CustomFunction`] by the caller, so derivatives
//! keep [`super::prim::Decomp`]'s rules.

use crate::cpu::CpuBuffer;
use crate::ops as o;
use crate::{Array, CpuOutput, CustomPrimitive, DType, Result, View};
use std::sync::Arc;
pub use wmx_spec::LinalgBlock;

/// A block kernel over a batch of small matrices (its CPU code is the reference
/// the conformance suite compares the GPU's with).
#[derive(Debug, PartialEq)]
pub struct Block {
    /// Which factorisation.
    pub block: LinalgBlock,
}

impl CustomPrimitive for Block {
    fn name(&self) -> &str {
        self.block.name()
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<Self>()
            .is_some_and(|o| o == self)
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let x = &inputs[0];
        let n = *x.layout.shape.last().unwrap_or(&0);
        let a = &x.buffer.as_slice::<f32>()[x.layout.offset..x.layout.offset + x.layout.numel()];
        let o = out.buffer.as_mut_slice::<f32>();
        if self.block == LinalgBlock::Lu {
            for (src, dst) in a.chunks(n * n).zip(o.chunks_mut(n * (n + 1))) {
                lu_reference(src, n, dst);
            }
            return Ok(());
        }
        for (src, dst) in a.chunks(n * n).zip(o.chunks_mut(n * n)) {
            let at = |i: usize, j: usize| src[i * n + j] as f64;
            let mut l = vec![0.0f64; n * n];
            match self.block {
                LinalgBlock::Cholesky => {
                    for j in 0..n {
                        let d = at(j, j) - (0..j).map(|k| l[j * n + k] * l[j * n + k]).sum::<f64>();
                        let d = if d > 0.0 { d.sqrt() } else { f64::NAN };
                        l[j * n + j] = d;
                        for i in j + 1..n {
                            let s: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
                            l[i * n + j] = (at(i, j) - s) / d;
                        }
                    }
                }
                LinalgBlock::Lu => unreachable!("handled above"),
                LinalgBlock::TriInv => {
                    for i in 0..n {
                        l[i * n + i] = 1.0 / at(i, i);
                        for j in 0..i {
                            let s: f64 = (j..i).map(|k| at(i, k) * l[k * n + j]).sum();
                            l[i * n + j] = -s / at(i, i);
                        }
                    }
                }
            }
            for (d, v) in dst.iter_mut().zip(&l) {
                *d = *v as f32;
            }
        }
        Ok(())
    }
}

/// The block kernel's LU (partial pivoting, the first largest pivot) of one
/// row-major n×n matrix into rows of n + 1: LU's row, then r_i.
fn lu_reference(src: &[f32], n: usize, dst: &mut [f32]) {
    let mut a: Vec<f64> = src.iter().map(|&x| x as f64).collect();
    let mut r: Vec<usize> = (0..n).collect();
    for k in 0..n {
        let mut p = k;
        for i in k + 1..n {
            if a[i * n + k].abs() > a[p * n + k].abs() {
                p = i;
            }
        }
        if p != k {
            for j in 0..n {
                a.swap(k * n + j, p * n + j);
            }
            r.swap(k, p);
        }
        for i in k + 1..n {
            a[i * n + k] /= a[k * n + k];
            for j in k + 1..n {
                a[i * n + j] -= a[i * n + k] * a[k * n + j];
            }
        }
    }
    for i in 0..n {
        for j in 0..n {
            dst[i * (n + 1) + j] = a[i * n + j] as f32;
        }
        dst[i * (n + 1) + n] = r[i] as f32;
    }
}

fn block(b: LinalgBlock, x: &Array) -> Result<Array> {
    let mut shape = x.shape().to_vec();
    let n = *shape.last().unwrap_or(&0);
    *shape.last_mut().unwrap() = b.out_cols(n);
    crate::custom(
        Arc::new(Block { block: b }),
        &[o::contiguous(x)?],
        &shape,
        DType::F32,
    )
}

/// `x` with `a x = rhs` for square f32 `a` of side n ≤ 64: the block kernel's LU,
/// the right side's rows permuted, then the two triangular solves.
pub(crate) fn solve_small(a: &Array, rhs: &Array) -> Result<Array> {
    let n = a.shape()[a.ndim() - 1];
    let k = rhs.shape()[rhs.ndim() - 1];
    let lu = block(LinalgBlock::Lu, a)?;
    let packed = part(&lu, (0, n), (0, n))?;
    let mut rs: Vec<isize> = lu.shape()[..lu.ndim() - 1]
        .iter()
        .map(|&d| d as isize)
        .collect();
    rs.push(1);
    let r = o::reshape(
        &o::astype(&part(&lu, (0, n), (n, n + 1))?, DType::I32)?,
        &rs,
    )?;
    let mut full = rhs.shape().to_vec();
    *full.last_mut().unwrap() = k;
    let pb = o::take_along_axis(rhs, &o::broadcast_to(&r, &full)?, Some(-2))?;
    let eye = crate::with_device(a.device(), || o::eye(n, DType::F32))?;
    let l = o::add(&o::tril(&packed, -1)?, &eye)?;
    let y = solve_lower(&l, &pb)?;
    solve_triangular(&packed, &y, true)
}

/// `x[..., r0..r1, c0..c1]`.
fn part(x: &Array, r: (usize, usize), c: (usize, usize)) -> Result<Array> {
    let mut s = vec![o::Slice::ALL; x.ndim() - 2];
    s.push(o::Slice::range(r.0 as isize, r.1 as isize));
    s.push(o::Slice::range(c.0 as isize, c.1 as isize));
    o::slice(x, &s)
}

fn mt(x: &Array) -> Result<Array> {
    o::swapaxes(x, -1, -2)
}

/// Blocked right-looking Cholesky of f32 `a` `[..., n, n]` (lower triangle read):
/// each block column is its diagonal block's factor over `L21 = A21 L11⁻ᵀ`, and
/// the trailing matrix `A22 - L21 L21ᵀ` factors the same way; the columns are
/// joined once at the end (joining at every level copied the trailing matrices
/// again and again: 58 % of the GPU time at 512², run 91).
pub(crate) fn cholesky(a: &Array) -> Result<Array> {
    let n = a.shape()[a.ndim() - 1];
    let b = LinalgBlock::MAX;
    if n <= b {
        return block(LinalgBlock::Cholesky, a);
    }
    let mut panels = Vec::new();
    let mut s = a.clone();
    let mut k = 0;
    while k < n {
        let (w, r) = (b.min(n - k), n - k);
        let lkk = block(LinalgBlock::Cholesky, &part(&s, (0, w), (0, w))?)?;
        let mut pieces = Vec::new();
        if k > 0 {
            let mut zs = lkk.shape().to_vec();
            let nd = zs.len();
            zs[nd - 2] = k;
            pieces.push(crate::with_device(a.device(), || {
                o::zeros(&zs, DType::F32)
            })?);
        }
        pieces.push(lkk.clone());
        if r > w {
            let inv = block(LinalgBlock::TriInv, &lkk)?;
            let l21 = o::matmul(&part(&s, (w, r), (0, w))?, &mt(&inv)?)?;
            s = o::addmm(&part(&s, (w, r), (w, r))?, &l21, &mt(&l21)?, -1.0, 1.0)?;
            pieces.push(l21);
        }
        let refs: Vec<&Array> = pieces.iter().collect();
        panels.push(o::concatenate(&refs, -2)?);
        k += w;
    }
    let refs: Vec<&Array> = panels.iter().collect();
    o::concatenate(&refs, -1)
}

/// `x` with `l x = rhs` for lower-triangular f32 `l` (its lower triangle read),
/// by blocks: each diagonal block's inverse times its rows, the rows below
/// updated by a product.
fn solve_lower(l: &Array, rhs: &Array) -> Result<Array> {
    let n = l.shape()[l.ndim() - 1];
    let k = rhs.shape()[rhs.ndim() - 1];
    let b = LinalgBlock::MAX;
    if n <= b {
        return o::matmul(&block(LinalgBlock::TriInv, l)?, rhs);
    }
    let x1 = o::matmul(
        &block(LinalgBlock::TriInv, &part(l, (0, b), (0, b))?)?,
        &part(rhs, (0, b), (0, k))?,
    )?;
    let r2 = o::addmm(
        &part(rhs, (b, n), (0, k))?,
        &part(l, (b, n), (0, b))?,
        &x1,
        -1.0,
        1.0,
    )?;
    let x2 = solve_lower(&part(l, (b, n), (b, n))?, &r2)?;
    o::concatenate(&[&x1, &x2], -2)
}

/// `x` with `a x = rhs`, `a` triangular (only that triangle read). An upper
/// system is the lower one of the matrix with rows and columns reversed.
pub(crate) fn solve_triangular(a: &Array, rhs: &Array, upper: bool) -> Result<Array> {
    if !upper {
        return solve_lower(a, rhs);
    }
    let flip = |x: &Array, axes: usize| -> Result<Array> {
        let mut s = vec![o::Slice::ALL; x.ndim() - axes];
        s.extend(std::iter::repeat_n(o::Slice::reversed(), axes));
        o::slice(x, &s)
    };
    let rows = |x: &Array| -> Result<Array> {
        let mut s = vec![o::Slice::ALL; x.ndim() - 2];
        s.extend([o::Slice::reversed(), o::Slice::ALL]);
        o::slice(x, &s)
    };
    rows(&solve_lower(&flip(a, 2)?, &rows(rhs)?)?)
}

/// Whether `x` may take the GPU path (the caller picks the ops): f32 on a WebGPU
/// or Metal device, unless `WMX_LINALG_CPU=1`.
pub(crate) fn takes(x: &Array) -> bool {
    x.dtype() == DType::F32 && x.device().kind() != crate::DeviceKind::Cpu && !forced_cpu()
}

/// `WMX_LINALG_CPU=1` sends every decomposition to the CPU (for comparisons).
fn forced_cpu() -> bool {
    static FORCED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| std::env::var("WMX_LINALG_CPU").as_deref() == Ok("1"))
}
