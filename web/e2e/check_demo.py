#!/usr/bin/env python3
"""End-to-end test of the demo page (web/www) in headless Chromium.

Serves web/www from a local static server, opens the page through chromedriver
(WebDriver HTTP API), polls `window.wmxDemo` until the run is done and checks
every number against references computed here independently (f64, with f32
rounding where the page stores f32). Then:

- saves a screenshot of the finished page (`--screenshot PATH`);
- negative control: opens the page again in a browser *without*
  --enable-unsafe-webgpu and checks that it reports the CPU fallback (so the
  "it used WebGPU" check above can fail, and the fallback path works).

Usage: web/e2e/check_demo.py [--n N] [--reps R] [--screenshot PATH]
Needs web/www/pkg (web/build.sh), chromium and chromedriver.
"""

import argparse
import array
import functools
import http.server
import math
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from webdriver import Chrome  # noqa: E402

WWW = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "www")
OPS = ["axpby 2x − 0.5y", "multiply x·y", "sum(x)", "max(x)"]


def serve(directory):
    """A static file server on a free port, in a thread (like `python3 -m http.server`)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

    handler = functools.partial(Quiet, directory=directory)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def f32(values):
    return array.array("f", values)


def references(n):
    """What each op must give on the page's inputs, computed in f64."""
    x = f32(((i * 7919) % 1000) / 1000 - 0.5 for i in range(n))
    y = f32(((i * 104729) % 997) / 997 for i in range(n))
    # 2x and 0.5y are exact, x*y of two f32 is exact in f64: one f32 rounding each.
    axpby = f32(2 * a - 0.5 * b for a, b in zip(x, y))
    mul = f32(a * b for a, b in zip(x, y))
    abs_x = math.fsum(abs(a) for a in x)
    return {
        "axpby 2x − 0.5y": ("checksum", math.fsum(axpby), math.fsum(abs(v) for v in axpby)),
        "multiply x·y": ("checksum", math.fsum(mul), math.fsum(abs(v) for v in mul)),
        "sum(x)": ("sum", math.fsum(x), abs_x),
        "max(x)": ("max", max(x), 0.0),
    }


def check_rows(rows, refs, impls, failures):
    for op in OPS:
        kind, want, scale = refs[op]
        for impl in impls:
            got = [r for r in rows if r["op"] == op and r["impl"] == impl]
            if len(got) != 1:
                failures.append(f"{op} / {impl}: {len(got)} rows on the page")
                continue
            r = got[0]
            if kind == "checksum":
                # The page sums the returned f32 values in f64, in order.
                tol = 1e-12 * scale + 1e-9
            elif kind == "sum":
                # f32 accumulation on wmx (a tree on WebGPU); f64 in the JS loop.
                # Bound ~ log2(n) · 2^-24 · Σ|x| for a tree of f32 partial sums.
                tol = (1e-9 if impl == "js" else 2e-6) * scale
            else:
                tol = 0.0
            err = abs(r["value"] - want)
            status = "ok" if err <= tol else "WRONG"
            print(f"  {op:18} {impl:7} {r['ms']:9.2f} ms  value {r['value']:.10g}"
                  f"  (reference {want:.10g}, |err| {err:.2g} <= {tol:.2g}) {status}")
            if err > tol:
                failures.append(f"{op} / {impl}: got {r['value']!r}, want {want!r} (tol {tol:.3g})")
            if not r.get("ok"):
                failures.append(f"{op} / {impl}: the page marked its result as a mismatch")
            # performance.now() is coarse (0.1 ms): tiny runs may time as 0.
            if not (isinstance(r["ms"], (int, float)) and 0 <= r["ms"] < 1e6):
                failures.append(f"{op} / {impl}: no timing ({r['ms']!r})")


