"""The result cache, parallel runs and the progress bar, through the real CLI (and `lint_files`)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpulint import linter
from gpulint.cache import CACHE_DIR_NAME, Cache, secret_key
from gpulint.config import load_settings
from gpulint.progress import Progress
from tests.conftest import FIXTURES, REPO, run_gpulint

TRAIN = """\
import torch

print(torch.cuda.memory_cached())
print("peak:", torch.cuda.max_memory_cached())
"""
MESSAGE_1 = "`torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\n", encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN, encoding="utf-8")
    (tmp_path / "src" / "regression.py").write_text((FIXTURES / "train_regression.py").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "src" / "util.py").write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    return tmp_path


def gpulint(project: Path, *args: str, cwd: Path | None = None):
    result = run_gpulint(*args, cwd=cwd or project)
    assert result.returncode in (0, 1), result.stderr.decode()
    return result


def cache_files(project: Path) -> list[Path]:
    """The result cache's files (the project's hashes and module summaries sit beside them)."""
    return sorted(p for p in (project / CACHE_DIR_NAME).rglob("*.json") if not p.name.startswith(("project-", "summaries-")))


def read_cache(path: Path) -> dict:
    return json.loads(path.read_bytes().partition(b"\n")[2])  # after the MAC line


def edit_cache(path: Path, change) -> None:
    """Change a cache file and sign it again with this user's key (tests of what the MAC cannot catch)."""
    data = read_cache(path)
    change(data)
    payload = json.dumps(data).encode()
    path.write_bytes(hmac.new(secret_key(), payload, hashlib.sha256).hexdigest().encode() + b"\n" + payload)


def test_cache_layout_next_to_the_config(project):
    gpulint(project, "check", "train.py", cwd=project / "src")  # run from a subfolder
    cache = project / CACHE_DIR_NAME
    assert (cache / "CACHEDIR.TAG").read_text(encoding="utf-8").startswith("Signature: 8a477f597d28d172789f06886806bc55\n")
    assert (cache / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"
    (entry,) = cache_files(project)
    assert entry.parent.name == __import__("gpulint").__version__
    assert not (project / "src" / CACHE_DIR_NAME).exists()
    assert not [p for p in cache.rglob("*") if p.name.endswith(".tmp")]  # atomic writes leave nothing behind


def test_git_ignores_the_cache(project):
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    gpulint(project, "check", "src")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=project, capture_output=True, check=True)
    assert CACHE_DIR_NAME not in status.stdout.decode()


@pytest.mark.parametrize("fmt", ["full", "json", "sarif"])
def test_warm_run_gives_the_same_output(project, fmt):
    cold = gpulint(project, "check", f"--output-format={fmt}", "src")
    warm = gpulint(project, "check", f"--output-format={fmt}", "src")
    assert (warm.stdout, warm.returncode) == (cold.stdout, cold.returncode)
    assert b"GPU402" in warm.stdout and b"GPU101" in warm.stdout


def test_warm_run_is_served_from_the_cache_and_edits_invalidate_it(project):
    gpulint(project, "check", "src")
    (path,) = cache_files(project)

    def mark(data):
        for entry in data["files"].values():
            for d in entry["diagnostics"]:
                d["message"] = "FROM CACHE"

    edit_cache(path, mark)
    assert gpulint(project, "check", "--output-format=concise", "src/train.py").stdout.decode().startswith(
        "src/train.py:3:7: GPU402 [*] FROM CACHE\n"
    )
    assert MESSAGE_1 in gpulint(project, "check", "--no-cache", "--output-format=concise", "src/train.py").stdout.decode()
    (project / "src" / "train.py").write_text(TRAIN + "# edited\n", encoding="utf-8")
    assert MESSAGE_1 in gpulint(project, "check", "--output-format=concise", "src/train.py").stdout.decode()


def test_no_cache_neither_reads_nor_writes(project):
    gpulint(project, "check", "--no-cache", "src")
    assert not (project / CACHE_DIR_NAME).exists()


def test_a_corrupt_cache_file_is_ignored_and_rewritten(project):
    gpulint(project, "check", "src")
    (path,) = cache_files(project)
    path.write_bytes(b"\x00{not json")
    result = gpulint(project, "check", "--output-format=concise", "src")
    assert result.stdout.decode().count(MESSAGE_1) == 1 and result.returncode == 1
    assert read_cache(path)["format"] == 2


