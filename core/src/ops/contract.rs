//! Contractions: [`einsum`] (numpy's notation, with a contraction order searched as
//! opt_einsum does), [`tensordot`], [`inner`], [`outer`], [`kron`], [`trace`],
//! [`diagonal`] and [`diag`]. All are composites of matmul, reductions and views,
//! so they run on every backend, differentiate, vmap and fuse.

use super::{
    astype, broadcast_to, matmul, multiply, reshape, reshape_exact, slice, sum, transpose, tril,
    triu,
};
use crate::layout::normalize_axis;
use crate::{Array, DType, Error, Result, Slice};

/// The diagonal of `x` over `axis1` and `axis2` (numpy's `diagonal`): those axes
/// are removed and the diagonal is the new last axis. `offset > 0` is above the
/// main diagonal, `< 0` below; an offset past the matrix gives an empty axis.
pub fn diagonal(x: &Array, offset: isize, axis1: isize, axis2: isize) -> Result<Array> {
    const OP: &str = "diagonal";
    if x.ndim() < 2 {
        return Err(Error::invalid(
            OP,
            format!("needs at least 2 dimensions, got shape {:?}", x.shape()),
        ));
    }
    let a1 = normalize_axis(OP, axis1, x.ndim())?;
    let a2 = normalize_axis(OP, axis2, x.ndim())?;
    if a1 == a2 {
        return Err(Error::invalid(
            OP,
            format!("axis1 and axis2 are both axis {a1}"),
        ));
    }
    let mut perm: Vec<isize> = (0..x.ndim())
        .filter(|&i| i != a1 && i != a2)
        .map(|i| i as isize)
        .collect();
    let batch: Vec<usize> = perm.iter().map(|&i| x.shape()[i as usize]).collect();
    perm.extend([a1 as isize, a2 as isize]);
    let (n, m) = (x.shape()[a1], x.shape()[a2]);
    // The diagonal of a row-major [n, m] block is every (m + 1)-th element from its
    // first one: a strided slice of the flattened block.
    let (start, len) = if offset >= 0 {
        let o = offset.unsigned_abs();
        (o, n.min(m.saturating_sub(o)))
    } else {
        let o = offset.unsigned_abs();
        (o.saturating_mul(m), n.saturating_sub(o).min(m))
    };
    let mut flat_shape = batch.clone();
    flat_shape.push(n * m);
    let flat = reshape_exact(&transpose(x, Some(&perm))?, &flat_shape)?;
    let mut s = vec![Slice::ALL; batch.len()];
    s.push(if len == 0 {
        Slice::range(0, 0)
    } else {
        Slice::new(
            Some(start as isize),
            Some((start + (len - 1) * (m + 1) + 1) as isize),
            (m + 1) as isize,
        )
    });
    slice(&flat, &s)
}

/// The sum of [`diagonal`]`(x, offset, axis1, axis2)` (numpy's `trace`).
pub fn trace(x: &Array, offset: isize, axis1: isize, axis2: isize) -> Result<Array> {
    sum(&diagonal(x, offset, axis1, axis2)?, Some(&[-1]), false)
}

/// numpy's `diag`: a 1-D `v` becomes the square matrix with `v` on its `k`-th
/// diagonal; a 2-D array gives its `k`-th diagonal.
pub fn diag(v: &Array, k: isize) -> Result<Array> {
    match v.ndim() {
        2 => diagonal(v, k, 0, 1),
        1 => {
            let n = v.shape()[0];
            let o = k.unsigned_abs();
            let m = n + o;
            let ones = super::ones(&[m, m], v.dtype())?;
            let mask = triu(&tril(&ones, k)?, k)?;
            let padded = super::pad(v, &[(0, o)], super::PadMode::Constant(0.0))?;
            // Row i holds v[i] at column i + k (k >= 0); column j holds v[j] at row
            // j - k (k < 0): one broadcast of the padded vector along the other axis.
            let spread = if k >= 0 {
                reshape_exact(&padded, &[m, 1])?
            } else {
                reshape_exact(&padded, &[1, m])?
            };
            multiply(&mask, &spread)
        }
        _ => Err(Error::invalid(
            "diag",
            format!("takes a 1-D or 2-D array, got shape {:?}", v.shape()),
        )),
    }
}

