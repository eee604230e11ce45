"""The HTML report as a user sees it: real runs of the sample application, opened in headless Chromium;
and the timeline of one of those runs, recorded with SCALEPROBE_TRACE=1.

The sample application is instrumented and swept (2 rank counts x 2 batch sizes) with the real
instrumentor and launcher, `modeler report` writes the page, and Chromium, driven over the DevTools
protocol on a pipe (no port, no network), loads it: no console errors or exceptions, no request
leaves the file, every chart has a size on the page, and a screenshot is taken (kept in
$SCALEPROBE_SCREENSHOT_DIR when set, so people can look at it).

Skips only when no chromium is installed (scripts/ensure_chromium.sh installs Debian's) or no torch (the
sample application needs it).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "testdata" / "sample_code"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not found on PATH; run scripts/ensure_chromium.sh as root"),
]


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe (fds 3 and 4)."""

    def __init__(self, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"]
        # The protocol fixes the child's fds (it reads 3, writes 4): posix_spawn's dup2 actions put
        # the pipe ends there; every other fd of ours is close-on-exec. chromium logs a lot on
        # stderr: a file, so that a full pipe never blocks it.
        self.log = profile.with_suffix(".log")
        self.pid = os.posix_spawn(CHROMIUM, args, dict(os.environ), file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, str(self.log), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
            (os.POSIX_SPAWN_DUP2, to_chrome_r, 3),
            (os.POSIX_SPAWN_DUP2, from_chrome_w, 4),
        ])
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    tail = self.log.read_text(errors="replace")[-2000:]
                    raise EOFError(f"chromium closed the pipe; its log ends with:\n{tail}")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_for(self, method: str, after: int = 0, timeout: float = 60) -> dict:
        """The first event `method` among the events from index `after` on, waiting for it if needed."""
        deadline = time.monotonic() + timeout
        for m in self.events[after:]:
            if m.get("method") == method:
                return m
        while True:
            m = self._read_message(deadline)
            self.events.append(m)
            if m.get("method") == method:
                return m

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except Exception:  # already gone: waiting (or killing) below is all that is left to do
            pass
        deadline = time.monotonic() + 10
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.1)
        os.close(self._to_chrome)
        os.close(self._from_chrome)


