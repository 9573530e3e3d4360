// wmx in the browser: `import * as wmx from "./wmx.js"; const info = await wmx.init();`
//
// Re-exports the wasm-bindgen API of pkg/wmx_web.js (built by web/build.sh) and
// wraps its `init` so one call loads the .wasm module and picks the device:
// WebGPU through navigator.gpu, else wmx's CPU backend inside wasm.
import loadWasm, * as api from "./pkg/wmx_web.js";

export * from "./pkg/wmx_web.js";

let loaded = null;

/** Loads the wasm module once, then chooses the device.
 *  `options.device`: "auto" (default), "webgpu" or "cpu".
 *  Resolves to {device, adapter, backend, fallback, reason, f16, ...}. */
export async function init(options) {
  loaded ??= loadWasm();
  await loaded;
  return api.init(options);
}

/** `grad(f, argnums = 0)`: a function of the same arguments as `f` returning the
 *  gradients of `f`'s result (a one-element float array) w.r.t. `argnums`. */
export function grad(f, argnums) {
  const g = api.grad(f, argnums);
  return (...args) => g(args);
}

/** `valueAndGrad(f, argnums = 0)`: like `grad`, returning `[value, grads]`. */
export function valueAndGrad(f, argnums) {
  const g = api.valueAndGrad(f, argnums);
  return (...args) => g(args);
}
