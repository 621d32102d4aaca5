"""One self-contained HTML page for `gpulint profile --html FILE` and `gpulint fix --verify --html FILE`.

No network: CSS, JS and every chart (SVG, drawn here) are inline, so the file opens from `file://`, prints to
PDF, and is the same bytes for the same report (snapshot tests). Colours are colour-blind safe and every mark
also carries a text label; hovering a mark shows its name. All numbers are embedded as JSON
(`<script id="gpulint-data">`: the report document and the numbers derived from it for the charts).
"""

from __future__ import annotations

import html
import json
import os
import pathlib
import shlex

from gpulint.profile import trace_metrics
from gpulint.profile.idle import explain
from gpulint.profile.timing import percentile, timing_stats

ASSETS = pathlib.Path(__file__).parent
WIDTH = 960  # drawing width of the charts (they scale down with the page)
MARKS_PER_LANE = 200  # drawn marks per timeline lane at most (closer ones are joined): the page stays small
LANES = [  # timeline lanes, top to bottom: (key, label)
    ("data", "DataLoader wait"),
    ("optimizer", "optimizer.step"),
    ("sync", "syncs / scalar reads"),
    ("kernel", "GPU kernels"),
    ("copy_pageable", "H2D pageable"),
    ("copy_pinned", "H2D pinned"),
    ("copy_other", "other copies"),
    ("memset", "memset"),
]
OUTCOME_CLASS = {"kept": "kept", "measured": "measured", "rolled back": "rolled", "not verified": "rolled", "error": "error"}


def e(value) -> str:
    return html.escape(str(value), quote=True)


def f(value, spec: str = ".1f", unit: str = "") -> str:
    if value is None:
        return "–"
    return f"{value:{spec}}{(' ' + unit) if unit else ''}"


# ---- the numbers the page shows ------------------------------------------------------------------------------


def _side(run: dict, kind: str) -> str:
    return "profile" if kind == "profile" else run.get("label", "?")[:1]


def derive(doc: dict) -> dict:
    """Per-run throughput in execution order, step times, the idle breakdown, timelines and losses per side."""
    kind = doc.get("kind", "verify")
    runs = doc.get("runs") or []
    cmp = doc.get("comparison") or {}
    unit = cmp.get("unit") or (doc.get("summary") or {}).get("throughput_unit") or "samples/s"
    per_run = []
    sides: dict[str, list[dict]] = {}
    for r in runs:
        side = _side(r, kind)
        sides.setdefault(side, []).append(r)
        timing = r.get("timing") or {}
        value = timing.get("samples_per_s") if unit == "samples/s" else timing.get("steps_per_s")
        per_run.append({"label": r.get("label") or side, "side": side, "throughput": value, "status": r.get("status")})
    view: dict = {"kind": kind, "unit": unit, "runs": per_run, "sides": {}}
    for side, side_runs in sides.items():
        steps = [s for r in side_runs if r.get("status") == "ok" for s in (r.get("steps") or [])]
        first = next((r for r in side_runs if (r.get("attribution") or {}).get("timeline")), None)
        exp = explain(timing_stats(steps) if steps else None, (side_runs[0].get("attribution") or {}) if side_runs else {})
        view["sides"][side] = {
            "step_ms": [round(s["wall_s"] * 1000, 3) for s in steps],
            "idle": exp.to_dict() if exp else None,
            "timeline_run": first.get("label") if first else None,  # its timeline is in that run's attribution
            "trace_path": next((r.get("trace_path") for r in side_runs if r.get("trace_path")), None),
            "losses": ((side_runs[0].get("details") or {}).get("losses") or []) if side_runs else [],
        }
    return view


# ---- SVG pieces -------------------------------------------------------------------------------------------------


def _svg(width: int, height: int, body: str, label: str) -> str:
    return f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="{e(label)}">{body}</svg>'


