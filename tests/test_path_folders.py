"""Source folders a run script puts on `PYTHONPATH` together (`analysis/path_folders.py`): `src/solver/solver.py`
writes `from loss import cal_performance` for `src/transformer/loss.py` (fifteenth corpus, a speech Transformer whose
`path.sh` exports `src/transformer/` and `src/solver/`). The project resolves the bare import to the one module of
that name in a sibling folder, so the loss helper's per-step `.item()` is reported at the call in the training
loop. Two sibling modules of that name are not guessed between, and a loss helper without reads stays silent."""

from __future__ import annotations

from tests.projects_helper import lint_written

SOLVER = """\
import torch

from loss import cal_performance


def train(model, loader, optimizer):
    model = model.cuda()
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        pred = model(x)
        loss, n_correct = cal_performance(pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

READING_LOSS = """\
import torch.nn.functional as F


def cal_performance(pred, gold):
    loss = F.cross_entropy(pred, gold)
    n_correct = pred.argmax(1).eq(gold).sum().item()
    return loss, n_correct
"""

QUIET_LOSS = """\
import torch.nn.functional as F


def cal_performance(pred, gold):
    loss = F.cross_entropy(pred, gold)
    n_correct = pred.argmax(1).eq(gold).sum()
    return loss, n_correct
"""


def test_bare_import_of_a_sibling_folders_module_reports_its_read_at_the_call(tmp_path, monkeypatch):
    files = {"src/solver/solver.py": SOLVER, "src/transformer/loss.py": READING_LOSS, "src/transformer/__init__.py": ""}
    assert lint_written(tmp_path, files, monkeypatch) == ["src/solver/solver.py:11 GPU303"]


def test_two_sibling_modules_of_that_name_are_not_guessed_between(tmp_path, monkeypatch):
    files = {"src/solver/solver.py": SOLVER, "src/transformer/loss.py": READING_LOSS, "src/asr/loss.py": READING_LOSS}
    assert lint_written(tmp_path, files, monkeypatch) == []


def test_a_sibling_loss_helper_without_reads_is_silent(tmp_path, monkeypatch):
    files = {"src/solver/solver.py": SOLVER, "src/transformer/loss.py": QUIET_LOSS}
    assert lint_written(tmp_path, files, monkeypatch) == []


def test_the_importers_own_folder_comes_first(tmp_path, monkeypatch):
    # `src/solver/loss.py` is the module Python imports: the sibling folder's reading loss is not it
    files = {"src/solver/solver.py": SOLVER, "src/solver/loss.py": QUIET_LOSS, "src/transformer/loss.py": READING_LOSS}
    assert lint_written(tmp_path, files, monkeypatch) == []


def test_a_package_without_the_name_falls_back_to_the_sibling_folders_module(tmp_path, monkeypatch):
    # `src/utils/` is a package (found walking up from `src/solver/`) that does not define `cal_performance`; with
    # the sibling folders on the path, `utils` is `src/utils/utils.py`, which does
    solver = SOLVER.replace("from loss import", "from utils import")
    files = {"src/solver/solver.py": solver, "src/utils/__init__.py": "", "src/utils/utils.py": READING_LOSS}
    assert lint_written(tmp_path, files, monkeypatch) == ["src/solver/solver.py:11 GPU303"]


def test_a_package_that_defines_the_name_is_the_one_imported(tmp_path, monkeypatch):
    solver = SOLVER.replace("from loss import", "from utils import")
    files = {"src/solver/solver.py": solver, "src/utils/__init__.py": QUIET_LOSS, "src/utils/utils.py": READING_LOSS}
    assert lint_written(tmp_path, files, monkeypatch) == []
