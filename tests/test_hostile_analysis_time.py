"""Analysis time is bounded: inputs that used to hang gpulint finish, and `analysis-timeout` stops any other.

The hang inputs run through the real CLI in a subprocess with the budget switched off (`--analysis-timeout 0`,
so the algorithm, not the budget, must be fast) under a timeout far above what they take now and far below
what they took before: a regression fails the test with `TimeoutExpired` instead of hanging the suite.
Nothing here asserts on seconds.
"""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path

import pytest

from gpulint.budget import AnalysisTimeout, run_within
from tests.conftest import UNPROVEN_COST_TOML, run_gpulint

HANG_LIMIT = 120  # seconds of wall time; each input takes about 1-5 s of CPU now, minutes to hours before


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    return path


def _concise(result) -> list[str]:
    return [line for line in result.stdout.decode().splitlines() if line and not line.startswith(("Found", "[*]", "All checks", "No fixes"))]


def test_conditional_augmented_assignments_cost_linear_time(tmp_path):
    # 40 × `if flag: total += loss`: each reaches every earlier one; followed path by path that was 2^40.
    updates = "".join(f"        if flags[{i}]:\n            total += loss\n" for i in range(40))
    _write(
        tmp_path,
        "train.py",
        "import torch\n\n\ndef train(loader, model, optimizer, flags):\n"
        '    total = torch.zeros(1, device="cuda")\n'
        "    for x in loader:\n        loss = model(x)\n        loss.backward()\n        optimizer.step()\n"
        f"{updates}        print(total.item())\n",
    )
    result = run_gpulint("check", "--no-cache", "--analysis-timeout", "0", "--output-format", "concise", ".", cwd=tmp_path, timeout=HANG_LIMIT)
    assert result.returncode == 1, result.stderr
    # The level of `total` still flows through all 40 updates: it is a GPU tensor, read every step.
    assert _concise(result) == [
        "train.py:90:15: GPU303 `total.item()` waits for the GPU every training step (loop at line 6)"
    ]


def test_augmented_assignments_feeding_each_other_around_a_loop_are_analysed(tmp_path):
    # torch/profiler/_cupti_monitor.py's shape: `self.total += ...` twice in a loop with no write before it. Each
    # reached the other around the loop and the recursion never ended: GPU303 was skipped as "too deeply nested".
    _write(
        tmp_path,
        "monitor.py",
        textwrap.dedent(
            """\
            import torch


            class Monitor:
                def drain(self, buffers, optimizer):
                    for buffer in buffers:
                        self.total += buffer
                        self.count += 1
                        self.total += self.count
                        loss = buffer.cuda().sum()
                        loss.backward()
                        optimizer.step()
                        print(self.total.item(), loss.item())
            """
        ),
    )
    result = run_gpulint("check", "--no-cache", "--analysis-timeout", "0", "--output-format", "concise", ".", cwd=tmp_path, timeout=HANG_LIMIT)
    assert result.returncode == 1, result.stderr
    lines = _concise(result)
    assert [line.split(" ")[0:2] for line in lines] == [["monitor.py:13:38:", "GPU303"]]
    assert "nested" not in result.stdout.decode()


def test_a_chain_of_functions_calling_each_other_costs_linear_time(tmp_path):
    # f_i calls f_(i-1) and f_(i-2): "does it train / need gradients" followed every path (Fibonacci(40) of them).
    chain = "def f0(x):\n    return x\n\n\n" + "".join(
        f"def f{i}(x):\n    f{i - 1}(x)\n    return f{max(i - 2, 0)}(x)\n\n\n" for i in range(1, 40)
    )
    _write(
        tmp_path,
        "evaluate.py",
        "import torch\n\n\n" + chain + "def evaluate(loader, model):\n    model.eval()\n    for x in loader:\n"
        "        y = model(x.cuda())\n        f39(y)\n        print(y.item())\n",
    )
    result = run_gpulint("check", "--no-cache", "--analysis-timeout", "0", "--output-format", "concise", ".", cwd=tmp_path, timeout=HANG_LIMIT)
    assert result.returncode == 1, result.stderr
    codes = [line.split(" ")[1] for line in _concise(result)]
    assert codes == ["GPU405", "GPU303"]  # the forward without no_grad, the sync in the evaluation loop