def _rect(x, y, w, h, cls, title, hit=True) -> str:
    extra = " hit" if hit else ""
    return f'<rect class="{cls}{extra}" x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.6):.1f}" height="{h:.1f}"><title>{e(title)}</title></rect>'


def _text(x, y, text, anchor="start", cls="") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{c}>{e(text)}</text>'


def _runs_chart(view: dict) -> str:
    runs = [r for r in view["runs"] if r["throughput"] is not None]
    if not runs:
        return '<p class="muted">No run was measured.</p>'
    top = max(r["throughput"] for r in runs) * 1.15
    height, left, bottom, head = 230, 60, 30, 26
    plot = height - bottom - head
    step = (WIDTH - left) / len(runs)
    bar = min(70.0, step * 0.6)
    body = [f'<line class="axis" x1="{left}" y1="{height - bottom}" x2="{WIDTH}" y2="{height - bottom}"/>']
    for k in range(5):
        v = top * k / 4
        y = height - bottom - plot * k / 4
        body.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{WIDTH}" y2="{y:.1f}"/>')
        body.append(_text(left - 6, y + 4, f"{v:.0f}", "end"))
    for i, r in enumerate(runs):
        h = plot * r["throughput"] / top
        x = left + step * i + (step - bar) / 2
        y = height - bottom - h
        side = r["side"]
        title = f"{r['label']}: {r['throughput']:.1f} {view['unit']}"
        body.append(_rect(x, y, bar, h, f"fill-{side}", title))
        if side == "B":
            body.append(_rect(x, y, bar, h, "hatch-B", title, hit=False))
        body.append(_text(x + bar / 2, y - 4, f"{r['throughput']:.0f}", "middle"))
        body.append(_text(x + bar / 2, height - bottom + 16, r["label"].split(" (")[0], "middle"))
    body.append(_text(0, 12, f"throughput ({view['unit']})"))
    return _svg(WIDTH, height, "".join(body), f"throughput per run in {view['unit']}, in execution order")


def _distribution_chart(view: dict) -> str:
    sides = [(s, d["step_ms"]) for s, d in view["sides"].items() if d["step_ms"]]
    if not sides:
        return '<p class="muted">No measured steps.</p>'
    hi = max(max(ms) for _, ms in sides) * 1.05
    left, row = 90, 46
    height = row * len(sides) + 30
    scale = (WIDTH - left - 10) / hi
    body = []
    for k in range(6):
        x = left + (WIDTH - left - 10) * k / 5
        body.append(f'<line class="grid" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 24}"/>')
        body.append(_text(x, height - 8, f"{hi * k / 5:.1f} ms", "middle"))
    for i, (side, ms) in enumerate(sides):
        y = 10 + i * row
        p10, med, p90 = percentile(ms, 0.1), percentile(ms, 0.5), percentile(ms, 0.9)
        body.append(_text(left - 8, y + 20, _side_name(side, view["kind"]), "end"))
        body.append(_rect(left + p10 * scale, y + 6, (p90 - p10) * scale, 24, f"fill-{side} band", f"{side}: p10 {p10:.2f} ms, p90 {p90:.2f} ms", hit=False))
        body.append(f'<line x1="{left + med * scale:.1f}" y1="{y + 2}" x2="{left + med * scale:.1f}" y2="{y + 34}" stroke="#000" stroke-width="2"><title>median {med:.2f} ms</title></line>')
        for j, v in enumerate(ms):
            cy = y + 12 + (j % 5) * 3
            shape = (f'<circle class="fill-{side} hit" cx="{left + v * scale:.1f}" cy="{cy:.1f}" r="2.5">' if side != "B"
                     else f'<rect class="fill-B hit" x="{left + v * scale - 2.5:.1f}" y="{cy - 2.5:.1f}" width="5" height="5">')
            tag = "circle" if side != "B" else "rect"
            body.append(f"{shape}<title>{e(side)} step: {v:.2f} ms</title></{tag}>")
        x = left + med * scale
        right = x > WIDTH - 260  # keep the label inside the chart
        body.append(_text(x + (-4 if right else 4), y + 44, f"median {med:.1f} ms (p10 {p10:.1f}, p90 {p90:.1f})", "end" if right else "start"))
    return _svg(WIDTH, height, "".join(body), "step time distributions")


