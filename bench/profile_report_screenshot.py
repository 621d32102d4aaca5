"""The screenshot in docs/profiling.md: a real `gpulint fix --apply --unsafe-fixes --verify --html` of
fixtures/profile/slow_loader.py (a scratch copy; CPU is enough), loaded in headless Chromium, which must show no
console error, then captured at 1100 CSS pixels wide.

    python bench/profile_report_screenshot.py [--out docs/profile-report.png] [--html-out FILE]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "profile"))

from headless_chromium import load  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "docs" / "profile-report.png")
    parser.add_argument("--html-out", type=pathlib.Path, default=None, help="also keep the HTML report here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gpulint-report-") as d:
        work = pathlib.Path(d)
        shutil.copy(REPO / "fixtures" / "profile" / "slow_loader.py", work / "slow_loader.py")
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
        proc = subprocess.run(
            [sys.executable, "-m", "gpulint", "fix", "--apply", "--unsafe-fixes", "--verify", "--repeat", "2",
             "--steps", "20", "--warmup", "5", "--html", "report.html", "--trace", "traces", "--", "python", "slow_loader.py"],
            cwd=work, env=env, capture_output=True, text=True, timeout=900,
        )
        print(proc.stdout + proc.stderr, file=sys.stderr)
        page = load(work / "report.html", {"ready": "document.documentElement.getAttribute('data-ready')"}, width=1100)
        if page.console_errors or page.exceptions or page.values["ready"] != "1":
            print(f"the report did not load cleanly: {page.console_errors} {page.exceptions}", file=sys.stderr)
            return 1
        args.out.write_bytes(page.screenshot_png)
        if args.html_out:
            shutil.copy(work / "report.html", args.html_out)
    print(f"[profile_report_screenshot] wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
