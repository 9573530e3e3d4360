//! Optimizers (MLX's `mlx.optimizers`, with PyTorch's update rules), learning-rate
//! schedules and gradient clipping.
//!
//! An optimizer maps parameters and their gradients (by name, [`crate::nn::Params`])
//! to new parameters, keeping its per-parameter state (momenta) as a tree of its
//! own that can be saved and loaded ([`Optimizer::state`]). Updates are lazy ops,
//! so under `compile` a step fuses into few kernels.

use crate::nn::{Module, ModuleExt, Params};
use crate::{Array, Error, Result, scalar_like as c};
use std::sync::Arc;

/// A learning rate by step (0 for the first update).
pub type Schedule = Arc<dyn Fn(usize) -> f64 + Send + Sync>;

/// A learning rate: fixed, or by step.
#[derive(Clone)]
pub enum LearningRate {
    /// The same every step.
    Fixed(f64),
    /// Given by the step.
    Scheduled(Schedule),
}

impl LearningRate {
    fn at(&self, step: usize) -> f64 {
        match self {
            LearningRate::Fixed(v) => *v,
            LearningRate::Scheduled(f) => f(step),
        }
    }
}

impl From<f64> for LearningRate {
    fn from(v: f64) -> LearningRate {
        LearningRate::Fixed(v)
    }
}

impl From<Schedule> for LearningRate {
    fn from(f: Schedule) -> LearningRate {
        LearningRate::Scheduled(f)
    }
}

/// What every optimizer does; [`Optimizer::update`] applies a step to a model.
pub trait Optimizer {
    /// The new values of `params` after one step with `grads` (both by name; a
    /// parameter without a gradient is left out of the result).
    fn step(&mut self, params: &Params, grads: &Params) -> Result<Params>;

    /// The optimizer's state: its step count (`"step"`) and per-parameter arrays
    /// (`"{name}.{slot}"`).
    fn state(&self) -> Params;

    /// Restores a state from [`Optimizer::state`].
    fn set_state(&mut self, state: &Params) -> Result<()>;

    /// One step on `model`'s trainable parameters with `grads` (from
    /// [`crate::nn::value_and_grad`]).
    fn update(&mut self, model: &dyn Module, grads: &Params) -> Result<()> {
        let params = model.trainable_parameters();
        for name in grads.keys() {
            if !params.contains_key(name) {
                return Err(Error::invalid(
                    "Optimizer::update",
                    format!(
                        "a gradient for {name:?}, which is no trainable parameter of the model"
                    ),
                ));
            }
        }
        let new = self.step(&params, grads)?;
        model.update(&new)
    }
}

/// The per-parameter slots, the step count, and their state tree.
#[derive(Default, Clone)]
struct Slots {
    step: usize,
    arrays: Params,
}

impl Slots {
    fn get(&self, name: &str, slot: &str) -> Option<&Array> {
        self.arrays.get(&format!("{name}.{slot}"))
    }
    fn put(&mut self, name: &str, slot: &str, a: Array) {
        self.arrays.insert(format!("{name}.{slot}"), a);
    }
    fn state(&self) -> Result<Params> {
        let mut s = self.arrays.clone();
        s.insert(
            "step".into(),
            crate::scalar(self.step as f64, crate::DType::U32)?,
        );
        Ok(s)
    }
    fn set(&mut self, state: &Params) -> Result<()> {
        let step = state
            .get("step")
            .ok_or_else(|| Error::invalid("set_state", "the state has no \"step\""))?;
        self.step = step.item::<u32>()? as usize;
        self.arrays = state
            .iter()
            .filter(|(k, _)| k.as_str() != "step")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(())
    }
}

fn pairs<'a>(
    params: &'a Params,
    grads: &'a Params,
) -> Result<impl Iterator<Item = (&'a String, &'a Array, &'a Array)>> {
    for (n, g) in grads {
        let p = params.get(n).ok_or_else(|| {
            Error::invalid(
                "optimizer",
                format!("a gradient for unknown parameter {n:?}"),
            )
        })?;
        if p.shape() != g.shape() {
            return Err(Error::invalid(
                "optimizer",
                format!("{n}: parameter {:?}, gradient {:?}", p.shape(), g.shape()),
            ));
        }
    }
    Ok(grads.iter().map(move |(n, g)| (n, &params[n], g)))
}

fn axpy(a: f64, x: &Array, y: &Array) -> Result<Array> {
    crate::add(&crate::multiply(x, &c(x, a)?)?, y)
}

/// Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight
/// decay (PyTorch's `SGD`).
#[derive(Clone)]
pub struct Sgd {
    /// The learning rate.
    pub lr: LearningRate,
    /// Momentum (0: none).
    pub momentum: f64,
    /// Dampening of the momentum's new gradient.
    pub dampening: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// Nesterov momentum.
    pub nesterov: bool,
    slots: Slots,
}