def _side_name(side: str, kind: str) -> str:
    return {"A": "A (original)", "B": "B (fixed)"}.get(side, "this run" if kind == "profile" else side)


def _segments(idle: dict) -> list[tuple[str, float]]:
    if idle["kind"] == "gpu":
        segments = [("GPU compute", idle["compute_pct"]), ("GPU non-compute (copies, memset, comms)", idle["non_compute_pct"])]
        segments += [(f"idle: {c['label']}", c["share_pct"]) for c in idle["causes"] if c["key"] != "pageable_copies"]
        return segments
    return [(c["label"], c["share_pct"]) for c in idle["causes"]]


def _breakdown_chart(view: dict) -> str:
    sides = [(s, d["idle"]) for s, d in view["sides"].items() if d["idle"]]
    if not sides:
        return '<p class="muted">No breakdown: no run was measured.</p>'
    left, row = 110, 44
    height = row * len(sides) + 10
    names: list[str] = []
    body = []
    for i, (side, idle) in enumerate(sides):
        y = 8 + i * row
        x = float(left)
        body.append(_text(left - 8, y + 18, _side_name(side, view["kind"]), "end"))
        for name, share in _segments(idle):
            if name not in names:
                names.append(name)
            w = (WIDTH - left - 10) * max(share, 0.0) / 100
            body.append(_rect(x, y, w, 28, f"cause-{names.index(name) % 8}", f"{_side_name(side, view['kind'])}: {name}: {share:.1f} % of the step"))
            if w > 44:
                body.append(_text(x + w / 2, y + 18, f"{share:.0f} %", "middle"))
            x += w
    legend = "".join(f'<span style="--sw: var(--c{names.index(n) % 8})">{e(n)}</span>' for n in names)
    swatches = "".join(f"--c{i}: {c};" for i, c in enumerate(("#d55e00", "#e69f00", "#56b4e9", "#cc79a7", "#999999", "#f0e442", "#009e73", "#0072b2")))
    return _svg(WIDTH, height, "".join(body), "where the step goes") + f'<div class="legend" style="{swatches}">{legend}</div>'


def _timeline_chart(doc: dict, view: dict) -> str:
    by_label = {r.get("label"): (r.get("attribution") or {}).get("timeline") for r in doc.get("runs") or []}
    sides = [(s, by_label.get(d["timeline_run"])) for s, d in view["sides"].items() if d.get("timeline_run")]
    sides = [(s, t) for s, t in sides if t]
    if not sides:
        return '<p class="muted">No timeline: the attribution pass did not run.</p>'
    span = max(t["span_us"] for _, t in sides) or 1.0
    left, lane_h = 150, 16
    scale = (WIDTH - left - 10) / span
    blocks = []
    for side, t in sides:
        lanes = [(k, label) for k, label in LANES if t["lanes"].get(k)]
        height = 22 + lane_h * max(len(lanes), 1) + 24
        gpu = any(k in t["lanes"] for k in ("kernel", "copy_pageable", "copy_pinned", "copy_other", "memset"))
        title = f"{_side_name(side, view['kind'])}: {len(t['steps'])} steps, {t['span_us'] / 1000:.1f} ms"
        body = [_text(0, 13, title + ("" if gpu else " (no GPU lanes: no GPU activity in this trace, a CPU-only run)"))]
        for start, dur, label in t["steps"]:
            x = left + start * scale
            body.append(f'<line class="axis" stroke-dasharray="3,3" x1="{x:.1f}" y1="18" x2="{x:.1f}" y2="{height - 20}"/>')
            body.append(_text(x + 3, height - 8, label))
        for i, (key, label) in enumerate(lanes):
            y = 22 + i * lane_h
            body.append(_text(left - 6, y + 11, label, "end"))
            for start, dur, name in trace_metrics.coarsen(t["lanes"][key], span / MARKS_PER_LANE):
                body.append(_rect(left + start * scale, y + 1, dur * scale, lane_h - 3, f"lane-{key}", f"{label}: {name[:60]} ({dur:.1f} µs at {start / 1000:.2f} ms)"))
        blocks.append(_svg(WIDTH, height, "".join(body), f"timeline of {_side_name(side, view['kind'])}"))
    legend = "".join(
        f'<span style="--sw: var(--{var})">{e(label)}</span>'
        for var, label in (("data", "DataLoader wait"), ("optimizer", "optimizer.step"), ("sync", "sync / scalar read"),
                           ("kernel", "kernel"), ("pageable", "pageable H2D copy"), ("pinned", "pinned H2D copy"),
                           ("copy", "other copy"), ("memset", "memset"))
    )
    links = []
    for side, d in view["sides"].items():
        if d.get("trace_path"):
            uri = pathlib.Path(d["trace_path"]).absolute().as_uri()
            links.append(f'<a href="{e(uri)}">{e(_side_name(side, view["kind"]))} raw trace</a>')
    note = (
        f'<p>Raw traces (open in Perfetto, ui.perfetto.dev, or chrome://tracing): {" · ".join(links)}</p>' if links
        else '<p class="muted">Add <code>--trace DIR</code> to keep the raw traces for Perfetto.</p>'
    )
    return "".join(blocks) + f'<div class="legend">{legend}</div><p id="detail" class="muted mono"></p>' + note


