//! Neural-network building blocks, MLX's `mlx.nn` in Rust: parameters and modules,
//! layers, activations, initialisers and losses, all composed of wmx ops (so they
//! differentiate, vmap and fuse under `compile` like any op).
//!
//! A model is a tree of [`Module`]s holding [`Param`]s. A `Param` is a shared,
//! replaceable array (cloning one shares it), so a model can be updated in place
//! through `&self`: by an optimizer, by [`ModuleExt::update`], or by
//! [`value_and_grad`], which traces the loss with the parameters swapped for its
//! own arrays. Parameters have dotted names from the module tree
//! (`layers.0.weight`), the names PyTorch and MLX state dicts use, so
//! [`ModuleExt::save_weights`] / [`ModuleExt::load_weights`] exchange checkpoints
//! with them through safetensors.
//!
//! ```
//! use wmx_core::{nn::{self, Layer, ModuleExt}, optim::{self, Optimizer}, Array, DType};
//! # fn main() -> wmx_core::Result<()> {
//! let key = wmx_core::random::key(0)?;
//! let keys = wmx_core::random::split(&key, 2)?;
//! let k = |i: isize| keys.slice(&[wmx_core::Slice::range(i, i + 1)])?.reshape(&[2]);
//! let model = nn::Sequential::new()
//!     .push(nn::Linear::new(&k(0)?, 4, 8, true)?)
//!     .push(nn::Activation::Relu)
//!     .push(nn::Linear::new(&k(1)?, 8, 1, true)?);
//! let x = wmx_core::ones(&[16, 4], DType::F32)?;
//! let y = wmx_core::zeros(&[16, 1], DType::F32)?;
//! let mut opt = optim::Adam::new(1e-2);
//! let step = nn::value_and_grad(&model, |a: &[Array]| {
//!     nn::losses::mse(&model.forward(&a[0])?, &a[1], nn::losses::Reduction::Mean)
//! });
//! for _ in 0..5 {
//!     let (loss, grads) = step(&[x.clone(), y.clone()])?;
//!     opt.update(&model, &grads)?;
//!     assert!(loss.item::<f32>()?.is_finite());
//! }
//! # Ok(()) }
//! ```

mod activations;
mod cache;
mod conv;
pub mod init;
mod layers;
pub(crate) use layers::LinearGroup;
pub mod losses;
mod quantized;
mod sharded;

pub use activations::{
    Activation, Gelu, elu, gelu, gelu_approx, gelu_fast, glu, hardswish, leaky_relu, log_sigmoid,
    mish, relu, relu6, selu, silu, softplus,
};
pub use cache::KvCache;
pub use conv::{
    AdaptiveAvgPool, AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AvgPool1d, AvgPool2d,
    AvgPool3d, Conv, Conv1d, Conv2d, Conv3d, ConvConfig, ConvTranspose1d, ConvTranspose2d,
    ConvTranspose3d, MaxPool1d, MaxPool2d, MaxPool3d, Pool,
};
pub use layers::{
    BatchNorm, Dropout, Embedding, Flatten, GroupNorm, LayerNorm, Linear, MultiHeadAttention,
    RmsNorm, Sequential, TransformerBlock,
};
pub use quantized::quantize;
pub use sharded::{
    AllToShardedLinear, GRADIENT_BUCKET_BYTES, ShardedToAllLinear, average_gradients,
    sum_gradients, sum_replicated,
};

use crate::{Array, Error, Result};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Arrays by dotted name: a model's parameters, their gradients, an optimizer's
/// state.
pub type Params = BTreeMap<String, Array>;

/// A model parameter: an array shared by every clone of the `Param` (the module
/// holding it, an optimizer updating it), replaceable through `&self`, and
/// trainable unless frozen.
#[derive(Clone)]
pub struct Param(Arc<Mutex<Slot>>);

struct Slot {
    value: Array,
    trainable: bool,
}