def test_classes_deriving_from_the_two_before_cost_linear_time(tmp_path):
    # C_i(C_(i-1), C_(i-2)): "is it an nn.Module" followed every path to every ancestor (Fibonacci(40) of them).
    classes = "class C0(torch.nn.Module):\n    pass\n\n\nclass C1:\n    pass\n\n\n" + "".join(
        f"class C{i}(C{i - 1}, C{i - 2}):\n    pass\n\n\n" for i in range(2, 40)
    )
    # ... and two classes that derive from each other (not valid at run time, but a file can say it).
    cycle = "class A(B):\n    pass\n\n\nclass B(A):\n    pass\n\n\n"
    _write(
        tmp_path,
        "model.py",
        "import torch\n\n\n" + classes + cycle + "def train(loader, optimizer):\n    model = C39()\n    other = A()\n"
        "    for x in loader:\n        model.cuda()\n        model(x.cuda()).sum().backward()\n        other(x)\n"
        "        optimizer.step()\n",
    )
    result = run_gpulint("check", "--no-cache", "--analysis-timeout", "0", "--output-format", "concise", ".", cwd=tmp_path, timeout=HANG_LIMIT)
    assert result.returncode == 1, result.stderr
    # GPU203 needs `C39` to be an nn.Module: through 39 generations of bases.
    assert [line.split(" ")[:2] for line in _concise(result)] == [["model.py:176:9:", "GPU203"]]


def test_many_functions_reusing_local_names_cost_linear_time(tmp_path):
    # 2,000 small step functions that all write `x` and `loss` (250 kB): every question about `x` used to scan the
    # writes of `x` in all of them (93 kB took 39 s, 185 kB over 5 minutes); now each question sees its function only.
    steps = "".join(
        f"def step{i}(x, model, opt):\n    x = x.cuda()\n    loss = model(x)\n    loss.backward()\n    opt.step()\n    print(loss.item())\n\n\n"
        for i in range(2000)
    )
    _write(tmp_path, "steps.py", "import torch\n\n\n" + steps)
    result = run_gpulint("check", "--no-cache", "--analysis-timeout", "0", "--output-format", "json", ".", cwd=tmp_path, timeout=HANG_LIMIT)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []  # no loop, so no sync in a loop; checked, not skipped


# ---- the budget ---------------------------------------------------------------------------------------------


def test_run_within_stops_a_hang_and_leaves_no_timer_or_handler_behind():
    def spin():
        while True:
            pass

    assert run_within(0.05, spin, lambda: "stopped") == "stopped"
    assert signal.getsignal(signal.SIGPROF) == signal.SIG_DFL
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    assert run_within(0.05, lambda: "done", lambda: "stopped") == "done"


def test_an_inner_budget_leaves_the_timeout_to_the_outer_one():
    # `fix` budgets the whole file (its re-checks included): a re-check must not turn the timeout into a finding.
    def spin():
        while True:
            pass

    inner_results = []

    def outer():
        try:
            inner_results.append(run_within(30, spin, lambda: "inner caught it"))
        except AnalysisTimeout:
            inner_results.append("passed up")
            raise
        return "finished"

    assert run_within(0.05, outer, lambda: "outer caught it") == "outer caught it"
    assert inner_results == ["passed up"]


def test_no_budget_means_no_limit():
    assert run_within(0, lambda: "done", lambda: "stopped") == "done"
    assert run_within(None, lambda: "done", lambda: "stopped") == "done"


