"""GPU context: does a module put values on an accelerator, from facts about it and the project around it.

Evidence comes from several sources, combined in `gpu_context_reason`:

1. the module's own code (`summary.py` records it while reading the file with `ast`): `.cuda()`, a CUDA
   device (`"cuda:0"`, `f"cuda:{rank}"`, `torch.device("cuda")`), a device chosen at run time
   (`torch.device(args.device)`, `"cuda" if torch.cuda.is_available() else "cpu"`), `torch.cuda.*`,
   `torch.accelerator.*`, a `local_rank` / `gpu_id` used as a device, and whatever `EVIDENCE_FINDERS` add;
2. the project (`project.py`): a `device` parameter that callers give a CUDA device, a project value
   used as a device (`from config import device`), values this module builds that are moved to the GPU
   elsewhere (a model class, a loader whose batches are copied), loaders that feed a GPU training loop,
   a class derived through project classes from a library class that `BASE_EVIDENCE` names.

Another analysis adds its own evidence in two places: a finder in `EVIDENCE_FINDERS` (it gets the module's
`ast` tree and a function that resolves imported names, and yields `(what, line)`), and the words its
evidence is always spelled with in `GPU_TEXT_MARKERS` (a module whose text has none of them is never
scanned, so a finder must not find evidence without one of its words); and, for classes derived from a
library class in another module, a function in `BASE_EVIDENCE`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable, Iterable, Optional

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Every module with GPU evidence of its own contains one of these words.
GPU_TEXT_MARKERS: list[str] = ["cuda", "device", "accelerator", "rank", "gpu"]

# Library calls that return the model they are given moved to the GPU (where there is one): ignite/distributed/auto.py
# (0.4-0.5) `auto_model(model)` runs `model.to(idist.device())`, then wraps it for the run's processes.
MODEL_PLACERS = frozenset({"ignite.distributed.auto_model", "ignite.distributed.auto.auto_model"})

# `finder(tree, qualify) -> [(what, line), ...]`: extra evidence of GPU use in one module's own code.
# `qualify(node)` is the import-resolved dotted name of a Name/Attribute (`torch.cuda.is_available`), or None.
EvidenceFinder = Callable[[ast.Module, Callable[[ast.AST], Optional[str]]], Iterable[tuple[str, int]]]
EVIDENCE_FINDERS: list[EvidenceFinder] = []
# `evidence(base) -> what`: a library class (`lightning.LightningModule`) whose subclasses are GPU code, also
# when the subclass derives from it through project classes in other modules (`project.inherited_bases`).
BASE_EVIDENCE: list[Callable[[str], Optional[str]]] = []


def may_have_own_evidence(text: str) -> bool:
    """False when no GPU evidence can be in this text (the cheap test before `ast` reads it)."""
    return any(marker in text for marker in GPU_TEXT_MARKERS)


def gpu_context_reason(own: list[tuple[str, int]], project: Iterable[str]) -> Optional[str]:
    """Why a module is GPU code: its own evidence first (`what` at line N), then what the project says; None
    when nothing does."""
    for what, line in own:
        return f"{what} at line {line}"
    for reason in project:
        return reason
    return None


def module_uses_cuda(model: SemanticModel) -> bool:
    """GPU context of the module the model describes, as its project context says, unless it is a notebook
    that runs on the CPU as shipped (`use_gpu = False` in its GPU-setup cell: `analysis/cpu_as_shipped.py`)."""
    from gpulint.analysis.cpu_as_shipped import runs_on_cpu_as_shipped

    return model.project.gpu and not runs_on_cpu_as_shipped(model)
