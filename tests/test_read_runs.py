"""The eleventh corpus's "a second read with nothing in flight" noise class (N5 (a), `analysis/read_runs.py`).
Minimal shapes of our own after benchmarking-gnns' training functions (the loss read after the optimizer step,
then a metric read on the next line) and StyleTTS2's clip loop (a minimum read twice, then per-sample lengths):
a run of host reads with no GPU work queued between them is one wait, reported once at its first read; a read
that waits for new GPU work (a forward, a backward pass, an optimizer step, an unknown call) stays its own finding."""

from __future__ import annotations

import textwrap

from tests.conftest import diagnostics, findings

HEADER = """\
import numpy as np
import torch
from torch import nn

device = torch.device("cuda")
model = nn.TransformerEncoder(nn.TransformerEncoderLayer(1024, 16), 24).to(device)
optimizer = torch.optim.AdamW(model.parameters())


"""


def gpu303(body: str) -> list[str]:
    return findings(HEADER + textwrap.dedent(body), select=("GPU303",))


# ---- a run of reads with nothing queued between them: one finding, at the first read ----------------------


def test_the_metric_read_right_after_the_loss_read_joins_it():
    # benchmarking-gnns / rasbt: the loss read after the step, then the accuracy's read of another tensor: only the
    # metric's few kernels were queued since the loss read drained the stream, one wait (the eleventh corpus's N5 (a))
    body = """\
        def train(loader):
            epoch_loss, epoch_acc = 0, 0
            for x, y in loader:
                scores = model(x.to(device))
                loss = nn.functional.cross_entropy(scores, y.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                epoch_loss += loss.detach().item()
                epoch_acc += (scores.argmax(1) == y.to(device)).float().sum().item()
            return epoch_loss, epoch_acc
    """
    [d] = diagnostics(HEADER + textwrap.dedent(body), select=("GPU303",))
    assert (d.location.row, d.location.column) == (18, 23)
    assert d.message == (
        "`loss.detach().item()` waits for the GPU every training step (loop at line 12), as does the read after it"
        " at line 19 (only light GPU work queued in between: one wait)"
    )
    assert [(text, where.row) for text, where in d.related][1:] == [
        ("then `(scores.argmax(1) == y.to(device)).float().sum().item()`, with only light GPU work queued since", 19),
    ]


def test_metric_reads_after_the_loss_read_join_it_also_in_a_branch_and_a_with_block():
    # Lightning-style logging in a plain loop: the loss read, then metrics (in a `with`, under an `if` on host values)
    assert gpu303("""\
        def train(loader, log_acc):
            for x, y in loader:
                scores = model(x.to(device))
                loss = nn.functional.cross_entropy(scores, y.to(device))
                loss.backward()
                optimizer.step()
                running = loss.item()
                with torch.no_grad():
                    correct = (scores.argmax(1) == y.to(device)).sum().item()
                if log_acc:
                    print(torch.softmax(scores, 1).max(1).values.mean().item())
    """) == ["16:19 GPU303"]


def test_each_segment_the_backward_pass_starts_keeps_a_finding():
    # the loss and its metric read before backward, then the loss and another metric again after the step
    assert gpu303("""\
        def train(loader):
            for x, y in loader:
                scores = model(x.to(device))
                loss = nn.functional.cross_entropy(scores, y.to(device))
                before = loss.item()
                acc = (scores.argmax(1) == y.to(device)).float().mean().item()
                loss.backward()
                optimizer.step()
                total = loss.item()
                peak = scores.max().item()
    """) == ["14:18 GPU303", "18:17 GPU303"]


def test_a_read_of_another_tensor_after_a_forward_or_a_collective_is_its_own_finding():
    assert gpu303("""\
        import torch.distributed as dist

        def train(loader, val_x):
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                a = loss.item()
                val = model(val_x.to(device)).mean()
                b = val.item()
                dist.all_reduce(loss)
                c = (loss * 2).item()
    """) == ["17:13 GPU303", "19:13 GPU303", "21:13 GPU303"]


def test_reads_of_another_tensor_across_a_loop_boundary_stay_their_own_findings():
    # a loop after the first read (each iteration may queue kernels), and reads in a loop or comprehension after it
    assert gpu303("""\
        def train(loader, heads):
            for x, y in loader:
                scores = model(x.to(device))
                loss = nn.functional.mse_loss(scores, y.to(device))
                loss.backward()
                optimizer.step()
                total = loss.item()
                for head in heads:
                    scores = scores * head
                peak = scores.max().item()
                for row in range(3):
                    print((loss * row).item())
                scaled = [(loss * row).item() for row in range(3)]
    """) == ["16:17 GPU303", "19:16 GPU303", "21:19 GPU303", "22:19 GPU303"]


def test_reads_of_the_same_minimum_and_per_sample_lengths_in_a_nested_loop_join_the_first_read():
    # StyleTTS2: the minimum read twice, then each sample's length read while clips are sliced and copied
    body = """\
        def train(loader, max_len):
            for x, lengths, waves in loader:
                lengths = lengths.to(device)
                out = model(x.to(device))
                mel_len = min(int(lengths.min().item() / 2 - 1), max_len // 2)
                mel_len_st = int(lengths.min().item() / 2 - 1)
                clips, wav = [], []
                for b in range(len(lengths)):
                    length = int(lengths[b].item() / 2)
                    start = np.random.randint(0, length - mel_len)
                    clips.append(out[b, :, start:start + mel_len])
                    wav.append(torch.from_numpy(waves[b][start:start + mel_len]).to(device))
                loss = nn.functional.mse_loss(torch.stack(clips), torch.stack(wav))
                loss.backward()
                optimizer.step()
    """
    assert gpu303(body) == ["14:27 GPU303"]
    [d] = diagnostics(HEADER + textwrap.dedent(body), select=("GPU303",))
    assert d.message == (
        "`lengths.min().item()` waits for the GPU every training step (loop at line 11), as do the reads after it"
        " at lines 15 and 18 (only light GPU work queued in between: one wait)"
    )
    assert [(text, where.row) for text, where in d.related][1:] == [
        ("then `lengths.min().item()`, with only light GPU work queued since", 15),
        ("then `lengths[b].item()`, with only light GPU work queued since", 18),
    ]


