//! The TypeScript types of the JS API. The custom section names them in the
//! generated `.d.ts`; the extern types below carry those names onto parameters and
//! results, so no export takes or returns `any` (web/test.sh checks that, and
//! type-checks a TypeScript program against the packed npm package).
//! The types are not checked at run time: the conversions in `convert.rs` are, and
//! throw wmx's errors for bad values.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &str = r#"
/** `LanguageModel.generate`'s options (mlx-lm's sampler settings). */
export interface GenerateOptions {
  /** The most tokens generated (default 64). */
  maxTokens?: number;
  /** Divides the logits; 0 (the default) is greedy. */
  temperature?: number;
  /** Nucleus sampling: keep the likeliest tokens whose probabilities sum to this. */
  topP?: number;
  /** Keep the topK likeliest tokens (0: all). */
  topK?: number;
  /** Drop tokens less likely than minP times the likeliest. */
  minP?: number;
  /** minP keeps at least this many tokens (default 1). */
  minTokensToKeep?: number;
  /** CTRL's repetition penalty over the last repetitionContext tokens. */
  repetitionPenalty?: number;
  /** How many past tokens the penalty looks at (default 20). */
  repetitionContext?: number;
  /** The random stream's seed (MLX's: the same tokens as mlx-lm for a seed). */
  seed?: number;
  /** Generation stops after any of these token ids. */
  stop?: readonly number[] | Uint32Array;
  /** Sees each token as it comes; returning false stops generation. */
  onToken?: (token: number) => boolean | void;
}
/** A dtype name: wmx's (`"f32"`) or numpy's (`"float32"`). */
export type DType =
  | "bool" | "u8" | "uint8" | "u32" | "uint32" | "i32" | "int32" | "i64" | "int64" | "u64" | "uint64"
  | "f16" | "float16" | "bf16" | "bfloat16" | "f32" | "float32" | "f64" | "float64"
  | "c64" | "complex64";
/** A shape: one number per dimension (a single number is a 1-D shape). */
export type Shape = number | readonly number[];
/** Axes of a reduction or view (negative counts from the end). */
export type Axes = number | readonly number[];
/** Host data an array can be made from. Natural dtypes: Float32Array f32,
 *  Int32Array i32, Uint32Array u32, Uint8Array u8, Uint16Array f16 bits (bf16 with
 *  that dtype), BigInt64Array i64, BigUint64Array u64, Float64Array f64 when that
 *  dtype is asked;
 *  other typed arrays, numbers and arrays of numbers f32; booleans bool. */
export type HostData =
  | Float32Array | Float64Array | Int8Array | Int16Array | Int32Array
  | Uint8Array | Uint8ClampedArray | Uint16Array | Uint32Array | BigInt64Array
  | BigUint64Array | readonly number[] | readonly boolean[] | number | boolean;
/** An array argument: an NdArray, or host data made into one (a number beside an
 *  NdArray takes its dtype, as MLX's weak scalars). */
export type ArrayInput = NdArray | HostData;
/** What `data()` resolves to, by dtype: f32 Float32Array, f64 Float64Array,
 *  i32 Int32Array, u32 Uint32Array, u8 and bool Uint8Array, f16 and bf16
 *  Uint16Array (the bits), i64 BigInt64Array, u64 BigUint64Array, c64
 *  Float32Array (real and imaginary parts in turn). */
export type TypedData =
  | Float32Array | Float64Array | Int32Array | Uint32Array | Uint8Array | Uint16Array
  | BigInt64Array | BigUint64Array;
/** One element, as `item()` gives it (BigInt for i64 and u64, `[re, im]` for c64). */
export type Element = number | boolean | bigint | [number, number];
/** One axis of a `slice` spec: `null` (the whole axis) or `[start, stop, step]`
 *  (entries may be null or left out). */
export type SliceEntry =
  | null
  | undefined
  | readonly [start?: number | null, stop?: number | null, step?: number | null];
/** A `slice` spec: one entry per leading axis. */
export type SliceSpec = readonly SliceEntry[];
/** `pad` widths: `[before, after]` per axis, or one pair for every axis. */
export type PadWidths = readonly (readonly [number, number])[] | readonly [number, number];
/** `pad` modes. */
export type PadMode = "constant" | "edge" | "reflect";
/** Convolution options (`conv`), per spatial axis: a number applies to every
 *  axis. Padding: zeros on both sides, or `[before, after]` per axis. */
export interface ConvOptions {
  stride?: Shape;
  padding?: Shape | readonly (readonly [number, number])[];
  dilation?: Shape;
  inputDilation?: Shape;
  groups?: number;
  flip?: boolean;
}
/** Options of the 1-D transforms (`fft`, `ifft`, `rfft`, `irfft`): points `n`
 *  (crop or zero-pad; default the axis' length), `axis` (default -1), `norm`
 *  (numpy's: "backward", the default, "ortho" or "forward"). */
