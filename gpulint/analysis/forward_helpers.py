"""Functions a model's `forward` runs on every call: per-step code in a helper module.

Research code keeps small tensor helpers in a `commons.py` / `utils.py` and calls them from the `forward`
of its modules, in another file (`ids_str = torch.rand([b]).to(device=x.device)` in vits'
`commons.rand_slice_segments`, called by `SynthesizerTrn.forward`; tacotron2's `get_mask_from_lengths`,
called by `Decoder.forward`). A factory or a legacy constructor there runs once per forward pass, as it
would in the `forward` itself (`step_code.per_step` gives both the FORWARD role). Only a call in the
`forward` of an `nn.Module` subclass that is not under a `step % N` guard counts; a function only reached
from `__init__`, from a script's set-up, or from another helper is one-time code as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulint.analysis.summary import MODULE_BODY

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

# Library classes that are `nn.Module`s, which projects subclass for their layers: PyG's message passing layers
# (torch_geometric/nn/conv/message_passing.py: `class MessagePassing(torch.nn.Module)`), whose `forward` runs per call.
LIBRARY_MODULES = frozenset({
    "torch_geometric.nn.MessagePassing", "torch_geometric.nn.conv.MessagePassing",
    "torch_geometric.nn.conv.message_passing.MessagePassing",
})  # fmt: skip


def forward_called(index: ProjectIndex, record: ModuleRecord) -> dict[str, str]:
    """The functions of `record` (not methods) that a model's `forward` calls, unguarded, in this module or
    another -> where (`models.py:512`)."""
    found: dict[str, str] = {}
    for key in record.summary.functions:
        if "." in key or key == MODULE_BODY:
            continue
        for caller, caller_key, position in index.callers(record, key):
            owner, _, method = caller_key.partition(".")
            call = caller.summary.functions[caller_key].calls[position]
            if method == "forward" and not call[5] and index.is_module_class(caller, owner):
                found[key] = f"{caller.shown}:{call[1]}"
                break
    return found