def test_a_foreign_cache_file_is_not_trusted(project):
    gpulint(project, "check", "src")
    (path,) = cache_files(project)

    def foreign(data):
        data["key"] = "0123456789abcdef"
        for entry in data["files"].values():
            entry["diagnostics"] = []

    edit_cache(path, foreign)
    assert MESSAGE_1 in gpulint(project, "check", "--output-format=concise", "src").stdout.decode()


@pytest.mark.parametrize(
    "damage",
    [
        lambda e: e.update(diagnostics="nonsense"),
        lambda e: e.update(diagnostics=[{"code": "GPU402"}]),
        lambda e: e["diagnostics"][0].update(severity="catastrophic"),
        lambda e: e["diagnostics"][0].update(filename="elsewhere.py"),
        lambda e: e.update(shown="other/train.py"),
    ],
    ids=["not-a-list", "missing-fields", "bad-severity", "other-file", "other-display-path"],
)
def test_a_malformed_entry_is_not_trusted(project, damage):
    gpulint(project, "check", "src/train.py")
    (path,) = cache_files(project)
    edit_cache(path, lambda data: [damage(entry) for entry in data["files"].values()])
    result = gpulint(project, "check", "--output-format=concise", "src/train.py")
    assert result.stdout.decode().startswith(f"src/train.py:3:7: GPU402 [*] {MESSAGE_1}\n")


def test_settings_are_part_of_the_key(project):
    gpulint(project, "check", "src")
    only_loaders = gpulint(project, "check", "--select=GPU1", "--output-format=concise", "src").stdout.decode()
    assert "GPU402" not in only_loaders and "GPU101" in only_loaders
    assert len(cache_files(project)) == 2
    assert "GPU402" in gpulint(project, "check", "--output-format=concise", "src").stdout.decode()


def test_paths_in_messages_follow_the_working_directory(project):
    top = gpulint(project, "check", "--output-format=concise", "src/regression.py").stdout.decode()
    sub = gpulint(project, "check", "--output-format=concise", "regression.py", cwd=project / "src").stdout.decode()
    assert "(module constant at src/regression.py:7)" in top
    assert "(module constant at regression.py:7)" in sub


def test_cache_dir_setting_relative_to_the_config(project):
    (project / "pyproject.toml").write_text('[tool.gpulint]\ncache-dir = "build/lint-cache"\n', encoding="utf-8")
    gpulint(project, "check", ".", cwd=project / "src")
    assert (project / "build" / "lint-cache" / "CACHEDIR.TAG").is_file()
    assert not (project / CACHE_DIR_NAME).exists()


def test_an_unwritable_cache_location_only_costs_the_cache(project):
    (project / "blocker").write_text("a file where the cache folder would go\n", encoding="utf-8")
    (project / "pyproject.toml").write_text('[tool.gpulint]\ncache-dir = "blocker/cache"\n', encoding="utf-8")
    result = gpulint(project, "check", "--output-format=concise", "src")
    assert result.returncode == 1 and result.stderr == b"" and MESSAGE_1 in result.stdout.decode()


def test_fix_does_not_trust_the_cache(project):
    gpulint(project, "check", "src/train.py")
    (path,) = cache_files(project)
    edit_cache(path, lambda data: [e.update(diagnostics=[]) for e in data["files"].values()])
    assert gpulint(project, "check", "src/train.py").returncode == 0  # the (doctored) cache says clean
    fixed = gpulint(project, "fix", "--apply", "src/train.py")
    assert fixed.returncode == 0
    assert "memory_cached" not in (project / "src" / "train.py").read_text(encoding="utf-8")


def test_add_noqa_works_from_a_warm_cache(project):
    gpulint(project, "check", "src/train.py")
    gpulint(project, "check", "--add-noqa", "src/train.py")
    assert (project / "src" / "train.py").read_text(encoding="utf-8").count("# noqa: GPU402") == 2
    assert gpulint(project, "check", "src/train.py").returncode == 0


def test_cache_entries_keep_related_locations(project):
    settings = load_settings(start=project)
    cache = Cache(settings)
    from gpulint.diagnostics import Diagnostic, Location

    d = Diagnostic("GPU101", "n", "m", "t.py", Location(1, 1), Location(1, 2), related=(("argparse default", Location(3, 4)),))
    cache.put(project / "t.py", "t.py", "abc", [d])
    cache.save()
    assert Cache(settings).get(project / "t.py", "t.py", "abc") == [d]
    assert Cache(settings).get(project / "t.py", "t.py", "abd") is None


# ---- parallel runs ------------------------------------------------------------------------------


