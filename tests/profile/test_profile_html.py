"""The HTML report: one self-contained, deterministic, small file with every number embedded as JSON, that a
real browser (headless Chromium) loads without a console error or a network request, sections all there."""

import io
import json
import re

import pytest
from headless_chromium import find_chromium, load
from profile_helpers import DATA, PY, fast_options

from gpulint.profile import html_report, trace_metrics
from gpulint.profile.report import environment, options_to_dict, run_to_dict
from gpulint.profile.runner import RunResult
from gpulint.profile.verify import PlannedFix, run_verify

VERIFY_SECTIONS = ["runs", "steps", "breakdown", "timeline", "idle", "mechanisms", "fixes", "numerics", "environment"]
PROFILE_SECTIONS = ["runs", "steps", "breakdown", "timeline", "idle", "environment"]
ORIGINAL = b"import torch\nloader = DataLoader(ds, batch_size=32)\n"
FIXED = b"import torch\nloader = DataLoader(ds, batch_size=32, num_workers=2)\n"


def gpu_attribution():
    from test_profile_trace_metrics import correlated_trace

    return trace_metrics.attribution_metrics(correlated_trace())


def cpu_attribution():
    return trace_metrics.attribution_metrics(trace_metrics.load_trace(DATA / "cpu_train_trace.json"))


def result(step_s, wait_s, seed, label, attribution):
    steps = [
        {"wall_s": step_s * (1 + 0.01 * ((seed * 7 + k) % 5)), "data_wait_s": wait_s, "samples": 32, "batches": 1}
        for k in range(12)
    ]
    raw = {"window": {"steps": steps}, "losses": [0.7, 0.65, 0.61], "torch_version": "2.13.0", "python_version": "3.11.7"}
    r = RunResult("ok", "measured", raw=raw, attribution=attribution if seed == 0 else {}, label=label)
    return r


def verify_doc(tmp_path, attribution):
    """A real run_verify over synthetic runs (a GPU-shaped or a CPU trace): the document --html renders."""
    script = tmp_path / "train.py"
    script.write_bytes(ORIGINAL)
    html_path = tmp_path / "report.html"
    json_path = tmp_path / "report.json"

    def run(plan, options, attribution, label, on_progress, trace_copy_to, probes):
        i = int(label.split()[1].split("/")[0]) - 1
        r = result(0.1, 0.04, i, label, gpu_or_cpu) if label.startswith("A") else result(0.07, 0.005, i, label, gpu_or_cpu)
        r.probe_hits = {(p, line) for p, lines in (probes or {}).items() for line in lines}
        return r

    gpu_or_cpu = attribution
    code = run_verify(
        [PY, str(script)],
        lambda: [PlannedFix(script, ORIGINAL, FIXED, {"GPU101": 1})],
        fast_options(repeat=3, html_path=html_path, json_path=json_path),
        out=io.StringIO(),
        err=io.StringIO(),
        run=run,
    )
    assert code == 0
    return json.loads(json_path.read_text()), html_path


def profile_doc():
    runs = [result(0.05, 0.01, i, f"run {i + 1}", cpu_attribution()) for i in range(2)]
    return {
        "kind": "profile",
        "command": ["python", "train.py"],
        "options": options_to_dict(fast_options()),
        "status": "measured",
        "message": None,
        "summary": None,
        "runs": [run_to_dict(r) for r in runs],
        "environment": environment(runs),
    }


def embedded(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="gpulint-data">(.*?)</script>', page, re.S)
    return json.loads(match.group(1))


def test_the_verify_report_is_written_self_contained_and_deterministic(tmp_path):
    doc, html_path = verify_doc(tmp_path, gpu_attribution())
    page = html_path.read_text()
    assert page == html_report.render(doc)  # the same document gives the same bytes
    assert [m for m in re.findall(r'\s(?:src|href)="([^"]*)"', page) if not m.startswith(("#", "file:"))] == []
    assert "<link" not in page and "@import" not in page and "http://" not in page and "https://" not in page
    assert re.findall(r"url\(([^)]*)\)", page) == ["#hatch"] * page.count("url(#hatch)")
    assert embedded(page)["report"] == json.loads(json.dumps(doc))  # every number of the report, as JSON
    for section in VERIFY_SECTIONS:
        assert f'<section id="{section}">' in page
    assert "GPU kernels" in page and "H2D pageable" in page  # the GPU lanes of the timeline
    assert "queue drained by a synchronization" in page  # an idle cause of the GPU breakdown


def test_a_big_report_stays_under_2_mb(tmp_path):
    doc, _ = verify_doc(tmp_path, gpu_attribution())
    lane = [[i * 2.0, 1.5, "ampere_sgemm_128x64_nn" * 3] for i in range(trace_metrics.TIMELINE_MAX_PER_LANE)]
    for run in doc["runs"]:
        run["steps"] = run["steps"] * 30  # 360 steps per run
        if run["attribution"]:
            run["attribution"]["timeline"]["lanes"] = {k: lane for k, _ in html_report.LANES}
    doc["fixes"] = doc["fixes"] * 20
    assert len(html_report.render(doc).encode()) < 2 * 1024 * 1024


needs_chromium = pytest.mark.skipif(
    find_chromium() is None, reason="chromium is not installed (`.ci/run` installs Debian's chromium package)"
)


@needs_chromium
@pytest.mark.parametrize("shape", ["verify-gpu-trace", "verify-cpu-trace", "profile-cpu"])
def test_the_report_loads_in_headless_chromium(tmp_path, shape):
    if shape == "profile-cpu":
        path, sections = tmp_path / "profile.html", PROFILE_SECTIONS
        html_report.write_html(path, profile_doc())
    else:
        _, path = verify_doc(tmp_path, gpu_attribution() if shape == "verify-gpu-trace" else cpu_attribution())
        sections = VERIFY_SECTIONS
    page = load(
        path,
        {
            "ready": "document.documentElement.getAttribute('data-ready')",
            "sections": "[...document.querySelectorAll('section')].map(s => s.id)",
            "charts": "document.querySelectorAll('svg[role=img]').length",
            "hover": "(() => { const m = document.querySelector('svg .hit'); m.dispatchEvent(new Event('mouseenter'));"
            " return document.getElementById('detail') ? document.getElementById('detail').textContent : 'no timeline'; })()",
        },
    )
    assert page.console_errors == [] and page.exceptions == []
    assert page.requests == [path.as_uri()]  # the page itself, nothing from the network
    assert page.values["ready"] == "1"  # the script ran to its end
    assert page.values["sections"] == sections
    assert page.values["charts"] >= 4
    assert page.values["hover"]  # hovering a mark names it
    assert page.screenshot_png.startswith(b"\x89PNG") and page.pdf.startswith(b"%PDF")  # it prints
