"""A class derived from a project class of another module whose own methods use the GPU is GPU code
(`analysis/project.py`, `_project_evidence`): TabNet's `TabNetClassifier(TabModel)`, whose inherited
`__post_init__` chooses a CUDA device, runs its `predict_proba` loop on that device (GPU405 there)."""

from __future__ import annotations

import textwrap

from gpulint.analysis.project import ProjectIndex
from gpulint.analysis.summary import summarize
from tests.projects_helper import lint_written

BASE = """\
    import torch
    from torch.utils.data import DataLoader


    class TabModel:
        def __post_init__(self):
            self.device = torch.device({device})

        def predict(self, X):
            self.network.eval()
            results = []
            for data in DataLoader(X, batch_size=1024):
                results.append(self.network(data.to(self.device).float()).cpu())
            return results
"""

CHILD = """\
    import torch
    from torch.utils.data import DataLoader
    from abstract_model import TabModel


    class TabNetClassifier(TabModel):
        def predict_proba(self, X):
            self.network.eval()
            results = []
            for data in DataLoader(X, batch_size=1024):
                output = self.network(data.to(self.device).float())
                results.append(torch.softmax(output, dim=1).cpu())
            return results
"""


def test_a_subclass_of_a_gpu_base_in_another_module_is_gpu_code(tmp_path, monkeypatch):
    files = {"abstract_model.py": BASE.format(device='"cuda" if torch.cuda.is_available() else "cpu"'), "tab_model.py": CHILD}
    found = lint_written(tmp_path, files, monkeypatch)
    assert "tab_model.py:11 GPU405" in found
    assert "abstract_model.py:13 GPU405" in found
    index = ProjectIndex(tmp_path, {p: summarize(p.read_text()) for p in sorted(tmp_path.glob("*.py"))})
    reason = index.context(tmp_path / "tab_model.py").gpu_reason
    assert reason == "`TabNetClassifier` derives from `TabModel` of abstract_model.py, whose `TabModel.__post_init__` uses the GPU"


def test_a_subclass_of_a_base_that_never_uses_the_gpu_is_not(tmp_path, monkeypatch):
    files = {"abstract_model.py": BASE.format(device='"cpu"'), "tab_model.py": CHILD}
    found = lint_written(tmp_path, files, monkeypatch)
    assert not any(f.startswith("tab_model.py") for f in found)
    index = ProjectIndex(tmp_path, {p: summarize(textwrap.dedent(p.read_text())) for p in sorted(tmp_path.glob("*.py"))})
    assert index.context(tmp_path / "tab_model.py").gpu_reason is None
