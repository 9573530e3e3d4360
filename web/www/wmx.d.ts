/// <reference lib="esnext.disposable" />
// Types of wmx.js (the package's entry point): everything of the generated
// pkg/wmx_web.js, with `init`, `grad`, `valueAndGrad` and `tidy` as wmx.js wraps them.
// The lib reference types the arrays' [Symbol.dispose] (and `using`) for projects
// whose own lib is older.
export * from "./pkg/wmx_web.js";
import type { DeviceChoice, DeviceInfo, InitOptions, NdArray } from "./pkg/wmx_web.js";

/** Loads the wasm module once, then chooses the device: `"auto"` (default:
 *  WebGPU through `navigator.gpu`, else the CPU backend inside wasm, with
 *  `fallback: true` and the `reason`), `"webgpu"` (throws when there is none) or
 *  `"cpu"`. May be called again to switch. */
export function init(options?: InitOptions | DeviceChoice): Promise<DeviceInfo>;

/** `grad(f, argnums = 0)`: a function of the same arguments as `f` returning the
 *  gradients of `f`'s result (a one-element float array, or the first of an array
 *  of results) with respect to the arguments named by `argnums`. */
export function grad<A extends NdArray[]>(
  f: (...args: A) => NdArray | NdArray[],
  argnums?: number | readonly number[],
): (...args: A) => NdArray[];

/** `valueAndGrad(f, argnums = 0)`: like `grad`, returning `[value, grads]`
 *  (`value`: `f`'s result, one NdArray when it returned one). */
export function valueAndGrad<A extends NdArray[]>(
  f: (...args: A) => NdArray | NdArray[],
  argnums?: number | readonly number[],
): (...args: A) => [value: NdArray | NdArray[], grads: NdArray[]];

/** `tidy(fn)`: runs the synchronous `fn` and releases every array made inside it
 *  except those it returns (an NdArray, or arrays and plain objects holding them),
 *  which move to an enclosing tidy if there is one. `fn` may not return a Promise
 *  (the overload below makes that a type error; at run time it throws). */
export function tidy<T>(fn: () => PromiseLike<T>): never;
export function tidy<T>(fn: () => T): T;
