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

/// The accessors of an optimizer's `state` field.
macro_rules! state_accessors {
    () => {
        fn opt_state(&self) -> &OptState {
            &self.state
        }
        fn opt_state_mut(&mut self) -> &mut OptState {
            &mut self.state
        }
    };
}

/// An optimizer's state: the steps taken and each parameter's slots
/// (`"{name}.{slot}"`: momenta).
#[derive(Default, Clone)]
pub struct OptState {
    /// Steps taken.
    pub step: usize,
    /// The slots by `"{parameter}.{slot}"`.
    pub slots: Params,
}

/// An optimizer: a rule for one parameter (`apply`, a pure function of arrays, so
/// the same code runs eagerly and inside a compiled step) with per-step scalars
/// (learning rate, bias corrections) computed on the host, and its state.
pub trait Optimizer {
    /// The per-step scalars `apply` reads, for step `step` (0 first).
    fn scalars(&self, step: usize) -> Vec<f64>;

    /// The names of a parameter's slots (`["m", "v"]` for Adam).
    fn slot_names(&self) -> &'static [&'static str];

    /// A parameter's slots before its first step, one per slot name: zeros of
    /// the parameter's shape unless the rule keeps others (Adafactor's factored
    /// moments).
    fn initial_slots(&self, p: &Array) -> Result<Vec<Array>> {
        self.slot_names()
            .iter()
            .map(|_| crate::contiguous(&crate::zeros_like(p)?))
            .collect()
    }

    /// The new value of parameter `p` and its new slots, from its gradient `g`,
    /// its slots (zeros before the first step) and the step's scalars (arrays).
    fn apply(
        &self,
        s: &[Array],
        p: &Array,
        g: &Array,
        slots: &[Array],
    ) -> Result<(Array, Vec<Array>)>;

    /// The state.
    fn opt_state(&self) -> &OptState;

    /// The state, to change.
    fn opt_state_mut(&mut self) -> &mut OptState;

    /// The new values of `params` after one step with `grads` (both by name; a
    /// parameter without a gradient is left out of the result).
    fn step(&mut self, params: &Params, grads: &Params) -> Result<Params> {
        let step = self.opt_state().step;
        let host = self.scalars(step);
        let mut out = Params::new();
        let mut slots_out = Vec::new();
        // The scalars as arrays, made once per device.
        let mut s: Option<(crate::Device, Vec<Array>)> = None;
        for (n, p, g) in pairs(params, grads)? {
            if s.as_ref().is_none_or(|(d, _)| d != p.device()) {
                let all = scalar_array(&host, p.device())?;
                s = Some((p.device().clone(), scalar_views(&all)?));
            }
            let s = &s.as_ref().expect("made above").1;
            let slots = slots_of(self, n, p)?;
            let (np, ns) = self.apply(s, p, g, &slots)?;
            out.insert(n.clone(), np);
            for (k, a) in self.slot_names().iter().zip(ns) {
                slots_out.push((format!("{n}.{k}"), a));
            }
        }
        let st = self.opt_state_mut();
        st.slots.extend(slots_out);
        st.step += 1;
        Ok(out)
    }

    /// The state as a tree: the step count (`"step"`, u32) and the slots.
    fn state(&self) -> Params {
        let mut s = self.opt_state().slots.clone();
        if let Ok(step) = crate::scalar(self.opt_state().step as f64, crate::DType::U32) {
            s.insert("step".into(), step);
        }
        s
    }

    /// Restores a state from [`Optimizer::state`].
    fn set_state(&mut self, state: &Params) -> Result<()> {
        let step = state
            .get("step")
            .ok_or_else(|| Error::invalid("set_state", "the state has no \"step\""))?;
        let step = step.item::<u32>()? as usize;
        let slots = state
            .iter()
            .filter(|(k, _)| k.as_str() != "step")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        *self.opt_state_mut() = OptState { step, slots };
        Ok(())
    }

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

