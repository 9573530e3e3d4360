// The wmx demo: axpby, a binary op and reductions on wmx-WebGPU, wmx-CPU (wasm)
// and a plain JavaScript loop, with timings and a small SVG chart.
// window.wmxDemo holds the state and results (the end-to-end test reads it).
import * as wmx from "./wmx.js";

const $ = (id) => document.getElementById(id);
const state = (window.wmxDemo = { status: "loading", rows: [], info: null, error: null });

const IMPLS = [
  { key: "webgpu", label: "wmx WebGPU", color: "#2e7d32" },
  { key: "cpu", label: "wmx CPU (wasm)", color: "#1565c0" },
  { key: "js", label: "JavaScript loop", color: "#9e9e9e" },
];

// Each op: how wmx computes it, how a JS loop does, and how to summarise the result.
const OPS = [
  {
    name: "axpby 2x − 0.5y",
    kind: "elementwise",
    wmx: (x, y) => wmx.axpby(x, y, 2, -0.5),
    js: (x, y) => {
      const z = new Float32Array(x.length);
      for (let i = 0; i < x.length; i++) z[i] = 2 * x[i] - 0.5 * y[i];
      return z;
    },
  },
  {
    name: "multiply x·y",
    kind: "elementwise",
    wmx: (x, y) => wmx.multiply(x, y),
    js: (x, y) => {
      const z = new Float32Array(x.length);
      for (let i = 0; i < x.length; i++) z[i] = x[i] * y[i];
      return z;
    },
  },
  {
    name: "sum(x)",
    kind: "reduction",
    wmx: (x) => wmx.sum(x),
    js: (x) => {
      let s = 0;
      for (let i = 0; i < x.length; i++) s += x[i];
      return s;
    },
  },
  {
    name: "max(x)",
    kind: "reduction",
    wmx: (x) => wmx.max(x),
    js: (x) => {
      let m = -Infinity;
      for (let i = 0; i < x.length; i++) if (x[i] > m) m = x[i];
      return m;
    },
  },
];

function inputs(n) {
  const x = new Float32Array(n);
  const y = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    x[i] = ((i * 7919) % 1000) / 1000 - 0.5;
    y[i] = ((i * 104729) % 997) / 997;
  }
  return { x, y };
}

const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function checksum(z) {
  let s = 0;
  for (let i = 0; i < z.length; i++) s += z[i];
  return s;
}

