//! The decompositions as one custom primitive, [`Decomp`]: its CPU code (faer, in
//! f64 for f32 and f64 inputs) and its transform rules, written with ops.
//!
//! A decomposition with several results (LU, QR, SVD, eigh) has one packed output,
//! `[..., total]`, its results flattened one after another; [`unpack`] takes them
//! apart with views, so their cotangents reach the rules packed the same way.

use crate::cpu::CpuBuffer;
use crate::ops as o;
use crate::{Array, CpuOutput, CustomPrimitive, DType, Device, DeviceKind, Error, Result, View};
use faer::linalg::solvers::{DenseSolveCore, Solve};
use faer::{Mat, MatRef, Par, Side};
use std::sync::Arc;

/// Which decomposition; inputs `[..., m, n]` (and the right side `[..., n, k]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Lower factor of A (the lower triangle read).
    Cholesky,
    /// X with A X = B, A triangular (only that triangle read).
    TriSolve { upper: bool },
    /// X with A X = B.
    Solve,
    /// A⁻¹.
    Inv,
    /// Packed: LU (L's strict lower part and U in one n×n), p (A = L[p] U), r
    /// (A[r] = L U), the permutation's sign.
    Lu,
    /// Packed: Q (m×k), R (k×n), k = min(m, n).
    Qr,
    /// Packed: U, S (k), Vᵀ; U m×k and Vᵀ k×n, or m×m and n×n when `full`.
    Svd { full: bool },
    /// Packed: eigenvalues (ascending), eigenvectors as columns.
    Eigh,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Cholesky => "linalg.cholesky",
            Op::TriSolve { .. } => "linalg.solve_triangular",
            Op::Solve => "linalg.solve",
            Op::Inv => "linalg.inv",
            Op::Lu => "linalg.lu",
            Op::Qr => "linalg.qr",
            Op::Svd { .. } => "linalg.svd",
            Op::Eigh => "linalg.eigh",
        }
    }

    /// The shapes of the results of one m×n matrix (`k` right-side columns).
    fn pieces(self, m: usize, n: usize, k: usize) -> Vec<Vec<usize>> {
        let p = m.min(n);
        match self {
            Op::Cholesky | Op::Inv => vec![vec![m, n]],
            Op::TriSolve { .. } | Op::Solve => vec![vec![n, k]],
            Op::Lu => vec![vec![n, n], vec![n], vec![n], vec![1]],
            Op::Qr => vec![vec![m, p], vec![p, n]],
            Op::Svd { full: false } => vec![vec![m, p], vec![p], vec![p, n]],
            Op::Svd { full: true } => vec![vec![m, m], vec![p], vec![n, n]],
            Op::Eigh => vec![vec![n], vec![n, n]],
        }
    }

    fn packed(self) -> bool {
        matches!(self, Op::Lu | Op::Qr | Op::Svd { .. } | Op::Eigh)
    }
}

/// The primitive: one decomposition over a batch of matrices.
#[derive(Debug, PartialEq)]
pub struct Decomp {
    op: Op,
}

/// (batch, m, n, k) of the inputs.
fn dims(inputs: &[Array]) -> (Vec<usize>, usize, usize, usize) {
    let a = inputs[0].shape();
    let nd = a.len();
    let k = inputs.get(1).map_or(0, |b| b.shape()[b.ndim() - 1]);
    (a[..nd - 2].to_vec(), a[nd - 2], a[nd - 1], k)
}

/// The op's output (packed for several results) for contiguous float inputs of
/// checked shapes with one batch shape. Off the CPU it runs on the CPU (moving the
/// inputs down and the result back, counted as implicit moves) unless implicit
/// moves are off, which is an `Err`.
pub(crate) fn apply(op: Op, inputs: &[Array]) -> Result<Array> {
    let (batch, m, n, k) = dims(inputs);
    let dt = inputs[0].dtype();
    let mut shape = batch.clone();
    if op.packed() {
        shape.push(
            op.pieces(m, n, k)
                .iter()
                .map(|s| s.iter().product::<usize>())
                .sum(),
        );
    } else {
        shape.extend(&op.pieces(m, n, k)[0]);
    }
    let gpu = match op {
        Op::Cholesky | Op::TriSolve { .. } | Op::Solve | Op::Inv | Op::Lu => true,
        Op::Qr => super::blocked::LinalgBlock::Qr.takes(dt, m, n),
        Op::Svd { .. } | Op::Eigh => false,
    };
    if gpu && super::blocked::takes(&inputs[0]) {
        return on_gpu(op, inputs);
    }
    let inputs: Vec<Array> = inputs.iter().map(o::contiguous).collect::<Result<_>>()?;
    let prim = Arc::new(Decomp { op });
    let dev = crate::device::scoped_device().unwrap_or_else(|| inputs[0].device().clone());
    if dev.kind() == DeviceKind::Cpu {
        return crate::custom(prim, &inputs, &shape, dt);
    }
    if !crate::device::implicit_moves_allowed() {
        return Err(Error::invalid(
            op.name(),
            format!(
                "runs on the CPU (no kernel for {} yet) and implicit moves are off: \
                 move the input with to_device(&Device::cpu())",
                dev.name()
            ),
        ));
    }
    let cpu = Device::cpu();
    let y = crate::with_device(&cpu, || crate::custom(prim, &inputs, &shape, dt))?;
    y.to_device(&dev)
}

