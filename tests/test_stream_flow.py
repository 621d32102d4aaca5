"""GPU301/GPU302 follow the flow: waits after the block, branches, blocking copies, prefetchers that wait
before they hand a batch out; their fixes are unsafe and never land inside a loop."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import diagnostics, findings, fixed


def only(source: str, code: str) -> list[str]:
    return findings(textwrap.dedent(source), select=(code,))


EXECUTOR = """\
import torch
from torch.nn.parallel import DistributedDataParallel as DDP


class Executor:
    def __init__(self, model):
        self.model = model.cuda()

    def distributed(self):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            self.model = DDP(self.model)
        torch.cuda.current_stream().wait_stream(s)

    def step(self, x):
        return self.model(x)
"""


def test_a_wait_right_after_the_block_covers_reads_in_other_methods():
    assert only(EXECUTOR, "GPU3") == []


def test_without_that_wait_the_read_is_reported_naming_no_record_stream_for_a_module():
    source = EXECUTOR.replace("        torch.cuda.current_stream().wait_stream(s)\n", "")
    [d] = diagnostics(source, select=("GPU302",))
    assert (d.location.row, d.location.column) == (16, 16)
    assert d.message == "`self.model` is produced on stream `s` (line 12) and read here without waiting for `s`"
    assert d.fix is None  # `s` is a local of `distributed`: a wait in `step` would raise NameError


BRANCHES = """\
import torch

side = torch.cuda.Stream()


def forward(net, x, use_side):
    h = x.cuda() * 2
    if use_side:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            h = net(h)
    else:
        h = net(h)
    return None
"""


def test_a_read_on_the_other_branch_never_saw_the_side_stream():
    assert only(BRANCHES, "GPU302") == []


def test_a_read_after_both_branches_may_see_it():
    source = BRANCHES.replace("    return None", "    return h.sum()")
    assert only(source, "GPU302") == ["14:12 GPU302"]


def test_in_a_loop_the_other_branch_may_see_the_last_iteration():
    source = textwrap.dedent("""\
        import torch

        side = torch.cuda.Stream()
        h = torch.ones(3, device="cuda")
        for step in range(10):
            if step % 2:
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    h = h * 2
            else:
                h = h + 1
    """)
    assert only(source, "GPU302") == ["11:13 GPU302"]


GENERATOR_PREFETCHER = """\
import torch


def prefetcher(load_iterator, prefetch_stream):
    def _prefetch():
        with torch.cuda.stream(prefetch_stream):
            try:
                data_batch = next(load_iterator)
            except StopIteration:
                return None
        return data_batch

    next_data_batch = _prefetch()
    while next_data_batch is not None:
        torch.cuda.current_stream().wait_stream(prefetch_stream)
        data_batch = next_data_batch
        next_data_batch = _prefetch()
        yield data_batch
"""


def test_a_prefetcher_whose_loop_waits_before_it_yields_is_silent():
    assert only(GENERATOR_PREFETCHER, "GPU3") == []


def test_the_same_prefetcher_without_the_wait_is_reported_where_it_hands_the_batch_out():
    source = GENERATOR_PREFETCHER.replace("        torch.cuda.current_stream().wait_stream(prefetch_stream)\n", "")
    assert only(source, "GPU302") == ["11:16 GPU302"]


def test_a_class_that_synchronizes_between_its_methods_is_left_alone():
    source = textwrap.dedent("""\
        import torch


        class Wrapper:
            def __init__(self, model):
                self.model = model.cuda()
                self.stream = torch.cuda.Stream()

            def warmup(self, x):
                with torch.cuda.stream(self.stream):
                    self.loss = self.model(x).sum()

            def capture(self, x):
                return self.loss * 2

            def step(self, x):
                self.warmup(x)
                torch.cuda.synchronize()
                return self.capture(x)
    """)
    assert only(source, "GPU302") == []


@pytest.mark.parametrize(
    "produced",
    [
        "mean = torch.tensor([0.485, 0.456, 0.406]).cuda().view(1, 3, 1, 1)",
        "mean = torch.tensor([0.485, 0.456, 0.406]).to(device)",
        "mean = torch.from_numpy(values).cuda(non_blocking=False)",
        "buffer = torch.empty(3, device=device)\nmean = buffer[1:]",
    ],
)
def test_values_nothing_is_still_writing_need_no_wait(produced):
    source = "import torch\ndevice = torch.device('cuda')\nstream = torch.cuda.Stream()\n" + produced + "\n"
    source += "with torch.cuda.stream(stream):\n    out = batch.cuda(non_blocking=True).sub_(mean)\n"
    assert only(source, "GPU301") == []


def test_a_non_blocking_copy_or_a_kernel_is_still_pending():
    source = "import torch\nstream = torch.cuda.Stream()\nmean = torch.tensor([0.5]).cuda(non_blocking=True)\n"
    source += "with torch.cuda.stream(stream):\n    out = mean * 2\n"
    assert only(source, "GPU301") == ["4:6 GPU301"]
    source = source.replace(".cuda(non_blocking=True)", ".cuda().float()")
    assert only(source, "GPU301") == ["4:6 GPU301"]


@pytest.mark.parametrize(
    "between",
    [
        "torch.cuda.synchronize()",
        "s.synchronize()",
        "done = s.record_event()\ndone.synchronize()",
        "done = torch.cuda.Event()\ndone.record(s)\ndone.wait()",
    ],
)
def test_synchronize_or_an_event_wait_covers_the_read(between):
    source = "import torch\ns = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    B = torch.ones(3, device='cuda') * 2\n"
    source += between + "\nprint(B.sum())\n"
    assert only(source, "GPU302") == []


def test_a_tensor_result_mentions_record_stream():
    source = "import torch\ns = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    B = torch.ones(3, device='cuda') * 2\nprint(B.sum())\n"
    [d] = diagnostics(source, select=("GPU302",))
    assert d.message == "`B` is produced on stream `s` (line 3) and read here without waiting for `s`"
    assert d.help.endswith(", and `B.record_stream(torch.cuda.current_stream())` so its memory is not reused too early")
    assert d.fix.applicability.value == "unsafe"
    assert len(d.message) < 160


def test_gpu301_fix_goes_before_the_loop_when_nothing_it_waits_for_changes_there():
    source = textwrap.dedent("""\
        import torch

        s = torch.cuda.Stream()
        weights = torch.ones(3, device="cuda") * 2
        for batch in loader:
            with torch.cuda.stream(s):
                out = batch.cuda(non_blocking=True) * weights
    """)
    [d] = diagnostics(source, select=("GPU301",))
    assert d.message == "Stream `s` reads `weights` (written at line 4) without waiting for the current stream"
    assert d.fix.applicability.value == "unsafe" and d.fix.message == "Insert `s.wait_stream(torch.cuda.current_stream())` before the loop"
    assert fixed(source, select=("GPU301",)) == source.replace("for batch", "s.wait_stream(torch.cuda.current_stream())\nfor batch")
    assert fixed(source, unsafe=False, select=("GPU301",)) == source


def test_gpu301_has_no_fix_when_the_input_changes_in_the_loop():
    source = textwrap.dedent("""\
        import torch

        s = torch.cuda.Stream()
        for batch in loader:
            feats = backbone(batch.cuda())
            with torch.cuda.stream(s):
                aux = head(feats)
            aux.sum().backward()
    """)
    [d] = diagnostics(source, select=("GPU301",))
    assert d.fix is None
