"""A tiny W3C WebDriver client for chromedriver (Python standard library only)."""

import base64
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebDriverError(RuntimeError):
    pass


class Chrome:
    """Starts chromedriver and one headless Chromium session.

    `webgpu=False` leaves out --enable-unsafe-webgpu (the negative control: the
    page must then report the CPU fallback)."""

    def __init__(self, webgpu=True, chromedriver=None, chromium=None, log=None):
        self.port = free_port()
        driver = chromedriver or os.environ.get("CHROMEDRIVER", "chromedriver")
        self.log = open(log or os.devnull, "w")
        self.proc = subprocess.Popen(
            [driver, f"--port={self.port}"], stdout=self.log, stderr=subprocess.STDOUT
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 30
        while True:
            try:
                self._call("GET", "/status")
                break
            except (urllib.error.URLError, ConnectionError, WebDriverError):
                if time.time() > deadline or self.proc.poll() is not None:
                    self.close()
                    raise WebDriverError("chromedriver did not start")
                time.sleep(0.2)
        args = ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1280,1700", "--hide-scrollbars"]
        if webgpu:
            args.append("--enable-unsafe-webgpu")
        opts = {"args": args}
        binary = chromium or os.environ.get("CHROMIUM")
        if binary:
            opts["binary"] = binary
        caps = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": opts}}}
        try:
            self.session = self._call("POST", "/session", caps)["sessionId"]
        except Exception:
            self.close()
            raise

    def _call(self, method, path, body=None, timeout=120):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                out = json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise WebDriverError(f"{method} {path}: {e.code} {e.read()[:2000]!r}") from None
        return out.get("value", out) if path != "/session" else out["value"]

    def _s(self, method, path, body=None, timeout=120):
        return self._call(method, f"/session/{self.session}{path}", body, timeout)

    def get(self, url):
        self._s("POST", "/url", {"url": url})

    def js(self, script, *args):
        """Runs `script` (a function body; `return` gives the result)."""
        return self._s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def js_async(self, script, *args, timeout=120):
        """Runs an async function body; its resolved value is returned."""
        wrapper = ("const done = arguments[arguments.length - 1];"
                   f"(async () => {{ {script} }})().then(done, e => done({{error: String(e)}}));")
        self._s("POST", "/timeouts", {"script": int(timeout * 1000)})
        return self._s("POST", "/execute/async", {"script": wrapper, "args": list(args)},
                       timeout=timeout + 30)

    def poll(self, script, timeout=120, interval=0.5):
        """Evaluates `script` until it returns something truthy."""
        deadline = time.time() + timeout
        while True:
            v = self.js(script)
            if v:
                return v
            if time.time() > deadline:
                raise WebDriverError(f"timed out after {timeout}s waiting for: {script}")
            time.sleep(interval)

    def screenshot(self, path):
        png = base64.b64decode(self._s("GET", "/screenshot"))
        with open(path, "wb") as f:
            f.write(png)

    def close(self):
        try:
            if getattr(self, "session", None):
                self._call("DELETE", f"/session/{self.session}", timeout=30)
        except Exception:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