def _project(tmp_path: Path, files: int = 24) -> tuple[Path, str]:
    """A project with one large generated file (parsing alone takes seconds) and `files - 1` small ones that
    each have fixes (a `DataLoader` without workers and without pinned memory); enough files for `-j 2` to use worker processes."""
    steps = "".join(f"def step{i}(x, model):\n    x = x.cuda()\n    return model(x)\n\n\n" for i in range(4000))
    (tmp_path / "big.py").write_text("import torch\n\n\n" + steps, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")  # GPU102 on a dataset of unknown size
    small = "import torch\nfrom torch.utils.data import DataLoader\n\nloader = DataLoader(make_dataset(), batch_size=64)\nfor x in loader:\n    x = x.cuda()\n"
    for i in range(files - 1):
        (tmp_path / f"small{i:02d}.py").write_text(small, encoding="utf-8")
    return tmp_path / "big.py", small


SKIPPED = "big.py:1:1: io-error: analysis took longer than 0.2 s of CPU time; skipped (raise `analysis-timeout` to check it)"


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_check_skips_a_file_past_the_budget_and_checks_the_rest(tmp_path, jobs):
    _project(tmp_path)
    result = run_gpulint("check", "--no-cache", "-j", jobs, "--analysis-timeout", "0.2", "--output-format", "concise", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    lines = _concise(result)
    assert lines[0] == SKIPPED
    assert len([line for line in lines if line.startswith("small")]) == 23 * 2  # GPU101 and GPU102 in each
    assert result.stderr == b""


def test_the_budget_comes_from_pyproject_and_is_not_cached(tmp_path):
    _project(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\nanalysis-timeout = 0.2\n", encoding="utf-8")
    for _ in range(2):  # the second run must not answer big.py from the cache
        result = run_gpulint("check", "--output-format", "concise", "big.py", cwd=tmp_path)
        assert _concise(result) == [SKIPPED]
    assert run_gpulint("check", "--analysis-timeout", "0", "--output-format", "concise", "big.py", cwd=tmp_path).returncode == 0


def test_fix_leaves_a_file_past_the_budget_as_it_was_and_says_so(tmp_path):
    big, small = _project(tmp_path, files=2)
    original = big.read_bytes()
    diff = run_gpulint("fix", "--unsafe-fixes", "--analysis-timeout", "0.2", ".", cwd=tmp_path)
    assert diff.returncode == 1
    assert "+++ small00.py" in diff.stdout.decode() and "big.py" not in diff.stdout.decode()
    assert f"gpulint: {SKIPPED.replace(':1:1: io-error', '')}" in diff.stderr.decode().splitlines()

    applied = run_gpulint("fix", "--apply", "--unsafe-fixes", "--analysis-timeout", "0.2", "--output-format", "concise", ".", cwd=tmp_path)
    assert applied.returncode == 1
    assert big.read_bytes() == original
    assert (tmp_path / "small00.py").read_text() != small  # fixed
    assert SKIPPED in applied.stdout.decode().splitlines()


@pytest.mark.parametrize("value", ["-1", '"60"', "true", "inf"])
def test_a_bad_budget_in_the_config_is_a_configuration_error(tmp_path, value):
    (tmp_path / "pyproject.toml").write_text(f"[tool.gpulint]\nanalysis-timeout = {value}\n", encoding="utf-8")
    (tmp_path / "t.py").write_text("x = 1\n", encoding="utf-8")
    result = run_gpulint("check", "t.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "`analysis-timeout` must be a number of seconds (0 for no limit)" in result.stderr.decode()


def test_a_chain_of_hundreds_of_modules_is_checked_not_a_recursion_error(tmp_path):
    # Each module moves what the one before builds to the GPU, so whether m0 is GPU code depends on all of them.
    n = 600
    _write(tmp_path, "m0.py", "import torch\n\n\ndef build(x, device):\n    return torch.utils.data.DataLoader(x)\n")
    for i in range(1, n):
        _write(tmp_path, f"m{i}.py", f"from m{i - 1} import build as b\n\n\ndef build(x, device):\n    return b(x, device).to(device)\n")
    _write(tmp_path, f"m{n}.py", f"from m{n - 1} import build\n\nbuild(1, 'cuda').cuda()\n")
    result = run_gpulint("check", "--no-cache", "-j", "1", "m0.py", cwd=tmp_path, timeout=HANG_LIMIT)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""


def test_a_long_builder_chain_in_a_project_module_costs_linear_time(tmp_path):
    # a Spark notebook's 40 `.config(...)` calls doubled the summary's candidate instances at every call: 10 GB
    # and no end, though the module never names torch (every project module is summarized for the index)
    chain = "".join(f"    .config('key{i}', 'value')\n" for i in range(40))
    (tmp_path / "session.py").write_text(f"from pyspark.sql import SparkSession\n\nspark = (SparkSession.builder\n{chain}    .getOrCreate())\n", encoding="utf-8")
    _write(tmp_path, "train.py", "import torch\n\n\ndef train(loader, model):\n    for x in loader:\n        model(x.cuda()).sum().backward()\n")
    result = run_gpulint("check", "--no-cache", "--analysis-timeout", "0", "--output-format", "concise", ".", cwd=tmp_path, timeout=HANG_LIMIT)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""


def test_a_summary_past_the_budget_leaves_the_module_unknown_and_the_run_going(tmp_path, monkeypatch):
    import gpulint.analysis.summary as summary_module
    from gpulint.api import check, discover_settings

    real = summary_module.summarize

    def summarize(text, tree=None):
        while "SPIN" in text:
            pass
        return real(text, tree)

    monkeypatch.setattr(summary_module, "summarize", summarize)
    (tmp_path / "slow.py").write_text("SPIN = 1\n", encoding="utf-8")
    small = "import torch\nfrom torch.utils.data import DataLoader\n\nloader = DataLoader(make_dataset(), batch_size=64)\nfor x in loader:\n    x = x.cuda()\n"
    _write(tmp_path, "small.py", small)
    settings = discover_settings(tmp_path, analysis_timeout=0.2)
    report = check([tmp_path], settings, jobs=1, cache=False)
    found = sorted((Path(d.filename).name, d.code) for d in report.diagnostics)
    assert ("small.py", "GPU101") in found and ("small.py", "GPU102") in found