/// The step's scalars as one f32 array on `device`.
fn scalar_array(host: &[f64], device: &crate::Device) -> Result<Array> {
    let v: Vec<f32> = host.iter().map(|&v| v as f32).collect();
    Array::from_slice_on(&v, &[v.len()], device)
}

/// The scalars of [`scalar_array`] as views: one buffer, so a fused update kernel
/// binds them once.
fn scalar_views(all: &Array) -> Result<Vec<Array>> {
    (0..all.shape()[0] as isize)
        .map(|i| all.slice(&[crate::Slice::range(i, i + 1)])?.reshape(&[]))
        .collect()
}

/// Parameter `n`'s slots: its state, or the rule's initial slots before its
/// first step (row-major: a compiled step's record is keyed by its inputs'
/// strides, and later calls pass its own row-major outputs).
fn slots_of<O: Optimizer + ?Sized>(opt: &O, n: &str, p: &Array) -> Result<Vec<Array>> {
    let st = opt.opt_state();
    let held: Vec<Option<Array>> = opt
        .slot_names()
        .iter()
        .map(|k| st.slots.get(&format!("{n}.{k}")).cloned())
        .collect();
    if held.iter().all(Option::is_some) {
        return Ok(held.into_iter().flatten().collect());
    }
    let init = opt.initial_slots(p)?;
    Ok(held
        .into_iter()
        .zip(init)
        .map(|(h, i)| h.unwrap_or(i))
        .collect())
}

/// `beta * m + (1 - beta) * x`: a moving average.
fn ema(m: &Array, x: &Array, beta: f64) -> Result<Array> {
    crate::add(
        &crate::multiply(m, &c(m, beta)?)?,
        &crate::multiply(x, &c(x, 1.0 - beta)?)?,
    )
}

/// The step's scalars in the parameter's dtype (they are f32 arrays).
fn in_dtype_of(s: &[Array], p: &Array) -> Result<Vec<Array>> {
    s.iter().map(|x| crate::astype(x, p.dtype())).collect()
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
    state: OptState,
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
            state: OptState::default(),
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
    /// `[lr, momentum, 1 - dampening]`; on the first step the momentum buffer is
    /// the gradient itself (PyTorch's), so `[lr, 0, 1]`.
    fn scalars(&self, step: usize) -> Vec<f64> {
        let lr = self.lr.at(step);
        if step == 0 {
            vec![lr, 0.0, 1.0]
        } else {
            vec![lr, self.momentum, 1.0 - self.dampening]
        }
    }

    fn slot_names(&self) -> &'static [&'static str] {
        if self.momentum != 0.0 {
            &["momentum"]
        } else {
            &[]
        }
    }

    fn apply(
        &self,
        s: &[Array],
        p: &Array,
        g: &Array,
        slots: &[Array],
    ) -> Result<(Array, Vec<Array>)> {
        let s = in_dtype_of(s, p)?;
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(Error::invalid(
                "Sgd",
                "Nesterov momentum needs a positive momentum and no dampening",
            ));
        }
        let (lr, mom, damp) = (&s[0], &s[1], &s[2]);
        let mut d = g.clone();
        if self.weight_decay != 0.0 {
            d = axpy(self.weight_decay, p, &d)?;
        }
        let mut new_slots = Vec::new();
        if self.momentum != 0.0 {
            let buf = crate::add(
                &crate::multiply(&slots[0], mom)?,
                &crate::multiply(&d, damp)?,
            )?;
            d = if self.nesterov {
                axpy(self.momentum, &buf, &d)?
            } else {
                buf.clone()
            };
            new_slots.push(buf);
        }
        Ok((crate::subtract(p, &crate::multiply(&d, lr)?)?, new_slots))
    }

    state_accessors!();
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
    state: OptState,
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
            state: OptState::default(),
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
    /// `[lr, lr / c1, 1 / c2, 1 - lr * weight_decay]` with the bias corrections
    /// `c = 1 - beta^t` (1 without bias correction).
    fn scalars(&self, step: usize) -> Vec<f64> {
        let (b1, b2) = self.betas;
        let t = (step + 1) as i32;
        let lr = self.lr.at(step);
        let (c1, c2) = if self.bias_correction {
            (1.0 - b1.powi(t), 1.0 - b2.powi(t))
        } else {
            (1.0, 1.0)
        };
        vec![lr, lr / c1, 1.0 / c2, 1.0 - lr * self.weight_decay]
    }

    fn slot_names(&self) -> &'static [&'static str] {
        &["m", "v"]
    }

    fn apply(
        &self,
        s: &[Array],
        p: &Array,
        g: &Array,
        slots: &[Array],
    ) -> Result<(Array, Vec<Array>)> {
        let s = in_dtype_of(s, p)?;
        let (b1, b2) = self.betas;
        let (step_size, inv_c2, decay) = (&s[1], &s[2], &s[3]);
        let mut p = p.clone();
        let mut g = g.clone();
        if self.weight_decay != 0.0 {
            if self.decoupled {
                p = crate::multiply(&p, decay)?;
            } else {
                g = axpy(self.weight_decay, &p, &g)?;
            }
        }
        let (m, v) = (&slots[0], &slots[1]);
        let m = ema(m, &g, b1)?;
        let v = ema(v, &crate::multiply(&g, &g)?, b2)?;
        // p - lr / c1 * m / (sqrt(v / c2) + eps)
        let den = crate::add(
            &crate::sqrt(&crate::multiply(&v, inv_c2)?)?,
            &c(&v, self.eps)?,
        )?;
        let upd = crate::multiply(&crate::divide(&m, &den)?, step_size)?;
        Ok((crate::subtract(&p, &upd)?, vec![m, v]))
    }

    state_accessors!();
}

