//! Losses, PyTorch's definitions (and MLX's): each takes predictions and targets
//! and a [`Reduction`] of the per-element (or per-sample) losses.

use crate::{Array, DType, Error, Result, scalar_like as c};

/// How per-sample losses become the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// Every sample's loss.
    None,
    /// Their mean.
    Mean,
    /// Their sum.
    Sum,
}

fn reduce(l: Array, r: Reduction) -> Result<Array> {
    match r {
        Reduction::None => Ok(l),
        Reduction::Mean => crate::mean(&l, None, false),
        Reduction::Sum => crate::sum(&l, None, false),
    }
}

fn same_shape(op: &'static str, a: &Array, b: &Array) -> Result<()> {
    if a.shape() != b.shape() {
        return Err(Error::invalid(
            op,
            format!(
                "predictions {:?} and targets {:?} differ in shape",
                a.shape(),
                b.shape()
            ),
        ));
    }
    Ok(())
}

/// Mean squared error `(x - y)^2`.
pub fn mse(x: &Array, y: &Array, r: Reduction) -> Result<Array> {
    same_shape("mse", x, y)?;
    let d = crate::subtract(x, y)?;
    reduce(crate::multiply(&d, &d)?, r)
}

/// Mean absolute error `|x - y|`.
pub fn l1(x: &Array, y: &Array, r: Reduction) -> Result<Array> {
    same_shape("l1", x, y)?;
    reduce(crate::abs(&crate::subtract(x, y)?)?, r)
}

/// Huber loss: `d²/2` for `|d| < delta`, else `delta (|d| - delta/2)`
/// (PyTorch's `HuberLoss`; `smooth_l1` is it divided by `delta`).
pub fn huber(x: &Array, y: &Array, delta: f64, r: Reduction) -> Result<Array> {
    same_shape("huber", x, y)?;
    if delta.is_nan() || delta <= 0.0 {
        return Err(Error::invalid(
            "huber",
            format!("delta must be positive, got {delta}"),
        ));
    }
    let d = crate::abs(&crate::subtract(x, y)?)?;
    let small = crate::less(&d, &c(&d, delta)?)?;
    let quad = crate::multiply(&crate::multiply(&d, &d)?, &c(&d, 0.5)?)?;
    let lin = crate::multiply(&crate::subtract(&d, &c(&d, delta / 2.0)?)?, &c(&d, delta)?)?;
    reduce(crate::where_(&small, &quad, &lin)?, r)
}

/// Smooth L1 (PyTorch's `SmoothL1Loss` with its `beta`): Huber over `beta`.
pub fn smooth_l1(x: &Array, y: &Array, beta: f64, r: Reduction) -> Result<Array> {
    let h = huber(x, y, beta, Reduction::None)?;
    reduce(crate::divide(&h, &c(&h, beta)?)?, r)
}

/// Options of [`cross_entropy`].
#[derive(Clone, Debug, Default)]
pub struct CrossEntropy<'a> {
    /// A weight per class (`[classes]`), as PyTorch's `weight`.
    pub weights: Option<&'a Array>,
    /// Class index whose samples count for nothing (index targets only).
    pub ignore_index: Option<i64>,
    /// Mixes the target with the uniform distribution by this amount.
    pub label_smoothing: f64,
}

