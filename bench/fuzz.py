"""A longer fuzz run than the test suite's: the same properties (tests/test_fuzz.py), more examples, a fresh
random seed each run (printed, so a failure can be replayed with --seed).

    python bench/fuzz.py                          # 300 mutated programs, 300 from the grammar, 100 from libcst nodes
    python bench/fuzz.py --examples 2000 --seed 7
    python bench/fuzz.py --only mutated --examples 1000

Every registered rule runs (`select=ALL`, preview on). On a failure, hypothesis shrinks the program and this
prints it with the failed property; the exit status is 1.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import hypothesmith  # noqa: E402
from hypothesis import HealthCheck, given, seed as hypothesis_seed, settings  # noqa: E402

from tests.test_fuzz import check_invariants, every_rule_on_every_file, mutated_programs, with_gpu_context  # noqa: E402

STRATEGIES = {
    "mutated": (lambda: mutated_programs, False),
    "grammar": (lambda: hypothesmith.from_grammar().map(with_gpu_context), True),
    "nodes": (lambda: hypothesmith.from_node().map(with_gpu_context), True),
}


def run_one(name: str, examples: int, run_seed: int, stats: Counter) -> bool:
    strategy, bypass_prefilter = STRATEGIES[name]

    @hypothesis_seed(run_seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )
    @given(strategy())
    def property_holds(program: str) -> None:
        stats[f"{name}: programs"] += 1
        if bypass_prefilter:
            with every_rule_on_every_file():
                diagnostics, outcome = check_invariants(program)
        else:
            diagnostics, outcome = check_invariants(program)
        stats[f"{name}: with findings"] += bool(diagnostics)
        stats[f"{name}: findings"] += len(diagnostics)
        stats[f"{name}: fixed"] += outcome.fixed_count > 0
        stats[f"{name}: fixes applied"] += outcome.fixed_count

    start = time.perf_counter()
    try:
        property_holds()
    except Exception:  # noqa: BLE001 - hypothesis has shrunk it; show and go on with the next strategy
        print(f"FAIL {name} (seed {run_seed}):", file=sys.stderr)
        traceback.print_exc()
        return False
    finally:
        stats[f"{name}: seconds"] = round(time.perf_counter() - start, 1)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=None, help="examples per strategy (default 300/300/100)")
    parser.add_argument("--seed", type=int, default=None, help="replay a run")
    parser.add_argument("--only", choices=sorted(STRATEGIES), action="append", help="run only this strategy (repeatable)")
    args = parser.parse_args(argv)
    run_seed = args.seed if args.seed is not None else random.randrange(2**32)
    defaults = {"mutated": 300, "grammar": 300, "nodes": 100}
    print(f"seed {run_seed}")
    stats: Counter = Counter()
    ok = True
    for name in args.only or ["mutated", "grammar", "nodes"]:
        ok &= run_one(name, args.examples or defaults[name], run_seed, stats)
    for key, value in stats.items():
        print(f"{key}: {value}")
    print("all properties held" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
