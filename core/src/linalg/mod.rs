//! Linear algebra, numpy's `np.linalg` (and scipy's triangular and Cholesky
//! solves): decompositions, solves, inverses, determinants, norms.
//!
//! - **Batched.** Every function takes `[..., m, n]` and works on each matrix of
//!   the leading dimensions; a right side broadcasts its batch against `a`'s.
//! - **Dtypes.** f32 and f64 (other dtypes are an `Err`: cast with `astype`). On
//!   the CPU the decompositions run in f64 with [faer](https://docs.rs/faer) and
//!   round once to the input's dtype, so f32 results are at least as accurate as
//!   numpy's; the GPU kernels compute in the input's dtype.
//! - **Devices.** On a GPU, `cholesky`, `solve_triangular`, `cho_solve`,
//!   `solve`, `inv`, `lu`, `det` and `slogdet` of f32 matrices, and of f64 ones
//!   where the adapter computes f64 (`SHADER_F64`: Vulkan and DX12, not Metal or
//!   browsers), run there: blocked algorithms whose diagonal blocks and LU panels
//!   (64 wide in f32, 32 in f64 and for Cholesky and triangular solves of
//!   matrices up to 64; partial pivoting searched down the whole panel,
//!   LAPACK's getf2) are kernels, one workgroup per matrix ([`Block`]), and whose
//!   updates are matrix products; `qr` of matrices up to 512×512 is one kernel
//!   (Householder reflections, LAPACK's geqr2 and org2r, so R's signs are
//!   LAPACK's and numpy's). The others (`qr` of larger matrices, `svd`, `eigh`)
//!   run on the CPU: an input on a GPU moves to the CPU and the result back,
//!   counted by [`crate::implicit_moves`]; with implicit moves off
//!   ([`crate::set_implicit_moves`]) that is an `Err`. `WMX_LINALG_CPU=1` sends
//!   the GPU's work to the CPU too. The rest (`norm`, `pinv`,
//!   `matrix_power`, `cross`, …) are composites whose other ops run where the
//!   input is.
//! - **Bad input.** A non-square matrix where a square one is needed, or fewer
//!   than two dimensions, is an `Err` when the op is made. A singular matrix for
//!   `solve`, `inv` and `solve_triangular` (an exactly zero pivot, as LAPACK),
//!   and one that is not positive definite for `cholesky`, is an `Err` when the
//!   array is evaluated, naming the matrix of the batch, as numpy's `LinAlgError`
//!   — on the CPU. The GPU kernels cannot stop a batch: there a matrix that is not
//!   positive definite gives NaN in `L` from its failing column on, and a zero
//!   pivot (a singular matrix, a zero on a triangular matrix's diagonal) inf or
//!   NaN in the solution (`lu` keeps a zero pivot's column as LAPACK does, so U
//!   has the zero and `det` is 0).
//!   `det` and `slogdet` of a singular matrix are 0 and (0, -inf).
//! - **Derivatives.** vjp, jvp and vmap of every function. `cholesky` and `eigh`
//!   read the lower triangle (numpy's default) and are differentiated as
//!   functions of the symmetric part `(A + Aᵀ)/2` (PyTorch's and JAX's
//!   convention), so their gradients are symmetric. Gradients of `svd` and
//!   `eigh` are undefined (inf or NaN) at repeated singular values or
//!   eigenvalues, of `svd` with `full_matrices` only for square matrices; those
//!   of `lu`, `det` and `slogdet` need a nonsingular matrix (the triangular
//!   solves inside are an `Err` otherwise).

mod blocked;
mod prim;

use crate::layout::{broadcast_shapes, normalize_axis};
use crate::ops as o;
use crate::{Array, DType, Error, Result};
pub use blocked::{Block, LinalgBlock};
pub use prim::Decomp;
use prim::{Op, apply, mt, unpack};

/// The promoted float dtype of `xs`, f32 or f64.
fn float_of(op: &'static str, xs: &[&Array]) -> Result<DType> {
    let d = xs
        .iter()
        .skip(1)
        .fold(xs[0].dtype(), |d, x| DType::promote(d, x.dtype()));
    match d {
        DType::F32 | DType::F64 => Ok(d),
        _ => Err(Error::invalid(
            op,
            format!("takes f32 or f64 arrays, got {d}: cast with astype"),
        )),
    }
}

