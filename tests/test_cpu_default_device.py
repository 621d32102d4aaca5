"""`cpu_as_shipped.device_parameter_on_cpu`: a training function whose `device` parameter defaults to the CPU and
that every call leaves so runs on the CPU as shipped (`loader_flow.moved_to_cpu_as_shipped`: GPU101 silent)."""

from __future__ import annotations

from tests.conftest import findings


# A training function whose `device` parameter defaults to the CPU and that every call of the notebook (or the
# project) leaves so: its loops copy the batches to the CPU as shipped (`cpu_as_shipped.device_parameter_on_cpu`,
# `loader_flow.moved_to_cpu_as_shipped`): GPU101 has no GPU to keep busy (seventeenth corpus, both judges: the
# lesson "runs on the cpu default device"). A notebook (here one kept as a script, `# %%` cells); a plain script's
# functions are API unless other modules call them. Negatives: one call that passes `device="cuda"`, and a function that
# nobody calls (API: any device may come).
CPU_DEFAULT = """\
    # %%
    import torch
    import torchvision
    from torchvision import transforms
    from torch.utils.data import DataLoader


    def train_simple_network(model, loss_func, training_loader, epochs=20, device="cpu"):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
        model.to(device)
        for epoch in range(epochs):
            for inputs, labels in training_loader:
                inputs = inputs.to(device)
                labels = labels.to(device)
                loss = loss_func(model(inputs), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


    data = torchvision.datasets.ImageFolder("photos", transform=transforms.ToTensor())
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(10))
    if torch.cuda.is_available():
        print("a GPU is there")
    CALL
"""


def test_a_training_function_left_at_its_cpu_device_default_runs_on_the_cpu():
    source = CPU_DEFAULT.replace("CALL", "train_simple_network(model, torch.nn.CrossEntropyLoss(), loader, epochs=5)")
    assert findings(source, select=("GPU101",)) == []


def test_a_call_that_passes_a_gpu_device_keeps_the_finding():
    call = 'train_simple_network(model, torch.nn.CrossEntropyLoss(), loader, epochs=5, device="cuda")'
    assert findings(CPU_DEFAULT.replace("CALL", call), select=("GPU101",)) == ["22:10 GPU101"]


def test_a_device_parameter_of_a_function_nobody_calls_is_open():
    source = CPU_DEFAULT.replace("CALL", "for x, y in loader:\n        model(x.to('cuda'))")
    assert findings(source, select=("GPU101",)) == ["22:10 GPU101"]


# The same fact across modules: `helpers.train` defaults `device` to the CPU and the project's only call leaves it
# (`ModuleContext.arguments`, from the module summaries); a call that gives "cuda" keeps the finding.
HELPER = """
import torch
import torchvision
from torchvision import transforms
from torch.utils.data import DataLoader


def train(root, epochs=10, device=torch.device("cpu")):
    data = torchvision.datasets.ImageFolder(root, transform=transforms.ToTensor())
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(10))
    model.to(device)
    opt = torch.optim.Adam(model.parameters())
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    torch.cuda.empty_cache()
"""
MAIN = """
from helpers import train

if __name__ == "__main__":
    CALL
"""


def _lint_project(tmp_path, monkeypatch, call: str) -> list[str]:
    from tests.projects_helper import lint_written

    files = {"helpers.py": HELPER, "main.py": MAIN.replace("CALL", call)}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] == "GPU101"]


def test_a_function_the_project_calls_at_its_cpu_default_runs_on_the_cpu(tmp_path, monkeypatch):
    assert _lint_project(tmp_path, monkeypatch, 'train("photos", epochs=5)') == []


def test_a_function_the_project_calls_with_cuda_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint_project(tmp_path, monkeypatch, 'train("photos", device="cuda")') == ["helpers.py:10 GPU101"]
