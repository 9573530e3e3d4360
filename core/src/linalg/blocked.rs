//! The GPU path of Cholesky, triangular solves, LU (solves, inverses,
//! determinants) and QR (f32, and f64 where the adapter has it): blocked
//! algorithms whose diagonal blocks and LU panels ([`LinalgBlock::side`]: 64 in
//! f32, 32 in f64) go to the kernel library's kernels ([`Block`], one
//! workgroup per matrix) and whose updates are matrix products, so every matrix
//! of a batch factors in one pass of a few dispatches per block column; QR of
//! matrices up to 512×512 is one kernel. Wrapped in a [`crate::CustomFunction`]
//! by the caller, so derivatives keep [`super::prim::Decomp`]'s rules.

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
        let m = x.layout.shape[x.layout.shape.len() - 2];
        let span = x.layout.offset..x.layout.offset + x.layout.numel();
        let a: Vec<f64> = match x.dtype {
            DType::F64 => x.buffer.as_slice::<f64>()[span].to_vec(),
            _ => x.buffer.as_slice::<f32>()[span]
                .iter()
                .map(|&v| v as f64)
                .collect(),
        };
        let per: usize = self.block.out_shape(m, n).iter().product();
        let count: usize = x.layout.shape[..x.layout.shape.len() - 2].iter().product();
        let mut o = vec![0.0f64; count * per];
        if m * n > 0 && per > 0 {
            self.reference(&a, m, n, per, &mut o);
        }
        match x.dtype {
            DType::F64 => out.buffer.as_mut_slice::<f64>()[..o.len()].copy_from_slice(&o),
            _ => {
                let dst = out.buffer.as_mut_slice::<f32>();
                for (d, v) in dst.iter_mut().zip(&o) {
                    *d = *v as f32;
                }
            }
        }
        Ok(())
    }
}

impl Block {
    /// The kernel's results for the row-major `m × n` matrices of `a`, in f64,
    /// `per` elements each.
    fn reference(&self, a: &[f64], m: usize, n: usize, per: usize, o: &mut [f64]) {
        match self.block {
            LinalgBlock::LuPanel => {
                for (src, dst) in a.chunks(m * n).zip(o.chunks_mut(per)) {
                    lu_panel_reference(src, m, n, dst);
                }
                return;
            }
            LinalgBlock::Qr => {
                for (src, dst) in a.chunks(m * n).zip(o.chunks_mut(per)) {
                    qr_reference(src, m, n, dst);
                }
                return;
            }
            _ => {}
        }
        if self.block == LinalgBlock::Lu {
            for (src, dst) in a.chunks(n * n).zip(o.chunks_mut(n * (n + 1))) {
                lu_reference(src, n, dst);
            }
            return;
        }
        for (src, dst) in a.chunks(n * n).zip(o.chunks_mut(n * n)) {
            let at = |i: usize, j: usize| src[i * n + j];
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
                LinalgBlock::Lu | LinalgBlock::LuPanel | LinalgBlock::Qr => {
                    unreachable!("handled above")
                }
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
            dst.copy_from_slice(&l);
        }
    }
}

/// LAPACK's getf2 on a row-major m×n `a` in place (the first largest pivot; a
/// zero pivot leaves its zero column as it is): r (`A[r] = L U`) and the number
/// of row swaps. The LU kernels' reference.
fn getf2(a: &mut [f64], m: usize, n: usize) -> (Vec<usize>, usize) {
    let mut r: Vec<usize> = (0..m).collect();
    let mut swaps = 0;
    for k in 0..m.min(n) {
        let mut p = k;
        for i in k + 1..m {
            if a[i * n + k].abs() > a[p * n + k].abs() {
                p = i;
            }
        }
        if p != k {
            for j in 0..n {
                a.swap(k * n + j, p * n + j);
            }
            r.swap(k, p);
            swaps += 1;
        }
        if a[k * n + k] != 0.0 {
            for i in k + 1..m {
                a[i * n + k] /= a[k * n + k];
            }
        }
        for i in k + 1..m {
            for j in k + 1..n {
                a[i * n + j] -= a[i * n + k] * a[k * n + j];
            }
        }
    }
    (r, swaps)
}

