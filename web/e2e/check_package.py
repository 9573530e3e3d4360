#!/usr/bin/env python3
"""The npm package, as a user gets it (web/test.sh runs this after web/pack.sh).

1. Copies web/npm/example to a temporary project and installs the packed
   target/npm/wmx-<version>.tgz into it with `npm install`, beside TypeScript
   from the npm registry (the version pinned in the example's package.json).
2. The package's public types name everything: no `any` in wmx.d.ts or
   pkg/wmx_web.d.ts (outside wasm-bindgen's InitOutput, the raw wasm exports).
3. `tsc` type-checks the example in strict mode and compiles it; the negative
   control bad.ts must fail with errors on exactly its marked lines; the
   package README's TypeScript example must compile.
4. The compiled example runs in headless Chromium from the installed package
   (an import map sends "wmx" to node_modules/wmx/wmx.js), on WebGPU and on the
   CPU backend, and its results must match its f64 reference.
Needs npm, chromium and chromedriver (`scripts/setup.sh --test`).
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_demo import serve  # noqa: E402
from webdriver import Chrome  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EXAMPLE = os.path.join(ROOT, "web", "npm", "example")
ANY = re.compile(r"\bany\b")


def run(cmd, cwd, check=True):
    print("  $ " + " ".join(cmd))
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p


def any_lines(path):
    """Lines of a .d.ts that type something `any` (doc comments and InitOutput aside)."""
    out = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if line.startswith("export type InitInput") or line.startswith("export interface InitOutput"):
                break
            code = line.split("//")[0]
            if code.strip().startswith("*") or code.strip().startswith("/**"):
                continue
            # `any(...)` the reduction is a name, not a type.
            code = re.sub(r"\bany\(", "(", code)
            if ANY.search(code):
                out.append(f"{os.path.basename(path)}:{i}: {line.strip()}")
    return out


def main():
    tgzs = sorted(glob.glob(os.path.join(ROOT, "target", "npm", "wmx-*.tgz")))
    if not tgzs:
        sys.exit("target/npm/wmx-*.tgz is missing: run web/pack.sh first")
    failures = []
    with tempfile.TemporaryDirectory(prefix="wmx-npm-") as tmp:
        proj = os.path.join(tmp, "example")
        shutil.copytree(EXAMPLE, proj, ignore=shutil.ignore_patterns("node_modules", "dist"))
        pj = os.path.join(proj, "package.json")
        meta = json.load(open(pj))
        meta["dependencies"] = {"wmx": "file:" + tgzs[-1]}
        json.dump(meta, open(pj, "w"), indent=2)
        print(f"npm package {os.path.basename(tgzs[-1])} in a fresh project:")
        run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], proj)
        pkg = os.path.join(proj, "node_modules", "wmx")
        for want in ["wmx.js", "wmx.d.ts", "pkg/wmx_web_bg.wasm", "package.json"]:
            if not os.path.exists(os.path.join(pkg, want)):
                failures.append(f"the installed package lacks {want}")

        bad = any_lines(os.path.join(pkg, "wmx.d.ts")) + any_lines(os.path.join(pkg, "pkg", "wmx_web.d.ts"))
        print(f"  `any` in the public types: {len(bad)}")
        failures += [f"`any` in the types: {b}" for b in bad]

        tsc = os.path.join(proj, "node_modules", ".bin", "tsc")
        print(f"  TypeScript {run([tsc, '--version'], proj).stdout.strip()}")
        p = run([tsc, "-p", "."], proj, check=False)
        if p.returncode != 0:
            failures.append(f"tsc failed on the example:\n{p.stdout}{p.stderr}")
        # The package README's TypeScript example compiles too.
        readme = open(os.path.join(pkg, "README.md")).read()
        blocks = re.findall(r"```ts\n(.*?)```", readme, re.S)
        if not blocks:
            failures.append("the package README has no ```ts example")
        with open(os.path.join(proj, "readme.ts"), "w") as f:
            f.write("\n".join(blocks) + "\nexport {};\n")
        json.dump({"extends": "./tsconfig.json", "compilerOptions": {"noEmit": True},
                   "files": ["readme.ts"]}, open(os.path.join(proj, "tsconfig.readme.json"), "w"))
        p = run([tsc, "-p", "tsconfig.readme.json"], proj, check=False)
        if p.returncode != 0:
            failures.append(f"tsc failed on the README's example:\n{p.stdout}{p.stderr}")
        # The negative control: the marked lines, and only they, are errors.
        marked = {i for i, l in enumerate(open(os.path.join(proj, "bad.ts")), 1) if "// error:" in l}
        p = run([tsc, "-p", "tsconfig.bad.json"], proj, check=False)
        got = {int(m) for m in re.findall(r"^bad\.ts\((\d+),\d+\): error", p.stdout, re.M)}
        print(f"  bad.ts: errors on lines {sorted(got)}, marked {sorted(marked)}")
        if p.returncode == 0 or got != marked:
            failures.append(f"bad.ts: errors on lines {sorted(got)}, want {sorted(marked)}:\n{p.stdout}")

        if os.path.exists(os.path.join(proj, "dist", "main.js")):
            httpd = serve(proj)
            base = f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
            for webgpu, query, device in [(True, "", "webgpu"), (True, "?device=cpu", "cpu")]:
                with Chrome(webgpu=webgpu) as c:
                    c.get(base + query)
                    out = c.poll("return window.wmxExample || null;", timeout=180)
                failures += check_outcome(out, device)
            httpd.shutdown()
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("npm package OK: installs, type-checks (and rejects bad calls), runs on WebGPU and CPU")


def check_outcome(out, device):
    fails = []
    print(f"  example on {device}: status {out.get('status')}"
          f" ({(out.get('info') or {}).get('adapter')})")
    if out.get("status") != "done":
        return [f"example on {device}: {out.get('error')}"]
    if (out.get("info") or {}).get("device") != device:
        fails.append(f"example ran on {(out.get('info') or {}).get('device')}, want {device}")
    for name in ["probs", "loss", "grad"]:
        c = out["checks"].get(name)
        if not c:
            fails.append(f"example on {device}: no {name} check")
            continue
        err = max((abs(g - w) for g, w in zip(c["got"], c["want"])), default=0.0)
        ok = len(c["got"]) == len(c["want"]) > 0 and err <= 2e-6
        print(f"    {name:5}: {len(c['got'])} values, max |err| {err:.2g} {'ok' if ok else 'WRONG'}")
        if not ok:
            fails.append(f"example on {device}: {name} off by {err:.3g}: {c}")
    if out.get("liveAfter") != 0:
        fails.append(f"example on {device}: {out.get('liveAfter')} arrays left alive")
    return fails


if __name__ == "__main__":
    main()
