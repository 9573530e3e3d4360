//! One pass of the FFT family, shared by core's primitive and the kernel library.

/// The longest row one GPU workgroup transforms (its workgroup memory holds the
/// rows: 16 KiB, WebGPU's default limit).
pub const FFT_MAX_ROW: usize = 2048;

/// Entries of the twiddle table's first part, `W_4096^k`.
pub const FFT_TABLE: usize = 4096;

/// One pass of an unnormalized DFT over rows of f32 pairs (`[.., 2]`): row `r`
/// has digits `r0 = r % radix[0]`, `r1 = (r / radix[0]) % radix[1]`,
/// `r2 = r / (radix[0] radix[1])`; its point `j` is read at pair
/// `r0 ih[0] + r1 ih[1] + r2 ih[2] + j in_step` of the (row-major) input, and
/// `y_k = sum_j x_j W^{jk}` (`W = exp(-2 pi i / n)`, its conjugate when
/// `inverse`), times `W_N^{r_d k}` for `twiddle = Some((d, N))`, is written at
/// `r0 oh[0] + r1 oh[1] + r2 oh[2] + k out_step` of the output (the input's
/// shape). A plan's passes write every output pair once. The GPU kernel takes
/// rows of a power of two up to [`FFT_MAX_ROW`], `cols` neighbouring rows per
/// workgroup; the CPU any length.
///
/// With `real`, the pass is a whole real transform of `2n` points and its
/// [`FftReal`] step (one pass: rfft and irfft of rows that fit a workgroup read
/// and write their data once): forward, each row's `y` becomes rfft's `n + 1`
/// outputs, written at `k < n + 1` (the output has `n + 1` pairs a row);
/// inverse, each row's `n` points `x_j` are first made from `n + 1` input pairs
/// read at `j < n + 1` (the input has `n + 1` pairs a row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FftPass {
    /// Points per row.
    pub n: usize,
    /// `exp(+2 pi i jk / n)`.
    pub inverse: bool,
    /// Rows per GPU workgroup (a power of two up to 64; `cols * n <= FFT_MAX_ROW`).
    pub cols: usize,
    /// Radices of the first two row digits.
    pub radix: [usize; 2],
    /// Input strides of the row digits (in pairs).
    pub ih: [usize; 3],
    /// Input stride of the points.
    pub in_step: usize,
    /// Output strides of the row digits.
    pub oh: [usize; 3],
    /// Output stride of the points.
    pub out_step: usize,
    /// Twiddles applied to the outputs: digit `d` and `N` (a power of two).
    pub twiddle: Option<(usize, usize)>,
    /// The bits of the scale ([`FftReal::scale`]) of a real transform folded
    /// into the pass, its direction `inverse`'s (without twiddles, point
    /// strides 1).
    pub real: Option<u32>,
}

impl FftPass {
    /// The pass's [`FftReal`] step, if a real transform is folded into it.
    pub fn real_step(&self) -> Option<FftReal> {
        self.real.map(|bits| FftReal {
            n: 2 * self.n,
            inverse: self.inverse,
            scale: f32::from_bits(bits),
        })
    }

    /// Pairs a row of the input (`n`, or `n + 1` for a folded irfft) and of the
    /// output (`n`, or `n + 1` for a folded rfft).
    pub fn widths(&self) -> (usize, usize) {
        match (self.real, self.inverse) {
            (Some(_), true) => (self.n + 1, self.n),
            (Some(_), false) => (self.n, self.n + 1),
            (None, _) => (self.n, self.n),
        }
    }
}

/// The pass that makes a real transform of `n` points (a power of two) from a
/// complex one of `m = n / 2`. Forward (rfft): from `Z`, the transform of
/// `z[j] = x[2j] + i x[2j+1]` (rows of `m` pairs), `X[k] = (a + b) / 2 -
/// i W^k (a - b) / 2` for `k <= m` (rows of `m + 1`), `a = Z[k mod m]`,
/// `b = conj Z[(m - k) mod m]`, `W = exp(-2 pi i / n)`. Inverse (irfft): from `X`
/// (rows of `m + 1`), `Z[k] = (a + b) + i conj(W^k) (a - b)` for `k < m`, with
/// `a = X[k]`, `b = conj X[m - k]` and the imaginary parts of `X[0]` and `X[m]`
/// dropped; the inverse transform of that `Z` holds the even and odd points.
/// Both times `scale`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FftReal {
    /// Points of the real transform (a power of two, at least 2).
    pub n: usize,
    /// irfft's side (else rfft's).
    pub inverse: bool,
    /// A factor on every output.
    pub scale: f32,
}