/// `a` as a batch of matrices (at least 2-D), square when asked, in `dt`.
fn matrices(op: &'static str, a: &Array, square: bool, dt: DType) -> Result<Array> {
    let s = a.shape();
    if s.len() < 2 {
        return Err(Error::invalid(
            op,
            format!("needs a matrix of at least 2 dimensions, got shape {s:?}"),
        ));
    }
    let (m, n) = (s[s.len() - 2], s[s.len() - 1]);
    if square && m != n {
        return Err(Error::invalid(
            op,
            format!("needs square matrices, got {m}×{n} (shape {s:?})"),
        ));
    }
    o::astype(a, dt)
}

fn mn(a: &Array) -> (usize, usize) {
    let s = a.shape();
    (s[s.len() - 2], s[s.len() - 1])
}

/// `a` square and `b` a right side (`[n]` when 1-D, else `[..., n, k]`), their
/// batches broadcast; returns (a, b as a matrix, whether b was a vector).
fn with_rhs(op: &'static str, a: &Array, b: &Array) -> Result<(Array, Array, bool)> {
    let dt = float_of(op, &[a, b])?;
    let a = matrices(op, a, true, dt)?;
    let n = a.shape()[a.ndim() - 1];
    let vector = b.ndim() == 1;
    let b = if vector {
        o::expand_dims(&o::astype(b, dt)?, -1)?
    } else if b.ndim() >= 2 {
        o::astype(b, dt)?
    } else {
        return Err(Error::invalid(
            op,
            "the right side must have at least 1 dimension",
        ));
    };
    if b.shape()[b.ndim() - 2] != n {
        return Err(Error::invalid(
            op,
            format!(
                "a is {n}×{n} but b has {} rows (shapes {:?} and {:?}; a 1-D b is one vector, \
                 otherwise b is [..., n, k])",
                b.shape()[b.ndim() - 2],
                a.shape(),
                b.shape()
            ),
        ));
    }
    let batch = broadcast_shapes(op, &a.shape()[..a.ndim() - 2], &b.shape()[..b.ndim() - 2])?;
    let full = |x: &Array| -> Result<Array> {
        let mut s = batch.clone();
        s.extend_from_slice(&x.shape()[x.ndim() - 2..]);
        o::broadcast_to(x, &s)
    };
    Ok((full(&a)?, full(&b)?, vector))
}

fn vector_back(x: Array, vector: bool) -> Result<Array> {
    if vector {
        o::squeeze(&x, Some(&[-1]))
    } else {
        Ok(x)
    }
}

/// The Cholesky factor of symmetric positive-definite `a`: lower `L` with
/// `a = L Lᵀ` (`upper`: `U = Lᵀ`, `a = Uᵀ U`). Reads `a`'s lower triangle; a
/// matrix that is not positive definite is an `Err` at evaluation.
pub fn cholesky(a: &Array, upper: bool) -> Result<Array> {
    const OP: &str = "linalg.cholesky";
    let a = matrices(OP, a, true, float_of(OP, &[a])?)?;
    let l = apply(Op::Cholesky, &[a])?;
    if upper { mt(&l) } else { Ok(l) }
}

/// `x` with `a x = b` for triangular `a` (scipy's `solve_triangular`): only
/// `a`'s upper (or lower) triangle is read. `b` is `[n]` or `[..., n, k]`.
pub fn solve_triangular(a: &Array, b: &Array, upper: bool) -> Result<Array> {
    let (a, b, v) = with_rhs("linalg.solve_triangular", a, b)?;
    vector_back(apply(Op::TriSolve { upper }, &[a, b])?, v)
}

/// `x` with `a x = b` given the lower Cholesky factor `l` of `a` (scipy's
/// `cho_solve`).
pub fn cho_solve(l: &Array, b: &Array) -> Result<Array> {
    let (l, b, v) = with_rhs("linalg.cho_solve", l, b)?;
    let y = apply(Op::TriSolve { upper: false }, &[l.clone(), b])?;
    vector_back(apply(Op::TriSolve { upper: true }, &[mt(&l)?, y])?, v)
}

/// `x` with `a x = b` (numpy's `solve`; LU with partial pivoting): `b` is `[n]`
/// (one vector) or `[..., n, k]`.
pub fn solve(a: &Array, b: &Array) -> Result<Array> {
    let (a, b, v) = with_rhs("linalg.solve", a, b)?;
    vector_back(apply(Op::Solve, &[a, b])?, v)
}