export interface FftOptions {
  n?: number;
  axis?: number;
  norm?: "backward" | "ortho" | "forward";
}
/** Options of the 2-D and n-D transforms: points `s` per axis, `axes`, `norm`. */
export interface FftNdOptions {
  s?: Shape;
  axes?: Axes;
  norm?: "backward" | "ortho" | "forward";
}
/** Transposed-convolution options (`convTranspose`), per spatial axis. */
export interface ConvTransposeOptions {
  stride?: Shape;
  padding?: Shape;
  dilation?: Shape;
  outputPadding?: Shape;
  groups?: number;
}
/** Attention options (`scaledDotProductAttention`): `scale` defaults to 1/sqrt(D);
 *  `mask` is `"none"` (the default), `"causal"` (aligned to the end when there are
 *  fewer queries than keys), `{ window }` (causal within the last `window` keys),
 *  a boolean array (true: attend) or a float array added to the scores, either
 *  broadcastable to `[B, Hq, Lq, Lk]`. */
export interface AttentionOptions {
  scale?: number;
  mask?: "none" | "causal" | { window: number } | NdArray;
}
/** Pooling options (`maxPool`, `avgPool`), per spatial axis; the stride defaults
 *  to the kernel. */
export interface PoolOptions {
  stride?: Shape;
  padding?: Shape;
  dilation?: Shape;
  ceilMode?: boolean;
  countIncludePad?: boolean;
}
/** A device name. */
export type DeviceName = "webgpu" | "gpu" | "cpu";
/** `init`'s choice: WebGPU when the browser has it, else the CPU backend. */
export type DeviceChoice = "auto" | DeviceName;
/** `init`'s options. */
export interface InitOptions {
  device?: DeviceChoice;
}
/** The browser's `GPUAdapter.info`. */
export interface AdapterInfo {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  isFallbackAdapter?: boolean;
}
/** What `init`, `setDevice` and `deviceInfo` report. The limits are present on
 *  WebGPU only. */
export interface DeviceInfo {
  device: "webgpu" | "cpu";
  name: string;
  adapter: string;
  adapterInfo?: AdapterInfo | null;
  backend: string;
  deviceType: string;
  f16: boolean;
  subgroups: boolean;
  maxBufferSize?: number;
  maxStorageBufferBindingSize?: number;
  maxWorkgroupsPerDimension?: number;
  /** True when WebGPU was wanted ("auto") but the CPU backend was chosen. */
  fallback: boolean;
  /** Why WebGPU could not be opened, if it could not. */
  reason: string | null;
}
/** `setMode`'s modes ("compiled", fusing at each read, is the default). */
export type Mode = "compiled" | "lazy" | "eager";
/** What `CompiledFunction.report` tells. */
export interface CompileReport {
  tracedOps: number;
  nodes: number;
  /** The WGSL of each generated kernel. */
  kernels: string[];
}
/** A function of arrays, as `compile`, `grad` and `valueAndGrad` take it. */
export type ArrayFunction = (...args: NdArray[]) => NdArray | NdArray[];
/** `wgslKernel`'s spec (see its doc). */
export interface KernelSpec {
  name: string;
  inputs: readonly string[];
  outputs: readonly string[];
  body: string;
  header?: string;
  rowContiguous?: boolean;
  guard?: boolean;
  atomicOutputs?: boolean;
}
/** One output of a kernel launch (dtype default f32). */
export interface OutputSpec {
  shape: Shape;
  dtype?: DType;
}
/** A kernel launch: the outputs (or one output's `shape` and `dtype`), the
 *  threads (`grid`, default one per element of the first output), the workgroup
 *  size (default 256), template parameters (strings are dtypes, integers i32
 *  constants, other numbers f32 ones) and the outputs' initial value. */
export interface Launch {
  outputs?: readonly OutputSpec[];
  shape?: Shape;
  dtype?: DType;
  grid?: Shape;
  workgroup?: Shape;
  template?: { readonly [name: string]: DType | number | boolean };
  initValue?: number;
}
"#;