impl Sgd {
    /// Plain SGD with learning rate `lr`.
    pub fn new(lr: impl Into<LearningRate>) -> Sgd {
        Sgd {
            lr: lr.into(),
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            slots: Slots::default(),
        }
    }
    /// With momentum.
    pub fn momentum(mut self, momentum: f64, dampening: f64, nesterov: bool) -> Sgd {
        (self.momentum, self.dampening, self.nesterov) = (momentum, dampening, nesterov);
        self
    }
    /// With L2 weight decay.
    pub fn weight_decay(mut self, wd: f64) -> Sgd {
        self.weight_decay = wd;
        self
    }
}

impl Optimizer for Sgd {
    fn step(&mut self, params: &Params, grads: &Params) -> Result<Params> {
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(Error::invalid(
                "Sgd",
                "Nesterov momentum needs a positive momentum and no dampening",
            ));
        }
        let lr = self.lr.at(self.slots.step);
        let mut out = Params::new();
        for (n, p, g) in pairs(params, grads)? {
            let mut d = g.clone();
            if self.weight_decay != 0.0 {
                d = axpy(self.weight_decay, p, &d)?;
            }
            if self.momentum != 0.0 {
                let buf = match self.slots.get(n, "momentum") {
                    None => d.clone(),
                    Some(b) => crate::add(
                        &crate::multiply(b, &c(b, self.momentum)?)?,
                        &crate::multiply(&d, &c(&d, 1.0 - self.dampening)?)?,
                    )?,
                };
                d = if self.nesterov {
                    axpy(self.momentum, &buf, &d)?
                } else {
                    buf.clone()
                };
                self.slots.put(n, "momentum", buf);
            }
            out.insert(n.clone(), axpy(-lr, &d, p)?);
        }
        self.slots.step += 1;
        Ok(out)
    }
    fn state(&self) -> Params {
        self.slots.state().unwrap_or_default()
    }
    fn set_state(&mut self, state: &Params) -> Result<()> {
        self.slots.set(state)
    }
}

/// Adam (PyTorch's: bias-corrected moments, L2 `weight_decay` added to the
/// gradient), and AdamW with [`Adam::decoupled`] (the decay applied to the
/// parameter, as PyTorch's `AdamW`).
#[derive(Clone)]
pub struct Adam {
    /// The learning rate.
    pub lr: LearningRate,
    /// The moments' decay rates.
    pub betas: (f64, f64),
    /// Added to the denominator.
    pub eps: f64,
    /// Weight decay: L2 in the gradient, or decoupled (AdamW).
    pub weight_decay: f64,
    /// AdamW's decoupled decay.
    pub decoupled: bool,
    /// Divides the moments by `1 - beta^t` (PyTorch; MLX's default is off).
    pub bias_correction: bool,
    slots: Slots,
}

impl Adam {
    /// Adam with learning rate `lr`, betas (0.9, 0.999), eps 1e-8.
    pub fn new(lr: impl Into<LearningRate>) -> Adam {
        Adam {
            lr: lr.into(),
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            bias_correction: true,
            slots: Slots::default(),
        }
    }
    /// AdamW: decoupled weight decay `weight_decay` (PyTorch's default 0.01).
    pub fn adamw(lr: impl Into<LearningRate>, weight_decay: f64) -> Adam {
        Adam {
            weight_decay,
            decoupled: true,
            ..Adam::new(lr)
        }
    }
    /// With other betas.
    pub fn betas(mut self, b1: f64, b2: f64) -> Adam {
        self.betas = (b1, b2);
        self
    }
    /// With another eps.
    pub fn eps(mut self, eps: f64) -> Adam {
        self.eps = eps;
        self
    }
    /// With L2 weight decay (not decoupled: use [`Adam::adamw`] for that).
    pub fn weight_decay(mut self, wd: f64) -> Adam {
        self.weight_decay = wd;
        self
    }
}