@pytest.fixture
def many(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\n", encoding="utf-8")
    for i in range(40):
        folder = tmp_path / f"pkg{i % 4}"
        folder.mkdir(exist_ok=True)
        source = TRAIN if i % 3 else (FIXTURES / "train_classifier.py").read_text(encoding="utf-8")
        (folder / f"m{i:02}.py").write_text(source, encoding="utf-8")
    (tmp_path / "pkg0" / "broken.py").write_text("import torch\nx = torch.cuda.memory_cached(\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("fmt", ["concise", "json"])
def test_jobs_do_not_change_the_output(many, fmt):
    serial = gpulint(many, "check", "--no-cache", "-j", "1", f"--output-format={fmt}", ".")
    parallel = gpulint(many, "check", "--no-cache", "-j", "2", f"--output-format={fmt}", ".")
    assert parallel.stdout == serial.stdout and parallel.returncode == serial.returncode == 1
    assert serial.stdout.count(b"invalid-syntax") == 1


class _PoolSpy:
    """Counts process pools that lint_files starts (the real pool still runs)."""

    def __init__(self, monkeypatch):
        import concurrent.futures

        self.started = []
        real = concurrent.futures.ProcessPoolExecutor

        def spy(*args, **kwargs):
            self.started.append(args[0] if args else kwargs.get("max_workers"))
            return real(*args, **kwargs)

        monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", spy)


def test_many_files_use_a_pool_and_match_the_serial_run(many, monkeypatch):
    monkeypatch.chdir(many)
    settings = load_settings(start=many)
    files = sorted(many.rglob("*.py"))
    spy = _PoolSpy(monkeypatch)
    parallel = linter.lint_files(files, settings, jobs=2, use_cache=False)
    assert spy.started == [2]
    serial = linter.lint_files(files, settings, jobs=1, use_cache=False)
    assert spy.started == [2]
    assert [(r.path, r.diagnostics) for r in parallel] == [(r.path, r.diagnostics) for r in serial]
    assert [r.path for r in parallel] == sorted(r.path for r in parallel)
    with_findings = [r for r in parallel if r.diagnostics and r.diagnostics[0].code]
    assert with_findings and all(r.source is not None for r in with_findings)  # for snippets and --add-noqa


def test_a_handful_of_files_stays_serial(many, monkeypatch):
    monkeypatch.chdir(many)
    spy = _PoolSpy(monkeypatch)
    linter.lint_files(sorted(many.rglob("*.py"))[:5], load_settings(start=many), jobs=8, use_cache=False)
    assert spy.started == []


def test_a_warm_cache_starts_no_pool(many, monkeypatch):
    monkeypatch.chdir(many)
    settings = load_settings(start=many)
    files = sorted(many.rglob("*.py"))
    cold = linter.lint_files(files, settings, jobs=2)
    spy = _PoolSpy(monkeypatch)
    warm = linter.lint_files(files, settings, jobs=2)
    assert spy.started == []
    assert [(r.path, r.diagnostics) for r in warm] == [(r.path, r.diagnostics) for r in cold]


def test_default_jobs_are_the_usable_cpus():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert linter.default_jobs() == expected


def test_jobs_must_be_positive(project):
    result = run_gpulint("check", "-j", "0", "src", cwd=project)
    assert result.returncode == 2 and b"-j" in result.stderr


# ---- progress -----------------------------------------------------------------------------------


def _run_with_terminal_stderr(args: list[str], cwd: Path, env: dict) -> tuple[int, bytes, bytes]:
    """stdout piped, stderr a pseudo-terminal: what a user at a terminal piping the report sees."""
    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def drain():
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    proc = subprocess.run(
        [sys.executable, "-m", "gpulint", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=slave, env=env, timeout=300
    )
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    return proc.returncode, proc.stdout, b"".join(chunks)


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GPULINT_OUTPUT_FORMAT")}
    return {**env, "PYTHONPATH": str(REPO), **extra}


def test_progress_bar_on_a_terminal(many):
    for i in range(20):
        (many / "pkg1" / f"extra{i}.py").write_text(TRAIN, encoding="utf-8")
    code, out, err = _run_with_terminal_stderr(["check", "--no-cache", "--output-format=json", "."], many, _env())
    assert code == 1
    assert b"\rChecking [" in err and b"61/61 files" in err
    assert err.endswith(b"\r")  # the bar erases itself
    assert b"Checking" not in out
    json.loads(out)


def test_no_progress_bar_under_ci(many):
    for i in range(20):
        (many / "pkg1" / f"extra{i}.py").write_text(TRAIN, encoding="utf-8")
    code, out, err = _run_with_terminal_stderr(["check", "--no-cache", "."], many, _env(CI="true"))
    assert code == 1 and b"Checking" not in err


def test_no_progress_bar_when_stderr_is_not_a_terminal(many):
    for i in range(20):
        (many / "pkg1" / f"extra{i}.py").write_text(TRAIN, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "gpulint", "check", "--no-cache", "."], cwd=many, capture_output=True, env=_env(), timeout=300
    )
    assert result.returncode == 1 and result.stderr == b""


class _Terminal:
    def __init__(self):
        self.written = []

    def isatty(self):
        return True

    def write(self, text):
        self.written.append(text)

    def flush(self):
        pass


def test_progress_bar_draws_and_erases(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    terminal = _Terminal()
    with Progress(100, stream=terminal, width=10) as progress:
        for _ in range(100):
            progress.advance()
    text = "".join(terminal.written)
    assert text.startswith("\rChecking [")
    assert "\rChecking [##########] 100/100 files" in text
    assert text.endswith("\r" + " " * len("Checking [##########] 100/100 files") + "\r")


def test_progress_bar_skips_short_runs(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    terminal = _Terminal()
    with Progress(3, stream=terminal) as progress:
        progress.advance(3)
    assert terminal.written == []


def test_ctrl_c_stops_a_parallel_run_at_once(tmp_path):
    """The workers ignore SIGINT, the parent drops the files not started: exit 130 soon, no tracebacks."""
    import signal
    import time

    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\n", encoding="utf-8")
    source = (FIXTURES / "train_classifier.py").read_text(encoding="utf-8")
    for i in range(400):
        (tmp_path / f"m{i:03}.py").write_text(f"# {i}\n{source}", encoding="utf-8")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpulint", "check", "--no-cache", "-j", "2", "."],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=_env(),
        start_new_session=True,
    )
    os.close(slave)
    seen = b""
    try:
        while b"Checking [" not in seen:  # the first files are done: the pool is running
            seen += os.read(master, 4096)
        os.killpg(proc.pid, signal.SIGINT)
        start = time.monotonic()
        proc.wait(timeout=60)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:  # a hung run must not outlive the test
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    try:
        while chunk := os.read(master, 4096):
            seen += chunk
    except OSError:
        pass
    os.close(master)
    assert proc.returncode == 130
    assert b"Traceback" not in seen
    assert elapsed < 20  # the chunks already running finish (a few files each); 400 files take far longer


# ---- a warm run does only what it must ------------------------------------------------------------------

WARM_PROBE = """
import json, sys
from gpulint.cli import main
try:
    main(["check", "--output-format=concise", "src"])
except SystemExit as exit:
    code = exit.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] == "libcst" or m.startswith(("gpulint.analysis", "gpulint.checks")))
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def _probe(project: Path) -> tuple[str, dict]:
    result = subprocess.run([sys.executable, "-c", WARM_PROBE], cwd=project, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    return result.stdout, json.loads(result.stderr.strip().splitlines()[-1])


def test_a_warm_run_imports_neither_libcst_nor_the_analysis_nor_the_rules(project):
    cold = gpulint(project, "check", "--output-format=concise", "src")
    output, warm = _probe(project)
    assert (output, warm["code"]) == (cold.stdout.decode(), cold.returncode) and warm["heavy"] == []
    (project / "src" / "train.py").write_text(TRAIN + "# edited\n", encoding="utf-8")
    output, edited = _probe(project)
    assert MESSAGE_1 in output and "libcst" in edited["heavy"]  # a changed file is parsed, so LibCST is loaded then


@pytest.mark.parametrize(
    "sequence",
    [
        [["--ignore=GPU402"], [], ["--ignore=GPU4"]],
        [["--select=GPU1"], ["--select=GPU101,GPU102,GPU103,GPU104,GPU105,GPU106,GPU107"], ["--select=GPU101"]],
        [[], ["--preview"], ["--extend-select=GPU9"], []],
    ],
)
def test_the_key_follows_the_selectors_as_written(project, sequence):
    """The settings' part of the key is the selectors as written (resolving them would import every rule):
    whatever order selections come in, a cached run says what an uncached one says."""
    for options in sequence:
        cached = gpulint(project, "check", "--output-format=concise", *options, "src")
        fresh = gpulint(project, "check", "--no-cache", "--output-format=concise", *options, "src")
        assert (cached.stdout, cached.returncode) == (fresh.stdout, fresh.returncode), options
