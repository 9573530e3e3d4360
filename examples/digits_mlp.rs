//! A multilayer perceptron on real data: scikit-learn's digits (see
//! `common/digits.rs`), trained with `wmx::nn` and AdamW on the best device (or
//! `WMX_DEVICE=cpu`). It prints the loss falling and the test accuracy, checks the
//! first loss against `ln 10` and fails unless the test accuracy reaches 97 %.
//!
//! ```text
//! cargo run --release --example digits_mlp
//! ```

#[path = "common/digits.rs"]
mod digits;

use wmx::Result;
use wmx::nn;

fn main() -> Result<()> {
    let data = digits::load(&[64])?;
    let keys = wmx::random::split(&wmx::random::key(0)?, 3)?;
    let key = |i: isize| keys.slice(&[wmx::Slice::range(i, i + 1)])?.reshape(&[2]);
    let model = nn::Sequential::new()
        .push(nn::Linear::new(&key(0)?, 64, 128, true)?)
        .push(nn::Activation::Relu)
        .push(nn::Linear::new(&key(1)?, 128, 10, true)?);
    digits::train(&model, &data, 25, &wmx::distributed::init()?, true)?;
    digits::test(&model, &data, 0.97)
}
