"""Issue 13, the seventh corpus's one-off noise left by noiseoneoff (docs/precision.md, section oneoff2):

- a probe that runs a few batches for each of a few batch sizes, once (nanoVLM's `measure_vram.py`), copies a
  handful of batches in all (`loop_bounds.runs_a_few_times`): GPU105's blocking copy costs nothing there; a list
  the user types as one string (`--batch_sizes "1 2 4 8"`) has as many items as its default has words;
- a `DataParallel` wrapper handed to a project function that feeds it one image per forward, in another module
  (RetinaNet's `evaluate_coco`), spreads nothing (`parallel._forwards_of_callee`);
- a lesson whose CUDA device is only printed trains on the CPU as shipped (`loader_flow._only_printed`).

Next to each, the same code in real work stays found.
"""

from __future__ import annotations

import libcst as cst
import pytest

from gpulint.analysis.loop_bounds import trip_count
from gpulint.analysis.model import SemanticModel
from tests.conftest import findings
from tests.projects_helper import found, lint, write

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

PROBE = """\
import argparse

import torch
from torch.utils.data import DataLoader

from data import ImageSet


def measure(args, model, dataset):
    sizes = [int(b) for b in args.batch_sizes.split()]
    for bs in sizes:
        loader = DataLoader(dataset, batch_size=bs, num_workers=4, pin_memory=True)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        torch.cuda.reset_peak_memory_stats()
        for i, (x, y) in enumerate(loader):
            if i >= args.num_iterations:
                break
            x = x.to("cuda")
            y = y.to("cuda")
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        print(bs, torch.cuda.max_memory_allocated())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_sizes", type=str, default="1 2 4 8 16 32 64 128 256 512")
    parser.add_argument("--num_iterations", type=int, default=2)
    args = parser.parse_args()
    model = torch.hub.load("pytorch/vision", "resnet50").cuda()
    measure(args, model, ImageSet("data/"))


if __name__ == "__main__":
    main()
"""

COPIES = ["18:17 GPU105", "19:17 GPU105"]  # `x.to("cuda")`, `y.to("cuda")`


def gpu105(source: str) -> list[str]:
    return findings(source, select=("GPU105",))


def test_a_list_typed_as_one_string_has_as_many_items_as_its_default_has_words():
    model = SemanticModel(cst.parse_module(PROBE), "probe.py", PROBE)
    outer = next(loop for loop in model.loops if isinstance(loop, cst.For) and model.code(loop.iter) == "sizes")
    assert trip_count(model, outer) == 10


def test_a_probe_of_two_batches_per_batch_size_run_once_is_silent():
    assert gpu105(PROBE) == []


def test_the_same_copies_in_a_training_loop_over_the_whole_loader_stay():
    training = PROBE.replace("            if i >= args.num_iterations:\n                break\n", "")
    assert gpu105(training) == ["16:17 GPU105", "17:17 GPU105"]


def test_a_probe_of_many_steps_per_size_stays():
    assert gpu105(PROBE.replace("default=2)", "default=100)")) == COPIES


def test_a_probe_run_every_epoch_stays():
    per_epoch = PROBE.replace(
        '    measure(args, model, ImageSet("data/"))\n',
        '    for epoch in range(100):\n        measure(args, model, ImageSet("data/"))\n',
    )
    assert gpu105(per_epoch) == COPIES


def test_a_probe_only_another_module_calls_stays():
    assert gpu105(PROBE.replace('    measure(args, model, ImageSet("data/"))\n', "    return args, model\n")) == COPIES


# ---- DataParallel handed to an evaluation function of another module that feeds one image at a time ----------

EVAL_TOOL = """\
import torch


def _detections(dataset, net):
    found = []
    for index in range(len(dataset)):
        img = dataset[index]["img"]
        with torch.no_grad():
            scores = net(img.permute(2, 0, 1).cuda().float().unsqueeze(dim=0))
        found.append(scores.cpu())
    return found


def evaluate(dataset, model, threshold=0.05):
    model.eval()
    return _detections(dataset, model)
"""

VALIDATE = """\
import torch

from data import CocoDataset
from tools import eval_tool
from models import resnet50

dataset = CocoDataset("coco/", set_name="val2017")
net = resnet50(num_classes=80).cuda()
net = torch.nn.DataParallel(net).cuda()
net.eval()
eval_tool.evaluate(dataset, net)
"""