/// The blocked GPU algorithm of `op`, with [`Decomp`]'s derivatives and batching.
fn on_gpu(op: Op, inputs: &[Array]) -> Result<Array> {
    fn forward(op: Op, x: &[Array]) -> Result<Array> {
        let n = x[0].shape()[x[0].ndim() - 1];
        match op {
            Op::TriSolve { upper } => super::blocked::solve_triangular(&x[0], &x[1], upper),
            Op::Solve => super::blocked::solve(&x[0], &x[1]),
            Op::Inv => {
                let eye = crate::with_device(x[0].device(), || o::eye(n, x[0].dtype()))?;
                super::blocked::solve(&x[0], &o::broadcast_to(&eye, x[0].shape())?)
            }
            Op::Lu => {
                // Packed as the CPU's: LU, p = r⁻¹, r, the permutation's sign.
                let (lu, r, swaps) = super::blocked::lu(&x[0])?;
                let batch = &x[0].shape()[..x[0].ndim() - 2];
                let mut flat: Vec<isize> = batch.iter().map(|&d| d as isize).collect();
                flat.push(-1);
                let r = o::reshape(&r, &flat)?;
                let dt = x[0].dtype();
                let p = o::astype(&o::argsort(&r, Some(-1))?, dt)?;
                let s = o::reshape(&swaps, &flat)?;
                let odd = o::subtract(
                    &s,
                    &o::multiply(
                        &o::floor(&o::multiply(&s, &o::scalar_like(&s, 0.5)?)?)?,
                        &o::scalar_like(&s, 2.0)?,
                    )?,
                )?;
                let sign = o::subtract(
                    &o::scalar_like(&odd, 1.0)?,
                    &o::multiply(&odd, &o::scalar_like(&odd, 2.0)?)?,
                )?;
                pack(&[lu, p, o::astype(&r, dt)?, sign], batch)
            }
            Op::Qr => super::blocked::qr(&x[0]),
            Op::Cholesky => super::blocked::cholesky(&x[0]),
            Op::Svd { .. } | Op::Eigh => Err(Error::invalid(op.name(), "has no GPU path")),
        }
    }
    let rules = Arc::new(Decomp { op });
    let (r1, r2, r3) = (rules.clone(), rules.clone(), rules);
    let f = crate::CustomFunction::new(move |x: &[Array]| Ok(vec![forward(op, x)?]))
        .name(op.name())
        .vjp(move |x, outs, ct| r1.vjp(x, &outs[0], &ct[0]))
        .jvp(move |x, t| {
            let y = forward(op, x)?;
            let dy = match r2.jvp(x, &y, t)? {
                Some(d) => d,
                None => o::zeros_like(&y)?,
            };
            Ok(vec![dy])
        })
        .vmap(move |x, b| Ok(vec![r3.vmap(x, b)?]));
    Ok(f.call(inputs)?.remove(0))
}

/// The results of a packed output `y` (`[..., total]`) as arrays `[..., piece]`.
pub(crate) fn unpack(op: Op, y: &Array, m: usize, n: usize, k: usize) -> Result<Vec<Array>> {
    if !op.packed() {
        return Ok(vec![y.clone()]);
    }
    let batch = &y.shape()[..y.ndim() - 1];
    let mut at = 0usize;
    let mut out = Vec::new();
    for p in op.pieces(m, n, k) {
        let len: usize = p.iter().product();
        let mut s = vec![o::Slice::ALL; batch.len()];
        s.push(o::Slice::range(at as isize, (at + len) as isize));
        let mut shape: Vec<isize> = batch.iter().map(|&d| d as isize).collect();
        shape.extend(p.iter().map(|&d| d as isize));
        out.push(o::reshape(&o::slice(y, &s)?, &shape)?);
        at += len;
    }
    Ok(out)
}