/// The block kernel's LU of one row-major n×n matrix into rows of n + 1: LU's
/// row, then r_i.
fn lu_reference(src: &[f64], n: usize, dst: &mut [f64]) {
    let mut a = src.to_vec();
    let (r, _) = getf2(&mut a, n, n);
    for i in 0..n {
        for j in 0..n {
            dst[i * (n + 1) + j] = a[i * n + j];
        }
        dst[i * (n + 1) + n] = r[i] as f64;
    }
}

/// The panel kernel's LU of a tall m×n panel into `(m + 1) × (n + 1)`: packed
/// rows then r_i, and a last row holding the number of row swaps.
fn lu_panel_reference(src: &[f64], m: usize, n: usize, dst: &mut [f64]) {
    let mut a = src.to_vec();
    let (r, swaps) = getf2(&mut a, m, n);
    let w = n + 1;
    for i in 0..m {
        for j in 0..n {
            dst[i * w + j] = a[i * n + j];
        }
        dst[i * w + n] = r[i] as f64;
    }
    dst[m * w..].fill(0.0);
    dst[m * w] = swaps as f64;
}

/// The kernel's Householder QR (LAPACK's geqr2 and org2r, in f64): Q (m × k)
/// then R (k × n), flat.
fn qr_reference(src: &[f64], m: usize, n: usize, dst: &mut [f64]) {
    let k = m.min(n);
    let mut a = src.to_vec();
    let mut taus = vec![0.0f64; k];
    // H = I - tau v vᵀ (v from row j, v_0 = 1) on columns c0..c1 of `q` (stride st).
    let apply = |q: &mut [f64], st: usize, j: usize, c0: usize, c1: usize, v: &[f64], tau: f64| {
        for c in c0..c1 {
            let d: f64 = (j..m).map(|i| v[i - j] * q[i * st + c]).sum::<f64>() * tau;
            for i in j..m {
                q[i * st + c] -= v[i - j] * d;
            }
        }
    };
    for j in 0..k {
        let alpha = a[j * n + j];
        let xnorm = (j + 1..m).map(|i| a[i * n + j].powi(2)).sum::<f64>().sqrt();
        let mut v = vec![1.0; m - j];
        if xnorm > 0.0 {
            let beta = if alpha >= 0.0 { -1.0 } else { 1.0 } * alpha.hypot(xnorm);
            taus[j] = (beta - alpha) / beta;
            for i in j + 1..m {
                a[i * n + j] /= alpha - beta;
                v[i - j] = a[i * n + j];
            }
            a[j * n + j] = beta;
        }
        apply(&mut a, n, j, j + 1, n, &v, taus[j]);
    }
    let (q, r) = dst.split_at_mut(m * k);
    for i in 0..k {
        for c in 0..n {
            r[i * n + c] = if c >= i { a[i * n + c] } else { 0.0 };
        }
    }
    let mut qm: Vec<f64> = (0..m * k).map(|e| a[(e / k) * n + e % k]).collect();
    for i in (0..k).rev() {
        let mut v = vec![1.0; m - i];
        for rr in i + 1..m {
            v[rr - i] = qm[rr * k + i];
        }
        apply(&mut qm, k, i, i + 1, k, &v, taus[i]);
        for rr in i + 1..m {
            qm[rr * k + i] *= -taus[i];
        }
        for rr in 0..i {
            qm[rr * k + i] = 0.0;
        }
        qm[i * k + i] = 1.0 - taus[i];
    }
    q.copy_from_slice(&qm);
}

fn block(b: LinalgBlock, x: &Array) -> Result<Array> {
    let nd = x.ndim();
    let mut shape = x.shape()[..nd - 2].to_vec();
    shape.extend(b.out_shape(x.shape()[nd - 2], x.shape()[nd - 1]));
    crate::custom(
        Arc::new(Block { block: b }),
        &[o::contiguous(x)?],
        &shape,
        x.dtype(),
    )
}

