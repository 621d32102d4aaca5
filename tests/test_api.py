"""The library API (`gpulint.api`): check and fix sources and files, write atomically, stop between files,
settings discovery, rule metadata; and the layering it stands for (nothing below the CLI imports the CLI)."""

from __future__ import annotations

import ast
import os
import stat
from collections import Counter
from pathlib import Path

import pytest

from gpulint import api
from gpulint.fixer import apply_edits
from tests.conftest import REPO
from tests.test_hardening_writes import AFTER, BEFORE, _files

LOADER = 'import torch\nfrom torch.utils.data import DataLoader\n\ndevice = torch.device("cuda")\n\n\ndef main():\n    loader = DataLoader(ds, batch_size=64)\n    return loader\n'


@pytest.fixture
def settings(tmp_path):
    return api.discover_settings(tmp_path)


# ---- check -------------------------------------------------------------------------------------------


def test_check_a_string(settings):
    report = api.check(api.Source(BEFORE, "train.py"), settings)
    assert [(d.code, d.filename, d.location.row, d.location.column) for d in report.diagnostics] == [
        ("GPU402", "train.py", 3, 5),
        ("GPU402", "train.py", 4, 5),
    ]
    assert report.sources == {"train.py": BEFORE}
    assert report.fixable() == {"train.py": Counter({"GPU402": 2})}