# ---- reads that wait for new work, or do not surely follow the first: still their own findings -----------


def test_a_read_after_backward_and_the_optimizer_step_is_its_own_finding():
    # the Fabric example: the loss read before backward, and again after the step
    assert gpu303("""\
        def train(loader):
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                print(loss.item())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                print(loss.item())
    """) == ["13:15 GPU303", "17:15 GPU303"]


def test_a_forward_or_an_unknown_call_between_the_reads_keeps_both():
    assert gpu303("""\
        def train(loader, helper):
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                a = loss.item()
                val = model(y.to(device)).mean()
                b = val.item()
                c = helper(val)
                d = val.item()
                e = (val @ val.T).sum()
                f = val.item()
    """) == ["15:13 GPU303", "17:13 GPU303", "19:13 GPU303", "21:13 GPU303"]


def test_a_read_in_a_branch_does_not_start_a_run():
    # `print` under `if verbose:` and the read of a conditional expression may not run: the read after each waits
    assert gpu303("""\
        def train(loader, verbose):
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                if verbose:
                    print(loss.item())
                total = loss.item()

        def train_quietly(loader, verbose):
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                last = loss.item() if verbose else 0
                total = loss.item()
    """) == ["16:19 GPU303", "17:17 GPU303", "24:16 GPU303", "25:17 GPU303"]


def test_a_read_before_the_step_loop_does_not_start_a_run():
    assert gpu303("""\
        def train(loader, scale):
            s = scale.to(device).sum().item()
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                print(loss.item())
    """) == ["16:15 GPU303"]


def test_a_read_in_the_test_of_an_if_and_in_a_with_block_start_a_run():
    # minGPT's trainer: `if self.tokens < warmup:` on a GPU counter, then `float(self.tokens)` in both branches
    assert gpu303("""\
        def train(loader, warmup):
            tokens = torch.zeros((), device=device)
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                tokens += (y.to(device) >= 0).sum()
                with torch.no_grad():
                    seen = tokens.item()
                if tokens < warmup:
                    lr_mult = float(tokens) / warmup
                else:
                    lr_mult = float(tokens - warmup) / warmup
    """) == ["19:20 GPU303"]


def test_a_read_in_a_with_block_before_the_backward_pass_does_not_join_the_read_after_it():
    assert gpu303("""\
        def train(loader):
            for x, y in loader:
                with torch.autocast("cuda"):
                    loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                    first = loss.item()
                loss.backward()
                optimizer.step()
                second = loss.item()
    """) == ["14:21 GPU303", "17:18 GPU303"]


def test_pythons_sum_over_a_gpu_tensor_after_the_loss_read_is_its_own_finding():
    # wandb's dropout notebook: `int(sum(predictions == target))` launches one add per element of the batch
    assert gpu303("""\
        def train(loader):
            correct = 0
            for x, y in loader:
                output = model(x.to(device))
                loss = nn.functional.cross_entropy(output, y.to(device))
                loss.backward()
                optimizer.step()
                total = loss.item()
                scores, predictions = torch.max(output.data, 1)
                correct += int(sum(predictions == y.to(device)))
    """) == ["17:17 GPU303", "19:20 GPU303"]


def test_reads_in_the_branches_of_an_if_on_the_same_tensor_join_the_test():
    # minGPT's trainer: `if self.tokens < warmup:`, then `float(self.tokens)` in either branch
    assert gpu303("""\
        class Trainer:
            def train(self, loader, warmup):
                self.tokens = torch.zeros((), device=device)
                for x, y in loader:
                    loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                    loss.backward()
                    optimizer.step()
                    self.tokens += (y.to(device) >= 0).sum()
                    if self.tokens < warmup:
                        lr_mult = float(self.tokens) / warmup
                    else:
                        lr_mult = float(self.tokens - warmup) / warmup
    """) == ["18:16 GPU303"]



def test_a_metric_read_after_a_read_under_an_if_is_its_own_finding():
    # the loss read only when `verbose`: on the other steps the metric's read is the one that waits for the step
    assert gpu303("""\
        def train(loader, verbose):
            for x, y in loader:
                scores = model(x.to(device))
                loss = nn.functional.cross_entropy(scores, y.to(device))
                loss.backward()
                optimizer.step()
                if verbose:
                    print(loss.item())
                correct = (scores.argmax(1) == y.to(device)).sum().item()
    """) == ["17:19 GPU303", "18:19 GPU303"]


def test_pythons_max_of_two_values_after_a_read_joins_the_run():
    # stylegan3's translation helpers: `max(iy, 0)` compares a GPU scalar with a number (one read), it walks nothing:
    # a slice bound computed so right after the `if` on the same shifts waits for a scalar kernel, not for the step
    source = """\
        def train(loader):
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                iy = (loss * 8).floor().long()
                if abs(iy) < 8:
                    y = y[max(-iy, 0):8 + min(-iy, 0)]
    """
    assert gpu303(source) == ["16:12 GPU303"]
    # `max(tensor)` walks the GPU tensor: a kernel and a read per element, its own finding
    assert gpu303(source.replace("y = y[max(-iy, 0):8 + min(-iy, 0)]", "top = int(max(y.to(device)))")) == [
        "16:12 GPU303", "17:19 GPU303",
    ]