/// Pieces (`[..., piece]` each) packed into `[..., total]`, the inverse of [`unpack`].
fn pack(pieces: &[Array], batch: &[usize]) -> Result<Array> {
    let flat: Vec<Array> = pieces
        .iter()
        .map(|p| {
            let mut s: Vec<isize> = batch.iter().map(|&d| d as isize).collect();
            s.push(-1);
            o::reshape(p, &s)
        })
        .collect::<Result<_>>()?;
    let refs: Vec<&Array> = flat.iter().collect();
    o::concatenate(&refs, -1)
}

// ---------------------------------------------------------------- CPU code

fn push(out: &mut Vec<f64>, m: MatRef<'_, f64>) {
    let (r, c) = (m.nrows(), m.ncols());
    let at = out.len();
    out.resize(at + r * c, 0.0);
    // Columns are contiguous in faer's matrices: read them in order.
    for j in 0..c {
        for (i, &x) in m.col(j).iter().enumerate() {
            out[at + i * c + j] = x;
        }
    }
}

/// A contiguous f32 or f64 input, read one matrix at a time as f64.
enum Src<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl<'a> Src<'a> {
    fn of(v: &View<'a, CpuBuffer>) -> Src<'a> {
        let (at, len) = (v.layout.offset, v.layout.numel());
        match v.dtype {
            DType::F32 => Src::F32(&v.buffer.as_slice::<f32>()[at..at + len]),
            _ => Src::F64(&v.buffer.as_slice::<f64>()[at..at + len]),
        }
    }
    /// Matrix `i` of a batch of row-major r×c matrices.
    fn matrix(&self, i: usize, r: usize, c: usize) -> Mat<f64> {
        let at = i * r * c;
        match self {
            Src::F32(v) => Mat::from_fn(r, c, |p, q| v[at + p * c + q] as f64),
            Src::F64(v) => Mat::from_fn(r, c, |p, q| v[at + p * c + q]),
        }
    }
}

/// A batch's geometry: `count` matrices m×n (right sides n×k), `per` output
/// elements each.
#[derive(Clone, Copy)]
struct Geo {
    m: usize,
    n: usize,
    k: usize,
    count: usize,
    per: usize,
}

impl Decomp {
    /// Fills `out` with every matrix's results: the batch shared over the cores,
    /// each thread reading, computing and writing its own matrices.
    fn fill<T: Send>(
        &self,
        out: &mut [T],
        a: &Src<'_>,
        b: Option<&Src<'_>>,
        g: Geo,
        conv: fn(f64) -> T,
    ) -> Result<()> {
        let run = |lo: usize, dst: &mut [T]| -> Result<()> {
            let mut res = Vec::with_capacity(g.per);
            for (j, dst) in dst.chunks_mut(g.per).enumerate() {
                let i = lo + j;
                let am = a.matrix(i, g.m, g.n);
                let bm = b.map(|b| b.matrix(i, g.n, g.k));
                res.clear();
                self.one(am.as_ref(), bm.as_ref().map(|b| b.as_ref()), &mut res)
                    .map_err(|e| match e {
                        Error::Invalid { op, msg } if g.count > 1 => Error::Invalid {
                            op,
                            msg: format!("{msg} (matrix {i} of the batch)"),
                        },
                        e => e,
                    })?;
                for (d, &x) in dst.iter_mut().zip(&res) {
                    *d = conv(x);
                }
            }
            Ok(())
        };
        let threads = if cfg!(target_arch = "wasm32") {
            1
        } else {
            std::thread::available_parallelism().map_or(1, |t| t.get())
        };
        let share = g.count.div_ceil(threads.min(g.count));
        if share >= g.count {
            return run(0, out);
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = out
                .chunks_mut(share * g.per)
                .enumerate()
                .map(|(t, dst)| {
                    let run = &run;
                    s.spawn(move || run(t * share, dst))
                })
                .collect();
            // The first failing matrix's error, in batch order.
            handles.into_iter().try_for_each(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::invalid(self.op.name(), "a worker thread panicked"))
                })
            })
        })
    }

    /// One matrix's results, appended to `out` in packed order.
    fn one(
        &self,
        a: MatRef<'_, f64>,
        b: Option<MatRef<'_, f64>>,
        out: &mut Vec<f64>,
    ) -> Result<()> {
        let fail = |msg: &str| Err(Error::invalid(self.op.name(), msg.to_string()));
        let (m, n) = (a.nrows(), a.ncols());
        match self.op {
            Op::Cholesky => {
                if n == 0 {
                    return Ok(());
                }
                match a.llt(Side::Lower) {
                    Ok(c) => push(out, c.L()),
                    Err(_) => return fail("the matrix is not positive definite"),
                }
            }
            Op::TriSolve { upper } => {
                let mut x = b.unwrap().to_owned();
                if let Some(i) = (0..n).find(|&i| a[(i, i)] == 0.0) {
                    return fail(&format!("singular matrix: zero on the diagonal at {i}"));
                }
                if upper {
                    faer::linalg::triangular_solve::solve_upper_triangular_in_place(
                        a,
                        x.as_mut(),
                        Par::Seq,
                    );
                } else {
                    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
                        a,
                        x.as_mut(),
                        Par::Seq,
                    );
                }
                push(out, x.as_ref());
            }
            Op::Solve | Op::Inv => {
                if n == 0 {
                    return Ok(());
                }
                let lu = a.partial_piv_lu();
                if (0..n).any(|i| lu.U()[(i, i)] == 0.0) {
                    return fail("singular matrix");
                }
                match b {
                    Some(b) => push(out, lu.solve(b).as_ref()),
                    None => push(out, lu.inverse().as_ref()),
                }
            }
            Op::Lu => {
                if n == 0 {
                    out.push(1.0);
                    return Ok(());
                }
                let lu = a.partial_piv_lu();
                let (l, u) = (lu.L(), lu.U());
                for i in 0..n {
                    for j in 0..n {
                        out.push(if j < i { l[(i, j)] } else { u[(i, j)] });
                    }
                }
                let (r, p) = lu.P().arrays();
                out.extend(p.iter().map(|&i| i as f64));
                out.extend(r.iter().map(|&i| i as f64));
                // The sign of r: (-1) to the number of even-length cycles.
                let mut seen = vec![false; n];
                let mut sign = 1.0;
                for s in 0..n {
                    let mut len = 0;
                    let mut i = s;
                    while !seen[i] {
                        seen[i] = true;
                        i = r[i];
                        len += 1;
                    }
                    if len > 0 && len % 2 == 0 {
                        sign = -sign;
                    }
                }
                out.push(sign);
            }
            Op::Qr => {
                if m.min(n) == 0 {
                    out.extend(std::iter::repeat_n(0.0, m * m.min(n) + m.min(n) * n));
                    return Ok(());
                }
                let qr = a.qr();
                push(out, qr.compute_thin_Q().as_ref());
                push(out, qr.thin_R());
            }
            Op::Svd { full } => {
                let p = m.min(n);
                if p == 0 {
                    // U and V of an empty side are identities (numpy's full case).
                    let eye = |d: usize, out: &mut Vec<f64>| {
                        out.extend((0..d * d).map(|i| if i % (d + 1) == 0 { 1.0 } else { 0.0 }));
                    };
                    if full {
                        eye(m, out);
                        eye(n, out);
                    }
                    return Ok(());
                }
                let svd = if full { a.svd() } else { a.thin_svd() };
                let Ok(s) = svd else {
                    return fail("the SVD did not converge");
                };
                push(out, s.U());
                out.extend(s.S().column_vector().iter().copied());
                push(out, s.V().transpose());
            }
            Op::Eigh => {
                if n == 0 {
                    return Ok(());
                }
                let Ok(e) = a.self_adjoint_eigen(Side::Lower) else {
                    return fail("the eigendecomposition did not converge");
                };
                out.extend(e.S().column_vector().iter().copied());
                push(out, e.U());
            }
        }
        Ok(())
    }
}

