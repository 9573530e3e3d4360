//! The geometry of a convolution's taps, shared by core's im2col and depthwise
//! primitives and the kernels that run them.

/// Per spatial axis (1 to 3): which input element each tap of each output
/// position reads. Tap `k` of output position `o` reads the input dilated by
/// `input_dilation` at `o * stride + k * kernel_dilation - lo`: element
/// `q / input_dilation` where that `q` is a multiple of the dilation inside the
/// input, else nothing (padding, or a hole of the dilation).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvGeometry {
    /// The input's spatial lengths.
    pub input: Vec<usize>,
    /// The output's spatial lengths.
    pub out: Vec<usize>,
    /// The kernel's lengths.
    pub kernel: Vec<usize>,
    /// Output step.
    pub stride: Vec<usize>,
    /// Spacing of the kernel's taps.
    pub kernel_dilation: Vec<usize>,
    /// Spacing of the input's elements.
    pub input_dilation: Vec<usize>,
    /// Padding before each axis (negative: the input is cropped).
    pub lo: Vec<i64>,
}

impl ConvGeometry {
    /// Taps of the kernel.
    pub fn taps(&self) -> usize {
        self.kernel.iter().product()
    }

    /// Whether the lists agree: one length (1 to 3 axes), positive steps, padding
    /// within `i32`.
    pub fn is_valid(&self) -> bool {
        let d = self.input.len();
        let lens = [
            &self.out,
            &self.kernel,
            &self.stride,
            &self.kernel_dilation,
            &self.input_dilation,
        ];
        (1..=3).contains(&d)
            && lens.iter().all(|v| v.len() == d)
            && self.lo.len() == d
            && self
                .stride
                .iter()
                .chain(&self.kernel_dilation)
                .chain(&self.input_dilation)
                .all(|&s| s > 0)
            && self.lo.iter().all(|&l| i32::try_from(l).is_ok())
    }

    /// The input index on axis `a` that output position `o` and tap `k` read.
    pub fn source(&self, a: usize, o: usize, k: usize) -> Option<usize> {
        let q = (o * self.stride[a] + k * self.kernel_dilation[a]) as i64 - self.lo[a];
        let dil = self.input_dilation[a] as i64;
        (q >= 0 && q % dil == 0 && q / dil < self.input[a] as i64).then_some((q / dil) as usize)
    }
}
