//! Generation for any causal language model: the prompt prefilled in one pass, a
//! KV cache, and mlx-lm's samplers and repetition penalty, with its random
//! stream, so a seed gives mlx-lm's tokens.

use crate::nn::{KvCache, Module};
use crate::{Array, DType, Device, Error, Result, Slice};

const OP: &str = "generate";

/// A causal language model that [`generate`] can drive (a [`Module`]: its
/// parameters can be quantized, saved or updated).
pub trait LanguageModel: Module {
    /// The logits `[B, L, vocab]` of `tokens` (`[B, L]` integers) at the positions
    /// after those the caches hold; the caches take the new keys and values.
    fn forward(&self, tokens: &Array, caches: Option<&mut [KvCache]>) -> Result<Array>;
    /// Empty caches for [`LanguageModel::forward`], one per layer.
    fn new_cache(&self) -> Vec<KvCache>;
    /// The device the weights live on.
    fn device(&self) -> Device;
}

/// How each token is chosen: mlx-lm's `make_sampler` and repetition penalty.
///
/// With `temperature` 0 the most likely token is taken (greedy) and the other
/// fields but `repetition_penalty` do nothing. Otherwise the filters run on the
/// log-probabilities in mlx-lm's order (top-p, min-p, top-k) and a token is drawn
/// from what is left at the temperature. Draws follow MLX's global random stream
/// after `mx.random.seed(seed)`: each takes the second half of a split of the
/// running key and keeps the first, so the same seed and settings give mlx-lm's
/// `generate` tokens.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    /// Divides the logits; 0 is greedy.
    pub temperature: f64,
    /// Keep the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the most likely tokens whose probabilities sum to `top_p` (nucleus
    /// sampling; off at 0 and at 1 or above).
    pub top_p: f64,
    /// Drop tokens less likely than `min_p` times the most likely one (0: off).
    pub min_p: f64,
    /// min-p keeps at least this many tokens.
    pub min_tokens_to_keep: usize,
    /// Logits of tokens in the last `repetition_context` tokens (the prompt's
    /// included) are divided by this when positive and multiplied when negative
    /// (CTRL's penalty; 1 or `None`: off).
    pub repetition_penalty: Option<f64>,
    /// How many past tokens the repetition penalty looks at.
    pub repetition_context: usize,
    /// The random stream's seed.
    pub seed: u64,
}

impl Default for Sampling {
    /// Greedy, no penalty (mlx-lm's defaults, repetition context 20).
    fn default() -> Self {
        Sampling {
            temperature: 0.0,
            top_k: 0,
            top_p: 0.0,
            min_p: 0.0,
            min_tokens_to_keep: 1,
            repetition_penalty: None,
            repetition_context: 20,
            seed: 0,
        }
    }
}

impl Sampling {
    /// Greedy decoding: always the most likely token.
    pub fn greedy() -> Sampling {
        Sampling::default()
    }

    /// Sampling at `temperature` with no filter.
    pub fn temperature(temperature: f64) -> Sampling {
        Sampling {
            temperature,
            ..Sampling::default()
        }
    }

    /// The settings' errors; top-k against the vocabulary once it is known.
    fn check(&self, vocab: Option<usize>) -> Result<()> {
        let bad = |m: String| Err(Error::invalid(OP, m));
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return bad(format!(
                "temperature must be finite and at least 0, got {}",
                self.temperature
            ));
        }
        if let Some(vocab) = vocab
            && self.top_k >= vocab
            && self.top_k > 0
        {
            return bad(format!(
                "top_k must be below the vocabulary ({vocab}), got {}",
                self.top_k
            ));
        }
        if self.top_p.is_nan() || self.top_p < 0.0 {
            return bad(format!("top_p must be at least 0, got {}", self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad(format!("min_p must be in [0, 1], got {}", self.min_p));
        }
        if self.min_tokens_to_keep == 0 {
            return bad("min_tokens_to_keep must be at least 1".into());
        }
        if let Some(p) = self.repetition_penalty
            && !(p >= 0.0 && p.is_finite())
        {
            return bad(format!(
                "repetition_penalty must be finite and at least 0, got {p}"
            ));
        }
        Ok(())
    }
}

/// What [`generate`] does: how many tokens, when to stop, how to choose.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct GenerateOptions {
    /// The most tokens generated.
    pub max_tokens: usize,
    /// Generation stops after any of these (it is returned and streamed).
    pub stop: Vec<u32>,
    /// How tokens are chosen.
    pub sampling: Sampling,
}