impl Param {
    /// A trainable parameter holding `value`.
    pub fn new(value: Array) -> Param {
        Param(Arc::new(Mutex::new(Slot {
            value,
            trainable: true,
        })))
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current array (a cheap handle to it).
    pub fn value(&self) -> Array {
        self.slot().value.clone()
    }

    /// Replaces the array: an `Err` unless `value` has the same shape and dtype.
    pub fn set(&self, value: Array) -> Result<()> {
        let mut s = self.slot();
        if value.shape() != s.value.shape() || value.dtype() != s.value.dtype() {
            return Err(Error::invalid(
                "Param::set",
                format!(
                    "a {} {:?} parameter cannot hold a {} {:?} array",
                    s.value.dtype(),
                    s.value.shape(),
                    value.dtype(),
                    value.shape()
                ),
            ));
        }
        s.value = value;
        Ok(())
    }

    /// Replaces the array whatever its shape and dtype (a layer changing form:
    /// quantization).
    pub(crate) fn replace(&self, value: Array) {
        self.slot().value = value;
    }

    /// Whether optimizers and [`value_and_grad`] see it.
    pub fn trainable(&self) -> bool {
        self.slot().trainable
    }

    /// Freezes (`false`) or unfreezes it.
    pub fn set_trainable(&self, trainable: bool) {
        self.slot().trainable = trainable;
    }
}

impl std::fmt::Debug for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.value();
        write!(f, "Param({} {:?})", v.dtype(), v.shape())
    }
}

/// What [`Module::visit`] is called with.
pub trait Visitor {
    /// A parameter of the module, by its field name.
    fn param(&mut self, name: &str, p: &Param);
    /// A submodule, by its field name (or index in a list).
    fn module(&mut self, name: &str, m: &dyn Module);
}

/// A node of a model: its parameters and submodules by name.
///
/// ```
/// use wmx_core::nn::{Linear, Module, Param, Visitor};
/// /// A layer of your own: one line per field in `visit`.
/// struct Block { proj: Linear, scale: Param }
/// impl Module for Block {
///     fn visit(&self, v: &mut dyn Visitor) {
///         v.module("proj", &self.proj);
///         v.param("scale", &self.scale);
///     }
/// }
/// ```
pub trait Module: Send + Sync {
    /// Calls `v.param` for each parameter and `v.module` for each submodule.
    fn visit(&self, v: &mut dyn Visitor);

    /// Switches this module (not its children: [`ModuleExt::train`] walks them)
    /// between training and evaluation; only modules that behave differently
    /// (dropout) override it.
    fn set_training(&self, training: bool) {
        let _ = training;
    }

    /// Quantizes this module's own weights in place for [`quantize`] (`Ok(true)`),
    /// or declines (`Ok(false)`: [`quantize`] then visits its children). Only
    /// layers with a quantized form ([`Linear`], [`Embedding`]) override it.
    fn quantize_layer(&self, group_size: usize, bits: usize) -> Result<bool> {
        let _ = (group_size, bits);
        Ok(false)
    }
}

/// A module applied to one array (what [`Sequential`] chains).
pub trait Layer: Module {
    /// The layer's output for `x`.
    fn forward(&self, x: &Array) -> Result<Array>;
}

/// Every parameter of `m` with its dotted name, in visiting order.
fn walk(m: &dyn Module, prefix: &str, out: &mut Vec<(String, Param)>) {
    struct W<'a> {
        prefix: &'a str,
        out: &'a mut Vec<(String, Param)>,
    }
    impl Visitor for W<'_> {
        fn param(&mut self, name: &str, p: &Param) {
            self.out.push((join(self.prefix, name), p.clone()));
        }
        fn module(&mut self, name: &str, m: &dyn Module) {
            walk(m, &join(self.prefix, name), self.out);
        }
    }
    m.visit(&mut W { prefix, out });
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn modes(m: &dyn Module, training: bool) {
    struct W(bool);
    impl Visitor for W {
        fn param(&mut self, _: &str, _: &Param) {}
        fn module(&mut self, _: &str, m: &dyn Module) {
            modes(m, self.0);
        }
    }
    m.set_training(training);
    m.visit(&mut W(training));
}

/// What every module can do, through its [`Module::visit`].
pub trait ModuleExt: Module {
    /// Every parameter with its dotted name.
    fn named_parameters(&self) -> Vec<(String, Param)> {
        let mut out = Vec::new();
        walk(self.as_dyn(), "", &mut out);
        out
    }

    /// The parameters' arrays by name.
    fn parameters(&self) -> Params {
        self.named_parameters()
            .into_iter()
            .map(|(n, p)| (n, p.value()))
            .collect()
    }