/// The axes [`tensordot`] sums over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorAxes {
    /// The last `n` axes of `a` with the first `n` of `b` (numpy's `axes=n`).
    Last(usize),
    /// `a`'s axes paired with `b`'s, in order.
    Pairs(Vec<isize>, Vec<isize>),
}

/// numpy's `tensordot`: the sum of products over the paired axes; the result has
/// `a`'s remaining axes then `b`'s.
pub fn tensordot(a: &Array, b: &Array, axes: TensorAxes) -> Result<Array> {
    const OP: &str = "tensordot";
    let (aa, ba) = match axes {
        TensorAxes::Last(n) => {
            if n > a.ndim() || n > b.ndim() {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "axes={n} but the shapes are {:?} and {:?}",
                        a.shape(),
                        b.shape()
                    ),
                ));
            }
            (
                (a.ndim() - n..a.ndim()).collect::<Vec<_>>(),
                (0..n).collect::<Vec<_>>(),
            )
        }
        TensorAxes::Pairs(x, y) => {
            if x.len() != y.len() {
                return Err(Error::invalid(
                    OP,
                    format!("{} axes of a paired with {} of b", x.len(), y.len()),
                ));
            }
            let norm = |axes: &[isize], nd| -> Result<Vec<usize>> {
                axes.iter().map(|&i| normalize_axis(OP, i, nd)).collect()
            };
            (norm(&x, a.ndim())?, norm(&y, b.ndim())?)
        }
    };
    // One label per axis; paired axes share theirs.
    let mut la: Vec<usize> = (0..a.ndim()).collect();
    let mut lb: Vec<usize> = (a.ndim()..a.ndim() + b.ndim()).collect();
    for (&i, &j) in aa.iter().zip(&ba) {
        if a.shape()[i] != b.shape()[j] {
            return Err(Error::invalid(
                OP,
                format!(
                    "axis {i} of a ({}) and axis {j} of b ({}) differ (shapes {:?} and {:?})",
                    a.shape()[i],
                    b.shape()[j],
                    a.shape(),
                    b.shape()
                ),
            ));
        }
        lb[j] = la[i];
    }
    if has_repeats(&aa) || has_repeats(&ba) {
        return Err(Error::invalid(OP, "an axis is listed twice"));
    }
    let out: Vec<usize> = la
        .iter()
        .enumerate()
        .filter(|(i, _)| !aa.contains(i))
        .map(|(_, &l)| l)
        .chain(
            lb.iter()
                .enumerate()
                .filter(|(j, _)| !ba.contains(j))
                .map(|(_, &l)| l),
        )
        .collect();
    let d = DType::promote(a.dtype(), b.dtype());
    let (a, b) = (astype(a, d)?, astype(b, d)?);
    let t = pair(
        Term::new(a, std::mem::take(&mut la)),
        Term::new(b, lb),
        &out,
    )?;
    Ok(t.x)
}

fn has_repeats(v: &[usize]) -> bool {
    v.iter().enumerate().any(|(i, x)| v[..i].contains(x))
}

/// numpy's `inner`: the sum of products over the last axes of `a` and `b` (a
/// scalar operand multiplies).
pub fn inner(a: &Array, b: &Array) -> Result<Array> {
    if a.ndim() == 0 || b.ndim() == 0 {
        return multiply(a, b);
    }
    tensordot(a, b, TensorAxes::Pairs(vec![-1], vec![-1]))
}

/// numpy's `outer`: both inputs flattened, `out[i, j] = a[i] * b[j]`.
pub fn outer(a: &Array, b: &Array) -> Result<Array> {
    let a = reshape(a, &[-1, 1])?;
    let b = reshape(b, &[1, -1])?;
    multiply(&a, &b)
}