/// Adagrad (PyTorch's: accumulated squared gradients, learning-rate decay, L2
/// weight decay).
#[derive(Clone)]
pub struct Adagrad {
    /// The learning rate.
    pub lr: LearningRate,
    /// Divides the rate by `1 + (t - 1) lr_decay` at step `t`.
    pub lr_decay: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// Added to the denominator.
    pub eps: f64,
    state: OptState,
}

impl Adagrad {
    /// Adagrad with learning rate `lr` (eps 1e-10).
    pub fn new(lr: impl Into<LearningRate>) -> Adagrad {
        Adagrad {
            lr: lr.into(),
            lr_decay: 0.0,
            weight_decay: 0.0,
            eps: 1e-10,
            state: OptState::default(),
        }
    }
}

impl Optimizer for Adagrad {
    fn scalars(&self, step: usize) -> Vec<f64> {
        vec![self.lr.at(step) / (1.0 + step as f64 * self.lr_decay)]
    }
    fn slot_names(&self) -> &'static [&'static str] {
        &["sum"]
    }
    fn apply(
        &self,
        s: &[Array],
        p: &Array,
        g: &Array,
        slots: &[Array],
    ) -> Result<(Array, Vec<Array>)> {
        let s = in_dtype_of(s, p)?;
        let g = if self.weight_decay != 0.0 {
            axpy(self.weight_decay, p, g)?
        } else {
            g.clone()
        };
        let sum = crate::add(&slots[0], &crate::multiply(&g, &g)?)?;
        let den = crate::add(&crate::sqrt(&sum)?, &c(&sum, self.eps)?)?;
        let upd = crate::multiply(&crate::divide(&g, &den)?, &s[0])?;
        Ok((crate::subtract(p, &upd)?, vec![sum]))
    }
    state_accessors!();
}

/// RMSprop (PyTorch's: smoothing `alpha`, optional momentum, centered variant, L2
/// weight decay).
#[derive(Clone)]
pub struct RmsProp {
    /// The learning rate.
    pub lr: LearningRate,
    /// Smoothing of the squared gradients.
    pub alpha: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
    /// Momentum of the scaled gradient (0: none).
    pub momentum: f64,
    /// Divides by the estimated variance instead of the second moment.
    pub centered: bool,
    state: OptState,
}

impl RmsProp {
    /// RMSprop with learning rate `lr` (alpha 0.99, eps 1e-8).
    pub fn new(lr: impl Into<LearningRate>) -> RmsProp {
        RmsProp {
            lr: lr.into(),
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
            state: OptState::default(),
        }
    }
}

