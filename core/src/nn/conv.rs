//! Convolution and pooling layers over channels-last inputs `[N, spatial..., C]`
//! (MLX's layout), one generic type per kind with MLX's and PyTorch's names as
//! aliases: [`Conv2d`] is `Conv<2>`, [`ConvTranspose2d`] is `Conv<2, true>`,
//! [`MaxPool2d`] is `Pool<2, true>`.

use super::{Layer, Module, Param, Visitor};
use crate::{Array, ConvOptions, DType, Error, PoolOptions, Result};

/// The settings of a convolution layer per spatial axis (`D` of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvConfig<const D: usize> {
    /// Step between output positions (default 1).
    pub stride: [usize; D],
    /// Zeros on both sides of each spatial axis (default 0); for a transposed
    /// convolution, the elements cut from both sides of the output.
    pub padding: [usize; D],
    /// Spacing of the kernel's taps (default 1).
    pub dilation: [usize; D],
    /// Transposed convolutions only: elements added at the end of each output
    /// axis (default 0; smaller than the stride or the dilation).
    pub output_padding: [usize; D],
    /// Channel groups (default 1; `in_channels` for a depthwise convolution).
    pub groups: usize,
    /// Whether the layer adds a bias (default true).
    pub bias: bool,
}

impl<const D: usize> Default for ConvConfig<D> {
    fn default() -> Self {
        ConvConfig {
            stride: [1; D],
            padding: [0; D],
            dilation: [1; D],
            output_padding: [0; D],
            groups: 1,
            bias: true,
        }
    }
}

/// A convolution layer (`TRANSPOSED = false`) or a transposed convolution
/// (`true`) over `D` spatial axes: weight `[C_out, kernel..., C_in / groups]`
/// (MLX's layout, for both kinds) and bias `[C_out]`, initialised as PyTorch does
/// (uniform in ±1/√fan_in).
pub struct Conv<const D: usize, const TRANSPOSED: bool = false> {
    /// `[C_out, kernel..., C_in / groups]`.
    pub weight: Param,
    /// `[C_out]`, if any.
    pub bias: Option<Param>,
    config: ConvConfig<D>,
}

/// 1-D convolution, `[N, L, C]` inputs.
pub type Conv1d = Conv<1>;
/// 2-D convolution, `[N, H, W, C]` inputs.
pub type Conv2d = Conv<2>;
/// 3-D convolution, `[N, D, H, W, C]` inputs.
pub type Conv3d = Conv<3>;
/// 1-D transposed convolution.
pub type ConvTranspose1d = Conv<1, true>;
/// 2-D transposed convolution.
pub type ConvTranspose2d = Conv<2, true>;
/// 3-D transposed convolution.
pub type ConvTranspose3d = Conv<3, true>;