impl CustomPrimitive for Decomp {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn is_equivalent(&self, other: &dyn CustomPrimitive) -> bool {
        (other as &dyn std::any::Any)
            .downcast_ref::<Self>()
            .is_some_and(|o| o == self)
    }

    fn eval_cpu(&self, inputs: &[View<'_, CpuBuffer>], out: &mut CpuOutput<'_>) -> Result<()> {
        let sa = &inputs[0].layout.shape;
        let nd = sa.len();
        let (m, n) = (sa[nd - 2], sa[nd - 1]);
        let count: usize = sa[..nd - 2].iter().product();
        let k = inputs.get(1).map_or(0, |v| v.layout.shape[nd - 1]);
        let total: usize = out.shape.iter().product();
        if count == 0 || total == 0 {
            return Ok(());
        }
        let (a, b) = (Src::of(&inputs[0]), inputs.get(1).map(Src::of));
        let geo = Geo {
            m,
            n,
            k,
            count,
            per: total / count,
        };
        match out.dtype {
            DType::F32 => self.fill(out.buffer.as_mut_slice::<f32>(), &a, b.as_ref(), geo, |x| {
                x as f32
            }),
            _ => self.fill(out.buffer.as_mut_slice::<f64>(), &a, b.as_ref(), geo, |x| x),
        }
    }

    fn vjp(&self, primals: &[Array], output: &Array, ct: &Array) -> Result<Vec<Option<Array>>> {
        let (_, m, n, k) = dims(primals);
        let y = unpack(self.op, output, m, n, k)?;
        let g = unpack(self.op, ct, m, n, k)?;
        let a = &primals[0];
        Ok(match self.op {
            Op::Cholesky => vec![Some(rules::cholesky_vjp(&y[0], &g[0])?)],
            Op::TriSolve { upper } => {
                let gb = apply(Op::TriSolve { upper: !upper }, &[mt(a)?, g[0].clone()])?;
                let ga = tri(&o::negative(&o::matmul(&gb, &mt(&y[0])?)?)?, upper)?;
                vec![Some(ga), Some(gb)]
            }
            Op::Solve => {
                let gb = apply(Op::Solve, &[mt(a)?, g[0].clone()])?;
                let ga = o::negative(&o::matmul(&gb, &mt(&y[0])?)?)?;
                vec![Some(ga), Some(gb)]
            }
            Op::Inv => {
                let yt = mt(&y[0])?;
                vec![Some(o::negative(&o::matmul(
                    &yt,
                    &o::matmul(&g[0], &yt)?,
                )?)?)]
            }
            Op::Lu => vec![Some(rules::lu_vjp(&y, &g[0])?)],
            Op::Qr => vec![Some(rules::qr_vjp(a, &y[0], &y[1], &g[0], &g[1])?)],
            Op::Svd { full } => {
                full_check(full, m, n)?;
                vec![Some(rules::svd_vjp(&y, &g, m, n)?)]
            }
            Op::Eigh => vec![Some(rules::eigh_vjp(&y[0], &y[1], &g[0], &g[1])?)],
        })
    }

    fn jvp(
        &self,
        primals: &[Array],
        output: &Array,
        tangents: &[Option<Array>],
    ) -> Result<Option<Array>> {
        let (batch, m, n, k) = dims(primals);
        let y = unpack(self.op, output, m, n, k)?;
        let a = &primals[0];
        let zero = |x: &Array| o::zeros_like(x);
        let ta = match &tangents[0] {
            Some(t) => t.clone(),
            None => zero(a)?,
        };
        let t = match self.op {
            Op::Cholesky => rules::cholesky_jvp(&y[0], &ta)?,
            Op::TriSolve { upper } => {
                let mut rhs = o::negative(&o::matmul(&tri(&ta, upper)?, &y[0])?)?;
                if let Some(Some(tb)) = tangents.get(1) {
                    rhs = o::add(&rhs, tb)?;
                }
                apply(Op::TriSolve { upper }, &[a.clone(), rhs])?
            }
            Op::Solve => {
                let mut rhs = o::negative(&o::matmul(&ta, &y[0])?)?;
                if let Some(Some(tb)) = tangents.get(1) {
                    rhs = o::add(&rhs, tb)?;
                }
                apply(Op::Solve, &[a.clone(), rhs])?
            }
            Op::Inv => o::negative(&o::matmul(&y[0], &o::matmul(&ta, &y[0])?)?)?,
            Op::Lu => {
                let dlu = rules::lu_jvp(&y, &ta)?;
                pack(&[dlu, zero(&y[1])?, zero(&y[2])?, zero(&y[3])?], &batch)?
            }
            Op::Qr => {
                let (dq, dr) = rules::qr_jvp(a, &y[0], &y[1], &ta)?;
                pack(&[dq, dr], &batch)?
            }
            Op::Svd { full } => {
                full_check(full, m, n)?;
                let (du, ds, dvt) = rules::svd_jvp(&y, &ta, m, n)?;
                pack(&[du, ds, dvt], &batch)?
            }
            Op::Eigh => {
                let (dw, dv) = rules::eigh_jvp(&y[0], &y[1], &ta)?;
                pack(&[dw, dv], &batch)?
            }
        };
        Ok(Some(t))
    }

    fn vmap(&self, inputs: &[Array], batched: &[bool]) -> Result<Array> {
        let size = inputs
            .iter()
            .zip(batched)
            .find(|(_, b)| **b)
            .map_or(1, |(x, _)| x.shape()[0]);
        let xs: Vec<Array> = inputs
            .iter()
            .zip(batched)
            .map(|(x, &b)| {
                if b {
                    Ok(x.clone())
                } else {
                    let mut s = vec![size];
                    s.extend_from_slice(x.shape());
                    o::broadcast_to(&o::expand_dims(x, 0)?, &s)
                }
            })
            .collect::<Result<_>>()?;
        apply(self.op, &xs)
    }
}

fn full_check(full: bool, m: usize, n: usize) -> Result<()> {
    if full && m != n {
        return Err(Error::invalid(
            "linalg.svd",
            format!(
                "derivatives of full_matrices=true need a square matrix (got {m}×{n}); \
                 use full_matrices=false"
            ),
        ));
    }
    Ok(())
}

/// The last two axes swapped.
pub(crate) fn mt(x: &Array) -> Result<Array> {
    o::swapaxes(x, -1, -2)
}

/// The upper (or lower) triangle of x.
fn tri(x: &Array, upper: bool) -> Result<Array> {
    if upper { o::triu(x, 0) } else { o::tril(x, 0) }
}

pub(crate) mod rules {
    //! The derivatives (real inputs), after PyTorch's `linalg` backward formulas
    //! and JAX's jvp rules; each is checked against finite differences in the
    //! conformance suite.
    use super::{Op, apply, mt};
    use crate::ops as o;
    use crate::{Array, Result};