/// numpy's `kron`: the Kronecker product, blocks of `b` scaled by each element of
/// `a` (the shorter shape is padded with leading ones).
pub fn kron(a: &Array, b: &Array) -> Result<Array> {
    let nd = a.ndim().max(b.ndim());
    let pad = |x: &Array| -> Vec<usize> {
        let mut s = vec![1; nd - x.ndim()];
        s.extend_from_slice(x.shape());
        s
    };
    let (sa, sb) = (pad(a), pad(b));
    // a as [a0, 1, a1, 1, ...], b as [1, b0, 1, b1, ...]: the product interleaves.
    let ia: Vec<usize> = sa.iter().flat_map(|&n| [n, 1]).collect();
    let ib: Vec<usize> = sb.iter().flat_map(|&n| [1, n]).collect();
    let out: Vec<usize> = sa.iter().zip(&sb).map(|(x, y)| x * y).collect();
    let p = multiply(&reshape_exact(a, &ia)?, &reshape_exact(b, &ib)?)?;
    reshape_exact(&p, &out)
}

// ---------------------------------------------------------------- einsum

/// An operand during a contraction: an array and one label per axis (labels of
/// one term are distinct).
#[derive(Clone)]
struct Term {
    x: Array,
    labels: Vec<usize>,
}

impl Term {
    fn new(x: Array, labels: Vec<usize>) -> Term {
        Term { x, labels }
    }
}

/// Contracts two terms into one whose labels are `keep` ∩ (labels of a or b),
/// in that order: a batched matmul over the shared kept labels, the shared
/// dropped ones summed by the product, the others summed first.
fn pair(a: Term, b: Term, keep: &[usize]) -> Result<Term> {
    let kept = |l: &usize| keep.contains(l);
    let (la, lb) = (a.labels.clone(), b.labels.clone());
    let (a, b) = (sum_unshared(a, &lb, keep)?, sum_unshared(b, &la, keep)?);
    let size = |t: &Term, l: usize| {
        t.labels
            .iter()
            .position(|&m| m == l)
            .map(|i| t.x.shape()[i])
    };
    let batch: Vec<usize> = a
        .labels
        .iter()
        .copied()
        .filter(|l| kept(l) && b.labels.contains(l))
        .collect();
    let contract: Vec<usize> = a
        .labels
        .iter()
        .copied()
        .filter(|l| !kept(l) && b.labels.contains(l))
        .collect();
    let free_a: Vec<usize> = a
        .labels
        .iter()
        .copied()
        .filter(|l| !b.labels.contains(l))
        .collect();
    let free_b: Vec<usize> = b
        .labels
        .iter()
        .copied()
        .filter(|l| !a.labels.contains(l))
        .collect();
    // Shared labels of size 1 in one operand broadcast (ellipsis axes).
    let full = |l: usize| size(&a, l).unwrap_or(1).max(size(&b, l).unwrap_or(1));
    let prod =
        |ls: &[usize], t: &Term| -> usize { ls.iter().map(|&l| size(t, l).unwrap()).product() };
    let arrange = |t: &Term, order: &[&[usize]], shared: &[usize]| -> Result<Array> {
        let ord: Vec<usize> = order.iter().flat_map(|o| o.iter().copied()).collect();
        let perm: Vec<isize> = ord
            .iter()
            .map(|l| t.labels.iter().position(|m| m == l).unwrap() as isize)
            .collect();
        let x = transpose(&t.x, Some(&perm))?;
        let shape: Vec<usize> = ord
            .iter()
            .map(|&l| {
                if shared.contains(&l) {
                    full(l)
                } else {
                    size(t, l).unwrap()
                }
            })
            .collect();
        broadcast_to(&x, &shape)
    };
    let shared: Vec<usize> = batch.iter().chain(&contract).copied().collect();
    let nb: usize = batch.iter().map(|&l| full(l)).product();
    let nk: usize = contract.iter().map(|&l| full(l)).product();
    let (m, n) = (prod(&free_a, &a), prod(&free_b, &b));
    let mut labels = batch.clone();
    labels.extend(&free_a);
    labels.extend(&free_b);
    let mut shape: Vec<usize> = batch.iter().map(|&l| full(l)).collect();
    shape.extend(free_a.iter().map(|&l| size(&a, l).unwrap()));
    shape.extend(free_b.iter().map(|&l| size(&b, l).unwrap()));
    let xa = arrange(&a, &[&batch, &free_a, &contract], &shared)?;
    let xb = arrange(&b, &[&batch, &contract, &free_b], &shared)?;
    let x = if a.x.dtype().is_float() {
        let pa = reshape_exact(&xa, &[nb, m, nk])?;
        let pb = reshape_exact(&xb, &[nb, nk, n])?;
        reshape_exact(&matmul(&pa, &pb)?, &shape)?
    } else {
        // Integer and bool operands (matmul takes floats): broadcast products summed.
        let pa = reshape_exact(&xa, &[nb, m, 1, nk])?;
        let pb = transpose(&reshape_exact(&xb, &[nb, nk, n])?, Some(&[0, 2, 1]))?;
        let pb = reshape_exact(&super::contiguous(&pb)?, &[nb, 1, n, nk])?;
        reshape_exact(&sum(&multiply(&pa, &pb)?, Some(&[-1]), false)?, &shape)?
    };
    let t = Term::new(x, labels);
    // Into `keep`'s order.
    let order: Vec<usize> = keep
        .iter()
        .copied()
        .filter(|l| t.labels.contains(l))
        .collect();
    permute_to(t, &order)
}