/// Generates up to `options.max_tokens` tokens after `prompt` with `model`: the
/// prompt in one pass, then a token at a time through a KV cache. `on_token` sees
/// each token as it comes and returns whether to go on; generation also stops
/// after a stop token. Returns the generated tokens. (A loop over [`Generation`],
/// which also serves callers that read tokens asynchronously, as in the browser.)
///
/// ```
/// use wmx_core::models::{generate, GenerateOptions, Llama, Sampling};
/// // `model` from `Llama::load(dir)` (the `io` feature).
/// fn story(model: &Llama, prompt: &[u32]) -> wmx_core::Result<Vec<u32>> {
///     let options = GenerateOptions {
///         max_tokens: 64,
///         stop: vec![2],
///         sampling: Sampling { temperature: 0.7, top_p: 0.9, seed: 1, ..Sampling::default() },
///     };
///     generate(model, prompt, &options, |token| {
///         println!("{token}");
///         true // go on
///     })
/// }
/// ```
pub fn generate(
    model: &dyn LanguageModel,
    prompt: &[u32],
    options: &GenerateOptions,
    mut on_token: impl FnMut(u32) -> bool,
) -> Result<Vec<u32>> {
    let mut g = Generation::new(model, prompt, options.clone())?;
    while let Some(next) = g.next_token()? {
        let t = next.to_vec::<u32>()?[0];
        let go = g.accept(t);
        if !on_token(t) || !go {
            break;
        }
    }
    Ok(g.tokens)
}

/// Generation one token at a time, for callers that read each token themselves
/// ([`generate`] is the loop): [`Generation::next_token`] gives the next token as
/// a lazy array, the caller reads it (`to_vec`, or `to_vec_async` in the browser)
/// and hands it to [`Generation::accept`].
pub struct Generation<'m> {
    model: &'m dyn LanguageModel,
    options: GenerateOptions,
    caches: Vec<crate::nn::KvCache>,
    key: Array,
    history: Vec<u32>,
    input: Array,
    tokens: Vec<u32>,
    done: bool,
}

impl<'m> Generation<'m> {
    /// A generation after `prompt` (an empty prompt is an `Err`).
    pub fn new(
        model: &'m dyn LanguageModel,
        prompt: &[u32],
        options: GenerateOptions,
    ) -> Result<Generation<'m>> {
        if prompt.is_empty() {
            return Err(Error::invalid(OP, "the prompt is empty"));
        }
        // Bad settings fail before the prompt runs.
        options.sampling.check(None)?;
        let device = model.device();
        let key = crate::with_device(&device, || crate::random::key(options.sampling.seed))?;
        let ids: Vec<i32> = prompt.iter().map(|&t| t as i32).collect();
        Ok(Generation {
            model,
            caches: model.new_cache(),
            key,
            history: prompt.to_vec(),
            input: Array::from_slice_on(&ids, &[1, ids.len()], &device)?,
            done: options.max_tokens == 0,
            options,
            tokens: Vec::new(),
        })
    }

    /// The next token (u32 `[1]`, lazy: reading it runs the model), or `None`
    /// once generation is over. Each call must be followed by
    /// [`Generation::accept`] of the value read.
    pub fn next_token(&mut self) -> Result<Option<Array>> {
        if self.done {
            return Ok(None);
        }
        let s = &self.options.sampling;
        let logits = self.model.forward(&self.input, Some(&mut self.caches))?;
        if self.tokens.is_empty() {
            s.check(Some(logits.shape()[2]))?;
        }
        let l = logits.shape()[1] as isize;
        let last = crate::reshape(
            &crate::slice(&logits, &[Slice::ALL, Slice::range(l - 1, l)])?,
            &[1, -1],
        )?;
        let last = penalize(&last, &self.history, s, &self.model.device())?;
        let token = if s.temperature == 0.0 {
            crate::argmax(&last, -1, false)?
        } else {
            let (next, draw) = crate::random::split2(&self.key)?;
            self.key = next;
            sample(&last, s, &draw)?
        };
        self.input = crate::reshape(&crate::astype(&token, DType::I32)?, &[1, 1])?;
        Ok(Some(token))
    }

    /// Records `token`, the value of the array [`Generation::next_token`] gave;
    /// returns whether generation goes on (not after a stop token or the last).
    pub fn accept(&mut self, token: u32) -> bool {
        self.tokens.push(token);
        self.history.push(token);
        self.done =
            self.options.stop.contains(&token) || self.tokens.len() >= self.options.max_tokens;
        !self.done
    }

    /// The tokens generated so far.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }
}