impl Optimizer for RmsProp {
    fn scalars(&self, step: usize) -> Vec<f64> {
        vec![self.lr.at(step)]
    }
    fn slot_names(&self) -> &'static [&'static str] {
        match (self.momentum != 0.0, self.centered) {
            (false, false) => &["square_avg"],
            (true, false) => &["square_avg", "momentum"],
            (false, true) => &["square_avg", "grad_avg"],
            (true, true) => &["square_avg", "grad_avg", "momentum"],
        }
    }
    fn apply(
        &self,
        s: &[Array],
        p: &Array,
        g: &Array,
        slots: &[Array],
    ) -> Result<(Array, Vec<Array>)> {
        let s = in_dtype_of(s, p)?;
        let a = self.alpha;
        let g = if self.weight_decay != 0.0 {
            axpy(self.weight_decay, p, g)?
        } else {
            g.clone()
        };
        let sq = ema(&slots[0], &crate::multiply(&g, &g)?, a)?;
        let mut out = vec![sq.clone()];
        let var = if self.centered {
            let ga = ema(&slots[1], &g, a)?;
            let v = crate::subtract(&sq, &crate::multiply(&ga, &ga)?)?;
            out.push(ga);
            v
        } else {
            sq
        };
        let den = crate::add(&crate::sqrt(&var)?, &c(&var, self.eps)?)?;
        let step = if self.momentum != 0.0 {
            let buf = crate::add(
                &crate::multiply(slots.last().expect("momentum"), &c(&g, self.momentum)?)?,
                &crate::divide(&g, &den)?,
            )?;
            out.push(buf.clone());
            buf
        } else {
            crate::divide(&g, &den)?
        };
        Ok((crate::subtract(p, &crate::multiply(&step, &s[0])?)?, out))
    }
    state_accessors!();
}

/// Lion (Chen et al. 2023, as MLX's): the sign of an interpolation of the momentum
/// and the gradient, decoupled weight decay.
#[derive(Clone)]
pub struct Lion {
    /// The learning rate.
    pub lr: LearningRate,
    /// Interpolation (update) and momentum rates.
    pub betas: (f64, f64),
    /// Decoupled weight decay.
    pub weight_decay: f64,
    state: OptState,
}

impl Lion {
    /// Lion with learning rate `lr`, betas (0.9, 0.99).
    pub fn new(lr: impl Into<LearningRate>) -> Lion {
        Lion {
            lr: lr.into(),
            betas: (0.9, 0.99),
            weight_decay: 0.0,
            state: OptState::default(),
        }
    }
}

impl Optimizer for Lion {
    fn scalars(&self, step: usize) -> Vec<f64> {
        let lr = self.lr.at(step);
        vec![lr, 1.0 - lr * self.weight_decay]
    }
    fn slot_names(&self) -> &'static [&'static str] {
        &["m"]
    }
    fn apply(
        &self,
        s: &[Array],
        p: &Array,
        g: &Array,
        slots: &[Array],
    ) -> Result<(Array, Vec<Array>)> {
        let s = in_dtype_of(s, p)?;
        let (b1, b2) = self.betas;
        let m = &slots[0];
        let mix = ema(m, g, b1)?;
        let p = crate::multiply(p, &s[1])?;
        let p = crate::subtract(&p, &crate::multiply(&crate::sign(&mix)?, &s[0])?)?;
        let m = ema(m, g, b2)?;
        Ok((p, vec![m]))
    }
    state_accessors!();
}