/// Sums away the labels of `t` that neither `other` nor `keep` has.
fn sum_unshared(t: Term, other: &[usize], keep: &[usize]) -> Result<Term> {
    let drop: Vec<isize> = t
        .labels
        .iter()
        .enumerate()
        .filter(|(_, l)| !other.contains(l) && !keep.contains(l))
        .map(|(i, _)| i as isize)
        .collect();
    if drop.is_empty() {
        return Ok(t);
    }
    let labels = t
        .labels
        .iter()
        .enumerate()
        .filter(|(i, _)| !drop.contains(&(*i as isize)))
        .map(|(_, &l)| l)
        .collect();
    Ok(Term::new(sum(&t.x, Some(&drop), false)?, labels))
}

fn permute_to(t: Term, order: &[usize]) -> Result<Term> {
    if t.labels == order {
        return Ok(t);
    }
    let perm: Vec<isize> = order
        .iter()
        .map(|l| t.labels.iter().position(|m| m == l).unwrap() as isize)
        .collect();
    Ok(Term::new(transpose(&t.x, Some(&perm))?, order.to_vec()))
}

/// How [`einsum_path`] orders the pairwise contractions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EinsumOptimize {
    /// The cheapest order for up to 8 operands (a search over subsets, opt_einsum's
    /// `"dp"`), [`Greedy`](EinsumOptimize::Greedy) beyond.
    #[default]
    Auto,
    /// opt_einsum's `"greedy"`: repeatedly the pair whose result is smallest
    /// relative to its inputs.
    Greedy,
    /// Left to right, as written (numpy's `optimize=False`).
    None,
    /// This order: pairs of positions in the shrinking operand list, as
    /// [`EinsumPath::steps`] (a path from opt_einsum or numpy's `einsum_path`).
    Path(Vec<(usize, usize)>),
}

/// The order [`einsum`] contracts its operands in.
#[derive(Debug, Clone, PartialEq)]
pub struct EinsumPath {
    /// Pairs of positions in the current operand list, opt_einsum's convention:
    /// each step removes the two operands and appends their contraction.
    pub steps: Vec<(usize, usize)>,
    /// Multiply-adds of the whole contraction along this path.
    pub flops: f64,
    /// Elements of the largest intermediate.
    pub largest: f64,
}

/// A parsed subscript string: per-operand labels (ellipsis axes as labels past
/// the 52 letters) and the output's labels.
struct Parsed {
    inputs: Vec<Vec<usize>>,
    output: Vec<usize>,
}

const LETTERS: usize = 52;