def dp_findings(tmp_path, monkeypatch, files: dict[str, str]) -> list[str]:
    return sorted(f for f in found(lint(write(tmp_path, files), monkeypatch, select=("GPU401",))))


def test_data_parallel_handed_to_a_function_of_another_module_that_feeds_one_image_is_silent(tmp_path, monkeypatch):
    assert dp_findings(tmp_path, monkeypatch, {"tools/__init__.py": "", "tools/eval_tool.py": EVAL_TOOL, "validate.py": VALIDATE}) == []


# The script goes on to fine-tune the wrapper: an evaluation-only script is silent whatever it feeds
# (`inference_tools.only_runs_inference`, tests/test_steps_that_wait_anyway.py).
FINE_TUNE = "optimizer = torch.optim.SGD(net.parameters(), lr=0.1)\nnet(images).sum().backward()\noptimizer.step()\n"


def test_data_parallel_handed_to_a_function_that_feeds_batches_stays(tmp_path, monkeypatch):
    batched = EVAL_TOOL.replace('img.permute(2, 0, 1).cuda().float().unsqueeze(dim=0)', 'img.cuda().float()')
    files = {"tools/__init__.py": "", "tools/eval_tool.py": batched, "validate.py": VALIDATE + FINE_TUNE}
    assert dp_findings(tmp_path, monkeypatch, files) == ["validate.py:9 GPU401"]
    files["validate.py"] = VALIDATE
    assert dp_findings(tmp_path, monkeypatch, files) == []  # an evaluation tool: nothing to all-reduce
    # one forward of a batch beside the single image
    mixed = EVAL_TOOL + "\n\ndef score_all(model, batch):\n    return _detections([], model), model(batch.cuda())\n"
    files = {"tools/__init__.py": "", "tools/eval_tool.py": mixed, "validate.py": VALIDATE + "eval_tool.score_all(net, None)\n" + FINE_TUNE}
    assert dp_findings(tmp_path, monkeypatch, files) == ["validate.py:9 GPU401"]


def test_data_parallel_handed_to_an_unknown_function_or_trained_stays(tmp_path, monkeypatch):
    files = {"tools/__init__.py": "", "tools/eval_tool.py": EVAL_TOOL, "validate.py": VALIDATE + "trainer.fit(net)\n"}
    assert dp_findings(tmp_path, monkeypatch, files) == ["validate.py:9 GPU401"]
    training = VALIDATE + (
        "opt = torch.optim.SGD(net.parameters(), lr=0.01)\n"
        "for epoch in range(10):\n"
        "    for x, y in loader:\n"
        "        loss = net(x.cuda()).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
    )
    files = {"tools/__init__.py": "", "tools/eval_tool.py": EVAL_TOOL, "validate.py": training}
    assert dp_findings(tmp_path, monkeypatch, files) == ["validate.py:9 GPU401"]


# ---- a CPU lesson that only prints the device it would use ---------------------------------------------------

CPU_LESSON = """\
import torch
import torchvision
import torchvision.transforms as transforms

transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
trainset = torchvision.datasets.CIFAR10(root="./data", train=True, download=True, transform=transform)
trainloader = torch.utils.data.DataLoader(trainset, batch_size=4, shuffle=True, num_workers=2)
net = Net()
optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
for epoch in range(2):
    for inputs, labels in trainloader:
        optimizer.zero_grad()
        loss = criterion(net(inputs), labels)
        loss.backward()
        optimizer.step()

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
print(device)
"""


def test_a_lesson_that_only_prints_its_cuda_device_trains_on_the_cpu():
    assert findings(CPU_LESSON, select=("GPU103",)) == []


def test_a_device_used_for_anything_but_printing_is_a_gpu_run():
    moved = CPU_LESSON.replace("print(device)\n", "print(device)\nnet.to(device)\n")
    assert findings(moved, select=("GPU103",)) == ["7:15 GPU103"]
    formatted = CPU_LESSON.replace("print(device)\n", "print(device)\nrun(net, device)\n")
    assert findings(formatted, select=("GPU103",)) == ["7:15 GPU103"]
