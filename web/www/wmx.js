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

/** `tidy(fn)`: runs the synchronous `fn` and releases every array made inside it
 *  except those it returns (an NdArray, or arrays and plain objects holding them),
 *  which move to an enclosing tidy if there is one. Handles of released arrays throw
 *  when used. `fn` may not return a Promise: work after an `await` would run outside
 *  the scope. */
export function tidy(fn) {
  api.beginScope();
  let result;
  try {
    result = fn();
  } catch (e) {
    api.endScope([]);
    throw e;
  }
  if (result && typeof result.then === "function") {
    api.endScope([]);
    throw new Error("tidy: fn returned a Promise; tidy scopes are synchronous");
  }
  api.endScope(arrayIds(result, []));
  return result;
}

function arrayIds(v, out) {
  if (v instanceof api.NdArray) {
    out.push(v.__wmxId);
  } else if (Array.isArray(v)) {
    for (const x of v) arrayIds(x, out);
  } else if (v && Object.getPrototypeOf(v) === Object.prototype) {
    for (const x of Object.values(v)) arrayIds(x, out);
  }
  return out;
}
