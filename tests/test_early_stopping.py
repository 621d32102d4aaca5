"""GPU303 on an early-stopping test (`host_reads.stops_the_run`): a read that moves a patience counter which
another test ends the run on is needed on the host (pytorch-GAT's `training_script_ppi.py` shape: one loop
for the training and validation phases, the patience test under `elif phase == VAL:`). Per-step logging,
a best-so-far record that stops nothing, a stop test in the training step and a metric summed per batch
stay reported."""

from __future__ import annotations

import textwrap

from tests.conftest import diagnostics, findings

PRELUDE = """\
import torch
from torch import nn

device = torch.device("cuda")
model = nn.Linear(512, 10).to(device)
optimizer = torch.optim.AdamW(model.parameters())
criterion = nn.CrossEntropyLoss()
TRAIN, VAL = 0, 1
BEST_LOSS = float("inf")
PATIENCE_CNT = 0


"""


def gpu303(body: str) -> list[str]:
    return findings(PRELUDE + textwrap.dedent(body), select=("GPU303",))


SHARED_PHASES = """\
def main_loop(phase, loader, epoch, patience):
    global BEST_LOSS, PATIENCE_CNT
    for batch_idx, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
        if phase == TRAIN:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        elif phase == VAL:
            if loss.item() < BEST_LOSS:
                BEST_LOSS = min(loss.item(), BEST_LOSS)
                PATIENCE_CNT = 0
            else:
                PATIENCE_CNT += 1
            if PATIENCE_CNT >= patience:
                raise Exception("Stopping the training, no more patience.")
"""


def test_a_patience_test_of_the_validation_phase_is_not_reported():
    # The test and the best-so-far record decide when the run stops: the host needs the loss to go on.
    assert gpu303(SHARED_PHASES) == []


def test_a_read_of_every_phase_beside_the_patience_test_is_still_reported():
    # pytorch-GAT's predictions copied every step, training phase included: only the validation phase stops on it.
    source = SHARED_PHASES.replace(
        "        if phase == TRAIN:\n",
        "        pred = model(x).argmax(1).cpu()\n        print(pred)\n        if phase == TRAIN:\n",
        1,
    )
    [d] = diagnostics(PRELUDE + source, select=("GPU303",))
    assert (d.location.row, d.message) == (18, "`model(x).argmax(1).cpu()` waits for the GPU every training step (loop at line 15)")


def test_an_evaluation_loop_that_breaks_on_a_patience_counter_is_not_reported():
    assert gpu303("""\
        def evaluate(loader, patience=5):
            best, bad = float("inf"), 0
            with torch.no_grad():
                for x, y in loader:
                    loss = criterion(model(x.to(device)), y.to(device))
                    if loss.item() < best:
                        best = loss.item()
                        bad = 0
                    else:
                        bad += 1
                    if bad > patience:
                        break
            return best
    """) == []


def test_a_best_so_far_record_that_stops_nothing_is_still_reported():
    # The record is saved, never ends the run: keep it on the GPU (`torch.minimum`) and read it once.
    assert gpu303("""\
        def evaluate(loader):
            best = float("inf")
            with torch.no_grad():
                for x, y in loader:
                    loss = criterion(model(x.to(device)), y.to(device))
                    if loss.item() < best:
                        best = loss.item()
                        torch.save(model.state_dict(), "best.pt")
            return best
    """) == ["18:16 GPU303"]  # (the read in its body joins the test's finding: read_runs)


def test_a_patience_counter_in_the_training_step_is_still_reported():
    # A training step that stops on the training loss: testing it every N steps would do.
    assert gpu303("""\
        def train(loader, patience=100):
            best, bad = float("inf"), 0
            for x, y in loader:
                loss = criterion(model(x.to(device)), y.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if loss.item() < best:
                    best, bad = loss.item(), 0
                else:
                    bad += 1
                if bad > patience:
                    break
    """) == ["20:12 GPU303"]  # (the read in its body joins the test's finding: read_runs)


def test_per_step_logging_of_an_expert_training_loop_is_still_reported():
    assert gpu303("""\
        def train(loader, log):
            for step, (x, y) in enumerate(loader):
                loss = criterion(model(x.to(device)), y.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                log.append(loss.item())
    """) == ["19:20 GPU303"]


def test_a_metric_summed_per_batch_over_an_evaluation_set_is_still_reported():
    assert gpu303("""\
        def evaluate(loader):
            correct = 0
            with torch.no_grad():
                for x, y in loader:
                    pred = model(x.to(device)).argmax(1)
                    correct += (pred == y.to(device)).sum().item()
            return correct
    """) == ["18:24 GPU303"]