    fn mm(a: &Array, b: &Array) -> Result<Array> {
        o::matmul(a, b)
    }
    fn recip(x: &Array) -> Result<Array> {
        o::divide(&o::scalar_like(x, 1.0)?, x)
    }
    fn scale(x: &Array, c: f64) -> Result<Array> {
        o::multiply(x, &o::scalar_like(x, c)?)
    }
    /// (x + xᵀ) / 2.
    pub(crate) fn sym(x: &Array) -> Result<Array> {
        scale(&o::add(x, &mt(x)?)?, 0.5)
    }
    fn diag_part(x: &Array) -> Result<Array> {
        o::diagonal(x, 0, -2, -1)
    }
    /// `v` `[..., n]` on the diagonal of `[..., n, n]`.
    pub(crate) fn diag_embed(v: &Array) -> Result<Array> {
        let n = v.shape()[v.ndim() - 1];
        let eye = crate::with_device(v.device(), || o::eye(n, v.dtype()))?;
        o::multiply(&o::expand_dims(v, -2)?, &eye)
    }
    fn eye_like(x: &Array) -> Result<Array> {
        let n = x.shape()[x.ndim() - 1];
        crate::with_device(x.device(), || o::eye(n, x.dtype()))
    }
    /// tril(x) with its diagonal halved.
    fn phi(x: &Array) -> Result<Array> {
        o::subtract(&o::tril(x, 0)?, &scale(&diag_embed(&diag_part(x)?)?, 0.5)?)
    }
    fn lower(a: &Array, b: &Array) -> Result<Array> {
        apply(Op::TriSolve { upper: false }, &[a.clone(), b.clone()])
    }
    fn upper(a: &Array, b: &Array) -> Result<Array> {
        apply(Op::TriSolve { upper: true }, &[a.clone(), b.clone()])
    }
    /// x R⁻¹ for R upper triangular.
    fn right_upper_inv(x: &Array, r: &Array) -> Result<Array> {
        mt(&lower(&mt(r)?, &mt(x)?)?)
    }
    /// x R⁻ᵀ for R upper triangular.
    fn right_upper_inv_t(x: &Array, r: &Array) -> Result<Array> {
        mt(&upper(r, &mt(x)?)?)
    }