/// The inverse of square `a`.
pub fn inv(a: &Array) -> Result<Array> {
    const OP: &str = "linalg.inv";
    apply(Op::Inv, &[matrices(OP, a, true, float_of(OP, &[a])?)?])
}

/// The packed LU of square `a` with its pieces: (LU, p, r, sign).
fn lu_packed(op: &'static str, a: &Array) -> Result<Vec<Array>> {
    let a = matrices(op, a, true, float_of(op, &[a])?)?;
    let n = a.shape()[a.ndim() - 1];
    let y = apply(Op::Lu, &[a])?;
    unpack(Op::Lu, &y, n, n, 0)
}

/// LU with partial pivoting of square `a`, MLX's convention: `(p, l, u)` with
/// `a = l[p] @ u` (`p` u32 row indices, `l` unit lower, `u` upper).
pub fn lu(a: &Array) -> Result<(Array, Array, Array)> {
    let y = lu_packed("linalg.lu", a)?;
    let n = y[0].shape()[y[0].ndim() - 1];
    let eye = crate::with_device(y[0].device(), || o::eye(n, y[0].dtype()))?;
    let l = o::add(&o::tril(&y[0], -1)?, &eye)?;
    let u = o::triu(&y[0], 0)?;
    let p = o::astype(&o::stop_gradient(&y[1])?, DType::U32)?;
    Ok((p, l, u))
}

/// The determinant of square `a` (through LU; 0 for a singular matrix).
pub fn det(a: &Array) -> Result<Array> {
    let y = lu_packed("linalg.det", a)?;
    let d = o::prod(&o::diagonal(&y[0], 0, -2, -1)?, Some(&[-1]), false)?;
    o::multiply(&d, &o::squeeze(&y[3], Some(&[-1]))?)
}

/// numpy's `slogdet`: `(sign, log|det a|)`, without overflow for large matrices;
/// `(0, -inf)` for a singular one.
pub fn slogdet(a: &Array) -> Result<(Array, Array)> {
    let y = lu_packed("linalg.slogdet", a)?;
    let d = o::diagonal(&y[0], 0, -2, -1)?;
    let sign = o::multiply(
        &o::prod(&o::sign(&d)?, Some(&[-1]), false)?,
        &o::squeeze(&y[3], Some(&[-1]))?,
    )?;
    let logabs = o::sum(&o::log(&o::abs(&d)?)?, Some(&[-1]), false)?;
    Ok((o::stop_gradient(&sign)?, logabs))
}

/// Reduced QR of `a` `[..., m, n]`: `q` `[..., m, k]` with orthonormal columns and
/// upper-triangular `r` `[..., k, n]`, `k = min(m, n)` (numpy's `mode="reduced"`;
/// signs as Householder's, which LAPACK's follow too).
pub fn qr(a: &Array) -> Result<(Array, Array)> {
    const OP: &str = "linalg.qr";
    let a = matrices(OP, a, false, float_of(OP, &[a])?)?;
    let (m, n) = mn(&a);
    let y = unpack(Op::Qr, &apply(Op::Qr, &[a])?, m, n, 0)?;
    Ok((y[0].clone(), y[1].clone()))
}

/// The SVD `a = u @ diag(s) @ vt` (numpy's `svd`): `s` `[..., k]` descending,
/// `k = min(m, n)`; `u` `[..., m, k]` and `vt` `[..., k, n]`, or `[..., m, m]` and
/// `[..., n, n]` with `full_matrices`.
pub fn svd(a: &Array, full_matrices: bool) -> Result<(Array, Array, Array)> {
    const OP: &str = "linalg.svd";
    let a = matrices(OP, a, false, float_of(OP, &[a])?)?;
    let (m, n) = mn(&a);
    let op = Op::Svd {
        full: full_matrices,
    };
    let y = unpack(op, &apply(op, &[a])?, m, n, 0)?;
    Ok((y[0].clone(), y[1].clone(), y[2].clone()))
}

/// The singular values of `a`, descending (numpy's `svdvals`).
pub fn svdvals(a: &Array) -> Result<Array> {
    Ok(svd(a, false)?.1)
}

/// Eigenvalues (ascending) and eigenvectors (columns) of symmetric `a`, from its
/// lower triangle (numpy's `eigh`).
pub fn eigh(a: &Array) -> Result<(Array, Array)> {
    const OP: &str = "linalg.eigh";
    let a = matrices(OP, a, true, float_of(OP, &[a])?)?;
    let n = a.shape()[a.ndim() - 1];
    let y = unpack(Op::Eigh, &apply(Op::Eigh, &[a])?, n, n, 0)?;
    Ok((y[0].clone(), y[1].clone()))
}