# The README's example and the JS-facing behaviour, run in the page as a user's
# module would (the generated glue, wmx.js, typed arrays, exceptions, dispose).
JS_API = """
const wmx = await import('./wmx.js');
const out = {};
out.info = await wmx.init();
const x = wmx.array(new Float32Array([1, 2, 3, 4]), [2, 2]);
const s = wmx.axpby(x, wmx.ones([2]), 2, 0.5).sum(1);
out.readme = Array.from(await s.data());
out.readmeType = (await s.data()).constructor.name;
out.shape = x.shape; out.dtype = x.dtype; out.device = x.device;
const i = wmx.array(new Int32Array([-7, 7]), [2]);
out.floordiv = Array.from(await i.floorDivide(2).data());
out.i32Type = (await i.data()).constructor.name;
out.u8 = Array.from(await wmx.array(new Uint8Array([250, 10])).add(10).data());
out.bool = Array.from(await wmx.less(x, 2.5).data());
out.cast = Array.from(await x.astype('int32').multiply(3).data());
out.view = Array.from(await x.T.slice([null, [null, null, -1]]).data());
out.item = await wmx.max(x).item();
try { wmx.add(x, wmx.ones([3])); out.err = 'no exception'; }
catch (e) { out.err = (e instanceof Error) + ': ' + e.message; }
x.dispose();
try { x.shape; out.disposed = 'no exception'; } catch (e) { out.disposed = 'threw'; }
// tidy releases what it made except what it returns; nested scopes pass it out.
// Live counts are compared within synchronous stretches only: across an await,
// the garbage collector may finalize arrays this script dropped earlier.
const live0 = wmx.liveArrays();
const kept = wmx.tidy(() => {
  const a = wmx.ones([3]);
  return { c: a.add(1).multiply(2), n: 1 };
});
out.tidyLive = wmx.liveArrays() - live0;
const inner = wmx.tidy(() => wmx.tidy(() => wmx.ones([2]).add(1)));
out.tidyNestedLive = wmx.liveArrays() - live0;
let leaked = null;
wmx.tidy(() => { leaked = wmx.ones([2]); return null; });
try { leaked.shape; out.tidyReleased = 'no exception'; } catch (e) { out.tidyReleased = 'threw'; }
try { wmx.tidy(() => { wmx.ones([2]); throw new Error('boom'); }); } catch (e) { out.tidyThrow = e.message; }
try { wmx.tidy(async () => wmx.ones([2])); } catch (e) { out.tidyAsync = 'threw'; }
out.tidyAfterThrowLive = wmx.liveArrays() - live0;
out.tidyKept = Array.from(await kept.c.data());
out.tidyNested = Array.from(await inner.data());
const live1 = wmx.liveArrays();
kept.c[Symbol.dispose]();
inner.dispose();
out.disposeLive = wmx.liveArrays() - live1;
return out;
"""

JS_WANT = {
    "readme": [7.0, 15.0], "readmeType": "Float32Array", "shape": [2, 2], "dtype": "f32",
    "floordiv": [-4, 3], "i32Type": "Int32Array", "u8": [4, 20], "bool": [1, 1, 0, 0],
    "cast": [3, 6, 9, 12], "view": [3, 1, 4, 2], "item": 4,
    "err": "true: shape mismatch in add: [2, 2] vs [3]", "disposed": "threw",
    "tidyLive": 1, "tidyKept": [4, 4, 4], "tidyNested": [2, 2], "tidyNestedLive": 2,
    "tidyReleased": "threw", "tidyThrow": "boom", "tidyAsync": "threw",
    "tidyAfterThrowLive": 2, "disposeLive": -2,
}


def run_page(url, webgpu, timeout, screenshot=None):
    with Chrome(webgpu=webgpu) as c:
        c.get(url)
        state = c.poll(
            "const s = window.wmxDemo;"
            "return s && (s.status === 'done' || s.status === 'error') ? s : null;",
            timeout=timeout,
        )
        lm = c.poll(
            "const s = window.wmxDemo;"
            "return s && s.lm && (s.lm.status === 'done' || s.lm.status === 'error') ? s.lm : null;",
            timeout=timeout,
        )
        lm["shown"] = c.js("return document.getElementById('lmStatus').innerText;")
        if screenshot:
            time.sleep(0.3)  # let the last chart update paint
            c.screenshot(screenshot)
            print(f"  screenshot: {screenshot}")
        text = c.js("return document.getElementById('device').innerText;")
        # A size picked in the form, run with the button.
        c.js("document.getElementById('nExact').value = '5001';"
             "document.getElementById('reps').value = '2';"
             "document.getElementById('run').click();")
        rerun = c.poll(
            "const s = window.wmxDemo;"
            "return s && s.n === 5001 && (s.status === 'done' || s.status === 'error') ? s : null;",
            timeout=timeout,
        )
        api = c.js_async(JS_API, timeout=60)
        return state, text, api, rerun, lm


def check_api(api, device, all_failures):
    failures = []
    check_api_into(api, device, failures)
    all_failures += failures
    print(f"  JS API checks: {'ok' if not failures else 'FAILED'} (arrays on {api.get('device')})")


