// A TypeScript program on the npm package: softmax regression on a small batch,
// its loss and gradient from wmx (lazy, on WebGPU when the browser has it) checked
// against the same maths in f64 here. web/test.sh installs the packed package
// beside this file, type-checks it with tsc (strict), compiles it and runs it in
// headless Chromium; the page's import map sends "wmx" to node_modules/wmx/wmx.js.
import * as wmx from "wmx";
import type { DeviceInfo, NdArray } from "wmx";

interface Check {
  got: number[];
  want: number[];
  maxErr: number;
  ok: boolean;
}
interface Outcome {
  status: "done" | "error";
  info?: DeviceInfo;
  checks: Record<string, Check>;
  liveAfter?: number;
  error?: string;
}
declare global {
  interface Window {
    wmxExample?: Outcome;
  }
}

const ROWS = 8;
const FEATS = 5;
const CLASSES = 3;
const x = Float32Array.from({ length: ROWS * FEATS }, (_, i) => Math.sin(0.7 * i + 0.1));
const w = Float32Array.from({ length: FEATS * CLASSES }, (_, i) => 0.5 * Math.cos(0.3 * i));
const labels = Int32Array.from({ length: ROWS }, (_, i) => (3 * i + 1) % CLASSES);

/** Loss and gradient of mean cross-entropy(softmax(x @ w), labels) in f64. */
function reference(): { probs: number[]; loss: number; grad: number[] } {
  const probs: number[] = [];
  const grad = new Array<number>(FEATS * CLASSES).fill(0);
  let loss = 0;
  for (let r = 0; r < ROWS; r++) {
    const logits = Array.from({ length: CLASSES }, (_, c) => {
      let s = 0;
      for (let k = 0; k < FEATS; k++) s += x[r * FEATS + k] * w[k * CLASSES + c];
      return s;
    });
    const m = Math.max(...logits);
    const e = logits.map((v) => Math.exp(v - m));
    const z = e.reduce((a, b) => a + b, 0);
    const p = e.map((v) => v / z);
    probs.push(...p);
    loss -= Math.log(p[labels[r]]) / ROWS;
    for (let k = 0; k < FEATS; k++) {
      for (let c = 0; c < CLASSES; c++) {
        const d = p[c] - (c === labels[r] ? 1 : 0);
        grad[k * CLASSES + c] += (x[r * FEATS + k] * d) / ROWS;
      }
    }
  }
  return { probs, loss, grad };
}

function check(got: ArrayLike<number>, want: number[], tol: number): Check {
  const g = Array.from(got);
  const maxErr = g.length === want.length
    ? Math.max(0, ...g.map((v, i) => Math.abs(v - want[i])))
    : Infinity;
  return { got: g, want, maxErr, ok: maxErr <= tol };
}

async function main(): Promise<Outcome> {
  const device = new URLSearchParams(location.search).get("device") === "cpu" ? "cpu" : "auto";
  const info = await wmx.init({ device });
  const live0 = wmx.liveArrays();
  const X = wmx.array(x, [ROWS, FEATS]);
  const W = wmx.array(w, [FEATS, CLASSES]);
  const Y = wmx.array(labels);
  const onehot = wmx.oneHot(Y, CLASSES, "float32");

  // The loss as a function of the weights, for wmx.grad.
  const loss = (weights: NdArray): NdArray => {
    const logp = wmx.logSoftmax(wmx.matmul(X, weights), -1);
    return logp.multiply(onehot).sum(-1).mean().negative();
  };
  // tidy frees the temporaries; what it returns survives.
  const { probs, value, grad } = wmx.tidy(() => {
    const [value, grads] = wmx.valueAndGrad(loss)(W);
    return { probs: wmx.softmax(wmx.matmul(X, W)), value: value as NdArray, grad: grads[0] };
  });
  const ref = reference();
  const tol = 2e-6;
  const checks: Record<string, Check> = {
    probs: check((await probs.data()) as Float32Array, ref.probs, tol),
    loss: check([Number(await value.item())], [ref.loss], tol),
    grad: check((await grad.data()) as Float32Array, ref.grad, tol),
  };
  for (const a of [probs, value, grad, X, W, Y, onehot]) a.dispose();
  return { status: "done", info, checks, liveAfter: wmx.liveArrays() - live0 };
}

const out = document.getElementById("out");
main()
  .catch((e: unknown): Outcome => ({ status: "error", checks: {}, error: String(e) }))
  .then((outcome) => {
    window.wmxExample = outcome;
    if (out) out.textContent = JSON.stringify(outcome, null, 2);
  });