    pub(crate) fn cholesky_vjp(l: &Array, gl: &Array) -> Result<Array> {
        let p = phi(&mm(&mt(l)?, &o::tril(gl, 0)?)?)?;
        // S = L⁻ᵀ P L⁻¹.
        let x1 = upper(&mt(l)?, &p)?;
        let s = mt(&upper(&mt(l)?, &mt(&x1)?)?)?;
        sym(&s)
    }

    pub(crate) fn cholesky_jvp(l: &Array, ta: &Array) -> Result<Array> {
        let da = sym(ta)?;
        // L⁻¹ dA L⁻ᵀ.
        let y = lower(l, &da)?;
        let z = mt(&lower(l, &mt(&y)?)?)?;
        mm(l, &phi(&z)?)
    }

    /// L (unit lower) and U from the packed LU, and the permutations as indices.
    fn lu_parts(y: &[Array]) -> Result<(Array, Array, Array, Array)> {
        let lu = &y[0];
        let l = o::add(&o::tril(lu, -1)?, &eye_like(lu)?)?;
        let u = o::triu(lu, 0)?;
        let idx = |p: &Array| -> Result<Array> {
            let mut s = p.shape().to_vec();
            s.push(1);
            let p = o::reshape(
                &o::astype(p, crate::DType::I32)?,
                &s.iter().map(|&d| d as isize).collect::<Vec<_>>(),
            )?;
            let mut full = s.clone();
            *full.last_mut().unwrap() = lu.shape()[lu.ndim() - 1];
            o::broadcast_to(&p, &full)
        };
        Ok((l, u, idx(&y[1])?, idx(&y[2])?))
    }

