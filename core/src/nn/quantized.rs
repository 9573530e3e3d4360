//! Quantized layers, MLX's `nn.QuantizedLinear`, `nn.QuantizedEmbedding` and
//! `nn.quantize`: a [`Linear`](super::Linear) or [`Embedding`](super::Embedding)
//! quantized in place. Its `weight` then holds the packed values (u32, MLX's
//! layout) beside two new parameters, `scales` and `biases`, so an MLX-quantized
//! checkpoint loads by name after [`quantize`] has made the model's layers
//! quantized; the three are frozen (as in MLX), a bias stays as it was.

use super::{Module, Param, Visitor};
use crate::{Array, Error, Result};
use std::sync::{Arc, Mutex};

/// A layer's quantized state, shared by its clones: none until quantized.
#[derive(Clone, Default)]
pub(crate) struct QuantSlot(Arc<Mutex<Option<Quantized>>>);

/// The extra parameters and the format of a quantized layer.
#[derive(Clone)]
pub(crate) struct Quantized {
    pub(crate) scales: Param,
    pub(crate) biases: Param,
    pub(crate) group_size: usize,
    pub(crate) bits: usize,
}

/// A parameter no optimizer updates (a quantized layer's, as in MLX).
fn frozen(a: Array) -> Param {
    let p = Param::new(a);
    p.set_trainable(false);
    p
}

impl Quantized {
    fn new(scales: Array, biases: Array, group_size: usize, bits: usize) -> Quantized {
        Quantized {
            scales: frozen(scales),
            biases: frozen(biases),
            group_size,
            bits,
        }
    }
}

impl QuantSlot {
    pub(crate) fn get(&self) -> Option<Quantized> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Quantizes `weight` (`[rows, K]`) in place: `Err` (nothing changed) if it is
    /// quantized already or does not fit the format.
    pub(crate) fn quantize(
        &self,
        what: &'static str,
        weight: &Param,
        group_size: usize,
        bits: usize,
    ) -> Result<()> {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return Err(Error::invalid(what, "the layer is quantized already"));
        }
        let (wq, scales, biases) = crate::quantize(&weight.value(), group_size, bits)?;
        weight.replace(wq);
        weight.set_trainable(false);
        *slot = Some(Quantized::new(scales, biases, group_size, bits));
        Ok(())
    }

    /// [`Module::quantize_layer`] of a layer holding `weight`: quantizes it unless it
    /// is quantized already or its rows are not whole groups (`Ok(false)`).
    pub(crate) fn quantize_layer(
        &self,
        what: &'static str,
        weight: &Param,
        group_size: usize,
        bits: usize,
    ) -> Result<bool> {
        let whole = weight
            .value()
            .shape()
            .last()
            .is_some_and(|k| k.is_multiple_of(group_size));
        if self.get().is_some() || !whole {
            return Ok(false);
        }
        self.quantize(what, weight, group_size, bits)?;
        Ok(true)
    }

    /// A quantized layer's packed weight (frozen) and state from its parts,
    /// checked against each other.
    pub(crate) fn from_parts(
        what: &'static str,
        weight: Array,
        scales: Array,
        biases: Array,
        group_size: usize,
        bits: usize,
    ) -> Result<(Param, QuantSlot)> {
        if weight.ndim() != 2 {
            return Err(Error::invalid(
                what,
                format!(
                    "the packed weight must be [rows, cols * bits / 32], got {:?}",
                    weight.shape()
                ),
            ));
        }
        crate::ops::quantized::dequantized_shape(
            what, &weight, &scales, &biases, group_size, bits,
        )?;
        let slot = Quantized::new(scales, biases, group_size, bits);
        Ok((frozen(weight), QuantSlot(Arc::new(Mutex::new(Some(slot))))))
    }

    /// Visits `scales` and `biases` when quantized.
    pub(crate) fn visit(&self, v: &mut dyn Visitor) {
        if let Some(q) = self.get() {
            v.param("scales", &q.scales);
            v.param("biases", &q.biases);
        }
    }
}

/// Quantizes every [`Linear`](super::Linear) and
/// [`Embedding`](super::Embedding) of `model` in place with `bits` per value in
/// groups of `group_size` (MLX's `nn.quantize`; see [`crate::quantize`] for the
/// format), skipping layers quantized already or whose rows are not whole groups
/// (MLX's default predicate). Returns how many layers it quantized. Call it before
/// loading an MLX-quantized checkpoint, whose names it then matches.
///
/// ```
/// # fn main() -> wmx_core::Result<()> {
/// use wmx_core::nn::{self, Layer, Linear, ModuleExt};
/// let key = wmx_core::random::key(0)?;
/// let layer = Linear::new(&key, 64, 8, true)?;
/// assert_eq!(nn::quantize(&layer, 64, 4)?, 1);
/// let names: Vec<String> = layer.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["weight", "scales", "biases", "bias"]);
/// let y = layer.forward(&wmx_core::ones(&[2, 64], wmx_core::DType::F32)?)?;
/// assert_eq!(y.shape(), &[2, 8]);
/// # Ok(()) }
/// ```
pub fn quantize(model: &dyn Module, group_size: usize, bits: usize) -> Result<usize> {
    crate::ops::quantized::check_params("nn::quantize", group_size, bits)?;
    struct Q {
        group_size: usize,
        bits: usize,
        count: usize,
        err: Option<Error>,
    }
    impl Visitor for Q {
        fn param(&mut self, _: &str, _: &Param) {}
        fn module(&mut self, _: &str, m: &dyn Module) {
            if self.err.is_some() {
                return;
            }
            match m.quantize_layer(self.group_size, self.bits) {
                Ok(true) => self.count += 1,
                Ok(false) => m.visit(self),
                Err(e) => self.err = Some(e),
            }
        }
    }
    let mut q = Q {
        group_size,
        bits,
        count: 0,
        err: None,
    };
    q.module("", model);
    match q.err {
        Some(e) => Err(e),
        None => Ok(q.count),
    }
}