    /// The trainable (not frozen) parameters' arrays by name.
    fn trainable_parameters(&self) -> Params {
        self.named_parameters()
            .into_iter()
            .filter(|(_, p)| p.trainable())
            .map(|(n, p)| (n, p.value()))
            .collect()
    }

    /// Sets the named parameters to `params`' arrays: an `Err` naming the first
    /// unknown name or mismatched shape or dtype, before anything is changed.
    fn update(&self, params: &Params) -> Result<()> {
        let mine: BTreeMap<String, Param> = self.named_parameters().into_iter().collect();
        for (name, a) in params {
            let p = mine.get(name).ok_or_else(|| {
                Error::invalid("update", format!("the model has no parameter {name:?}"))
            })?;
            let v = p.value();
            if v.shape() != a.shape() || v.dtype() != a.dtype() {
                return Err(Error::invalid(
                    "update",
                    format!(
                        "{name}: the model's is {} {:?}, the update's {} {:?}",
                        v.dtype(),
                        v.shape(),
                        a.dtype(),
                        a.shape()
                    ),
                ));
            }
        }
        for (name, a) in params {
            mine[name].set(a.clone())?;
        }
        Ok(())
    }

    /// Freezes the parameters whose name starts with `prefix` (all with `""`).
    fn freeze(&self, prefix: &str) {
        for (n, p) in self.named_parameters() {
            if under(&n, prefix) {
                p.set_trainable(false);
            }
        }
    }

    /// Unfreezes the parameters whose name starts with `prefix` (all with `""`).
    fn unfreeze(&self, prefix: &str) {
        for (n, p) in self.named_parameters() {
            if under(&n, prefix) {
                p.set_trainable(true);
            }
        }
    }

    /// Training (`true`) or evaluation mode for the module and all it holds.
    fn train(&self, training: bool) {
        modes(self.as_dyn(), training);
    }

    /// Saves the parameters to a safetensors file, by name (atomically: a failed
    /// save leaves an existing file as it was).
    #[cfg(all(feature = "io", not(target_arch = "wasm32")))]
    fn save_weights(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let params = self.parameters();
        let list: Vec<(&str, &Array)> = params.iter().map(|(n, a)| (n.as_str(), a)).collect();
        crate::io::save_safetensors(path, &list)
    }

    /// Loads parameters from a safetensors file: every parameter must be in the
    /// file with its shape and dtype, and the file must hold nothing else; an `Err`
    /// lists the missing, unexpected and mismatched names, and nothing changes.
    #[cfg(all(feature = "io", not(target_arch = "wasm32")))]
    fn load_weights(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        let path = path.as_ref();
        let file: Params = crate::io::load_safetensors(path)?.into_iter().collect();
        let mine = self.parameters();
        let missing: Vec<&String> = mine.keys().filter(|n| !file.contains_key(*n)).collect();
        let unexpected: Vec<&String> = file.keys().filter(|n| !mine.contains_key(*n)).collect();
        let wrong: Vec<String> = mine
            .iter()
            .filter_map(|(n, a)| {
                let f = file.get(n)?;
                (f.shape() != a.shape() || f.dtype() != a.dtype()).then(|| {
                    format!(
                        "{n} (model {} {:?}, file {} {:?})",
                        a.dtype(),
                        a.shape(),
                        f.dtype(),
                        f.shape()
                    )
                })
            })
            .collect();
        if !missing.is_empty() || !unexpected.is_empty() || !wrong.is_empty() {
            return Err(Error::invalid(
                "load_weights",
                format!(
                    "{} does not fit the model: missing {missing:?}, unexpected {unexpected:?}, mismatched {wrong:?}",
                    path.display()
                ),
            ));
        }
        let on: Params = file
            .into_iter()
            .map(|(n, a)| {
                let d = mine[&n].device().clone();
                Ok((n, a.to_device(&d)?))
            })
            .collect::<Result<_>>()?;
        self.update(&on)
    }

    #[doc(hidden)]
    fn as_dyn(&self) -> &dyn Module;
}

impl<M: Module> ModuleExt for M {
    fn as_dyn(&self) -> &dyn Module {
        self
    }
}

impl<'a> ModuleExt for dyn Module + 'a {
    fn as_dyn(&self) -> &dyn Module {
        self
    }
}