    pub(crate) fn lu_vjp(y: &[Array], g: &Array) -> Result<Array> {
        let (l, u, p, _) = lu_parts(y)?;
        let m = o::add(
            &o::tril(&mm(&mt(&l)?, &o::tril(g, -1)?)?, -1)?,
            &o::triu(&mm(&o::triu(g, 0)?, &mt(&u)?)?, 0)?,
        )?;
        // L⁻ᵀ M U⁻ᵀ for the permuted rows, then rows back in A's order.
        let x1 = upper(&mt(&l)?, &m)?;
        let gp = right_upper_inv_t(&x1, &u)?;
        o::take_along_axis(&gp, &p, Some(-2))
    }

    pub(crate) fn lu_jvp(y: &[Array], ta: &Array) -> Result<Array> {
        let (l, u, _, r) = lu_parts(y)?;
        let dap = o::take_along_axis(ta, &r, Some(-2))?;
        let x = right_upper_inv(&lower(&l, &dap)?, &u)?;
        let dl = mm(&l, &o::tril(&x, -1)?)?;
        let du = mm(&o::triu(&x, 0)?, &u)?;
        o::add(&o::tril(&dl, -1)?, &o::triu(&du, 0)?)
    }

    /// QR's vjp for m >= n (PyTorch's `linalg_qr_backward`).
    fn qr_vjp_tall(q: &Array, r: &Array, gq: &Array, gr: &Array) -> Result<Array> {
        let m = o::subtract(&mm(gr, &mt(r)?)?, &mm(&mt(q)?, gq)?)?;
        // copyltu: the upper triangle mirrored onto the lower.
        let c = o::add(&o::triu(&m, 0)?, &mt(&o::triu(&m, 1)?)?)?;
        let b = o::add(gq, &mm(q, &c)?)?;
        right_upper_inv_t(&b, r)
    }

    pub(crate) fn qr_vjp(a: &Array, q: &Array, r: &Array, gq: &Array, gr: &Array) -> Result<Array> {
        let (m, n) = (a.shape()[a.ndim() - 2], a.shape()[a.ndim() - 1]);
        if m >= n {
            return qr_vjp_tall(q, r, gq, gr);
        }
        // Wide: A = [X | Y], R = [U | V] with X = Q U square and Y = Q V.
        let (_, ys) = split_last(a, m)?;
        let (gu, gv) = split_last(gr, m)?;
        let (u, _) = split_last(r, m)?;
        let gq2 = o::add(gq, &mm(&ys, &mt(&gv)?)?)?;
        let gx = qr_vjp_tall(q, &u, &gq2, &gu)?;
        let gy = mm(q, &gv)?;
        o::concatenate(&[&gx, &gy], -1)
    }

    fn split_last(x: &Array, at: usize) -> Result<(Array, Array)> {
        let mut v = o::split_at(x, &[at as isize], -1)?;
        let b = v.pop().unwrap();
        Ok((v.pop().unwrap(), b))
    }

    fn qr_jvp_tall(q: &Array, r: &Array, da: &Array) -> Result<(Array, Array)> {
        let dx_rinv = right_upper_inv(da, r)?;
        let qt = mm(&mt(q)?, &dx_rinv)?;
        let low = o::tril(&qt, -1)?;
        let dom = o::subtract(&low, &mt(&low)?)?;
        let dq = o::add(&mm(q, &o::subtract(&dom, &qt)?)?, &dx_rinv)?;
        let dr = mm(&o::subtract(&qt, &dom)?, r)?;
        Ok((dq, dr))
    }

    pub(crate) fn qr_jvp(a: &Array, q: &Array, r: &Array, da: &Array) -> Result<(Array, Array)> {
        let (m, n) = (a.shape()[a.ndim() - 2], a.shape()[a.ndim() - 1]);
        if m >= n {
            return qr_jvp_tall(q, r, da);
        }
        let (_, ys) = split_last(a, m)?;
        let (dx, dy) = split_last(da, m)?;
        let (u, _) = split_last(r, m)?;
        let (dq, du) = qr_jvp_tall(q, &u, &dx)?;
        let dv = o::add(&mm(&mt(&dq)?, &ys)?, &mm(&mt(q)?, &dy)?)?;
        Ok((dq, o::concatenate(&[&du, &dv], -1)?))
    }

    /// `1 / (s_j² - s_i²)` off the diagonal, 0 on it.
    fn gaps(s2: &Array) -> Result<Array> {
        let e = o::subtract(&o::expand_dims(s2, -2)?, &o::expand_dims(s2, -1)?)?;
        let eye = eye_like(&e)?;
        o::subtract(&recip(&o::add(&e, &eye)?)?, &eye)
    }