/// The eigenvalues of symmetric `a`, ascending (numpy's `eigvalsh`).
pub fn eigvalsh(a: &Array) -> Result<Array> {
    Ok(eigh(a)?.0)
}

/// The singular values above `rtol` times the largest, as a mask, with `s` made
/// safe to invert where the mask is false.
fn kept(s: &Array, rtol: Option<f64>, m: usize, n: usize) -> Result<(Array, Array)> {
    let eps = if s.dtype() == DType::F32 {
        f32::EPSILON as f64
    } else {
        f64::EPSILON
    };
    let rtol = rtol.unwrap_or(m.max(n) as f64 * eps);
    let top = o::max(s, Some(&[-1]), true)?;
    let cut = o::multiply(&top, &o::scalar_like(&top, rtol)?)?;
    let keep = o::greater(s, &o::stop_gradient(&cut)?)?;
    let safe = o::where_(&keep, s, &o::ones_like(s)?)?;
    Ok((keep, safe))
}

/// The Moore–Penrose pseudo-inverse of `a` `[..., m, n]` (numpy's `pinv`):
/// singular values at most `rtol` times the largest count as zero; `rtol`
/// defaults to `max(m, n)` times the dtype's epsilon.
pub fn pinv(a: &Array, rtol: Option<f64>) -> Result<Array> {
    const OP: &str = "linalg.pinv";
    Ok(pseudo_inverse(&matrices(OP, a, false, float_of(OP, &[a])?)?, rtol)?.0)
}

/// The pseudo-inverse of matrices `a` with the singular values and the mask of
/// those kept.
fn pseudo_inverse(a: &Array, rtol: Option<f64>) -> Result<(Array, Array, Array)> {
    let (m, n) = mn(a);
    let (u, s, vt) = svd(a, false)?;
    let (keep, safe) = kept(&s, rtol, m, n)?;
    let sinv = o::where_(
        &keep,
        &o::divide(&o::ones_like(&safe)?, &safe)?,
        &o::zeros_like(&s)?,
    )?;
    let p = o::matmul(
        &o::multiply(&mt(&vt)?, &o::expand_dims(&sinv, -2)?)?,
        &mt(&u)?,
    )?;
    Ok((p, s, keep))
}

/// What [`lstsq`] returns.
#[derive(Debug, Clone)]
pub struct Lstsq {
    /// The minimum-norm least-squares solution `[..., n]` or `[..., n, k]`.
    pub solution: Array,
    /// `|a x - b|²` per column of `b` (`[..., k]`, or `[...]` for a vector `b`).
    /// numpy returns these only when `m > n` and `a` has full rank (else an
    /// empty array); here they are always computed.
    pub residuals: Array,
    /// The number of singular values above the cutoff (i32).
    pub rank: Array,
    /// `a`'s singular values, descending.
    pub singular_values: Array,
}

/// The least-squares solution of `a x = b` with the smallest norm (numpy's
/// `lstsq`, through the SVD): `a` `[..., m, n]`, `b` `[..., m]` or `[..., m, k]`;
/// `rcond` as [`pinv`]'s `rtol`.
pub fn lstsq(a: &Array, b: &Array, rcond: Option<f64>) -> Result<Lstsq> {
    const OP: &str = "linalg.lstsq";
    let dt = float_of(OP, &[a, b])?;
    let a = matrices(OP, a, false, dt)?;
    let (m, _) = mn(&a);
    let vector = b.ndim() == 1;
    let bm = if vector {
        o::expand_dims(&o::astype(b, dt)?, -1)?
    } else {
        o::astype(b, dt)?
    };
    if bm.ndim() < 2 || bm.shape()[bm.ndim() - 2] != m {
        return Err(Error::invalid(
            OP,
            format!(
                "a has {m} rows but b has shape {:?} (b is [m] or [..., m, k])",
                b.shape()
            ),
        ));
    }
    let (p, s, keep) = pseudo_inverse(&a, rcond)?;
    let x = o::matmul(&p, &bm)?;
    let r = o::subtract(&o::matmul(&a, &x)?, &bm)?;
    let residuals = o::sum(&o::multiply(&r, &r)?, Some(&[-2]), false)?;
    let rank = o::sum(&o::astype(&keep, DType::I32)?, Some(&[-1]), false)?;
    Ok(Lstsq {
        solution: vector_back(x, vector)?,
        residuals: if vector {
            o::squeeze(&residuals, Some(&[-1]))?
        } else {
            residuals
        },
        rank,
        singular_values: s,
    })
}

