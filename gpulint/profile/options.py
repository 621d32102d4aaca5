"""Settings shared by `gpulint profile` and `gpulint fix --verify`."""

from __future__ import annotations

import os
import pathlib
import sys
from dataclasses import dataclass, field

DEFAULT_STEPS = 30
DEFAULT_WARMUP = 10
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_FIRST_STEP_TIMEOUT_S = 300.0  # no step seen for this long: stop early and say what was seen
DEFAULT_REPEAT_PROFILE = 3  # PROFILING.md's synopsis: `profile ... [--repeat 3]`, so the run-to-run spread is known
DEFAULT_REPEAT_VERIFY = 3  # PROFILING.md: A B A B with at least 3 runs each
DEFAULT_ATTRIBUTION_STEPS = 6  # profiled steps; the first and last are dropped when parsing


@dataclass
class ProfileOptions:
    steps: int = DEFAULT_STEPS
    warmup: int = DEFAULT_WARMUP
    repeat: int | None = None  # None: 3 for `profile` and for `fix --verify`
    timeout: float = DEFAULT_TIMEOUT_S  # seconds per run, for the whole process group
    first_step_timeout: float = DEFAULT_FIRST_STEP_TIMEOUT_S  # seconds from the start to the first step
    json_path: pathlib.Path | None = None
    html_path: pathlib.Path | None = None
    trace_dir: pathlib.Path | None = None
    launcher: str | None = None  # None or "torchrun"
    nproc_per_node: int = 1
    attribution_steps: int = DEFAULT_ATTRIBUTION_STEPS  # 0 disables the torch.profiler pass
    cwd: pathlib.Path | None = None  # the user's working directory (default: ours)
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the script
    progress: bool | None = None  # None: only when stderr is a terminal and CI is unset
    seed: int = 0
    isolate_runs: bool = False  # move the files each run creates aside, so runs do not feed each other

    def repeat_for_profile(self) -> int:
        return self.repeat or DEFAULT_REPEAT_PROFILE

    def repeat_for_verify(self) -> int:
        return self.repeat or DEFAULT_REPEAT_VERIFY

    def show_progress(self) -> bool:
        if self.progress is not None:
            return self.progress
        return sys.stderr.isatty() and not os.environ.get("CI")