impl<const D: usize, const TRANSPOSED: bool> Conv<D, TRANSPOSED> {
    fn op() -> &'static str {
        if TRANSPOSED { "ConvTranspose" } else { "Conv" }
    }

    /// A layer from `in_channels` to `out_channels` with a `kernel`, f32, drawn
    /// from `key`.
    pub fn new(
        key: &Array,
        in_channels: usize,
        out_channels: usize,
        kernel: [usize; D],
        config: ConvConfig<D>,
    ) -> Result<Self> {
        let g = config.groups;
        if in_channels == 0
            || out_channels == 0
            || g == 0
            || !in_channels.is_multiple_of(g)
            || !out_channels.is_multiple_of(g)
        {
            return Err(Error::invalid(
                Self::op(),
                format!(
                    "{in_channels} -> {out_channels} channels in {g} groups (both must be positive \
                     multiples of the groups)"
                ),
            ));
        }
        if kernel.contains(&0) {
            return Err(Error::invalid(
                Self::op(),
                format!("kernel {kernel:?} has a zero"),
            ));
        }
        let taps: usize = kernel.iter().product();
        // PyTorch's fan-in: its weight is [C_out, C_in/g, k...], transposed
        // [C_in, C_out/g, k...].
        let fan_in = taps
            * if TRANSPOSED {
                out_channels / g
            } else {
                in_channels / g
            };
        let s = 1.0 / (fan_in as f64).sqrt();
        let keys = crate::random::split(key, 2)?;
        let k = |i: isize| keys.slice(&[crate::Slice::range(i, i + 1)])?.reshape(&[2]);
        let mut shape = vec![out_channels];
        shape.extend(kernel);
        shape.push(in_channels / g);
        let w = crate::random::uniform(&k(0)?, &shape, -s, s, DType::F32)?;
        let b = if config.bias {
            Some(crate::random::uniform(
                &k(1)?,
                &[out_channels],
                -s,
                s,
                DType::F32,
            )?)
        } else {
            None
        };
        Self::from_arrays(w, b, config)
    }

    /// A layer holding `weight` in wmx's layout `[C_out, kernel..., C_in /
    /// groups]` and `bias` `[C_out]` (`config.bias` is ignored: the bias is
    /// there or not).
    pub fn from_arrays(weight: Array, bias: Option<Array>, config: ConvConfig<D>) -> Result<Self> {
        let op = Self::op();
        if weight.ndim() != D + 2 {
            return Err(Error::invalid(
                op,
                format!(
                    "weight must be [C_out, kernel ({D} axes)..., C_in/groups], got {:?}",
                    weight.shape()
                ),
            ));
        }
        let out = weight.shape()[0];
        if config.groups == 0 || !out.is_multiple_of(config.groups) {
            return Err(Error::invalid(
                op,
                format!(
                    "{out} output channels do not divide into {} groups",
                    config.groups
                ),
            ));
        }
        if let Some(b) = &bias
            && b.shape() != [out]
        {
            return Err(Error::invalid(
                op,
                format!("bias must be [{out}], got {:?}", b.shape()),
            ));
        }
        if !TRANSPOSED && config.output_padding.iter().any(|&p| p != 0) {
            return Err(Error::invalid(
                op,
                "output_padding is for transposed convolutions",
            ));
        }
        let config = ConvConfig {
            bias: bias.is_some(),
            ..config
        };
        Ok(Conv {
            weight: Param::new(weight),
            bias: bias.map(Param::new),
            config,
        })
    }

    /// A layer holding a PyTorch layer's weights (`Conv*d.weight` `[C_out,
    /// C_in / groups, kernel...]`, or `ConvTranspose*d.weight` `[C_in, C_out /
    /// groups, kernel...]`), converted by [`crate::conv_weight_from_torch`].
    pub fn from_torch(weight: &Array, bias: Option<Array>, config: ConvConfig<D>) -> Result<Self> {
        let w = crate::conv_weight_from_torch(weight, TRANSPOSED, config.groups)?;
        Self::from_arrays(crate::contiguous(&w)?, bias, config)
    }

    /// The layer's settings.
    pub fn config(&self) -> &ConvConfig<D> {
        &self.config
    }
}