fn letter(c: char) -> Option<usize> {
    match c {
        'a'..='z' => Some(c as usize - 'a' as usize),
        'A'..='Z' => Some(26 + c as usize - 'A' as usize),
        _ => None,
    }
}

fn parse(subscripts: &str, ndims: &[usize]) -> Result<Parsed> {
    const OP: &str = "einsum";
    let s: String = subscripts.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match s.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (s.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ndims.len() {
        return Err(Error::invalid(
            OP,
            format!(
                "'{subscripts}' names {} operands, {} were given",
                terms.len(),
                ndims.len()
            ),
        ));
    }
    // Letters and at most one ellipsis per term.
    let lex = |t: &str| -> Result<(Vec<usize>, Option<usize>)> {
        let mut out = Vec::new();
        let mut ell = None;
        let mut rest = t;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("...") {
                if ell.is_some() {
                    return Err(Error::invalid(
                        OP,
                        format!("'{t}' has more than one ellipsis"),
                    ));
                }
                ell = Some(out.len());
                rest = r;
                continue;
            }
            let c = rest.chars().next().unwrap();
            let l = letter(c).ok_or_else(|| {
                Error::invalid(
                    OP,
                    format!("'{c}' in '{subscripts}' is not a letter, ',', '->' or '...'"),
                )
            })?;
            out.push(l);
            rest = &rest[c.len_utf8()..];
        }
        Ok((out, ell))
    };
    let mut ell_nd = 0;
    let mut inputs = Vec::new();
    for (t, &nd) in terms.iter().zip(ndims) {
        let (ls, ell) = lex(t)?;
        let labels = match ell {
            None => {
                if ls.len() != nd {
                    return Err(Error::invalid(
                        OP,
                        format!("'{t}' names {} axes of an operand with {nd}", ls.len()),
                    ));
                }
                ls
            }
            Some(at) => {
                if ls.len() > nd {
                    return Err(Error::invalid(
                        OP,
                        format!("'{t}' names {} axes of an operand with {nd}", ls.len()),
                    ));
                }
                // Ellipsis axes align from the right, as broadcasting does.
                let k = nd - ls.len();
                ell_nd = ell_nd.max(k);
                let mut v = ls[..at].to_vec();
                v.extend((0..k).map(|i| LETTERS + (k - 1 - i)));
                v.extend(&ls[at..]);
                v
            }
        };
        inputs.push(labels);
    }
    let ell_labels: Vec<usize> = (0..ell_nd).rev().map(|i| LETTERS + i).collect();
    let output = match rhs {
        Some(r) => {
            let (ls, ell) = lex(r)?;
            let mut v = Vec::new();
            match ell {
                Some(at) => {
                    v.extend(&ls[..at]);
                    v.extend(&ell_labels);
                    v.extend(&ls[at..]);
                }
                // Without an ellipsis in the output, ellipsis axes are summed.
                None => v.extend(&ls),
            }
            for (i, l) in v.iter().enumerate() {
                if v[..i].contains(l) {
                    return Err(Error::invalid(
                        OP,
                        format!("output '{r}' names an axis twice"),
                    ));
                }
                if !inputs.iter().flatten().any(|m| m == l) {
                    return Err(Error::invalid(
                        OP,
                        format!("output '{r}' names an axis no operand has"),
                    ));
                }
            }
            v
        }
        None => {
            // Implicit output: the ellipsis axes, then the letters seen once, sorted.
            let mut v = ell_labels.clone();
            let mut once: Vec<usize> = (0..LETTERS)
                .filter(|l| inputs.iter().flatten().filter(|m| *m == l).count() == 1)
                .collect();
            once.sort_unstable();
            v.extend(once);
            v
        }
    };
    Ok(Parsed { inputs, output })
}