/// Adafactor (Shazeer and Stern 2018, as MLX's `Adafactor`): second moments kept
/// as row and column averages for parameters of two or more dimensions (a full
/// one for vectors), updates clipped by their RMS, and by default a relative step
/// size `min(1e-2, 1/sqrt(t))` scaled by the parameter's RMS in place of a
/// learning rate.
#[derive(Clone)]
pub struct Adafactor {
    /// The learning rate, used when `relative_step` is off.
    pub lr: Option<LearningRate>,
    /// Added to the squared gradients, and the least parameter scale.
    pub eps: (f64, f64),
    /// The update's RMS is clipped to this.
    pub clip_threshold: f64,
    /// The second moments' decay is `1 - t^decay_rate`.
    pub decay_rate: f64,
    /// A first moment of the updates, with this rate (`None`: none).
    pub beta_1: Option<f64>,
    /// Decoupled weight decay, scaled by the step size.
    pub weight_decay: f64,
    /// The step size is scaled by the parameter's RMS (at least `eps.1`).
    pub scale_parameter: bool,
    /// The step size is `min(1e-2, 1/sqrt(t))` (`min(1e-6 t, 1/sqrt(t))` with
    /// `warmup_init`), not the learning rate.
    pub relative_step: bool,
    /// See `relative_step`.
    pub warmup_init: bool,
    state: OptState,
}

impl Default for Adafactor {
    /// MLX's defaults: relative step sizes scaled by the parameter's RMS,
    /// eps (1e-30, 1e-3), clip 1, decay rate -0.8, no first moment.
    fn default() -> Self {
        Adafactor {
            lr: None,
            eps: (1e-30, 1e-3),
            clip_threshold: 1.0,
            decay_rate: -0.8,
            beta_1: None,
            weight_decay: 0.0,
            scale_parameter: true,
            relative_step: true,
            warmup_init: false,
            state: OptState::default(),
        }
    }
}

impl Adafactor {
    /// Adafactor with relative step sizes (MLX's defaults).
    pub fn new() -> Adafactor {
        Adafactor::default()
    }

    /// Adafactor with learning rate `lr` instead of relative step sizes.
    pub fn with_lr(lr: impl Into<LearningRate>) -> Adafactor {
        Adafactor {
            lr: Some(lr.into()),
            relative_step: false,
            ..Adafactor::default()
        }
    }
}

/// The root mean square of `x` (a 0-d array).
fn rms(x: &Array) -> Result<Array> {
    crate::sqrt(&crate::mean(&crate::multiply(x, x)?, None, false)?)
}

