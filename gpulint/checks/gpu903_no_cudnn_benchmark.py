"""GPU903 no-cudnn-benchmark (preview): a conv net trained on CUDA with cuDNN's heuristic algorithm choice."""

from __future__ import annotations

from typing import Iterator

from gpulint.analysis.frameworks import lightning_1_trainer
from gpulint.analysis.loader_bound import training_waits_on_loaders
from gpulint.analysis.matmul_work import launch_bound_training, small_network_steps
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import add_torch_setting

STATEMENT = "{torch}.backends.cudnn.benchmark = True"


class NoCudnnBenchmark(Rule):
    code = "GPU903"
    name = "no-cudnn-benchmark"
    summary = "Convolutional model trained on CUDA without `torch.backends.cudnn.benchmark = True`"
    preview = True
    fix_applicability = Applicability.UNSAFE
    requires = (r"Conv|torchvision|Trainer|create_model|hub\.load|from_pretrained",)  # a library conv net by name
    project_tags = ("builds-convolutions",)  # a model class or factory of another module
    default_severity = Severity.INFO

    def check(self) -> Iterator[Diagnostic]:
        setup = self.model.training_setup
        if not setup.convolutions or setup.cudnn_configured:
            return
        if setup.cuda_training_script and launch_bound_training(self.model):
            return  # kernels of a few microseconds: a faster convolution algorithm shortens nothing
        if small_network_steps(self.model):
            return  # an ImageNet network on CIFAR-size images: a host-bound step of small kernels
        if training_waits_on_loaders(self.model):
            return  # workers decoding photographs set the pace: a faster step waits for them just the same
        if setup.cuda_training_script:
            # `cudnn.benchmark = False` is the line to change; otherwise the model's move to CUDA
            anchors = [setup.cudnn_benchmark_off or setup.model_moves[0]]
        else:  # Lightning places the model itself: its Trainer is where the run is configured
            anchors = self.model.frameworks.cudnn_heuristics[:1]
        off = setup.cudnn_benchmark_off
        for anchor in anchors:
            message = "a convolutional model trains on CUDA with cuDNN's heuristic algorithm choice"
            help = (
                "Set `torch.backends.cudnn.benchmark = True` at start-up to time the algorithms once per input shape "
                "and keep the fastest (for fixed input shapes)"
            )
            edit = add_torch_setting(self.model, STATEMENT)
            fix = self.fix("Enable the cuDNN autotuner after the imports", [edit], Applicability.UNSAFE)
            if off is not None:  # a start-up `benchmark = True` would be written over: that line itself must change
                setting = self.model.code(off.targets[0].target)
                where = "" if anchor is off else f" (line {self.model.line_of(off)})"
                message = f"a convolutional model trains on CUDA with `{setting} = False`{where}, cuDNN's heuristic algorithm choice"
                help = (
                    f"`False` is torch's default, not a request for reproducibility (that is `cudnn.deterministic`); set "
                    f"`{setting} = True` to time the algorithms once per input shape and keep the fastest (for fixed input shapes)"
                )
                fix = None
            if anchor not in setup.model_moves and anchor is not off:
                message = f"{message} (the Lightning Trainer leaves `benchmark` unset)"
                help = f"Pass `benchmark=True` to the Trainer, or s{help[1:]} (Lightning 1.6 and later keep it)"
                if off is not None:
                    help = (
                        f"Pass `benchmark=True` to the Trainer, or set `{setting} = True` instead of `False` (torch's "
                        "default, not a request for reproducibility, which is `cudnn.deterministic`)"
                    )
                if lightning_1_trainer(anchor):
                    fix = None  # Lightning before 1.6 writes its own `benchmark=False` over a start-up setting
            yield self.diagnostic(anchor, message, fix=fix, help=help)