impl Optimizer for Adam {
    fn step(&mut self, params: &Params, grads: &Params) -> Result<Params> {
        let (b1, b2) = self.betas;
        let t = self.slots.step + 1;
        let lr = self.lr.at(self.slots.step);
        let (c1, c2) = if self.bias_correction {
            (1.0 - b1.powi(t as i32), 1.0 - b2.powi(t as i32))
        } else {
            (1.0, 1.0)
        };
        let mut out = Params::new();
        for (n, p, g) in pairs(params, grads)? {
            let mut p = p.clone();
            let mut g = g.clone();
            if self.weight_decay != 0.0 {
                if self.decoupled {
                    p = crate::multiply(&p, &c(&p, 1.0 - lr * self.weight_decay)?)?;
                } else {
                    g = axpy(self.weight_decay, &p, &g)?;
                }
            }
            let zero = || crate::zeros_like(&g);
            let m = self.slots.get(n, "m").cloned().map_or_else(zero, Ok)?;
            let v = self.slots.get(n, "v").cloned().map_or_else(zero, Ok)?;
            let m = crate::add(
                &crate::multiply(&m, &c(&m, b1)?)?,
                &crate::multiply(&g, &c(&g, 1.0 - b1)?)?,
            )?;
            let v = crate::add(
                &crate::multiply(&v, &c(&v, b2)?)?,
                &crate::multiply(&crate::multiply(&g, &g)?, &c(&g, 1.0 - b2)?)?,
            )?;
            // p - lr/c1 * m / (sqrt(v / c2) + eps)
            let den = crate::add(
                &crate::sqrt(&crate::divide(&v, &c(&v, c2)?)?)?,
                &c(&v, self.eps)?,
            )?;
            let upd = crate::divide(&m, &den)?;
            out.insert(n.clone(), axpy(-lr / c1, &upd, &p)?);
            self.slots.put(n, "m", m);
            self.slots.put(n, "v", v);
        }
        self.slots.step += 1;
        Ok(out)
    }
    fn state(&self) -> Params {
        self.slots.state().unwrap_or_default()
    }
    fn set_state(&mut self, state: &Params) -> Result<()> {
        self.slots.set(state)
    }
}

/// Scales `grads` so their global L2 norm is at most `max_norm` (PyTorch's
/// `clip_grad_norm_`, factor `max_norm / (norm + 1e-6)` when above); returns the
/// clipped gradients and the norm before clipping.
pub fn clip_grad_norm(grads: &Params, max_norm: f64) -> Result<(Params, Array)> {
    if max_norm.is_nan() || max_norm <= 0.0 {
        return Err(Error::invalid(
            "clip_grad_norm",
            format!("max_norm must be positive, got {max_norm}"),
        ));
    }
    let mut total: Option<Array> = None;
    for g in grads.values() {
        let g32 = crate::astype(g, crate::DType::F32)?;
        let s = crate::sum(&crate::multiply(&g32, &g32)?, None, false)?;
        total = Some(match total {
            None => s,
            Some(t) => crate::add(&t, &s)?,
        });
    }
    let Some(total) = total else {
        return Ok((Params::new(), crate::scalar(0.0, crate::DType::F32)?));
    };
    let norm = crate::sqrt(&total)?;
    let factor = crate::minimum(
        &crate::divide(&c(&norm, max_norm)?, &crate::add(&norm, &c(&norm, 1e-6)?)?)?,
        &c(&norm, 1.0)?,
    )?;
    let clipped = grads
        .iter()
        .map(|(n, g)| {
            let f = crate::astype(&factor, g.dtype())?;
            Ok((n.clone(), crate::multiply(g, &f)?))
        })
        .collect::<Result<_>>()?;
    Ok((clipped, norm))
}

/// `lr * gamma^(step / step_size)` (PyTorch's `StepLR`).
pub fn step_decay(lr: f64, gamma: f64, step_size: usize) -> Schedule {
    let s = step_size.max(1);
    Arc::new(move |t| lr * gamma.powi((t / s) as i32))
}

/// `lr * gamma^step`.
pub fn exponential_decay(lr: f64, gamma: f64) -> Schedule {
    Arc::new(move |t| lr * gamma.powi(t as i32))
}

/// Cosine decay from `lr` to `end` over `steps` (then `end`).
pub fn cosine_decay(lr: f64, steps: usize, end: f64) -> Schedule {
    let n = steps.max(1) as f64;
    Arc::new(move |t| {
        let x = (t as f64).min(n) / n;
        end + (lr - end) * 0.5 * (1.0 + (std::f64::consts::PI * x).cos())
    })
}

/// Linear from `start` to `end` over `steps` (then `end`): a warm-up.
pub fn linear_schedule(start: f64, end: f64, steps: usize) -> Schedule {
    let n = steps.max(1) as f64;
    Arc::new(move |t| start + (end - start) * (t as f64).min(n) / n)
}

/// `schedules[i]` from `boundaries[i - 1]` on (each restarted at step 0 there),
/// MLX's `join_schedules`: e.g. a warm-up then a cosine decay.
pub fn join_schedules(schedules: Vec<Schedule>, boundaries: Vec<usize>) -> Result<Schedule> {
    if schedules.is_empty() || boundaries.len() + 1 != schedules.len() {
        return Err(Error::invalid(
            "join_schedules",
            format!(
                "{} schedules need {} boundaries, got {}",
                schedules.len(),
                schedules.len().saturating_sub(1),
                boundaries.len()
            ),
        ));
    }
    if boundaries.windows(2).any(|w| w[0] > w[1]) {
        return Err(Error::invalid(
            "join_schedules",
            format!("boundaries must increase, got {boundaries:?}"),
        ));
    }
    Ok(Arc::new(move |t| {
        let i = boundaries.iter().take_while(|&&b| t >= b).count();
        let start = if i == 0 { 0 } else { boundaries[i - 1] };
        schedules[i](t - start)
    }))
}