/// `x` with `a x = rhs` for square `a`: LU (the block kernel up to
/// [`LinalgBlock::side`], else [`lu`]), the right side's rows permuted, then the
/// two triangular solves.
pub(crate) fn solve(a: &Array, rhs: &Array) -> Result<Array> {
    let n = a.shape()[a.ndim() - 1];
    let (packed, r) = if n <= LinalgBlock::side(a.dtype()) {
        let lu = block(LinalgBlock::Lu, a)?;
        let r = o::astype(&part(&lu, (0, n), (n, n + 1))?, DType::I32)?;
        (part(&lu, (0, n), (0, n))?, r)
    } else {
        let (lu, r, _) = lu(a)?;
        (lu, r)
    };
    let pb = o::take_along_axis(rhs, &o::broadcast_to(&r, rhs.shape())?, Some(-2))?;
    let y = solve_lower(&unit_lower(&packed)?, &pb)?;
    solve_triangular(&packed, &y, true)
}

/// The unit lower-triangular L of a packed LU (its strict lower part and ones).
fn unit_lower(packed: &Array) -> Result<Array> {
    let n = packed.shape()[packed.ndim() - 1];
    let eye = crate::with_device(packed.device(), || o::eye(n, packed.dtype()))?;
    o::add(&o::tril(packed, -1)?, &eye)
}

/// LU with partial pivoting of `a` `[..., n, n]` (LAPACK's getrf): the packed L
/// and U, r (`A[r] = L U`, i32 `[..., n, 1]`) and the number of row swaps (`a`'s
/// dtype, `[..., 1, 1]`). Right-looking by panels of [`LinalgBlock::side`] columns: each panel's LU is a
/// kernel (pivots searched down the whole panel), its row order is applied to
/// the rest of those rows, then `U12 = L11⁻¹ A12` and `A22 - L21 U12` by products.
pub(crate) fn lu(a: &Array) -> Result<(Array, Array, Array)> {
    let nd = a.ndim();
    let n = a.shape()[nd - 1];
    let mut col = a.shape()[..nd - 2].to_vec();
    col.extend([n, 1]);
    if n == 0 {
        let mut one = col.clone();
        one[nd - 2] = 1;
        let zeros = |s: &[usize], dt| crate::with_device(a.device(), || o::zeros(s, dt));
        return Ok((a.clone(), zeros(&col, DType::I32)?, zeros(&one, a.dtype())?));
    }
    let r0 = crate::with_device(a.device(), || o::arange(0.0, n as f64, 1.0, DType::I32))?;
    let mut r = o::broadcast_to(&o::reshape(&r0, &[n as isize, 1])?, &col)?;
    // The trailing matrix and the finished columns of L on its rows, both with
    // their rows in the order the pivots so far gave them.
    let mut t = a.clone();
    let mut left: Option<Array> = None;
    let mut rows = Vec::new();
    let mut swaps = Vec::new();
    let mut k = 0;
    while k < n {
        let (w, m) = (LinalgBlock::side(a.dtype()).min(n - k), n - k);
        let pan = block(LinalgBlock::LuPanel, &part(&t, (0, m), (0, w))?)?;
        let pl = part(&pan, (0, m), (0, w))?;
        let p = o::astype(&part(&pan, (0, m), (w, w + 1))?, DType::I32)?;
        swaps.push(part(&pan, (m, m + 1), (0, 1))?);
        let reorder = |x: &Array| -> Result<Array> {
            o::take_along_axis(x, &o::broadcast_to(&p, x.shape())?, Some(-2))
        };
        r = if k == 0 {
            reorder(&r)?
        } else {
            o::concatenate(
                &[
                    &part(&r, (0, k), (0, 1))?,
                    &reorder(&part(&r, (k, n), (0, 1))?)?,
                ],
                -2,
            )?
        };
        let lp = left.as_ref().map(reorder).transpose()?;
        let mut row = Vec::new();
        if let Some(l) = &lp {
            row.push(part(l, (0, w), (0, k))?);
        }
        row.push(part(&pl, (0, w), (0, w))?);
        if m > w {
            let rest = reorder(&part(&t, (0, m), (w, m))?)?;
            let l11 = unit_lower(&part(&pl, (0, w), (0, w))?)?;
            let u12 = o::matmul(
                &block(LinalgBlock::TriInv, &l11)?,
                &part(&rest, (0, w), (0, m - w))?,
            )?;
            let l21 = part(&pl, (w, m), (0, w))?;
            t = o::addmm(&part(&rest, (w, m), (0, m - w))?, &l21, &u12, -1.0, 1.0)?;
            row.push(u12);
            left = Some(match &lp {
                Some(l) => o::concatenate(&[&part(l, (w, m), (0, k))?, &l21], -1)?,
                None => l21,
            });
        }
        let refs: Vec<&Array> = row.iter().collect();
        rows.push(o::concatenate(&refs, -1)?);
        k += w;
    }
    let refs: Vec<&Array> = rows.iter().collect();
    let lu = o::concatenate(&refs, -2)?;
    let refs: Vec<&Array> = swaps.iter().collect();
    let s = o::sum(&o::concatenate(&refs, -1)?, Some(&[-1]), true)?;
    Ok((lu, r, s))
}