def check_api_into(api, device, failures):
    if "error" in api:
        failures.append(f"JS API snippet threw: {api['error']}")
        return
    for k, want in JS_WANT.items():
        if api.get(k) != want:
            failures.append(f"JS API: {k} = {api.get(k)!r}, want {want!r}")
    if api.get("device") != device:
        failures.append(f"JS API: arrays on {api.get('device')!r}, want {device!r}")


LM_EXPECTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                           "goldens", "llama_tiny", "generate_expected.txt")


def check_lm(lm, failures):
    """The page's generation: mlx-lm's text for the prompt (examples/generate
    prints the same natively), and tokens/s shown."""
    want = open(LM_EXPECTED).read().rstrip("\n")
    if lm.get("status") != "done":
        failures.append(f"language model: {lm.get('error')}")
        return
    print(f"  language model: {len(lm['tokens'])} tokens, {lm['tokensPerSecond']:.1f} tokens/s: {lm['text']!r}")
    if lm["text"] != want:
        failures.append(f"language model text {lm['text']!r}, mlx-lm's {want!r}")
    if "tokens/s" not in lm.get("shown", ""):
        failures.append(f"the page does not show tokens/s: {lm.get('shown')!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_003)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--screenshot", default=None)
    args = ap.parse_args()
    if not os.path.exists(os.path.join(WWW, "pkg", "wmx_web_bg.wasm")):
        sys.exit("web/www/pkg is missing: run web/build.sh first")

    t0 = time.time()
    refs = references(args.n)
    httpd = serve(os.path.abspath(WWW))
    url = f"http://127.0.0.1:{httpd.server_address[1]}/?n={args.n}&reps={args.reps}"
    failures = []

    print(f"demo page with WebGPU: {url}")
    state, device_text, api, rerun, lm = run_page(url, True, args.timeout, args.screenshot)
    check_lm(lm, failures)
    check_api(api, "webgpu", failures)
    info = state.get("info") or {}
    print(f"  device: {device_text!r}")
    if state["status"] != "done":
        failures.append(f"page error: {state.get('error')}")
    # The page must have run on the browser's WebGPU, not the CPU fallback.
    if info.get("device") != "webgpu" or info.get("fallback") is not False:
        failures.append(f"the page did not use WebGPU: {info}")
    if info.get("backend") != "BrowserWebGpu":
        failures.append(f"adapter backend {info.get('backend')!r}, want 'BrowserWebGpu'")
    if not info.get("adapter") or "cpu backend" in info.get("adapter", "").lower():
        failures.append(f"adapter name {info.get('adapter')!r} is not a WebGPU adapter")
    if "WebGPU" not in device_text:
        failures.append(f"the page does not show the WebGPU adapter: {device_text!r}")
    if state.get("n") != args.n:
        failures.append(f"the page ran {state.get('n')} elements, asked for {args.n}")
    check_rows(state.get("rows", []), refs, ["webgpu", "cpu", "js"], failures)
    print("  the same page, 5001 elements picked in the form:")
    if rerun["status"] != "done":
        failures.append(f"rerun error: {rerun.get('error')}")
    check_rows(rerun.get("rows", []), references(5001), ["webgpu", "cpu", "js"], failures)

    print("negative control: the same page without --enable-unsafe-webgpu")
    state2, device_text2, api2, _, lm2 = run_page(url, False, args.timeout)
    check_lm(lm2, failures)
    check_api(api2, "cpu", failures)
    info2 = state2.get("info") or {}
    print(f"  device: {device_text2!r}")
    if info2.get("device") != "cpu" or info2.get("fallback") is not True:
        failures.append(f"without WebGPU the page should report the CPU fallback: {info2}")
    if "No WebGPU" not in device_text2:
        failures.append(f"the page does not say it fell back: {device_text2!r}")
    if any(r["impl"] == "webgpu" for r in state2.get("rows", [])):
        failures.append("without WebGPU the page still reports WebGPU timings")
    if state2["status"] != "done":
        failures.append(f"fallback page error: {state2.get('error')}")
    check_rows(state2.get("rows", []), refs, ["cpu", "js"], failures)

    httpd.shutdown()
    print(f"e2e: {time.time() - t0:.1f} s")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("e2e: demo page OK (WebGPU used; CPU fallback works without it)")


if __name__ == "__main__":
    main()