function maxAbsDiff(a, b) {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

// One wmx run: build the op, await its data (a typed array or a single value).
async function runWmx(op, x, y) {
  const r = op.wmx(x, y);
  try {
    return op.kind === "reduction" ? await r.item() : await r.data();
  } finally {
    r.free();
  }
}

async function time(fn, reps) {
  await fn(); // warm-up: pipeline compilation, buffer pools
  const ms = [];
  let out;
  for (let k = 0; k < reps; k++) {
    const t0 = performance.now();
    out = await fn();
    ms.push(performance.now() - t0);
  }
  return { ms: median(ms), out };
}

const fmt = (v, d = 6) => (typeof v === "number" ? Number(v.toPrecision(d)).toString() : String(v));

async function run(n, reps) {
  state.status = "running";
  state.rows = [];
  state.n = n;
  state.reps = reps;
  $("status").textContent = `running on ${n.toLocaleString()} elements…`;
  $("run").disabled = true;
  const tbody = document.querySelector("#results tbody");
  tbody.innerHTML = "";
  const { x, y } = inputs(n);
  const impls = IMPLS.filter((i) => i.key !== "webgpu" || state.info.device === "webgpu");
  const arrays = {};
  for (const impl of impls) {
    if (impl.key === "js") continue;
    wmx.setDevice(impl.key);
    arrays[impl.key] = { x: wmx.array(x, [n]), y: wmx.array(y, [n]) };
  }
  wmx.setDevice(state.info.device);
  try {
    for (const op of OPS) {
      const ref = op.js(x, y);
      for (const impl of impls) {
        const t =
          impl.key === "js"
            ? await time(async () => op.js(x, y), reps)
            : await time(() => runWmx(op, arrays[impl.key].x, arrays[impl.key].y), reps);
        const row = { op: op.name, impl: impl.key, label: impl.label, ms: t.ms };
        if (op.kind === "elementwise") {
          row.value = checksum(t.out);
          row.first = Array.from(t.out.slice(0, 3));
          row.maxAbsDiff = maxAbsDiff(t.out, ref);
          row.ok = row.maxAbsDiff <= 1e-6;
        } else {
          row.value = t.out;
          row.maxAbsDiff = Math.abs(t.out - ref);
          // f32 tree sums vs an f64 loop: relative to the sum of |x| (≤ 0.5 n).
          row.ok = row.maxAbsDiff <= (op.name.startsWith("sum") ? 1e-5 * 0.5 * n : 0);
        }
        state.rows.push(row);
        const tr = document.createElement("tr");
        tr.innerHTML =
          `<td>${op.name}</td><td class="l">${impl.label}</td><td>${t.ms.toFixed(2)}</td>` +
          `<td>${op.kind === "elementwise" ? "Σ = " : ""}${fmt(row.value)}</td>` +
          `<td class="${row.ok ? "ok" : "bad"}">${row.maxAbsDiff.toExponential(1)}${row.ok ? " ✓" : " ✗"}</td>`;
        tbody.appendChild(tr);
        chart(state.rows);
      }
    }
    state.ok = state.rows.every((r) => r.ok);
    state.status = "done";
    $("status").textContent = state.ok
      ? `done: ${n.toLocaleString()} elements, every result matches the JavaScript loop`
      : "done, with MISMATCHES (marked ✗)";
  } catch (e) {
    fail(e);
  } finally {
    for (const a of Object.values(arrays)) {
      a.x.free();
      a.y.free();
    }
    $("run").disabled = false;
  }
}

// Horizontal grouped bars on a log scale (times differ by orders of magnitude).
function chart(rows) {
  const svg = $("chart");
  const ops = [...new Set(rows.map((r) => r.op))];
  const bar = 16, gap = 14, left = 150, width = 900, right = 90, top = 24;
  const ms = rows.map((r) => Math.max(r.ms, 1e-3));
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(...ms))));
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(...ms) * 1.01)));
  const X = (v) => left + ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * (width - left - right);
  let h = top, parts = [];
  for (const op of ops) {
    const group = rows.filter((r) => r.op === op);
    parts.push(`<text x="0" y="${h + (group.length * bar) / 2 + 4}">${op}</text>`);
    for (const r of group) {
      const c = IMPLS.find((i) => i.key === r.impl).color;
      const w = Math.max(1, X(r.ms) - left);
      parts.push(`<rect x="${left}" y="${h}" width="${w}" height="${bar - 3}" fill="${c}"><title>${r.label}: ${r.ms.toFixed(3)} ms</title></rect>`);
      parts.push(`<text x="${left + w + 4}" y="${h + bar - 5}">${r.ms < 10 ? r.ms.toFixed(2) : r.ms.toFixed(0)} ms</text>`);
      h += bar;
    }
    h += gap;
  }
  for (let v = lo; v <= hi * 1.001; v *= 10) {
    parts.push(`<line x1="${X(v)}" x2="${X(v)}" y1="${top - 6}" y2="${h - gap}" stroke="#ccc"/>`);
    parts.push(`<text x="${X(v) - 10}" y="${top - 10}">${v >= 1 ? v : v.toPrecision(1)} ms</text>`);
  }
  svg.setAttribute("height", h);
  svg.innerHTML = parts.join("");
}

// ---- the language model: a tiny Llama and its tokenizer.json, fetched.
// tokenizer.json's BPE with a Metaspace pre-tokenizer (Llama 2's kind), in a few
// lines: enough for the demo's checkpoint; real apps use a tokenizer library.
function bpeEncode(tok, text) {
  let s = text.replaceAll(" ", "\u2581");
  if (!s.startsWith("\u2581")) s = "\u2581" + s;
  const rank = new Map(tok.model.merges.map((m, i) => [Array.isArray(m) ? m.join(" ") : m, i]));
  const parts = [...s];
  for (;;) {
    let best = -1, bestRank = Infinity;
    for (let i = 0; i + 1 < parts.length; i++) {
      const r = rank.get(parts[i] + " " + parts[i + 1]);
      if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
    }
    if (best < 0) break;
    parts.splice(best, 2, parts[best] + parts[best + 1]);
  }
  const unk = tok.model.vocab[tok.model.unk_token];
  return [tok.model.vocab["<s>"], ...parts.map((p) => tok.model.vocab[p] ?? unk)];
}

// The Metaspace decoder as tokenizers has it: in the first token every \u2581 is
// dropped, in the others each is a space.
function bpeDecode(tok, ids) {
  const piece = [];
  for (const [p, id] of Object.entries(tok.model.vocab)) piece[id] = p;
  const special = new Set(tok.added_tokens.filter((t) => t.special).map((t) => t.id));
  return ids
    .filter((i) => !special.has(i))
    .map((i, k) => piece[i].replaceAll("\u2581", k === 0 ? "" : " "))
    .join("");
}

