"""Load a local HTML file in headless Chromium and report what a user's browser would: console errors, uncaught
exceptions, network requests, the DOM facts asked for, a screenshot and a PDF print.

Talks the DevTools protocol over `--remote-debugging-pipe` (fd 3: commands in, fd 4: replies out, messages
separated by NUL), so it needs nothing but the standard library and Debian's `chromium` package.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--remote-debugging-pipe",
]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageReport:
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for, the page itself included
    values: dict = field(default_factory=dict)  # the evaluated expressions
    screenshot_png: bytes = b""
    pdf: bytes = b""


class _Pipe:
    def __init__(self, proc, write_fd, read_fd):
        self.proc, self.write_fd, self.read_fd = proc, write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method, params=None, session=None, timeout=60.0):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            for msg in self._read(deadline):
                if msg.get("id") == self.next_id:
                    if "error" in msg:
                        raise RuntimeError(f"{method}: {msg['error']}")
                    return msg.get("result", {})
                self.events.append(msg)

    def wait_event(self, name, timeout=60.0):
        deadline = time.monotonic() + timeout
        while True:
            for i, msg in enumerate(self.events):
                if msg.get("method") == name:
                    return self.events.pop(i)
            self.events += self._read(deadline)

    def _read(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buffer += chunk
        *messages, self.buffer = self.buffer.split(b"\0")
        return [json.loads(m) for m in messages if m]


def load(path, expressions: dict[str, str], width: int = 1200) -> PageReport:
    """Open file `path`, wait for its load event, evaluate `expressions` ({name: JS}), screenshot the whole page
    at `width` CSS pixels, print it to PDF."""
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError("chromium is not installed")
    profile = tempfile.mkdtemp(prefix="gpulint-chromium-")
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()

    def fds():  # the protocol's fixed descriptors: 3 = commands in, 4 = replies out
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]  # never clobber each other
        os.dup2(high[0], 3)
        os.dup2(high[1], 4)

    proc = subprocess.Popen(
        [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=fds,
        pass_fds=(3, 4),  # kept open after preexec_fn put the pipes there
    )
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    pipe = _Pipe(proc, to_chrome_w, from_chrome_r)
    report = PageReport()
    try:
        target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            pipe.send(f"{domain}.enable", session=session)
        pipe.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session)
        pipe.send("Page.navigate", {"url": f"file://{os.path.abspath(path)}"}, session)
        pipe.wait_event("Page.loadEventFired")
        for name, expression in expressions.items():
            result = pipe.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
            report.values[name] = result.get("result", {}).get("value")
        height = pipe.send("Runtime.evaluate", {"expression": "document.documentElement.scrollHeight", "returnByValue": True}, session)
        full = int(height["result"]["value"])
        pipe.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": full, "deviceScaleFactor": 1, "mobile": False}, session)
        shot = pipe.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
        report.screenshot_png = base64.b64decode(shot["data"])
        report.pdf = base64.b64decode(pipe.send("Page.printToPDF", {"printBackground": True}, session)["data"])
        for msg in pipe.events:
            method, params = msg.get("method"), msg.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                report.console_errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                report.exceptions.append(details.get("exception", {}).get("description") or details.get("text", ""))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                report.console_errors.append(params["entry"].get("text", ""))
            elif method == "Network.requestWillBeSent":
                report.requests.append(params.get("request", {}).get("url", ""))
        try:
            pipe.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError):
            pass
    finally:
        os.close(to_chrome_w)
        os.close(from_chrome_r)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    return report