def run_checked(cmd: list[str], timeout: int, **env_extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), **env_extra)
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """Real runs, traced: instrument the sample app, sweep ranks x batch, `modeler report`."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the sample application needs torch, which is not installed")
    tmp = tmp_path_factory.mktemp("browser")
    py = sys.executable
    run_checked([py, "-m", "instrumentor.cli", str(SAMPLE), "-o", str(tmp / "build")], timeout=180)
    run_checked([py, "-m", "runtime.launch", "--sweep", "ranks=1,2", "--sweep", "batch=4,8", "--out",
                 str(tmp / "runs"), "--experiment", "sample", "--timeout", "240", "--",
                 str(tmp / "build" / "main.py"), "--epochs", "1", "--steps-per-epoch", "2", "--batch-size", "{batch}",
                 "--num-samples", "64", "--eval-samples", "32"], timeout=560, SCALEPROBE_TRACE="1")
    run_checked([py, "-m", "modeler", "report", str(tmp / "runs"), "-o", str(tmp / "report.html"),
                 "--at", "ranks=8,batch=16"], timeout=180)
    return tmp


@pytest.fixture(scope="module")
def report(sweep) -> Path:
    return sweep / "report.html"


def test_timeline_of_a_real_traced_run(sweep, tmp_path):
    """One process per rank, every region visit a slice, and slices on a track nest like calls."""
    (run_dir,) = [d for d in (sweep / "runs" / "sample").iterdir() if d.name.startswith("ranks-2_batch-8")]
    out = tmp_path / "trace.json"
    run_checked([sys.executable, "-m", "modeler", "timeline", str(run_dir), "-o", str(out)], timeout=120)
    trace = json.loads(out.read_text())
    names = sorted(e["args"]["name"].split(" (")[0] for e in trace["traceEvents"] if e["name"] == "process_name")
    assert names == ["rank 0", "rank 1"]
    assert trace["otherData"]["region_events"] is True
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    regions = {e["name"] for e in slices if e["cat"] not in ("step", "epoch", "data_wait")}
    assert {"main", "Trainer.train_step", "ResNet.forward"} <= regions
    tracks: dict = {}
    for e in slices:
        tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        stack: list = []
        for start, end in spans:  # the file is sorted by start, parents first
            while stack and stack[-1] <= start + 1e-3:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, "a slice overlaps its parent's end"
            stack.append(end)


def test_report_opens_in_chromium_without_errors_and_draws_its_charts(report, tmp_path):
    devtools = DevTools(tmp_path / "profile")
    try:
        target = devtools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = devtools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            devtools.call(f"{domain}.enable", session=session)
        devtools.call("Emulation.setDeviceMetricsOverride",
                      {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session=session)
        mark = len(devtools.events)
        devtools.call("Page.navigate", {"url": report.as_uri() + "#all"}, session=session)
        devtools.wait_for("Page.loadEventFired", after=mark)
        stats = json.loads(devtools.call("Runtime.evaluate", {"returnByValue": True, "expression": """
            JSON.stringify({
              ready: document.documentElement.getAttribute("data-ready"),
              charts: Array.from(document.querySelectorAll("svg.chart")).map(function (s) {
                var r = s.getBoundingClientRect(); return [r.width, r.height, s.querySelectorAll("circle, path, rect").length];
              }),
              hidden: Array.from(document.querySelectorAll("section.view")).filter(function (v) { return v.hidden; }).length,
              rows: document.querySelectorAll("#ranking-table tbody tr").length,
              height: document.documentElement.scrollHeight
            })"""}, session=session)["result"]["value"])
        # the filter box works: typing hides the rows that do not match
        filtered = devtools.call("Runtime.evaluate", {"returnByValue": True, "expression": """
            (function () { var i = document.querySelector("input.filter"); i.value = "train_step";
              i.dispatchEvent(new Event("input"));
              var shown = Array.from(document.querySelectorAll("#ranking-table tbody tr")).filter(function (r) {
                return !r.hidden; }).map(function (r) { return r.cells[1].textContent; });
              i.value = ""; i.dispatchEvent(new Event("input"));  // the screenshot shows the whole table
              return shown; })()"""},
            session=session)["result"]["value"]
        # a click on a header sorts by that column, descending first, a second click ascending
        sorted_cols = devtools.call("Runtime.evaluate", {"returnByValue": True, "expression": """
            (function () { var t = document.getElementById("ranking-table");
              var col = Array.from(t.tHead.rows[0].cells).findIndex(function (c) {
                return c.textContent.indexOf("largest measured") === 0; });
              var values = function () { return Array.from(t.tBodies[0].rows).map(function (r) {
                return parseFloat(r.cells[col].getAttribute("data-sort")); }); };
              t.tHead.rows[0].cells[col].click(); var first = values();
              t.tHead.rows[0].cells[col].click(); return [first, values()]; })()"""},
            session=session)["result"]["value"]
        # folding the call tree's root hides every other row of it; unfolding shows them again
        folded = devtools.call("Runtime.evaluate", {"returnByValue": True, "expression": """
            (function () { var rows = document.querySelectorAll("#call-tree tbody tr");
              var count = function () { return Array.from(rows).filter(function (r) { return !r.hidden; }).length; };
              var b = rows[0].querySelector("button.fold"); b.click(); var after = count(); b.click();
              var unfolded = count();
              // an inner fold stays folded while its ancestor is folded and unfolded again
              var inner = Array.from(rows).slice(1).find(function (r) { return r.querySelector("button.fold"); });
              var ib = inner.querySelector("button.fold"); ib.click(); var innerFolded = count();
              b.click(); b.click(); var nested = [count(), inner.hidden]; ib.click();
              return [rows.length, after, unfolded, innerFolded, nested, count()]; })()"""},
            session=session)["result"]["value"]
        devtools.call("Emulation.setDeviceMetricsOverride",
                      {"width": 1400, "height": min(int(stats["height"]), 6000), "deviceScaleFactor": 1,
                       "mobile": False}, session=session)
        shot = devtools.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
    finally:
        devtools.close()

    png = base64.b64decode(shot)
    (tmp_path / "report.png").write_bytes(png)
    keep = os.environ.get("SCALEPROBE_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "report.png", Path(keep) / "report.png")
        shutil.copy(report, Path(keep) / "report.html")

    problems = []
    for e in devtools.events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            details = p["exceptionDetails"]
            problems.append(f"{details.get('text')} {details.get('exception', {}).get('description', '')}")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
            problems.append(f"console.{p['type']}: {p.get('args')}")
        elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
            problems.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
    assert problems == []
    requests = [e["params"]["request"]["url"] for e in devtools.events if e.get("method") == "Network.requestWillBeSent"]
    assert all(u.startswith(("file:", "data:", "about:")) for u in requests), requests

    assert stats["ready"] == "1"  # the page's script ran to its end
    assert stats["hidden"] == 0  # "#all" shows every view
    assert stats["rows"] > 10  # every instrumented region of the sample app that ran is ranked
    assert len(stats["charts"]) >= 10
    for width, height, shapes in stats["charts"]:
        assert width > 100 and height > 100 and shapes > 0
    assert filtered and all("train_step" in t for t in filtered)
    descending, ascending = sorted_cols
    assert descending == sorted(descending, reverse=True) and ascending == sorted(ascending)
    total, after_fold, after_unfold, inner_folded, (nested, inner_hidden), inner_unfolded = folded
    assert total > 5 and after_fold < total and after_unfold == total
    assert inner_folded < total and nested == inner_folded and not inner_hidden and inner_unfolded == total
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 50_000
