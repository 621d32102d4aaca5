"""A project's own wrapper named after DeepSpeed, off by default (DALLE-pytorch's `distributed_utils`
backends, lightning-transformers' `deepspeed_sharding=False`), is not the DeepSpeed engine: the optimizer the
script builds is the one that steps, so GPU904 applies. The library itself still owns the optimizer."""

from __future__ import annotations

from tests.conftest import findings

GPU904 = {"select": ("GPU904",), "preview": True}

SCRIPT = """\
    import torch
    {imports}

    model = torch.nn.Linear(1024, 1024).cuda()
    {switch}
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    """


def run(imports: str, switch: str = "") -> list[str]:
    return findings(SCRIPT.format(imports=imports, switch=switch), **GPU904)


def test_a_project_wrapper_named_after_deepspeed_and_off_by_default_leaves_the_optimizer_to_the_script():
    wrapper = "from dalle_pytorch import distributed_utils"
    assert run(wrapper, "using_deepspeed = distributed_utils.using_backend(distributed_utils.DeepSpeedBackend)") == ["6:7 GPU904"]
    assert run("from project.utilities.deepspeed import enable_sharding", "deepspeed_sharding = False") == ["6:7 GPU904"]


def test_the_deepspeed_library_or_accelerate_engine_names_still_own_the_optimizer():
    assert run("import deepspeed") == []
    assert run("from deepspeed.ops.adam import FusedAdam") == []
    assert run("from accelerate.utils import DummyOptim") == []
    assert run("from accelerate import Accelerator", "print(Accelerator().state.deepspeed_plugin)") == []