/// The sizes of every label, checked: a letter has one size in every operand;
/// ellipsis axes broadcast (size 1 stretches).
fn label_sizes(p: &Parsed, shapes: &[Vec<usize>]) -> Result<Vec<usize>> {
    let mut size = vec![usize::MAX; LETTERS + 64];
    for (ls, sh) in p.inputs.iter().zip(shapes) {
        for (&l, &n) in ls.iter().zip(sh) {
            if l >= size.len() {
                size.resize(l + 1, usize::MAX);
            }
            let s = &mut size[l];
            if *s == usize::MAX || (*s == 1 && l >= LETTERS) {
                *s = n;
            } else if *s != n && !(l >= LETTERS && n == 1) {
                let name = if l < LETTERS {
                    format!(
                        "'{}'",
                        if l < 26 {
                            (b'a' + l as u8) as char
                        } else {
                            (b'A' + (l - 26) as u8) as char
                        }
                    )
                } else {
                    "an ellipsis axis".into()
                };
                return Err(Error::invalid(
                    "einsum",
                    format!("{name} has sizes {s} and {n} (shapes {shapes:?})"),
                ));
            }
        }
    }
    Ok(size)
}

/// Labels that must survive contracting the operands in `group`: those of the
/// output and of operands outside the group.
fn keep_of(labels: &[Vec<usize>], group: u64, output: &[usize]) -> Vec<usize> {
    let mut k: Vec<usize> = output.to_vec();
    for (i, ls) in labels.iter().enumerate() {
        if group & (1 << i) == 0 {
            for &l in ls {
                if !k.contains(&l) {
                    k.push(l);
                }
            }
        }
    }
    k
}

fn group_labels(labels: &[Vec<usize>], group: u64, keep: &[usize]) -> Vec<usize> {
    let mut v = Vec::new();
    for (i, ls) in labels.iter().enumerate() {
        if group & (1 << i) != 0 {
            for &l in ls {
                if keep.contains(&l) && !v.contains(&l) {
                    v.push(l);
                }
            }
        }
    }
    v
}

/// The contraction order for `subscripts` over operands of `shapes`, with its
/// cost (opt_einsum's `contract_path`).
pub fn einsum_path(
    subscripts: &str,
    shapes: &[&[usize]],
    optimize: EinsumOptimize,
) -> Result<EinsumPath> {
    let ndims: Vec<usize> = shapes.iter().map(|s| s.len()).collect();
    let p = parse(subscripts, &ndims)?;
    let owned: Vec<Vec<usize>> = shapes.iter().map(|s| s.to_vec()).collect();
    let sizes = label_sizes(&p, &owned)?;
    let labels: Vec<Vec<usize>> = p.inputs.iter().map(|ls| dedup(ls)).collect();
    plan(&labels, &p.output, &sizes, &optimize)
}

fn dedup(ls: &[usize]) -> Vec<usize> {
    let mut v = Vec::new();
    for &l in ls {
        if !v.contains(&l) {
            v.push(l);
        }
    }
    v
}

fn volume(ls: &[usize], sizes: &[usize]) -> f64 {
    ls.iter().map(|&l| sizes[l] as f64).product()
}

/// Multiply-adds of contracting operand groups `g1` and `g2` (each already reduced
/// to its kept labels), and the labels of the result.
fn step(
    labels: &[Vec<usize>],
    output: &[usize],
    sizes: &[usize],
    g1: u64,
    g2: u64,
) -> (f64, Vec<usize>) {
    let all = g1 | g2;
    let keep = keep_of(labels, all, output);
    let l1 = group_labels(labels, g1, &keep_of(labels, g1, output));
    let l2 = group_labels(labels, g2, &keep_of(labels, g2, output));
    let union = dedup(&[l1, l2].concat());
    (volume(&union, sizes), group_labels(labels, all, &keep))
}