def _loss_chart(view: dict) -> str:
    series = [(s, d["losses"]) for s, d in view["sides"].items() if d.get("losses")]
    if not series:
        return '<p class="muted">No losses were read (they are read from scalar losses during warm-up).</p>'
    values = [v for _, ls in series for v in ls]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.1 or abs(hi) * 0.1 or 1.0
    lo, hi = lo - pad, hi + pad
    n = max(len(ls) for _, ls in series)
    left, height = 70, 180
    body = []
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        y = height - 20 - (height - 40) * k / 4
        body.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{WIDTH}" y2="{y:.1f}"/>')
        body.append(_text(left - 6, y + 4, f"{v:.4g}", "end"))

    def point(i, v):
        x = left + (WIDTH - left - 20) * (i / max(n - 1, 1))
        y = height - 20 - (height - 40) * (v - lo) / (hi - lo)
        return x, y

    for side, losses in series:
        pts = [point(i, v) for i, v in enumerate(losses)]
        color = "var(--b)" if side == "B" else "var(--a)"
        dash = ' stroke-dasharray="6,3"' if side == "B" else ""
        body.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in pts)}"/>')
        for i, (x, y) in enumerate(pts):
            mark = (f'<circle class="fill-{side} hit" cx="{x:.1f}" cy="{y:.1f}" r="4">' if side != "B"
                    else f'<rect class="fill-B hit" x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8">')
            body.append(f"{mark}<title>{e(_side_name(side, view['kind']))} loss {i + 1}: {losses[i]:.6g}</title></{'circle' if side != 'B' else 'rect'}>")
        below = side == "B"  # A's label above its last point, B's below: readable when the lines coincide
        body.append(_text(pts[-1][0] - 8, pts[-1][1] + (16 if below else -8), _side_name(side, view["kind"]), "end"))
    for i in range(n):
        body.append(_text(point(i, lo)[0], height - 4, f"loss {i + 1}", "middle"))
    return _svg(WIDTH, height, "".join(body), "first losses of each side")


# ---- sections ---------------------------------------------------------------------------------------------------