#[wasm_bindgen]
extern "C" {
    /// `ArrayInput`: an `NdArray` or host data.
    #[wasm_bindgen(typescript_type = "ArrayInput")]
    pub type ArrayInput;
    /// `HostData`.
    #[wasm_bindgen(typescript_type = "HostData")]
    pub type HostDataArg;
    /// `readonly ArrayInput[]`.
    #[wasm_bindgen(typescript_type = "readonly ArrayInput[]")]
    pub type ArrayInputs;
    /// `Shape`.
    #[wasm_bindgen(typescript_type = "Shape")]
    pub type ShapeArg;
    /// `Axes`.
    #[wasm_bindgen(typescript_type = "Axes")]
    pub type AxesArg;
    /// `DType`.
    #[wasm_bindgen(typescript_type = "DType")]
    pub type DTypeArg;
    /// `SliceSpec`.
    #[wasm_bindgen(typescript_type = "SliceSpec")]
    pub type SliceArg;
    /// `ConvOptions`.
    #[wasm_bindgen(typescript_type = "ConvOptions")]
    pub type ConvOptionsArg;
    /// `FftOptions`.
    #[wasm_bindgen(typescript_type = "FftOptions")]
    pub type FftOptionsArg;
    /// `FftNdOptions`.
    #[wasm_bindgen(typescript_type = "FftNdOptions")]
    pub type FftNdOptionsArg;
    /// `ConvTransposeOptions`.
    #[wasm_bindgen(typescript_type = "ConvTransposeOptions")]
    pub type ConvTransposeOptionsArg;
    /// `PoolOptions`.
    #[wasm_bindgen(typescript_type = "PoolOptions")]
    pub type PoolOptionsArg;
    /// `AttentionOptions`.
    #[wasm_bindgen(typescript_type = "AttentionOptions")]
    pub type AttentionOptionsArg;
    /// `PadWidths`.
    #[wasm_bindgen(typescript_type = "PadWidths")]
    pub type PadWidthsArg;
    /// `InitOptions | DeviceChoice`.
    #[wasm_bindgen(typescript_type = "InitOptions | DeviceChoice")]
    pub type InitArg;
    /// `DeviceInfo`.
    #[wasm_bindgen(typescript_type = "DeviceInfo")]
    pub type DeviceInfoJs;
    /// `number[]` (a shape).
    #[wasm_bindgen(typescript_type = "number[]")]
    pub type Dims;
    /// `NdArray[]`.
    #[wasm_bindgen(typescript_type = "NdArray[]")]
    pub type NdArrays;
    /// `[NdArray, NdArray]`.
    #[wasm_bindgen(typescript_type = "[values: NdArray, indices: NdArray]")]
    pub type NdPair;
    /// `Uint8Array | readonly Uint8Array[]`: safetensors bytes, or every shard's.
    #[wasm_bindgen(typescript_type = "Uint8Array | readonly Uint8Array[]")]
    pub type SafetensorsArg;
    /// `Uint32Array | readonly number[]`: token ids.
    #[wasm_bindgen(typescript_type = "Uint32Array | readonly number[]")]
    pub type TokensArg;
    /// `GenerateOptions`.
    #[wasm_bindgen(typescript_type = "GenerateOptions")]
    pub type GenerateOptionsArg;
    /// `Promise<Uint32Array>`.
    #[wasm_bindgen(typescript_type = "Promise<Uint32Array>")]
    pub type TokensPromise;
    /// `quantize`'s result.
    #[wasm_bindgen(typescript_type = "[wq: NdArray, scales: NdArray, biases: NdArray]")]
    pub type QuantizedParts;
    /// `Promise<TypedData>`.
    #[wasm_bindgen(typescript_type = "Promise<TypedData>")]
    pub type TypedDataPromise;
    /// `Promise<Element>`.
    #[wasm_bindgen(typescript_type = "Promise<Element>")]
    pub type ElementPromise;
    /// `Promise<NdArray>`.
    #[wasm_bindgen(typescript_type = "Promise<NdArray>")]
    pub type NdArrayPromise;
    /// `CompileReport`.
    #[wasm_bindgen(typescript_type = "CompileReport")]
    pub type CompileReportJs;
    /// `ArrayFunction`.
    #[wasm_bindgen(typescript_type = "ArrayFunction")]
    pub type ArrayFunction;
    /// `number | readonly number[]` (argnums).
    #[wasm_bindgen(typescript_type = "number | readonly number[]")]
    pub type Argnums;
    /// `grad`'s result before wmx.js makes it variadic.
    #[wasm_bindgen(typescript_type = "(args: readonly NdArray[]) => NdArray[]")]
    pub type GradFn;
    /// `valueAndGrad`'s result before wmx.js makes it variadic.
    #[wasm_bindgen(
        typescript_type = "(args: readonly NdArray[]) => [value: NdArray | NdArray[], grads: NdArray[]]"
    )]
    pub type ValueAndGradFn;
    /// `KernelSpec`.
    #[wasm_bindgen(typescript_type = "KernelSpec")]
    pub type KernelSpecArg;
    /// `Launch`.
    #[wasm_bindgen(typescript_type = "Launch")]
    pub type LaunchArg;
    /// `PadMode`.
    #[wasm_bindgen(typescript_type = "PadMode")]
    pub type PadModeArg;
    /// `Mode`.
    #[wasm_bindgen(typescript_type = "Mode")]
    pub type ModeArg;
    /// `DeviceName`.
    #[wasm_bindgen(typescript_type = "DeviceName")]
    pub type DeviceNameArg;
}

/// An optional argument as the JsValue the conversions read (`undefined` when absent).
pub(crate) fn opt<T: Into<JsValue>>(v: Option<T>) -> JsValue {
    v.map(Into::into).unwrap_or(JsValue::UNDEFINED)
}