    /// SVD's vjp (reduced; PyTorch's `svd_backward`, real case).
    pub(crate) fn svd_vjp(y: &[Array], g: &[Array], m: usize, n: usize) -> Result<Array> {
        let (u, s, vt) = (&y[0], &y[1], &y[2]);
        let (gu, gs, gvt) = (&g[0], &g[1], &g[2]);
        let v = mt(vt)?;
        let gv = mt(gvt)?;
        let f = gaps(&o::multiply(s, s)?)?;
        let skew = |x: &Array| o::subtract(x, &mt(x)?);
        let s_row = o::expand_dims(s, -2)?;
        let s_col = o::expand_dims(s, -1)?;
        // F ∘ skew(UᵀgU) S + S F ∘ skew(VᵀgV) + diag(gS), with F_ij = 1/(s_j² - s_i²).
        let j = o::multiply(&o::multiply(&f, &skew(&mm(&mt(u)?, gu)?)?)?, &s_row)?;
        let kk = o::multiply(&s_col, &o::multiply(&f, &skew(&mm(&mt(&v)?, &gv)?)?)?)?;
        let core = o::add(&o::add(&j, &kk)?, &diag_embed(gs)?)?;
        let k = m.min(n);
        if m > k {
            // + (I - U Uᵀ) gU S⁻¹, then Vᵀ.
            let gus = o::divide(gu, &s_row)?;
            let extra = o::subtract(&gus, &mm(u, &mm(&mt(u)?, &gus)?)?)?;
            mm(&o::add(&mm(u, &core)?, &extra)?, vt)
        } else if n > k {
            // + S⁻¹ gVᵀ (I - V Vᵀ), after U.
            let svt = o::divide(&mt(&gv)?, &s_col)?;
            let extra = o::subtract(&svt, &mm(&mm(&svt, &v)?, vt)?)?;
            mm(u, &o::add(&mm(&core, vt)?, &extra)?)
        } else {
            mm(u, &mm(&core, vt)?)
        }
    }

    /// SVD's jvp (reduced; JAX's `svd_jvp_rule`, real case).
    pub(crate) fn svd_jvp(
        y: &[Array],
        da: &Array,
        m: usize,
        n: usize,
    ) -> Result<(Array, Array, Array)> {
        let (u, s, vt) = (&y[0], &y[1], &y[2]);
        let v = mt(vt)?;
        let ds_mat = mm(&mt(u)?, &mm(da, &v)?)?;
        let ds = diag_part(&ds_mat)?;
        let f = gaps(&o::multiply(s, s)?)?;
        let s_row = o::expand_dims(s, -2)?;
        let s_col = o::expand_dims(s, -1)?;
        let dss = o::multiply(&ds_mat, &s_row)?;
        let sds = o::multiply(&s_col, &ds_mat)?;
        let mut du = mm(u, &o::multiply(&f, &o::add(&dss, &mt(&dss)?)?)?)?;
        let mut dv = mm(&v, &o::multiply(&f, &o::add(&sds, &mt(&sds)?)?)?)?;
        if m > n {
            let dav = mm(da, &v)?;
            let extra = o::subtract(&dav, &mm(u, &mm(&mt(u)?, &dav)?)?)?;
            du = o::add(&du, &o::divide(&extra, &s_row)?)?;
        }
        if n > m {
            let dau = mm(&mt(da)?, u)?;
            let extra = o::subtract(&dau, &mm(&v, &mm(vt, &dau)?)?)?;
            dv = o::add(&dv, &o::divide(&extra, &s_row)?)?;
        }
        Ok((du, ds, mt(&dv)?))
    }

    /// eigh's vjp (PyTorch's `linalg_eig_backward`, Hermitian case).
    pub(crate) fn eigh_vjp(w: &Array, v: &Array, gw: &Array, gv: &Array) -> Result<Array> {
        let vg = mm(&mt(v)?, gv)?;
        let sk = scale(&o::subtract(&vg, &mt(&vg)?)?, 0.5)?;
        let e = o::subtract(&o::expand_dims(w, -2)?, &o::expand_dims(w, -1)?)?;
        let x = o::add(
            &o::divide(&sk, &o::add(&e, &eye_like(&e)?)?)?,
            &diag_embed(gw)?,
        )?;
        sym(&mm(v, &mm(&x, &mt(v)?)?)?)
    }

    pub(crate) fn eigh_jvp(w: &Array, v: &Array, ta: &Array) -> Result<(Array, Array)> {
        let d = mm(&mt(v)?, &mm(&sym(ta)?, v)?)?;
        let dw = diag_part(&d)?;
        let e = o::subtract(&o::expand_dims(w, -2)?, &o::expand_dims(w, -1)?)?;
        let eye = eye_like(&e)?;
        let f = o::subtract(&recip(&o::add(&e, &eye)?)?, &eye)?;
        Ok((dw, mm(v, &o::multiply(&f, &d)?)?))
    }
}