def _kv(rows: list[tuple[str, str]]) -> str:
    return '<dl class="kv">' + "".join(f"<dt>{e(k)}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _header(doc: dict, view: dict) -> str:
    kind = view["kind"]
    cmd = " ".join(shlex.quote(c) for c in doc.get("command") or [])
    if kind == "profile":
        outcome = "measured" if doc.get("status") == "measured" else "error"
        summary = doc.get("summary") or {}
        t = summary.get("timing") or {}
        rows = [("command", f"<code>{e(cmd)}</code>"), ("status", f'<span class="tag {OUTCOME_CLASS[outcome]}">{e(doc.get("status"))}</span>')]
        if doc.get("message"):
            rows.append(("why", e(doc["message"])))
        if t:
            rows.append(("step time", e(f"{f(t.get('step_ms_median'))} ms median (p10 {f(t.get('step_ms_p10'))}, p90 {f(t.get('step_ms_p90'))})")))
            value = t.get("samples_per_s") if view["unit"] == "samples/s" else t.get("steps_per_s")
            rows.append(("throughput", e(f"{f(value)} {view['unit']}")))
            if summary.get("run_spread") is not None:
                rows.append(("run-to-run spread", e(f"{summary['run_spread'] * 100:.1f} %")))
        idle = (summary.get("idle") or {})
        best = max((c for c in idle.get("causes", []) if c.get("ceiling")), key=lambda c: c["share_pct"], default=None)
        if best:
            rows.append(("speedup ceiling", e(f"{best['ceiling']:.2f}x if {best['label']} went away ({', '.join(best['rules']) or best['remedy']})")))
        return f'<h1>gpulint profile</h1><div class="verdict" id="verdict">{_kv(rows)}</div>'
    cmp = doc.get("comparison") or {}
    outcome = doc.get("outcome") or "error"
    rows = [
        ("command", f"<code>{e(cmd)}</code>"),
        ("outcome", f'<span class="tag {OUTCOME_CLASS.get(outcome, "")}">{e(outcome)}</span>' + (f" — {e(doc['reason'])}" if doc.get("reason") else "")),
        ("files changed", e(", ".join(doc.get("files") or []) or "none")),
    ]
    if cmp:
        rows.append(("verdict", f'<span class="big">{e(cmp.get("summary"))}</span>'))
        ci = cmp.get("ci")
        ci_text = f" (95 % CI {(ci[0] - 1) * 100:+.1f} % .. {(ci[1] - 1) * 100:+.1f} %)" if ci else ""
        rows.append((cmp.get("unit") or "throughput", e(f"A {f(cmp.get('before'))} → B {f(cmp.get('after'))}{ci_text}")))
        noise = cmp.get("noise_floor")
        rows.append(("noise floor", e(f"{noise * 100:.1f} % (A-vs-A spread)" if noise is not None else "not measured (needs 2 runs of A)")))
        if cmp.get("ceiling"):
            rows.append(("speedup ceiling", e(f"{cmp['ceiling']:.2f}x: all the time the applied rules address, removed")))
    if doc.get("never_ran"):
        rows.append(("changed lines that never ran", e(", ".join(doc["never_ran"]))))
    return f'<h1>gpulint fix --verify</h1><div class="verdict" id="verdict">{_kv(rows)}</div>'


def _idle_table(view: dict) -> str:
    sides = [(s, d["idle"]) for s, d in view["sides"].items() if d["idle"]]
    if not sides:
        return '<p class="muted">Nothing measured.</p>'
    parts = []
    for side, idle in sides:
        head = f"<h3>{e(_side_name(side, view['kind']))}</h3>" if len(sides) > 1 else ""
        if idle["kind"] == "gpu":
            intro = (f"<p>GPU compute {idle['compute_pct']:.1f} %, non-compute {idle['non_compute_pct']:.1f} %, "
                     f"idle {idle['idle_pct']:.1f} % of the step window.</p>")
        else:
            intro = f"<p>GPU: {e(idle.get('gpu_unavailable') or 'not measured')}. What the CPU can measure:</p>"
        rows = "".join(
            f"<tr><td>{e(c['label'])}</td><td class='num'>{c['share_pct']:.1f} %</td>"
            f"<td class='num'>{e(f(c['ceiling'], '.2f', 'x')) if c['ceiling'] else '–'}</td>"
            f"<td>{e(', '.join(c['rules']) or c['remedy'] or '–')}</td></tr>"
            for c in idle["causes"]
        )
        launch = idle.get("launch") or {}
        extra = ""
        if launch.get("kernels_per_step"):
            extra = (f"<p>Launch-bound signals: {launch['kernels_per_step']:.0f} kernels per step, "
                     f"{launch.get('short_kernel_pct', 0):.0f} % shorter than 10 µs, launch delay p50 "
                     f"{f(launch.get('launch_delay_us_p50'), '.0f')} µs, p90 {f(launch.get('launch_delay_us_p90'), '.0f')} µs.</p>")
        parts.append(
            f"{head}{intro}<table><tr><th>cause</th><th class='num'>share of step</th><th class='num'>speedup ceiling</th>"
            f"<th>removed by</th></tr>{rows}</table>{extra}"
        )
    return "".join(parts) + f'<p class="muted">Source: {e(sides[0][1].get("source", ""))}. Ceiling = 1 / (1 − share).</p>'


def _mechanism_table(doc: dict) -> str:
    cmp = doc.get("comparison") or {}
    if not cmp:
        return '<p class="muted">No comparison.</p>'
    rows = [
        f"<tr><td>throughput</td><td class='num'>{e(f(cmp.get('before')))} {e(cmp.get('unit'))}</td>"
        f"<td class='num'>{e(f(cmp.get('after')))} {e(cmp.get('unit'))}</td><td>{e(cmp.get('verdict'))}</td><td>–</td></tr>"
    ]
    for m in cmp.get("mechanisms") or []:
        mark = "improved" if m["improved"] else ("worse" if m["worse"] else (m.get("note") or "same"))
        rows.append(
            f"<tr><td>{e(m['name'])}</td><td class='num'>{m['before']:.1f} {e(m['unit'])}</td>"
            f"<td class='num'>{m['after']:.1f} {e(m['unit'])}</td><td><span class='tag {mark}'>{mark}</span></td>"
            f"<td>{e(', '.join(m.get('rules') or []))}</td></tr>"
        )
    return ("<table><tr><th>mechanism</th><th class='num'>before (A)</th><th class='num'>after (B)</th><th>change</th>"
            f"<th>rule that should move it</th></tr>{''.join(rows)}</table>")


def _diff(text: str) -> str:
    lines = []
    for line in text.splitlines():
        cls = "add" if line.startswith("+") and not line.startswith("+++") else "del" if line.startswith("-") and not line.startswith("---") else "hunk" if line.startswith("@@") else ""
        lines.append(f'<span class="{cls}">{e(line)}</span>' if cls else e(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"


def _fixes(doc: dict) -> str:
    fixes = doc.get("fixes") or []
    if not fixes:
        return '<p class="muted">No file was changed.</p>'
    return "".join(
        f"<h3>{e(x['path'])}</h3><p>{e(', '.join(f'{n} × {code}' for code, n in sorted((x.get('rules') or {}).items())) or 'fixes')}</p>{_diff(x.get('diff') or '')}"
        for x in fixes
    )


def _reproduce(doc: dict) -> str:
    o = doc.get("options") or {}
    flags = ["--steps", str(o.get("steps")), "--warmup", str(o.get("warmup"))]
    if o.get("repeat"):
        flags += ["--repeat", str(o["repeat"])]
    if o.get("launcher"):
        flags += ["--launcher", o["launcher"], "--nproc-per-node", str(o.get("nproc_per_node"))]
    head = ["gpulint", "profile"] if doc.get("kind") == "profile" else ["gpulint", "fix", "--apply", "--verify"]
    return " ".join(shlex.quote(x) for x in [*head, *flags, "--", *(doc.get("command") or [])])


def _environment(doc: dict) -> str:
    env = doc.get("environment") or {}
    gpu = env.get("gpu") or {}
    rows = [
        ("python", e(env.get("python"))),
        ("torch", e(env.get("torch"))),
        ("platform", e(env.get("platform"))),
        ("CPUs", e(env.get("cpus"))),
        ("load average", e(env.get("load_average", "–"))),
    ]
    if gpu.get("unavailable"):
        rows.append(("GPU", e(gpu["unavailable"])))
    else:
        rows += [
            ("GPU", e(f"{gpu.get('name')} (driver {gpu.get('driver')})")),
            ("SM clock", e(f"{gpu.get('sm_clock_mhz_median')} MHz median")),
            ("throttling", e(", ".join(gpu.get("throttle_reasons") or []) or "none seen")),
            ("other GPU processes", e(gpu.get("other_processes") or "none")),
        ]
    return _kv(rows) + (
        '<p>Reproduce (the measurement settings; add the fix options you used): '
        '<button id="copy-command" type="button">Copy</button></p>'
        f'<pre id="reproduce">{e(_reproduce(doc))}</pre>'
    )


def render(doc: dict) -> str:
    """The whole page for a report document (`profile` or `fix --verify` JSON)."""
    view = derive(doc)
    kind = view["kind"]
    sections = [
        ("runs", "Throughput per run, in execution order", _runs_chart(view) + _spread_note(doc, view)),
        ("steps", "Step-time distributions", _distribution_chart(view)),
        ("breakdown", "Where the step goes", _breakdown_chart(view)),
        ("timeline", "Timeline of a few steps" + (" (A above B, one time scale)" if kind != "profile" else ""), _timeline_chart(doc, view)),
        ("idle", "Why the GPU is idle", _idle_table(view)),
    ]
    if kind != "profile":
        sections += [
            ("mechanisms", "Mechanisms before → after", _mechanism_table(doc)),
            ("fixes", "Applied fixes", _fixes(doc)),
            ("numerics", "Numerics", _loss_chart(view) + f"<p>{e((doc.get('comparison') or {}).get('numerics') or '')}</p>"),
        ]
    sections.append(("environment", "Environment and how to reproduce", _environment(doc)))
    data = json.dumps({"report": doc, "derived": view}, sort_keys=True, separators=(",", ":"), default=str)
    data = data.replace("</", "<\\/").replace("<!--", "<\\!--")
    css = (ASSETS / "report.css").read_text()
    js = (ASSETS / "report.js").read_text()
    title = "gpulint profile" if kind == "profile" else "gpulint fix --verify"
    hatch = ('<svg width="0" height="0" aria-hidden="true" style="position:absolute"><defs><pattern id="hatch" width="6" height="6" '
             'patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2" height="6" fill="#000" opacity="0.35"/>'
             "</pattern></defs></svg>")
    body = "".join(f'<section id="{sid}"><h2>{e(heading)}</h2>{content}</section>' for sid, heading, content in sections)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}: {e(' '.join(doc.get('command') or []))}</title><style>{css}</style></head>"
        f"<body>{hatch}{_header(doc, view)}{body}"
        '<footer>Written by gpulint. One file: no network, no external resources.</footer>'
        f'<script type="application/json" id="gpulint-data">{data}</script><script>{js}</script></body></html>\n'
    )


def _spread_note(doc: dict, view: dict) -> str:
    cmp = doc.get("comparison") or {}
    if view["kind"] == "profile":
        spread = (doc.get("summary") or {}).get("run_spread")
        return f"<p>Run-to-run spread: {f(spread * 100 if spread is not None else None)} % of throughput.</p>"
    noise = cmp.get("noise_floor")
    return (
        f"<p>A-vs-A spread (the noise floor): {f(noise * 100 if noise is not None else None)} %. "
        "A = original (solid), B = with the fixes (hatched).</p>"
    )


def write_html(path: os.PathLike | str, doc: dict) -> None:
    from gpulint.fixer import write_atomic

    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, render(doc).encode("utf-8"))