impl Optimizer for Adafactor {
    fn scalars(&self, step: usize) -> Vec<f64> {
        let t = (step + 1) as f64;
        let size = if self.relative_step {
            let min = if self.warmup_init { 1e-6 * t } else { 1e-2 };
            min.min(1.0 / t.sqrt())
        } else {
            // `new` and `with_lr` set one or the other; a missing rate is 0.
            self.lr.as_ref().map_or(0.0, |lr| lr.at(step))
        };
        vec![size, 1.0 - t.powf(self.decay_rate)]
    }
    fn slot_names(&self) -> &'static [&'static str] {
        if self.beta_1.is_some() {
            &["exp_avg_sq_row", "exp_avg_sq_col", "exp_avg_sq", "exp_avg"]
        } else {
            &["exp_avg_sq_row", "exp_avg_sq_col", "exp_avg_sq"]
        }
    }
    fn initial_slots(&self, p: &Array) -> Result<Vec<Array>> {
        let zeros =
            |shape: &[usize]| crate::with_device(p.device(), || crate::zeros(shape, p.dtype()));
        let sh = p.shape();
        // The slots a parameter does not use are 0-d zeros.
        let mut out = if sh.len() >= 2 {
            let mut col = sh[..sh.len() - 2].to_vec();
            col.push(sh[sh.len() - 1]);
            vec![zeros(&sh[..sh.len() - 1])?, zeros(&col)?, zeros(&[])?]
        } else {
            vec![
                zeros(&[])?,
                zeros(&[])?,
                crate::contiguous(&crate::zeros_like(p)?)?,
            ]
        };
        if self.beta_1.is_some() {
            out.push(crate::contiguous(&crate::zeros_like(p)?)?);
        }
        Ok(out)
    }
    fn apply(
        &self,
        s: &[Array],
        p: &Array,
        g: &Array,
        slots: &[Array],
    ) -> Result<(Array, Vec<Array>)> {
        let s = in_dtype_of(s, p)?;
        let (size, beta2) = (&s[0], &s[1]);
        let one_minus = crate::subtract(&c(beta2, 1.0)?, beta2)?;
        let ema2 = |m: &Array, x: &Array| -> Result<Array> {
            crate::add(
                &crate::multiply(beta2, m)?,
                &crate::multiply(&one_minus, x)?,
            )
        };
        let lr = if self.scale_parameter {
            crate::multiply(&crate::maximum(&c(p, self.eps.1)?, &rms(p)?)?, size)?
        } else {
            size.clone()
        };
        let sq = crate::add(&crate::multiply(g, g)?, &c(g, self.eps.0)?)?;
        let mut out = slots[..3].to_vec();
        let update = if p.ndim() >= 2 {
            let row = ema2(&slots[0], &crate::mean(&sq, Some(&[-1]), false)?)?;
            let col = ema2(&slots[1], &crate::mean(&sq, Some(&[-2]), false)?)?;
            let r = crate::rsqrt(&crate::divide(
                &row,
                &crate::mean(&row, Some(&[-1]), true)?,
            )?)?;
            let cf = crate::rsqrt(&col)?;
            let approx =
                crate::multiply(&crate::expand_dims(&r, -1)?, &crate::expand_dims(&cf, -2)?)?;
            (out[0], out[1]) = (row, col);
            crate::multiply(&approx, g)?
        } else {
            let v = ema2(&slots[2], &sq)?;
            out[2] = v.clone();
            crate::multiply(&crate::rsqrt(&v)?, g)?
        };
        let clip = crate::maximum(
            &c(&update, 1.0)?,
            &crate::divide(&rms(&update)?, &c(&update, self.clip_threshold)?)?,
        )?;
        let mut update = crate::multiply(&crate::divide(&update, &clip)?, &lr)?;
        if let Some(b1) = self.beta_1 {
            update = ema(&slots[3], &update, b1)?;
            out.push(update.clone());
        }
        let p = if self.weight_decay != 0.0 {
            crate::add(
                p,
                &crate::multiply(&crate::multiply(p, &lr)?, &c(p, -self.weight_decay)?)?,
            )?
        } else {
            p.clone()
        };
        Ok((crate::subtract(&p, &update)?, out))
    }
    state_accessors!();
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

/// A training step compiled once (MLX's `mx.compile(step, inputs=state,
/// outputs=state)`): the loss, its gradients and the optimizer's update of every
/// trainable parameter in one traced function, whose inputs are the step's
/// scalars, the parameters, the optimizer's slots and the batch, and whose outputs
/// are the new parameters, the new slots and the loss. Calls with batches of one
/// shape replay the record (no retrace: [`CompiledStep::traces`]); on the GPU its
/// elementwise work fuses into few kernels.
///
/// The trainable set is fixed when the step is made, and frozen parameters are
/// constants of the record: make a new step after freezing or unfreezing. Layers
/// that draw random numbers (dropout) or keep statistics (batch normalisation's
/// running mean and variance) are not state of the record: train them with the
/// eager [`Optimizer::update`].
pub struct CompiledStep<M: Module + 'static, O: Optimizer> {
    model: Arc<M>,
    opt: O,
    names: Vec<String>,
    compiled: crate::Compiled,
}

/// Compiles one training step of `model` with `opt` on the loss `loss(model,
/// batch)` (see [`CompiledStep`]).
pub fn compile_step<M, O, F>(model: Arc<M>, opt: O, loss: F) -> Result<CompiledStep<M, O>>
where
    M: Module + 'static,
    O: Optimizer + Clone + Send + Sync + 'static,
    F: Fn(&M, &[Array]) -> Result<Array> + Send + Sync + 'static,
{
    compile_step_with(model, opt, loss, Ok)
}