def test_check_paths_and_sources_together_sorted_by_path(tmp_path, settings, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _files(tmp_path, 2)
    report = api.check([".", api.Source(LOADER, "a_buffer.py"), "nosuch.py"], settings, cache=False)
    assert [f.path for f in report.files] == ["a_buffer.py", "m000.py", "m001.py", "nosuch.py"]
    missing = report.files[-1].diagnostics
    assert [(d.name, d.message) for d in missing] == [("io-error", "No such file or directory")]
    assert [d.code for d in report.files[0].diagnostics] == ["GPU101"]


def test_force_exclude_applies_to_a_source_by_its_path(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nextend-exclude = ["legacy"]\nforce-exclude = true\n')
    settings = api.discover_settings(tmp_path / "legacy" / "t.py")
    assert settings.root == tmp_path.resolve()
    assert api.check(api.Source(BEFORE, str(tmp_path / "legacy" / "t.py")), settings).files == []
    assert len(api.check(api.Source(BEFORE, str(tmp_path / "t.py")), settings).diagnostics) == 2


# ---- fix -----------------------------------------------------------------------------------------------


def test_fix_a_string_gives_text_counts_edits_and_the_remaining_findings(settings):
    report = api.fix(api.Source(BEFORE + LOADER.replace("import torch\n", ""), "train.py"), settings)
    (result,) = report.files
    assert result.fixed.startswith(AFTER)
    assert result.fixes == Counter({"GPU402": 2})
    assert [d.code for d in result.remaining] == ["GPU101"]  # unsafe: not applied by default
    assert report.hidden_unsafe == 1
    assert apply_edits(result.original, list(result.edits)) == result.fixed
    assert [(e.location.row, e.end_location.row) for e in result.edits] == [(3, 5)]
    assert result.diff().startswith("--- train.py\n+++ train.py\n@@ -1,")

    unsafe = api.fix(api.Source(LOADER, "train.py"), settings, unsafe=True)
    assert "num_workers=" in unsafe.files[0].fixed and unsafe.files[0].remaining == []


def test_fix_keeps_the_source_encoding(settings):
    source = api.Source.from_bytes("# -*- coding: latin-1 -*-\n# café\n".encode("latin-1") + BEFORE.encode(), "latin.py")
    (result,) = api.fix(source, settings).files
    assert result.fixed_bytes() == "# -*- coding: latin-1 -*-\n# café\n".encode("latin-1") + AFTER.encode()
    with pytest.raises(api.SourceError, match="binary file"):
        api.Source.from_bytes(b"\x00torch", "bin.py")


def test_fix_reports_unreadable_inputs_as_errors(tmp_path, settings, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bin.py").write_bytes(b"\x00torch")
    report = api.fix(["bin.py", "nosuch.py"], settings)
    assert report.files == []
    assert [(d.filename, d.message) for d in report.errors] == [
        ("nosuch.py", "No such file or directory"),
        ("bin.py", "binary file (contains NUL bytes), not Python source"),
    ]


# ---- write -----------------------------------------------------------------------------------------------


def test_write_fixes_writes_each_changed_file_and_says_which_it_could_not(tmp_path, settings):
    paths = _files(tmp_path, 3)
    (tmp_path / "clean").mkdir()
    _files(tmp_path / "clean", 1, before=AFTER)
    paths[1].chmod(0o444)
    report = api.fix([tmp_path], settings)
    assert [p.read_text() for p in paths] == [BEFORE] * 3  # computing writes nothing
    api.write_fixes(report)
    assert [p.read_text() for p in paths] == [AFTER, BEFORE, AFTER]
    assert [(f.written, f.write_error) for f in report.files] == [(False, None), (True, None), (False, "file is read-only"), (True, None)]
    assert stat.S_IMODE(paths[1].stat().st_mode) == 0o444
    # As the files now stand: the unwritten file keeps its findings, at the original positions.
    assert [(Path(d.filename).name, d.location.row) for d in report.findings()] == [("m001.py", 3), ("m001.py", 4)]


def test_a_cancellation_finishes_the_file_in_flight_and_leaves_the_rest(tmp_path, settings, monkeypatch):
    import gpulint.fixer as fixer

    paths = _files(tmp_path, 4)
    cancel = api.Cancellation()
    real = fixer.write_atomic

    def cancelled_during_second(path, data, expected=None):
        if Path(path).name == "m001.py":
            cancel.cancel("SIGINT")  # what the CLI's signal handler does
        return real(path, data, expected)

    monkeypatch.setattr(fixer, "write_atomic", cancelled_during_second)
    report = api.write_fixes(api.fix([tmp_path], settings), cancel)
    assert report.cancelled and cancel.reason == "SIGINT"
    assert [p.read_text() for p in paths] == [AFTER, AFTER, BEFORE, BEFORE]
    assert [f.write_error for f in report.files] == [None, None, "interrupted before it was written", "interrupted before it was written"]


def test_an_exception_during_a_write_leaves_the_report_true_to_the_disk(tmp_path, settings, monkeypatch):
    import gpulint.fixer as fixer

    paths = _files(tmp_path, 3)
    real = fixer.write_atomic

    def interrupted_after_the_rename(path, data, expected=None):
        real(path, data, expected)
        if Path(path).name == "m001.py":
            raise KeyboardInterrupt  # a second Ctrl-C just after the swap

    monkeypatch.setattr(fixer, "write_atomic", interrupted_after_the_rename)
    report = api.fix([tmp_path], settings)
    with pytest.raises(KeyboardInterrupt):
        api.write_fixes(report)
    assert [f.written for f in report.files] == [True, True, False]
    assert report.files[2].write_error == "interrupted before it was written"
    monkeypatch.setattr(fixer, "write_atomic", real)
    assert api.restore_originals(report) == []
    assert [p.read_text() for p in paths] == [BEFORE] * 3
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".gpulint-tmp")]


def test_in_memory_sources_are_never_written(settings):
    report = api.write_fixes(api.fix(api.Source(BEFORE, "train.py"), settings))
    assert [(f.written, f.write_error, f.fixed) for f in report.files] == [(False, None, AFTER)]


def test_add_noqa_writes_a_baseline(tmp_path, settings):
    (path,) = _files(tmp_path, 1)
    done = api.add_noqa(api.check([path], settings, cache=False))
    assert done.added == 2 and not done.cancelled
    assert path.read_text().splitlines()[2:] == ["x = torch.cuda.memory_cached()  # noqa: GPU402", "y = torch.cuda.max_memory_cached()  # noqa: GPU402"]
    assert api.check([path], settings, cache=False).diagnostics == []


# ---- settings and rules ---------------------------------------------------------------------------------------


def test_discover_settings_reads_the_nearest_pyproject_and_applies_overrides(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nignore = ["GPU1"]\n')
    (tmp_path / "src").mkdir()
    settings = api.discover_settings(tmp_path / "src", ignore=("GPU402",), unsafe_fixes=True)
    assert settings.ignore == ("GPU1", "GPU402") and settings.unsafe_fixes
    assert settings.config_path == (tmp_path / "pyproject.toml").resolve()
    assert api.check(api.Source(BEFORE + LOADER, "t.py"), settings).diagnostics == []
    with pytest.raises(api.ConfigError, match="Unknown rule selector: `GPU777`"):
        api.discover_settings(tmp_path, select=("GPU777",))


def test_rule_metadata():
    info = api.rule("dataloader-without-workers")
    assert (info.code, info.name, info.preview) == ("GPU101", "dataloader-without-workers", False)
    assert info.url.endswith("/rules/GPU101.md") and info.explanation.startswith("# dataloader-without-workers (GPU101)")
    assert api.rule("gpu101") == info
    assert [r.code for r in api.rules()][:3] == ["GPU001", "GPU101", "GPU102"]
    with pytest.raises(api.ConfigError, match="Unknown rule `GPU000`"):
        api.rule("GPU000")


# ---- layering ------------------------------------------------------------------------------------------------

CLI_LAYER = {"gpulint.cli", "gpulint.cli_output", "gpulint.__main__"}


def _module_imports() -> dict[str, set[str]]:
    """Every gpulint module -> the gpulint modules it imports anywhere (functions included)."""
    modules = {}
    for path in (REPO / "gpulint").rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    imported.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = imported & set(modules)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The import cycles: strongly connected components of more than one module."""
    reach = {name: set() for name in graph}
    for name in graph:
        todo = list(graph[name])
        while todo:
            other = todo.pop()
            if other not in reach[name]:
                reach[name].add(other)
                todo.extend(graph[other])
    components = {frozenset({name} | {o for o in reach[name] if name in reach[o]}) for name in graph}
    return [set(c) for c in components if len(c) > 1]


def test_nothing_below_the_cli_imports_the_cli():
    importers = {name for name, imported in _module_imports().items() if "gpulint.cli" in imported}
    assert importers <= {"gpulint.__main__"}, importers


def test_no_import_cycle_between_the_cli_the_fix_path_and_the_profiler():
    def layer(module: str) -> str:
        if module in CLI_LAYER:
            return "cli"
        if module in {"gpulint.api", "gpulint.fixer"}:
            return "fix path"
        return "profiler" if module.startswith("gpulint.profile") else "other"

    for cycle in _cycles(_module_imports()):
        layers = {layer(m) for m in cycle} - {"other"}
        assert len(layers) <= 1, sorted(cycle)


def test_the_library_prints_nothing_exits_never_and_handles_no_signals():
    graph = _module_imports()
    assert not graph["gpulint.api"] & CLI_LAYER
    tree = ast.parse((REPO / "gpulint" / "api.py").read_text(encoding="utf-8"))
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {"print", "exit", "echo", "signal"} & names
    assert not {"click", "signal", "sys"} & imported


# ---- docs/api.md -------------------------------------------------------------------------------------------------


def _doc_blocks(kind: str) -> list[str]:
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    return [block.split("```", 1)[0] for block in text.split(f"```{kind}\n")[1:]]


def test_the_documented_example_prints_what_the_document_says(tmp_path):
    import subprocess
    import sys

    example, output = _doc_blocks("python")[0], _doc_blocks("text")[0]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == output


def test_the_documented_files_example_runs(tmp_path):
    import subprocess
    import sys

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(BEFORE)
    (tmp_path / "train.py").write_text(LOADER)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = "from gpulint import api\n" + _doc_blocks("python")[1]
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "src/m.py {'GPU402': 2}\n"
    assert (tmp_path / "src" / "m.py").read_text() == AFTER


def test_the_readme_library_example_runs(tmp_path):
    import subprocess
    import sys

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    code = readme.split("## Library API\n", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(BEFORE)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("src/m.py 3 GPU402 `torch.cuda.memory_cached` is deprecated")
    assert (tmp_path / "src" / "m.py").read_text() == AFTER
