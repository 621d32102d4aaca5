"""`gpulint check` stays light: no torch, no flake8, no profiler machinery, no reporters it does not use."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import FIXTURES, REPO

PROBE = """
import json, sys
from gpulint.cli import main
after_import = sorted(sys.modules)
try:
    main(["check", "--no-cache", "-q", *sys.argv[1:]])
except SystemExit:
    pass
print(json.dumps({"import": after_import, "check": sorted(sys.modules)}))
"""


def _modules() -> dict[str, list[str]]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, sorted(FIXTURES.glob("*.py")))],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": ""},
        timeout=120,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_the_cli_and_checking_files_imports_no_torch_flake8_or_profiler():
    modules = _modules()
    for phase in ("import", "check"):
        # The profiler's option declarations (shared by `profile` and `fix --verify`) are torch-free and
        # cost ~2 ms; its runner, metrics and NVML code must stay unloaded.
        light = {"gpulint.profile", "gpulint.profile.cli", "gpulint.profile.options"}
        heavy = [
            m
            for m in modules[phase]
            if m.split(".")[0] in {"torch", "flake8", "numpy", "pynvml"} or (m.startswith("gpulint.profile") and m not in light)
        ]
        assert heavy == [], f"{phase}: {heavy}"
    # The fixer and the JSON reporters are not needed to print a text report.
    assert "gpulint.fixer" not in modules["import"]
    assert "gpulint.reporters.json_formats" not in modules["check"]


def test_the_rule_codes_read_from_module_names_are_the_registry():
    """A config's selectors are checked against the rule modules' names, without importing the rules."""
    from gpulint.checks import all_rules
    from gpulint.config import rule_codes

    assert rule_codes() == tuple(all_rules())
