"""Round 14: GPU201 reports a factory rebuilt on the CPU and copied every step only with evidence that it costs the
step a measurable share: the size the code shows, above 512 KiB (`factory_bytes.costly_bytes`; a pageable copy of
1.5 MB measured +5-20 % on 3 ms steps, bench/results/cost_facts.md). A size out of sight is no evidence: every such
finding both judges read on the fourteenth and fifteenth corpora was noise (a randperm of the batch, a mask of
batch x tokens), so it is silent, and reported with `unproven-cost = true`. The message names the size."""

from __future__ import annotations

import textwrap

from gpulint.analysis.factory_bytes import described_bytes
from tests.conftest import diagnostics, findings

STEP = textwrap.dedent("""\
    import sys
    import torch

    device = torch.device("cuda")
    N = {n}

    for x, y in loader:
        mask = torch.ones(N, 512).to(device)
        loss = model(x.to(device) * mask).sum()
        loss.backward()
        optimizer.step()
""")
UNPROVEN_COST = (("GPU201", (("unproven-cost", True),)),)


def test_a_factory_of_megabytes_a_step_is_reported_with_its_size():
    # 1024 x 512 x 8 bytes = 4 MiB filled on the CPU and copied every step
    found = diagnostics(STEP.format(n=1024), select=("GPU201",))
    assert [f"{d.location.row}:{d.location.column} {d.code}" for d in found] == ["8:12 GPU201"]
    assert "fills ~4.0 MB on the CPU" in found[0].message
    assert found[0].help.startswith("A fill of ~4.0 MB and its blocking pageable copy")


def test_a_factory_at_the_line_or_of_unknown_size_is_silent():
    # 128 x 512 x 8 bytes = 512 KiB: at the line, known cheap
    assert findings(STEP.format(n=128), select=("GPU201",)) == []
    # 129 rows: just above it, reported
    assert findings(STEP.format(n=129), select=("GPU201",)) == ["8:12 GPU201"]
    # a size given on the command line: out of sight, no evidence
    unknown = STEP.format(n="int(sys.argv[1])")
    assert findings(unknown, select=("GPU201",)) == []
    assert findings(unknown, select=("GPU201",), rule_options=UNPROVEN_COST) == ["8:12 GPU201"]


def test_a_factory_moved_later_needs_the_same_evidence():
    source = textwrap.dedent("""\
        import torch

        for x, y in loader:
            z = torch.randn({rows}, 100)
            z = z.cuda()
            loss = model(x.cuda(), z).sum()
            loss.backward()
            optimizer.step()
    """)
    assert findings(source.format(rows=64), select=("GPU201",)) == []
    assert findings(source.format(rows="x.size(1)"), select=("GPU201",)) == []
    found = diagnostics(source.format(rows=4096), select=("GPU201",))
    assert [f"{d.location.row}:{d.location.column} {d.code}" for d in found] == ["4:9 GPU201"]
    assert "fills ~3.1 MB on the CPU" in found[0].message


def test_described_bytes():
    assert described_bytes(600 * 1024) == "~600 KB"
    assert described_bytes(3 << 20) == "~3.0 MB"
    assert described_bytes(40 << 20) == "~40 MB"