impl<const D: usize, const TRANSPOSED: bool> Module for Conv<D, TRANSPOSED> {
    fn visit(&self, v: &mut dyn Visitor) {
        v.param("weight", &self.weight);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
}

impl<const D: usize, const TRANSPOSED: bool> Layer for Conv<D, TRANSPOSED> {
    fn forward(&self, x: &Array) -> Result<Array> {
        let c = &self.config;
        let w = self.weight.value();
        let y = if TRANSPOSED {
            crate::conv_transpose_general(
                x,
                &w,
                &c.stride,
                &c.padding,
                &c.dilation,
                &c.output_padding,
                c.groups,
            )?
        } else {
            let opts = ConvOptions {
                stride: c.stride.to_vec(),
                padding: c.padding.iter().map(|&p| (p, p)).collect(),
                kernel_dilation: c.dilation.to_vec(),
                groups: c.groups,
                ..ConvOptions::default()
            };
            crate::conv_general(x, &w, &opts)?
        };
        match &self.bias {
            Some(b) => crate::add(&y, &b.value()),
            None => Ok(y),
        }
    }
}

/// Max pooling (`MAX = true`) or average pooling over `D` spatial axes of
/// `[N, spatial..., C]`, built as `MaxPool2d::new([2, 2]).stride([1, 1])`. The
/// stride defaults to the kernel. See [`crate::max_pool`] and [`crate::avg_pool`].
#[derive(Debug, Clone)]
pub struct Pool<const D: usize, const MAX: bool> {
    kernel: [usize; D],
    options: PoolOptions,
}

/// 1-D max pooling.
pub type MaxPool1d = Pool<1, true>;
/// 2-D max pooling.
pub type MaxPool2d = Pool<2, true>;
/// 3-D max pooling.
pub type MaxPool3d = Pool<3, true>;
/// 1-D average pooling.
pub type AvgPool1d = Pool<1, false>;
/// 2-D average pooling.
pub type AvgPool2d = Pool<2, false>;
/// 3-D average pooling.
pub type AvgPool3d = Pool<3, false>;

impl<const D: usize, const MAX: bool> Pool<D, MAX> {
    /// Windows of `kernel`, not overlapping (stride = kernel), no padding.
    pub fn new(kernel: [usize; D]) -> Self {
        Pool {
            kernel,
            options: PoolOptions::default(),
        }
    }
    /// Step between windows.
    pub fn stride(mut self, stride: [usize; D]) -> Self {
        self.options.stride = stride.to_vec();
        self
    }
    /// Implicit padding on both sides (at most half the window).
    pub fn padding(mut self, padding: [usize; D]) -> Self {
        self.options.padding = padding.to_vec();
        self
    }
    /// Spacing of a window's taps.
    pub fn dilation(mut self, dilation: [usize; D]) -> Self {
        self.options.dilation = dilation.to_vec();
        self
    }
    /// PyTorch's `ceil_mode`: a last partial window counts.
    pub fn ceil_mode(mut self, on: bool) -> Self {
        self.options.ceil_mode = on;
        self
    }
    /// Average pooling: whether padding counts in the divisor (default true).
    pub fn count_include_pad(mut self, on: bool) -> Self {
        self.options.count_include_pad = on;
        self
    }
}

impl<const D: usize, const MAX: bool> Module for Pool<D, MAX> {
    fn visit(&self, _: &mut dyn Visitor) {}
}

impl<const D: usize, const MAX: bool> Layer for Pool<D, MAX> {
    fn forward(&self, x: &Array) -> Result<Array> {
        if MAX {
            crate::max_pool(x, &self.kernel, &self.options)
        } else {
            crate::avg_pool(x, &self.kernel, &self.options)
        }
    }
}

/// Adaptive average pooling to a fixed `[N, output..., C]` (PyTorch's
/// `AdaptiveAvgPool*d`); see [`crate::adaptive_avg_pool`].
#[derive(Debug, Clone)]
pub struct AdaptiveAvgPool<const D: usize> {
    output: [usize; D],
}

/// 1-D adaptive average pooling.
pub type AdaptiveAvgPool1d = AdaptiveAvgPool<1>;
/// 2-D adaptive average pooling (`[1, 1]`: global average pooling).
pub type AdaptiveAvgPool2d = AdaptiveAvgPool<2>;
/// 3-D adaptive average pooling.
pub type AdaptiveAvgPool3d = AdaptiveAvgPool<3>;

impl<const D: usize> AdaptiveAvgPool<D> {
    /// Pooling to `output` elements per spatial axis.
    pub fn new(output: [usize; D]) -> Self {
        AdaptiveAvgPool { output }
    }
}

impl<const D: usize> Module for AdaptiveAvgPool<D> {
    fn visit(&self, _: &mut dyn Visitor) {}
}

impl<const D: usize> Layer for AdaptiveAvgPool<D> {
    fn forward(&self, x: &Array) -> Result<Array> {
        crate::adaptive_avg_pool(x, &self.output)
    }
}