/// mlx-lm's repetition penalty on logits `[1, V]`.
fn penalize(logits: &Array, history: &[u32], s: &Sampling, device: &Device) -> Result<Array> {
    let p = match s.repetition_penalty {
        Some(p) if p != 1.0 && s.repetition_context > 0 => p,
        _ => return Ok(logits.clone()),
    };
    let recent = &history[history.len().saturating_sub(s.repetition_context)..];
    let idx = Array::from_slice_on(recent, &[1, recent.len()], device)?;
    let picked = crate::take_along_axis(logits, &idx, Some(-1))?;
    let pen = crate::scalar_like(&picked, p)?;
    let zero = crate::scalar_like(&picked, 0.0)?;
    let changed = crate::where_(
        &crate::less(&picked, &zero)?,
        &crate::multiply(&picked, &pen)?,
        &crate::divide(&picked, &pen)?,
    )?;
    crate::put_along_axis(logits, &idx, &changed, -1)
}

/// mlx-lm's sampler on logits `[1, V]` (temperature above 0): the filters on the
/// log-probabilities, then a categorical draw at the temperature.
fn sample(logits: &Array, s: &Sampling, key: &Array) -> Result<Array> {
    let logits = crate::astype(logits, DType::F32)?;
    let mut lp = crate::subtract(&logits, &crate::logsumexp(&logits, Some(&[-1]), true)?)?;
    let ninf = crate::scalar_like(&lp, f64::NEG_INFINITY)?;
    let v = lp.shape()[1] as isize;
    if s.top_p > 0.0 && s.top_p < 1.0 {
        let sorted = crate::sort(&lp, Some(-1))?;
        let probs = crate::exp(&sorted)?;
        let above = probs.cumsum(Some(-1), true, false)?;
        let first = |a: &Array| a.slice(&[Slice::ALL, Slice::range(0, 1)]);
        let total = crate::add(&first(&above)?, &first(&probs)?)?;
        let limit = crate::multiply(&total, &crate::scalar_like(&total, s.top_p)?)?;
        let dropped = crate::sum(
            &crate::astype(&crate::greater_equal(&above, &limit)?, DType::I32)?,
            Some(&[-1]),
            true,
        )?;
        let threshold = crate::take_along_axis(&sorted, &dropped, Some(-1))?;
        lp = crate::where_(&crate::less(&lp, &threshold)?, &ninf, &lp)?;
    }
    if s.min_p > 0.0 {
        let top = crate::max(&lp, Some(&[-1]), true)?;
        let floor = crate::add(&top, &crate::scalar_like(&top, s.min_p.ln())?)?;
        let mut remove = crate::less(&lp, &floor)?;
        if s.min_tokens_to_keep > 1 {
            let keep = (s.min_tokens_to_keep as isize).min(v);
            let order = crate::argsort(&lp, Some(-1))?;
            let best = order.slice(&[Slice::ALL, Slice::range(v - keep, v)])?;
            let no = crate::zeros_like(&crate::take_along_axis(&remove, &best, Some(-1))?)?;
            remove = crate::put_along_axis(&remove, &best, &no, -1)?;
        }
        lp = crate::where_(&remove, &ninf, &lp)?;
    }
    if s.top_k > 0 {
        let order = crate::argsort(&lp, Some(-1))?;
        let worst = order.slice(&[Slice::ALL, Slice::range(0, v - s.top_k as isize)])?;
        lp = crate::put_along_axis(&lp, &worst, &ninf, -1)?;
    }
    let scaled = crate::multiply(&lp, &crate::scalar_like(&lp, 1.0 / s.temperature)?)?;
    crate::random::categorical(key, &scaled, -1)
}