/// Cross-entropy of `logits` (`[N, C]` or `[N, C, ...]`: classes on axis 1, as
/// PyTorch; or `[C]`) against integer class `targets` (`[N]` / `[N, ...]`) or
/// class probabilities (`logits`' shape). With `Mean`, index targets average over
/// the weights of the counted samples, as PyTorch does.
pub fn cross_entropy(
    logits: &Array,
    targets: &Array,
    opt: &CrossEntropy<'_>,
    r: Reduction,
) -> Result<Array> {
    let op = "cross_entropy";
    if !logits.dtype().is_float() {
        return Err(Error::invalid(
            op,
            format!("logits must be float, got {}", logits.dtype()),
        ));
    }
    if !(0.0..=1.0).contains(&opt.label_smoothing) {
        return Err(Error::invalid(
            op,
            format!(
                "label_smoothing must be in [0, 1], got {}",
                opt.label_smoothing
            ),
        ));
    }
    // Classes last, so every reduction below is over axis -1.
    let lg = if logits.ndim() >= 2 {
        crate::moveaxis(logits, 1, -1)?
    } else {
        logits.clone()
    };
    let classes = *lg
        .shape()
        .last()
        .ok_or_else(|| Error::invalid(op, "logits need a class axis"))?;
    let logp = crate::log_softmax(&lg, &[-1])?;
    let w = match opt.weights {
        Some(w) if w.shape() != [classes] => {
            return Err(Error::invalid(
                op,
                format!("weights must be [{classes}], got {:?}", w.shape()),
            ));
        }
        Some(w) => Some(crate::astype(w, logp.dtype())?),
        None => None,
    };
    let eps = opt.label_smoothing;
    if targets.dtype().is_int() {
        let want: Vec<usize> = lg.shape()[..lg.ndim() - 1].to_vec();
        if targets.shape() != want.as_slice() {
            return Err(Error::invalid(
                op,
                format!(
                    "index targets must be {want:?} for logits {:?}, got {:?}",
                    logits.shape(),
                    targets.shape()
                ),
            ));
        }
        let t = crate::astype(targets, DType::I32)?;
        let valid = match opt.ignore_index {
            Some(i) => crate::not_equal(&t, &crate::scalar_like(&t, i as f64)?)?,
            None => crate::full_like(&t, 1.0)?.astype(DType::Bool)?,
        };
        // Ignored samples read class 0 (any valid class) and are masked out.
        let safe = crate::where_(&valid, &t, &crate::zeros_like(&t)?)?;
        let idx = crate::expand_dims(&safe, -1)?;
        let picked = crate::squeeze(&crate::take_along_axis(&logp, &idx, Some(-1))?, Some(&[-1]))?;
        let sw = match &w {
            Some(w) => crate::take(w, &safe, Some(0))?,
            None => crate::ones_like(&picked)?,
        };
        let sw = crate::multiply(&sw, &crate::astype(&valid, sw.dtype())?)?;
        let mut nll = crate::negative(&crate::multiply(&picked, &sw)?)?;
        if eps > 0.0 {
            // The uniform part: -sum_c w_c logp_c / C per sample.
            let all = match &w {
                Some(w) => crate::multiply(&logp, w)?,
                None => logp.clone(),
            };
            let smooth = crate::negative(&crate::sum(&all, Some(&[-1]), false)?)?;
            let smooth = crate::multiply(&smooth, &crate::astype(&valid, smooth.dtype())?)?;
            nll = crate::add(
                &crate::multiply(&nll, &c(&nll, 1.0 - eps)?)?,
                &crate::multiply(&smooth, &c(&smooth, eps / classes as f64)?)?,
            )?;
        }
        return match r {
            Reduction::Mean => crate::divide(
                &crate::sum(&nll, None, false)?,
                &crate::sum(&sw, None, false)?,
            ),
            _ => reduce(nll, r),
        };
    }
    // Probability targets, classes on axis 1 as the logits.
    if targets.shape() != logits.shape() {
        return Err(Error::invalid(
            op,
            format!(
                "probability targets must have the logits' shape {:?}, got {:?}",
                logits.shape(),
                targets.shape()
            ),
        ));
    }
    let mut p = if targets.ndim() >= 2 {
        crate::moveaxis(targets, 1, -1)?
    } else {
        targets.clone()
    };
    p = crate::astype(&p, logp.dtype())?;
    if eps > 0.0 {
        p = crate::add(
            &crate::multiply(&p, &c(&p, 1.0 - eps)?)?,
            &c(&p, eps / classes as f64)?,
        )?;
    }
    let mut terms = crate::multiply(&p, &logp)?;
    if let Some(w) = &w {
        terms = crate::multiply(&terms, w)?;
    }
    reduce(
        crate::negative(&crate::sum(&terms, Some(&[-1]), false)?)?,
        r,
    )
}