fn under(name: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || name == prefix
        || name
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// `f`'s value and its gradient with respect to `model`'s trainable parameters, by
/// name (MLX's `nn.value_and_grad`). `f` takes the arrays the returned function is
/// called with and returns a one-element loss; it reads the parameters through the
/// model as usual (they hold the traced arrays while it runs, and their own
/// arrays again after).
pub fn value_and_grad<'m, F>(
    model: &'m dyn Module,
    f: F,
) -> impl Fn(&[Array]) -> Result<(Array, Params)> + 'm
where
    F: Fn(&[Array]) -> Result<Array> + 'm,
{
    move |inputs: &[Array]| {
        let mut params = model.named_parameters();
        params.retain(|(_, p)| p.trainable());
        let n = params.len();
        let mut args: Vec<Array> = params.iter().map(|(_, p)| p.value()).collect();
        args.extend(inputs.iter().cloned());
        let saved = args[..n].to_vec();
        let traced = |a: &[Array]| -> Result<Vec<Array>> {
            // The parameters hold the traced arrays while `f` runs.
            let restore = Restore(&params, &saved);
            for ((_, p), v) in params.iter().zip(a) {
                p.set(v.clone())?;
            }
            let loss = f(&a[n..]);
            drop(restore);
            Ok(vec![loss?])
        };
        let argnums: Vec<usize> = (0..n).collect();
        let (value, grads) = crate::value_and_grad(traced, &argnums)(&args)?;
        let grads = params
            .iter()
            .map(|(name, _)| name.clone())
            .zip(grads)
            .collect();
        Ok((value.into_iter().next().expect("one output"), grads))
    }
}

/// Runs `f` with `model`'s floating-point parameters read as `dtype`: mixed
/// precision with master weights, as PyTorch's `autocast` with f32 parameters.
/// Each parameter is cast on entry (a differentiable [`crate::astype`], so under
/// [`value_and_grad`] or a compiled step the gradients reach the parameters in
/// their own dtype, for the optimizer to update them there) and holds its own
/// array again when `f` returns, fails or panics. Integer parameters (packed
/// quantized weights) are left as they are. While `f` runs, other holders of the
/// same parameters read the casts too.
///
/// ```
/// use wmx_core::{nn::{self, Layer}, Array, DType};
/// # fn main() -> wmx_core::Result<()> {
/// let layer = nn::Linear::new(&wmx_core::random::key(0)?, 4, 2, true)?;
/// let x = wmx_core::ones(&[3, 4], DType::F16)?;
/// let y = nn::autocast(&layer, DType::F16, || layer.forward(&x))?;
/// assert_eq!(y.dtype(), DType::F16);
/// # Ok(()) }
/// ```
pub fn autocast<R>(
    model: &dyn Module,
    dtype: crate::DType,
    f: impl FnOnce() -> Result<R>,
) -> Result<R> {
    if !dtype.is_float() {
        return Err(Error::invalid(
            "autocast",
            format!("parameters can be read as a float dtype, not {dtype}"),
        ));
    }
    let params = model.named_parameters();
    let saved: Vec<Array> = params.iter().map(|(_, p)| p.value()).collect();
    let casts = saved
        .iter()
        .map(|v| {
            if v.dtype().is_float() && v.dtype() != dtype {
                crate::astype(v, dtype)
            } else {
                Ok(v.clone())
            }
        })
        .collect::<Result<Vec<_>>>()?;
    /// Puts the parameters' own arrays back (dtype and all) when dropped.
    struct Back<'a>(&'a [(String, Param)], &'a [Array]);
    impl Drop for Back<'_> {
        fn drop(&mut self) {
            for ((_, p), v) in self.0.iter().zip(self.1) {
                p.replace(v.clone());
            }
        }
    }
    let back = Back(&params, &saved);
    for ((_, p), c) in params.iter().zip(casts) {
        p.replace(c);
    }
    let r = f();
    drop(back);
    r
}

/// Puts the saved arrays back into the parameters when dropped (also when `f`
/// fails or panics).
struct Restore<'a>(&'a [(String, Param)], &'a [Array]);

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        for ((_, p), v) in self.0.iter().zip(self.1) {
            let _ = p.set(v.clone());
        }
    }
}
