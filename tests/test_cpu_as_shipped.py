"""A notebook that runs on the CPU as shipped (`analysis/cpu_as_shipped.py`): its GPU-setup cell writes
`use_gpu = False`, a function of the notebook returns `torch.device("cuda")` only when that flag is true, the flag
reaches it through the notebook's own dicts (`gpu['use'] = use_gpu; config['gpu'] = gpu; main(True, config)`),
and the branch that would read the flag from a JSON file never runs in a notebook (`notebook_mode = in_ipynb()`).
No batch reaches a GPU, so the rules that need GPU context stay silent. `use_gpu = True`, a flag chosen at run
time, a store that may change it, any other GPU evidence, and the same code as a script keep the findings.

The repros are minimal shapes of our own (issue 13, eleventh corpus class N1: a graph-network benchmark's
notebooks with a notebook mode and a terminal mode).
"""

from __future__ import annotations

import pytest

from tests.conftest import diagnostics
from tests.test_notebooks import check, notebook

IMPORTS = """\
import json

import torch
from torch.utils.data import DataLoader
"""

PROBE = """\
def in_ipynb():
    try:
        cfg = get_ipython().config
        return True
    except NameError:
        return False


notebook_mode = {mode}
"""

SETUP = """\
def gpu_setup(use_gpu, gpu_id):
    if torch.cuda.is_available() and use_gpu:
        device = torch.device("cuda")
    else:
        device = torch.device("cpu")
    return device


use_gpu = {flag}; gpu_id = -1; device = None
"""

PIPELINE = """\
def train_val_pipeline(dataset, params, net_params):
    device = net_params['device']
    if device.type == 'cuda':
        torch.cuda.manual_seed(params['seed'])
    model = torch.nn.Linear(16, 2).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    loader = DataLoader(dataset, batch_size=params['batch_size'], shuffle=True)
    for epoch in range(params['epochs']):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""

MAIN = """\
def main(notebook_mode=False, config=None):
    if notebook_mode == False:
        with open('config.json') as f:
            config = json.load(f)
        config['gpu']['use'] = True
        device = gpu_setup(config['gpu']['use'], config['gpu']['id'])
    if notebook_mode:
        device = gpu_setup(config['gpu']['use'], config['gpu']['id'])
    net_params = config['net_params']
    net_params['device'] = device
    train_val_pipeline(dataset, config['params'], net_params)
"""

RUN = """\
if notebook_mode == True:
    config = {{}}
    gpu = {{}}
    gpu['use'] = use_gpu
    gpu['id'] = gpu_id
    config['gpu'] = gpu
    config['params'] = {{'seed': 41, 'epochs': 100, 'batch_size': 128}}
    config['net_params'] = {{}}
{extra}    main(True, config)
else:
    main()
"""


def codes(
    flag: str = "False", mode: str = "in_ipynb()", extra: str = "", more: str = "", path: str = "bench.ipynb", probe: str = PROBE,
    pipeline: str = PIPELINE,
) -> list[str]:
    data = "from data import LoadData\ndataset = LoadData('CSL').train\n" + more
    cells = [IMPORTS, probe.format(mode=mode), SETUP.format(flag=flag), data, pipeline, MAIN, RUN.format(extra=extra)]
    if path.endswith(".ipynb"):
        return [d.code for d in check(notebook(*cells), path).diagnostics]
    return [d.code for d in diagnostics("\n\n".join(cells), path)]


def test_notebook_on_the_cpu_as_shipped_gets_no_gpu_findings() -> None:
    assert codes() == []


@pytest.mark.parametrize(
    ("flag", "mode", "extra", "more"),
    [
        ("True", "in_ipynb()", "", ""),  # the GPU-setup cell turns the GPU on
        ("torch.cuda.is_available()", "in_ipynb()", "", ""),  # chosen at run time
        ("False", "in_ipynb()", "    config['gpu']['use'] = True\n", ""),  # stored again before the call
        ("False", "in_ipynb()", "    gpu.update(use=True)\n", ""),  # changed in place
        ("False", "in_ipynb()", "    print(gpu)\n", ""),  # handed to a function that is not the notebook's
        ("False", "False", "", ""),  # terminal mode: the flag comes from config.json
        ("False", "len(__file__) > 0", "", ""),  # not known which mode runs
        ("False", "in_ipynb()", "", "probe = torch.zeros(1).cuda()\n"),  # other GPU evidence
        ("False", "in_ipynb()", "", "device = get_device()\n"),  # a device from a getter
    ],
)
def test_gpu_on_or_not_known_keeps_the_findings(flag: str, mode: str, extra: str, more: str) -> None:
    assert "GPU101" in codes(flag, mode, extra, more)


def test_a_script_with_the_same_code_keeps_the_findings() -> None:
    # A script's functions are API and its settings come at launch: only notebooks are read this way.
    assert "GPU101" in codes(path="bench.py")




def test_a_probe_that_may_return_false_in_a_notebook_decides_nothing() -> None:
    # `return False` before the `return True`: not known to be True in the notebook, so the terminal mode may run.
    probe = PROBE.replace("        return True\n", "        if cfg is None:\n            return False\n        return True\n")
    assert "GPU101" in codes(probe=probe)



def test_evidence_in_the_else_of_a_cuda_question_counts() -> None:
    seeded = "        torch.cuda.manual_seed(params['seed'])\n"
    pipeline = PIPELINE.replace(seeded, seeded + "    else:\n        probe = torch.zeros(1).cuda()\n")
    assert "GPU101" in codes(pipeline=pipeline)


SMALL_PIPELINE = """\
def train_val_pipeline(dataset, params, net_params):
    device = net_params['device']
    model = torch.nn.Linear(16, 2).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    loader = DataLoader(dataset, batch_size=params['batch_size'], shuffle=True)
    for epoch in range(params['epochs']):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_other_gpu_evidence_that_runs_keeps_the_findings_in_a_small_notebook() -> None:
    # Few evidence lines (the large pipeline above fills the summary's evidence list, which alone keeps GPU
    # context): here the module-level `.cuda()` itself must be what keeps the findings.
    assert codes(pipeline=SMALL_PIPELINE) == []
    assert codes(more="probe = torch.zeros(1).cuda()\n", pipeline=SMALL_PIPELINE) == ["GPU101", "GPU102"]