/// [`compile_step`] with the gradients passed through `grads` before the update,
/// inside the compiled step: clipping, or averaging over the ranks of a
/// data-parallel job (`|g| nn::average_gradients(&g, &world, None)`).
pub fn compile_step_with<M, O, F, G>(
    model: Arc<M>,
    opt: O,
    loss: F,
    grads: G,
) -> Result<CompiledStep<M, O>>
where
    M: Module + 'static,
    O: Optimizer + Clone + Send + Sync + 'static,
    F: Fn(&M, &[Array]) -> Result<Array> + Send + Sync + 'static,
    G: Fn(Params) -> Result<Params> + Send + Sync + 'static,
{
    let params: Vec<(String, crate::nn::Param)> = model
        .named_parameters()
        .into_iter()
        .filter(|(_, p)| p.trainable())
        .collect();
    let names: Vec<String> = params.iter().map(|(n, _)| n.clone()).collect();
    let ns = opt.slot_names().len();
    let np = params.len();
    let rule = opt.clone();
    let m = model.clone();
    let names_in = names.clone();
    let f = move |a: &[Array]| -> Result<Vec<Array>> {
        let s = scalar_views(&a[0])?;
        let s = &s[..];
        let (p, rest) = a[1..].split_at(np);
        let (slots, batch) = rest.split_at(np * ns);
        // The parameters hold the traced arrays while the loss runs.
        let saved: Vec<Array> = params.iter().map(|(_, q)| q.value()).collect();
        for ((_, q), v) in params.iter().zip(p) {
            q.set(v.clone())?;
        }
        let model_ref: &M = &m;
        let run = crate::nn::value_and_grad(model_ref, |b: &[Array]| loss(model_ref, b))(batch);
        for ((_, q), v) in params.iter().zip(&saved) {
            q.set(v.clone())?;
        }
        let (value, g) = run?;
        let grads = grads(g)?;
        let mut new_p = Vec::with_capacity(np);
        let mut new_s = Vec::with_capacity(np * ns);
        for (i, name) in names_in.iter().enumerate() {
            let (q, sl) = rule.apply(s, &p[i], &grads[name], &slots[i * ns..(i + 1) * ns])?;
            new_p.push(q);
            new_s.extend(sl);
        }
        new_p.extend(new_s);
        new_p.push(value);
        Ok(new_p)
    };
    Ok(CompiledStep {
        model,
        opt,
        names,
        compiled: crate::compile(f),
    })
}

impl<M: Module + 'static, O: Optimizer> CompiledStep<M, O> {
    /// One step on `batch`: the model's parameters and the optimizer's state are
    /// updated; returns the loss (lazy).
    pub fn call(&mut self, batch: &[Array]) -> Result<Array> {
        let params = self.model.parameters();
        let step = self.opt.opt_state().step;
        let device = params
            .values()
            .next()
            .map(|p| p.device().clone())
            .map_or_else(crate::default_device, Ok)?;
        let mut inputs = vec![scalar_array(&self.opt.scalars(step), &device)?];
        let slot_names = self.opt.slot_names();
        let mut slots = Vec::new();
        for n in &self.names {
            let p = &params[n];
            inputs.push(p.clone());
            slots.extend(slots_of(&self.opt, n, p)?);
        }
        inputs.extend(slots);
        inputs.extend(batch.iter().cloned());
        let mut out = self.compiled.call(&inputs)?;
        let loss = out.pop().expect("the loss");
        let np = self.names.len();
        let new_slots = out.split_off(np);
        let update: Params = self.names.iter().cloned().zip(out).collect();
        self.model.update(&update)?;
        let st = self.opt.opt_state_mut();
        for (i, n) in self.names.iter().enumerate() {
            for (j, k) in slot_names.iter().enumerate() {
                st.slots.insert(
                    format!("{n}.{k}"),
                    new_slots[i * slot_names.len() + j].clone(),
                );
            }
        }
        st.step += 1;
        Ok(loss)
    }

    /// How many times the step was traced (1 after any number of calls with
    /// batches of one shape).
    pub fn traces(&self) -> usize {
        self.compiled.traces()
    }

    /// The optimizer (its state, to save).
    pub fn optimizer(&self) -> &O {
        &self.opt
    }
}