/// `a` to the integer power `n` (numpy's `matrix_power`): repeated squaring;
/// `n = 0` gives the identity, `n < 0` powers of [`inv`]`(a)`.
pub fn matrix_power(a: &Array, n: i64) -> Result<Array> {
    const OP: &str = "linalg.matrix_power";
    let s = a.shape();
    if s.len() < 2 || s[s.len() - 1] != s[s.len() - 2] {
        return Err(Error::invalid(
            OP,
            format!("needs square matrices of at least 2 dimensions, got shape {s:?}"),
        ));
    }
    let d = s[s.len() - 1];
    if n == 0 {
        let eye = crate::with_device(a.device(), || o::eye(d, a.dtype()))?;
        return o::broadcast_to(&eye, s);
    }
    let mut base = if n < 0 { inv(a)? } else { a.clone() };
    let mut e = n.unsigned_abs();
    let mut acc: Option<Array> = None;
    while e > 0 {
        if e & 1 == 1 {
            acc = Some(match acc {
                None => base.clone(),
                Some(x) => o::matmul(&x, &base)?,
            });
        }
        e >>= 1;
        if e > 0 {
            base = o::matmul(&base, &base)?;
        }
    }
    Ok(acc.unwrap())
}

/// The cross product of 3-vectors along `axis` of `a` and `b` (numpy's `cross`
/// with `axis`; the other axes broadcast).
pub fn cross(a: &Array, b: &Array, axis: isize) -> Result<Array> {
    const OP: &str = "linalg.cross";
    for x in [a, b] {
        let ax = normalize_axis(OP, axis, x.ndim())?;
        if x.shape()[ax] != 3 {
            return Err(Error::invalid(
                OP,
                format!(
                    "needs vectors of 3 along axis {axis}, got shapes {:?} and {:?}",
                    a.shape(),
                    b.shape()
                ),
            ));
        }
    }
    let a = o::moveaxis(a, axis, -1)?;
    let b = o::moveaxis(b, axis, -1)?;
    let c = |x: &Array, i: isize| -> Result<Array> {
        let mut s = vec![o::Slice::ALL; x.ndim() - 1];
        s.push(o::Slice::range(i, i + 1));
        o::slice(x, &s)
    };
    let term = |i: isize, j: isize| -> Result<Array> {
        o::subtract(
            &o::multiply(&c(&a, i)?, &c(&b, j)?)?,
            &o::multiply(&c(&a, j)?, &c(&b, i)?)?,
        )
    };
    let out = o::concatenate(&[&term(1, 2)?, &term(2, 0)?, &term(0, 1)?], -1)?;
    let ax = normalize_axis(OP, axis, out.ndim())?;
    o::moveaxis(&out, -1, ax as isize)
}

/// The `ord` of [`norm`], numpy's.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum NormOrd {
    /// The 2-norm of vectors, Frobenius of matrices (numpy's `ord=None`).
    #[default]
    Default,
    /// Frobenius (matrices).
    Fro,
    /// Nuclear: the sum of singular values (matrices).
    Nuc,
    /// Vectors: max |x|; matrices: the largest row sum of |x|.
    Inf,
    /// Vectors: min |x|; matrices: the smallest row sum of |x|.
    NegInf,
    /// Vectors: `(Σ|x|^p)^(1/p)` (`p = 0` counts nonzeros); matrices: `1`/`-1` the
    /// largest/smallest column sum of |x|, `2`/`-2` the largest/smallest
    /// singular value.
    P(f64),
}