/// Negative log-likelihood of log-probabilities `logp` (`[N, C]`) at class
/// `targets` (`[N]`).
pub fn nll(logp: &Array, targets: &Array, r: Reduction) -> Result<Array> {
    if logp.ndim() != 2 || targets.shape() != [logp.shape()[0]] || !targets.dtype().is_int() {
        return Err(Error::invalid(
            "nll",
            format!(
                "log-probabilities [N, C] and integer targets [N], got {:?} and {} {:?}",
                logp.shape(),
                targets.dtype(),
                targets.shape()
            ),
        ));
    }
    let idx = crate::expand_dims(&crate::astype(targets, DType::I32)?, -1)?;
    let picked = crate::squeeze(&crate::take_along_axis(logp, &idx, Some(-1))?, Some(&[-1]))?;
    reduce(crate::negative(&picked)?, r)
}

/// Binary cross-entropy of probabilities `p` against targets `y` in [0, 1]
/// (PyTorch's `BCELoss`: the logs clamped at -100).
pub fn binary_cross_entropy(p: &Array, y: &Array, r: Reduction) -> Result<Array> {
    same_shape("binary_cross_entropy", p, y)?;
    let lo = c(p, -100.0)?;
    let lp = crate::maximum(&crate::log(p)?, &lo)?;
    let l1p = crate::maximum(&crate::log1p(&crate::negative(p)?)?, &lo)?;
    let y = crate::astype(y, p.dtype())?;
    let one_y = crate::subtract(&c(&y, 1.0)?, &y)?;
    let l = crate::negative(&crate::add(
        &crate::multiply(&y, &lp)?,
        &crate::multiply(&one_y, &l1p)?,
    )?)?;
    reduce(l, r)
}

/// Binary cross-entropy of `logits` (PyTorch's `BCEWithLogitsLoss`, the stable
/// form `max(x, 0) - x y + log(1 + exp(-|x|))`).
pub fn binary_cross_entropy_with_logits(x: &Array, y: &Array, r: Reduction) -> Result<Array> {
    same_shape("binary_cross_entropy_with_logits", x, y)?;
    let y = crate::astype(y, x.dtype())?;
    let l = crate::subtract(&super::softplus(x)?, &crate::multiply(x, &y)?)?;
    reduce(l, r)
}

/// Kullback-Leibler divergence with log-probability inputs `logq` and target
/// probabilities `p`: `p (log p - logq)`, 0 where `p` is 0 (PyTorch's `kl_div`;
/// its `batchmean` is `Sum` divided by the batch).
pub fn kl_div(logq: &Array, p: &Array, r: Reduction) -> Result<Array> {
    same_shape("kl_div", logq, p)?;
    let pos = crate::greater(p, &c(p, 0.0)?)?;
    let safe = crate::where_(&pos, p, &crate::ones_like(p)?)?;
    let t = crate::multiply(p, &crate::subtract(&crate::log(&safe)?, logq)?)?;
    reduce(crate::where_(&pos, &t, &crate::zeros_like(&t)?)?, r)
}

/// Cosine similarity along `axis`: `x·y / max(|x| |y|, eps)`.
pub fn cosine_similarity(x: &Array, y: &Array, axis: isize, eps: f64) -> Result<Array> {
    same_shape("cosine_similarity", x, y)?;
    let dot = crate::sum(&crate::multiply(x, y)?, Some(&[axis]), false)?;
    let nx = crate::sum(&crate::multiply(x, x)?, Some(&[axis]), false)?;
    let ny = crate::sum(&crate::multiply(y, y)?, Some(&[axis]), false)?;
    let den = crate::sqrt(&crate::multiply(&nx, &ny)?)?;
    crate::divide(&dot, &crate::maximum(&den, &c(&den, eps)?)?)
}