fn plan(
    labels: &[Vec<usize>],
    output: &[usize],
    sizes: &[usize],
    opt: &EinsumOptimize,
) -> Result<EinsumPath> {
    let n = labels.len();
    let vol = |ls: &[usize]| volume(ls, sizes);
    let step_cost = |g1: u64, g2: u64| step(labels, output, sizes, g1, g2);
    if let EinsumOptimize::Path(steps) = opt {
        let mut live: Vec<u64> = (0..n).map(|i| 1 << i).collect();
        let mut order = Vec::new();
        for &(i, j) in steps {
            if i == j || i.max(j) >= live.len() {
                return Err(Error::invalid(
                    "einsum",
                    format!(
                        "path step ({i}, {j}) does not name two of the {} operands left",
                        live.len()
                    ),
                ));
            }
            let (i, j) = (i.min(j), i.max(j));
            order.push((live[i], live[j]));
            let g = live[i] | live[j];
            live.remove(j);
            live.remove(i);
            live.push(g);
        }
        if live.len() > 1 {
            return Err(Error::invalid(
                "einsum",
                format!("the path leaves {} operands", live.len()),
            ));
        }
        return Ok(cost_of(labels, output, sizes, order));
    }
    if n < 2 {
        return Ok(EinsumPath {
            steps: vec![],
            flops: labels.first().map_or(0.0, |l| vol(l)),
            largest: 0.0,
        });
    }
    let order: Vec<(u64, u64)> = match opt {
        EinsumOptimize::Auto if n <= 8 => {
            // Best split of every subset, smallest subsets first.
            let full = (1u64 << n) - 1;
            let mut best: Vec<(f64, u64)> = vec![(f64::INFINITY, 0); 1 << n];
            for i in 0..n {
                best[1 << i] = (0.0, 0);
            }
            for s in 1..=full {
                if s.count_ones() < 2 {
                    continue;
                }
                let mut sub = (s - 1) & s;
                while sub > 0 {
                    let other = s & !sub;
                    if sub < other {
                        let (c, _) = step_cost(sub, other);
                        let total = best[sub as usize].0 + best[other as usize].0 + c;
                        if total < best[s as usize].0 {
                            best[s as usize] = (total, sub);
                        }
                    }
                    sub = (sub - 1) & s;
                }
            }
            let mut steps = Vec::new();
            fn walk(s: u64, best: &[(f64, u64)], steps: &mut Vec<(u64, u64)>) {
                if s.count_ones() < 2 {
                    return;
                }
                let a = best[s as usize].1;
                walk(a, best, steps);
                walk(s & !a, best, steps);
                steps.push((a, s & !a));
            }
            walk(full, &best, &mut steps);
            steps
        }
        EinsumOptimize::Auto | EinsumOptimize::Greedy => {
            let mut live: Vec<u64> = (0..n).map(|i| 1 << i).collect();
            let mut steps = Vec::new();
            while live.len() > 1 {
                let mut pick = (f64::INFINITY, f64::INFINITY, 0, 1);
                for i in 0..live.len() {
                    for j in i + 1..live.len() {
                        let (c, out) = step_cost(live[i], live[j]);
                        let size_of =
                            |g: u64| vol(&group_labels(labels, g, &keep_of(labels, g, output)));
                        let removed = vol(&out) - size_of(live[i]) - size_of(live[j]);
                        if (removed, c) < (pick.0, pick.1) {
                            pick = (removed, c, i, j);
                        }
                    }
                }
                let (i, j) = (pick.2, pick.3);
                steps.push((live[i], live[j]));
                let g = live[i] | live[j];
                live.remove(j);
                live.remove(i);
                live.push(g);
            }
            steps
        }
        EinsumOptimize::None | EinsumOptimize::Path(_) => {
            let mut acc = 1u64;
            (1..n)
                .map(|i| {
                    let s = (acc, 1u64 << i);
                    acc |= 1 << i;
                    s
                })
                .collect()
        }
    };
    Ok(cost_of(labels, output, sizes, order))
}

