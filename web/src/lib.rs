//! `wmx-web`: wmx in the browser.
//!
//! A [wasm-bindgen](https://rustwasm.github.io/docs/wasm-bindgen/) API over `wmx-core`
//! on the WebGPU backend (`navigator.gpu`, through wgpu's browser backend), with the
//! CPU backend (inside wasm) as the fallback when the browser has no WebGPU:
//!
//! ```js
//! import * as wmx from "./wmx.js";           // loads pkg/wmx_web.js and the .wasm
//! const info = await wmx.init();             // {device: "webgpu", adapter: "…", …}
//! const x = wmx.array(new Float32Array([1, 2, 3, 4]), [2, 2]);
//! const y = wmx.ones([2], "float32");
//! const s = wmx.axpby(x, y, 2, 0.5).sum(1);  // lazy
//! console.log(await s.data());               // Float32Array [7, 15]
//! ```
//!
//! The API (every op is also a method: `a.add(b)`, `a.sum(0, true)`):
//! - devices: `init({device: "auto"|"webgpu"|"cpu"})`, `setDevice`, `deviceInfo`,
//!   `synchronize()`;
//! - creation: `array(typedArray | numbers | number, shape?, dtype?)`, `zeros`, `ones`,
//!   `full`, `arange`, `linspace`, `eye`;
//! - elementwise: the unary ops (`exp`, `sqrt`, `negative`, `logicalNot`, …) and binary
//!   ops (`add`, …, `floorDivide`, `lessEqual`, `bitwiseXor`, …) with broadcasting,
//!   numbers as operands (MLX's weak scalars), `where`, `axpby`;
//! - reductions: `sum`, `prod`, `max`, `min`, `all`, `any`, `mean`, `logsumexp`
//!   (`axes?`, `keepdims?`), `var`, `argmax`, `argmin`;
//! - views (no copies): `reshape`, `transpose`/`T`, `slice([[start, stop, step] | null, …])`,
//!   `broadcastTo`, `expandDims`, `squeeze`, `flatten`; `astype(dtype)`, `contiguous`;
//! - reading: `await a.data()` (Float32Array, Int32Array, Uint32Array, Uint8Array,
//!   Uint16Array with f16/bf16 bits), `await a.item()`, `a.shape`, `a.dtype`, `a.size`,
//!   `a.device`, `await a.toDevice("cpu")`; `a.free()`/`a.dispose()`;
//! - language models: `LanguageModel.fromSafetensors(configJson, bytes)` (Llama,
//!   Mistral, Qwen2, GPT-2; f32/f16/bf16 or MLX-quantized), `model.logits(ids)`,
//!   `await model.generate(ids, {maxTokens, temperature, topP, topK, minP,
//!   repetitionPenalty, seed, stop, onToken})` (mlx-lm's samplers);
//! - compiled functions: `compile(fn)` then `f.call([x, ...])` (fused kernels on
//!   WebGPU), `f.report([x, ...])`; `setMode("compiled" | "lazy" | "eager")`.
//!
//! Every export is typed for TypeScript (the names in `types.rs`, no `any`);
//! `web/pack.sh` packs the npm package (`wmx.js`, `wmx.d.ts`, the wasm-bindgen
//! output) and web/test.sh installs and type-checks it.
//!
//! Nothing blocks: reads (`data`, `item`, `toDevice`, `synchronize`) are async. An op
//! mixing devices must read its inputs from the GPU first (`toDevice`): a blocking
//! GPU read is impossible in the browser and fails with an error.
//! Errors are JS exceptions carrying wmx's messages. On native targets this crate is
//! empty; build it with `web/build.sh` (wasm32-unknown-unknown + wasm-bindgen).

#[cfg(target_arch = "wasm32")]
mod api;
#[cfg(target_arch = "wasm32")]
mod blocks;
#[cfg(target_arch = "wasm32")]
mod compile;
#[cfg(target_arch = "wasm32")]
mod convert;
#[cfg(target_arch = "wasm32")]
mod fft;
#[cfg(target_arch = "wasm32")]
mod kernel;
#[cfg(target_arch = "wasm32")]
mod models;
#[cfg(target_arch = "wasm32")]
mod types;

#[cfg(target_arch = "wasm32")]
pub use api::*;
#[cfg(target_arch = "wasm32")]
pub use blocks::*;
#[cfg(target_arch = "wasm32")]
pub use compile::*;
#[cfg(target_arch = "wasm32")]
pub use fft::*;
#[cfg(target_arch = "wasm32")]
pub use kernel::*;
#[cfg(target_arch = "wasm32")]
pub use models::*;
#[cfg(target_arch = "wasm32")]
pub use types::*;