/// Householder QR of `a` `[..., m, n]` (m, n ≤ [`LinalgBlock::QR_MAX`]): Q and
/// R flat, one kernel.
pub(crate) fn qr(a: &Array) -> Result<Array> {
    block(LinalgBlock::Qr, a)
}

/// The block side of Cholesky and the triangular solves of `n × n` matrices: up
/// to 64, two 32-wide blocks and a product beat one 64-wide block kernel (f32
/// Cholesky of 4096 × 64² 1.29 -> 0.98 ms, run 189); larger matrices keep the
/// widest block (at 32 the 512² cases were 10-30 % slower).
fn block_side(dtype: DType, n: usize) -> usize {
    const SMALL: usize = 32;
    if n <= 2 * SMALL {
        SMALL.min(LinalgBlock::side(dtype))
    } else {
        LinalgBlock::side(dtype)
    }
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

/// Blocked right-looking Cholesky of `a` `[..., n, n]` (lower triangle read):
/// each block column is its diagonal block's factor over `L21 = A21 L11⁻ᵀ`, and
/// the trailing matrix `A22 - L21 L21ᵀ` factors the same way; the columns are
/// joined once at the end (joining at every level copied the trailing matrices
/// again and again: 58 % of the GPU time at 512², run 91).
pub(crate) fn cholesky(a: &Array) -> Result<Array> {
    let n = a.shape()[a.ndim() - 1];
    let b = block_side(a.dtype(), n);
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
            pieces.push(crate::with_device(a.device(), || o::zeros(&zs, a.dtype()))?);
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

/// `x` with `l x = rhs` for lower-triangular `l` (its lower triangle read),
/// by blocks: each diagonal block's inverse times its rows, the rows below
/// updated by a product.
fn solve_lower(l: &Array, rhs: &Array) -> Result<Array> {
    let n = l.shape()[l.ndim() - 1];
    let k = rhs.shape()[rhs.ndim() - 1];
    let b = block_side(l.dtype(), n);
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

/// Whether `x` may take the GPU path (the caller picks the ops): f32 or f64 (an
/// f64 array on a GPU means its adapter computes f64) on a WebGPU or Metal device,
/// unless `WMX_LINALG_CPU=1`.
pub(crate) fn takes(x: &Array) -> bool {
    matches!(x.dtype(), DType::F32 | DType::F64)
        && x.device().kind() != crate::DeviceKind::Cpu
        && !forced_cpu()
}

/// `WMX_LINALG_CPU=1` sends every decomposition to the CPU (for comparisons).
fn forced_cpu() -> bool {
    static FORCED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| std::env::var("WMX_LINALG_CPU").as_deref() == Ok("1"))
}
