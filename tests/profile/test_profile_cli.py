"""The click command, the shared option decorator, `python -m gpulint.profile`, and the torchrun launcher."""

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner
from profile_helpers import FIXTURES, PY, REPO

from gpulint.profile.cli import profile, profile_options
from gpulint.profile.options import ProfileOptions


def invoke(*args):
    return CliRunner().invoke(profile, list(args), catch_exceptions=False)


def test_help_lists_the_shared_options():
    result = invoke("--help")
    assert result.exit_code == 0
    for flag in ("--steps", "--warmup", "--repeat", "--timeout", "--first-step-timeout", "--json", "--html", "--trace", "--launcher", "--nproc-per-node", "--isolate-runs"):
        assert flag in result.output


def test_profile_options_decorator_builds_profile_options(tmp_path):
    captured = {}

    @click.command()
    @click.option("--apply", is_flag=True)
    @profile_options
    def fix(apply, profile_options):
        captured["apply"] = apply
        captured["options"] = profile_options

    result = CliRunner().invoke(
        fix, ["--apply", "--steps", "12", "--warmup", "0", "--repeat", "5", "--json", str(tmp_path / "x.json")]
    )
    assert result.exit_code == 0, result.output
    opts = captured["options"]
    assert isinstance(opts, ProfileOptions)
    assert (opts.steps, opts.warmup, opts.repeat, opts.timeout) == (12, 0, 5, 600.0)
    assert opts.json_path == tmp_path / "x.json" and opts.launcher is None
    assert opts.repeat_for_verify() == 5
    CliRunner().invoke(fix, [])
    assert captured["options"].repeat is None and captured["options"].repeat_for_verify() == 3
    assert captured["options"].repeat_for_profile() == 3  # PROFILING.md: `gpulint profile ... [--repeat 3]`


def test_missing_script_is_exit_2_with_cause():
    result = invoke("--", PY, "no_such_train.py")
    assert result.exit_code == 2
    assert result.stderr == "gpulint failed\n  Cause: script not found: no_such_train.py\n"
    assert "Traceback" not in result.output


def test_bad_option_values_are_usage_errors():
    assert invoke("--steps", "0", "--", PY, "x.py").exit_code == 2
    result = invoke("--nproc-per-node", "2", "--", PY, str(FIXTURES / "tiny_train.py"))
    assert result.exit_code == 2 and "--launcher torchrun" in result.output


def test_import_does_not_load_torch():
    code = "import sys, gpulint.profile.cli, gpulint.profile; print('torch' in sys.modules, 'pynvml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_python_dash_m_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "gpulint.profile", "--", PY, "nope.py"], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 2
    assert out.stderr.startswith("gpulint failed\n  Cause: script not found: nope.py")


@pytest.mark.slow
def test_profile_writes_report_json_html_and_trace(tmp_path):
    out_json = tmp_path / "p.json"
    out_html = tmp_path / "p.html"
    trace_dir = tmp_path / "traces"
    result = invoke(
        "--steps", "5", "--warmup", "2", "--json", str(out_json), "--html", str(out_html), "--trace", str(trace_dir),
        "--", PY, str(FIXTURES / "tiny_train.py"), "--epochs", "1",
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert "gpulint profile: python " in result.stdout
    assert "samples/s" in result.stdout
    # On CPU the GPU numbers are missing for one reason, said once.
    gpu_lines = [line for line in result.stdout.splitlines() if "NVIDIA" in line or "CUDA not available" in line]
    assert gpu_lines == ["  GPU  not measured: CUDA not available (CPU-only torch or no GPU); NVML: no NVIDIA driver (NVMLError_LibraryNotFound)"]
    assert "Where the step goes (CPU-only run: what the CPU can measure)" in result.stdout
    page = out_html.read_text()
    assert page.startswith("<!DOCTYPE html>") and '<section id="timeline">' in page and "tiny_train.py" in page
    assert result.stderr == ""  # not a terminal: no progress line
    doc = json.loads(out_json.read_text())
    assert doc["status"] == "measured"
    assert len(doc["runs"]) == 3  # the default --repeat 3
    assert "run-to-run spread" in result.stdout and doc["summary"]["run_spread"] is not None
    run = doc["runs"][0]
    assert len(run["steps"]) == 5 and run["timing"]["samples_per_s"] > 0
    assert run["attribution"]["profiled_steps"] >= 1
    trace = json.loads((trace_dir / "profile.pt.trace.json").read_text())
    assert any(e.get("name", "").startswith("ProfilerStep#") for e in trace["traceEvents"])


@pytest.mark.slow
def test_profile_failure_reports_partial_result_and_exit_2(tmp_path):
    result = invoke("--steps", "5", "--warmup", "2", "--", PY, str(FIXTURES / "raises_before_step.py"))
    assert result.exit_code == 2
    assert result.stderr.startswith("gpulint failed\n  Cause: could not profile `python ")
    assert "FileNotFoundError: config file not found" in result.stderr
    assert "_child.py" not in result.stderr


@pytest.mark.slow
def test_torchrun_two_ranks_on_cpu(tmp_path):
    out_json = tmp_path / "ddp.json"
    result = invoke(
        "--steps", "4", "--warmup", "2", "--repeat", "1", "--launcher", "torchrun", "--nproc-per-node", "2", "--timeout", "120",
        "--json", str(out_json), "--", PY, str(FIXTURES / "ddp_tiny.py"),
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert "rank 0 of 2 measured" in result.stdout
    details = json.loads(out_json.read_text())["runs"][0]["details"]
    assert details["rank"] == 0 and details["world_size"] == 2


def test_json_report_is_written_atomically_never_through_a_predictable_temp_name(tmp_path):
    """A symlink planted at `FILE.tmp` (the old temp name) must not redirect the write."""
    from gpulint.profile.report import write_json

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "out.json"
    (tmp_path / "out.json.tmp").symlink_to(victim)
    write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    assert victim.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "out.json.tmp", "victim.txt"]  # no temp left


ISOLATION_SCRIPT = """
import os, torch
from torch.utils.data import DataLoader, TensorDataset
resumed = os.path.exists("ckpt.txt")  # a script that resumes from its last checkpoint
with open("ckpt.txt", "w") as f:  # before the loop: gpulint ends the run after its measured steps
    f.write("resumed" if resumed else "fresh")
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(TensorDataset(torch.randn(256, 4), torch.randn(256, 1)), batch_size=8):
    opt.zero_grad(); torch.nn.functional.mse_loss(model(x), y).backward(); opt.step()
"""


@pytest.mark.slow
def test_isolate_runs_keeps_a_checkpoint_from_feeding_the_next_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(ISOLATION_SCRIPT)
    result = invoke("--steps", "4", "--warmup", "2", "--repeat", "2", "--isolate-runs", "--json", "p.json", "--", PY, "train.py")
    assert result.exit_code == 0, result.output + result.stderr
    runs = json.loads((tmp_path / "p.json").read_text())["runs"]
    assert [r["new_files"] for r in runs] == [["ckpt.txt"], ["ckpt.txt"]]
    assert not (tmp_path / "ckpt.txt").exists()
    for run in runs:
        assert (tmp_path / run["set_aside"] / "ckpt.txt").read_text() == "fresh"  # the second run did not resume
    assert "the new ones were moved to .gpulint-runs/" in result.stdout