async function loadModel() {
  const base = "./models/llama_tiny/";
  const get = async (f) => {
    const r = await fetch(base + f);
    if (!r.ok) throw new Error(`${base + f}: HTTP ${r.status}`);
    return r;
  };
  const [config, weights, tok] = await Promise.all([
    get("config.json").then((r) => r.text()),
    get("model.safetensors").then((r) => r.arrayBuffer()),
    get("tokenizer.json").then((r) => r.json()),
  ]);
  const eos = JSON.parse(config).eos_token_id;
  return { model: wmx.LanguageModel.fromSafetensors(config, new Uint8Array(weights)), tok, eos };
}

async function generateText(lm) {
  const lmState = (state.lm = { status: "running", tokens: [], text: "" });
  $("lmRun").disabled = true;
  try {
    const prompt = bpeEncode(lm.tok, $("lmPrompt").value);
    const maxTokens = Math.max(1, parseInt($("lmMax").value, 10) || 40);
    const temperature = Math.max(0, parseFloat($("lmTemp").value) || 0);
    lmState.prompt = prompt;
    $("lmOut").textContent = "";
    const t0 = performance.now();
    let first = null;
    const tokens = await lm.model.generate(prompt, {
      maxTokens, temperature, seed: 0, stop: lm.eos === undefined ? [] : [lm.eos],
      onToken: (t) => {
        first ??= performance.now();
        lmState.tokens.push(t);
        $("lmOut").textContent = bpeDecode(lm.tok, lmState.tokens);
      },
    });
    const end = performance.now();
    lmState.text = bpeDecode(lm.tok, Array.from(tokens));
    lmState.promptMs = first - t0;
    lmState.tokensPerSecond = (tokens.length - 1) / Math.max(1e-9, (end - first) / 1000);
    lmState.status = "done";
    $("lmStatus").textContent =
      `prompt: ${prompt.length} tokens in ${lmState.promptMs.toFixed(0)} ms; ` +
      `generation: ${tokens.length} tokens, ${lmState.tokensPerSecond.toFixed(1)} tokens/s`;
  } catch (e) {
    lmState.status = "error";
    lmState.error = String(e && e.message ? e.message : e);
    $("lmStatus").textContent = "error: " + lmState.error;
  } finally {
    $("lmRun").disabled = false;
  }
}

function fail(e) {
  state.status = "error";
  state.error = String(e && e.message ? e.message : e);
  $("status").textContent = "error: " + state.error;
  console.error(e);
}

async function main() {
  const q = new URLSearchParams(location.search);
  const wanted = q.get("device") || "auto";
  state.info = await wmx.init({ device: wanted });
  const i = state.info;
  const dev = $("device");
  if (i.device === "webgpu") {
    dev.innerHTML = `<b>WebGPU</b> adapter: <b>${i.adapter}</b> (${i.backend}, ${i.deviceType}` +
      `${i.adapterInfo && i.adapterInfo.isFallbackAdapter ? ", a software fallback adapter" : ""}); ` +
      `f16 ${i.f16 ? "yes" : "no"}, max buffer ${(i.maxBufferSize / 2 ** 20).toFixed(0)} MiB`;
    if (i.adapterInfo && i.adapterInfo.isFallbackAdapter) {
      $("note").textContent = "This adapter is a software fallback (e.g. SwiftShader: a GPU emulated on the CPU), " +
        "so WebGPU is slower than plain CPU code here; each WebGPU timing also includes a GPU round trip " +
        "(submit, map, download). On a real GPU the picture changes with size.";
    }
  } else {
    dev.className = "fallback";
    dev.innerHTML = `<b>No WebGPU</b> — using wmx's CPU backend inside wasm` +
      (i.reason ? `<br><small>${i.reason}</small>` : "");
  }
  if (q.get("n")) {
    const preset = [...$("n").options].some((o) => o.value === q.get("n"));
    if (preset) $("n").value = q.get("n");
    else $("nExact").value = q.get("n");
  }
  if (q.get("reps")) $("reps").value = q.get("reps");
  const go = () => {
    const n = parseInt($("nExact").value || $("n").value, 10);
    const reps = Math.max(1, parseInt($("reps").value, 10) || 5);
    if (!(n > 0)) return fail("the number of elements must be a positive integer");
    return run(n, reps);
  };
  $("form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    go();
  });
  $("run").disabled = false;
  await go();
  try {
    const lm = await loadModel();
    $("lmForm").addEventListener("submit", (ev) => {
      ev.preventDefault();
      generateText(lm);
    });
    $("lmRun").disabled = false;
    await generateText(lm);
  } catch (e) {
    state.lm = { status: "error", error: String(e && e.message ? e.message : e) };
    $("lmStatus").textContent = "error: " + state.lm.error;
  }
}

main().catch(fail);