/// `order` (pairs of operand groups) as positions in a shrinking operand list
/// (opt_einsum's convention), with its cost.
fn cost_of(
    labels: &[Vec<usize>],
    output: &[usize],
    sizes: &[usize],
    order: Vec<(u64, u64)>,
) -> EinsumPath {
    let n = labels.len();
    let mut live: Vec<u64> = (0..n).map(|i| 1 << i).collect();
    let (mut flops, mut largest) = (0.0, 0.0f64);
    let mut steps = Vec::new();
    for (g1, g2) in order {
        let i = live.iter().position(|&g| g == g1).unwrap();
        let j = live.iter().position(|&g| g == g2).unwrap();
        let (c, out) = step(labels, output, sizes, g1, g2);
        flops += c;
        largest = largest.max(volume(&out, sizes));
        steps.push((i.min(j), i.max(j)));
        live.remove(i.max(j));
        live.remove(i.min(j));
        live.push(g1 | g2);
    }
    EinsumPath {
        steps,
        flops,
        largest,
    }
}

/// numpy's `einsum`: `"ij,jk->ik"`, `"bij,bjk->bik"`, `"ii->i"` (diagonal), `"ii"`
/// (trace), `"...ij->...ji"`, implicit output (`"ij,jk"`: the letters seen once,
/// sorted, after the ellipsis axes). Operands are promoted to one dtype; the
/// contraction order is [`einsum_path`]'s with [`EinsumOptimize::Auto`], each step
/// a batched matmul (integer operands: broadcast products summed).
pub fn einsum(subscripts: &str, operands: &[&Array]) -> Result<Array> {
    einsum_with(subscripts, operands, EinsumOptimize::Auto)
}

/// [`einsum`] with the contraction order chosen by `optimize`.
pub fn einsum_with(
    subscripts: &str,
    operands: &[&Array],
    optimize: EinsumOptimize,
) -> Result<Array> {
    if operands.is_empty() {
        return Err(Error::invalid("einsum", "needs at least one operand"));
    }
    if operands.len() > 60 {
        return Err(Error::invalid("einsum", "takes at most 60 operands"));
    }
    let ndims: Vec<usize> = operands.iter().map(|x| x.ndim()).collect();
    let p = parse(subscripts, &ndims)?;
    let shapes: Vec<Vec<usize>> = operands.iter().map(|x| x.shape().to_vec()).collect();
    let sizes = label_sizes(&p, &shapes)?;
    let d = operands
        .iter()
        .skip(1)
        .fold(operands[0].dtype(), |d, x| DType::promote(d, x.dtype()));
    // Each operand with its repeated labels taken as diagonals.
    let mut terms = Vec::new();
    for (x, ls) in operands.iter().zip(&p.inputs) {
        let mut t = Term::new(astype(x, d)?, ls.clone());
        while let Some((i, j)) = (0..t.labels.len())
            .flat_map(|i| (i + 1..t.labels.len()).map(move |j| (i, j)))
            .find(|&(i, j)| t.labels[i] == t.labels[j])
        {
            let l = t.labels[i];
            t.x = diagonal(&t.x, 0, i as isize, j as isize)?;
            let mut rest: Vec<usize> = (0..t.labels.len())
                .filter(|&k| k != i && k != j)
                .map(|k| t.labels[k])
                .collect();
            rest.push(l);
            t.labels = rest;
        }
        terms.push(t);
    }
    let labels: Vec<Vec<usize>> = terms.iter().map(|t| t.labels.clone()).collect();
    let path = plan(&labels, &p.output, &sizes, &optimize)?;
    let mut live: Vec<(u64, Term)> = terms
        .into_iter()
        .enumerate()
        .map(|(i, t)| (1u64 << i, t))
        .collect();
    for (i, j) in path.steps {
        let (g2, b) = live.remove(j);
        let (g1, a) = live.remove(i);
        let g = g1 | g2;
        let keep = keep_of(&labels, g, &p.output);
        live.push((g, pair(a, b, &keep)?));
    }
    let (_, t) = live.pop().unwrap();
    let t = sum_unshared(t, &[], &p.output)?;
    // Ellipsis axes of size 1 everywhere broadcast to the output's size.
    let t = permute_to(t, &p.output)?;
    let shape: Vec<usize> = p.output.iter().map(|&l| sizes[l]).collect();
    if t.x.shape() != shape.as_slice() {
        return broadcast_to(&t.x, &shape);
    }
    Ok(t.x)
}