/// numpy's `linalg.norm`: of vectors along one axis, of matrices over two, or
/// with `axes = None` of the whole array flattened (`NormOrd::Default`) or of
/// the matrix (2-D `x`, other orders).
pub fn norm(x: &Array, ord: NormOrd, axes: Option<&[isize]>, keepdims: bool) -> Result<Array> {
    const OP: &str = "linalg.norm";
    let dt = match x.dtype() {
        d if d.is_float() => d,
        _ => DType::F32,
    };
    let x = o::astype(x, dt)?;
    let all: Vec<isize> = (0..x.ndim() as isize).collect();
    let axes: Vec<isize> = match axes {
        Some(a) => a.to_vec(),
        None if ord == NormOrd::Default => all,
        None if x.ndim() == 1 || x.ndim() == 2 => all,
        None => {
            return Err(Error::invalid(
                OP,
                format!(
                    "{ord:?} of a {}-D array needs its axes (a vector axis or two matrix axes)",
                    x.ndim()
                ),
            ));
        }
    };
    let ax: Vec<usize> = axes
        .iter()
        .map(|&a| normalize_axis(OP, a, x.ndim()))
        .collect::<Result<_>>()?;
    let absx = o::abs(&x)?;
    let sq =
        || -> Result<Array> { o::sqrt(&o::sum(&o::multiply(&x, &x)?, Some(&axes), keepdims)?) };
    let matrix = ax.len() == 2 && ord != NormOrd::Default;
    if ax.len() == 2 && ax[0] == ax[1] {
        return Err(Error::invalid(OP, format!("axes {axes:?} repeat an axis")));
    }
    if !matrix {
        if ord != NormOrd::Default && ax.len() != 1 {
            return Err(Error::invalid(
                OP,
                format!("{ord:?} is a vector norm: give one axis, got {axes:?}"),
            ));
        }
        return match ord {
            NormOrd::Default | NormOrd::P(2.0) => sq(),
            NormOrd::Inf => o::max(&absx, Some(&axes), keepdims),
            NormOrd::NegInf => o::min(&absx, Some(&axes), keepdims),
            NormOrd::P(0.0) => o::sum(
                &o::astype(&o::not_equal(&x, &o::zeros_like(&x)?)?, dt)?,
                Some(&axes),
                keepdims,
            ),
            NormOrd::P(1.0) => o::sum(&absx, Some(&axes), keepdims),
            NormOrd::P(p) if p.is_finite() => {
                let s = o::sum(
                    &o::power(&absx, &o::scalar_like(&absx, p)?)?,
                    Some(&axes),
                    keepdims,
                )?;
                o::power(&s, &o::scalar_like(&s, 1.0 / p)?)
            }
            _ => Err(Error::invalid(
                OP,
                format!("{ord:?} is not a vector norm (Fro and Nuc are matrix norms)"),
            )),
        };
    }
    let (r, c) = (axes[0], axes[1]);
    // Axis numbers after summing one of them away.
    let after = |gone: usize, keep: usize| -> isize {
        if keepdims || keep < gone {
            keep as isize
        } else {
            keep as isize - 1
        }
    };
    let out = match ord {
        NormOrd::Fro => return sq(),
        NormOrd::P(1.0) | NormOrd::P(-1.0) => {
            let cols = o::sum(&absx, Some(&[r]), keepdims)?;
            let a = [after(ax[0], ax[1])];
            if ord == NormOrd::P(1.0) {
                o::max(&cols, Some(&a), keepdims)?
            } else {
                o::min(&cols, Some(&a), keepdims)?
            }
        }
        NormOrd::Inf | NormOrd::NegInf => {
            let rows = o::sum(&absx, Some(&[c]), keepdims)?;
            let a = [after(ax[1], ax[0])];
            if ord == NormOrd::Inf {
                o::max(&rows, Some(&a), keepdims)?
            } else {
                o::min(&rows, Some(&a), keepdims)?
            }
        }
        NormOrd::P(2.0) | NormOrd::P(-2.0) | NormOrd::Nuc => {
            let mut perm: Vec<isize> = (0..x.ndim())
                .filter(|i| !ax.contains(i))
                .map(|i| i as isize)
                .collect();
            perm.extend([ax[0] as isize, ax[1] as isize]);
            let m = o::transpose(&x, Some(&perm))?;
            let s = svdvals(&m)?;
            let v = match ord {
                NormOrd::P(2.0) => o::max(&s, Some(&[-1]), false)?,
                NormOrd::P(_) => o::min(&s, Some(&[-1]), false)?,
                _ => o::sum(&s, Some(&[-1]), false)?,
            };
            if keepdims {
                let mut shape = x.shape().to_vec();
                shape[ax[0]] = 1;
                shape[ax[1]] = 1;
                o::reshape(&v, &shape.iter().map(|&d| d as isize).collect::<Vec<_>>())?
            } else {
                v
            }
        }
        _ => {
            return Err(Error::invalid(
                OP,
                format!("{ord:?} is not a matrix norm (Fro, Nuc, ±1, ±2, ±Inf are)"),
            ));
        }
    };
    Ok(out)
}
