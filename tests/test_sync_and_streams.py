"""GPU301-GPU305: side streams that race, and host-device syncs every step."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import diagnostics, findings, fixed


def only(source: str, code: str) -> list[str]:
    return findings(source, select=(code,))


def fix(source: str, code: str, unsafe: bool = True) -> str:
    result = fixed(source, unsafe=unsafe, select=(code,))
    assert fixed(result, unsafe=unsafe, select=(code,)) == result  # idempotent
    compile(result, "train.py", "exec")
    return result


# ---- GPU301 stream-without-wait ---------------------------------------------------------------------

CUDA_NOTES_EXAMPLE = """\
import torch

cuda = torch.device("cuda")
s = torch.cuda.Stream()
A = torch.empty((100, 100), device=cuda).normal_()
with torch.cuda.stream(s):
    B = torch.sum(A)
"""


def test_gpu301_the_cuda_semantics_example():
    assert only(CUDA_NOTES_EXAMPLE, "GPU301") == ["6:6 GPU301"]
    [d] = diagnostics(CUDA_NOTES_EXAMPLE, select=("GPU301",))
    assert d.severity.value == "error" and "`A`" in d.message and "line 5" in d.message


def test_gpu301_fix_is_the_documented_correct_form():
    corrected = CUDA_NOTES_EXAMPLE.replace("with torch", "s.wait_stream(torch.cuda.current_stream())\nwith torch")
    assert fix(CUDA_NOTES_EXAMPLE, "GPU301") == corrected
    assert only(corrected, "GPU3") == []


def test_gpu301_fix_keeps_the_indentation_inside_a_function():
    source = textwrap.dedent("""\
        import torch

        side = torch.cuda.Stream()


        def step(backbone, aux_head, images):
            feats = backbone(images.cuda())
            # run the auxiliary head beside the main one
            with torch.cuda.stream(side):
                aux = aux_head(feats)
            return aux
    """)
    assert only(source, "GPU301") == ["9:10 GPU301"]
    assert fix(source, "GPU301") == source.replace(
        "    with torch", "    side.wait_stream(torch.cuda.current_stream())\n    with torch"
    )


def test_gpu301_a_wait_inside_the_block_does_nothing():
    source = CUDA_NOTES_EXAMPLE.replace("    B = ", "    s.wait_stream(torch.cuda.current_stream())\n    B = ")
    [d] = diagnostics(source, select=("GPU301",))
    assert "inside the block" in d.help and "does nothing" in d.help


def test_gpu301_with_stream_object_and_torch_alias():
    source = textwrap.dedent("""\
        import torch as th

        s = th.cuda.Stream()
        x = th.ones(3, device="cuda") * 2
        with s:
            y = x + 1
    """)
    assert only(source, "GPU301") == ["5:6 GPU301"]
    assert "s.wait_stream(th.cuda.current_stream())\nwith s:" in fix(source, "GPU301")


@pytest.mark.parametrize(
    "source",
    [
        # waited for before the block
        "s = torch.cuda.Stream()\nA = torch.ones(3, device='cuda') * 2\ns.wait_stream(torch.cuda.current_stream())\nwith torch.cuda.stream(s):\n    B = A.sum()\n",
        "s = torch.cuda.Stream()\nA = torch.ones(3, device='cuda') * 2\ntorch.cuda.synchronize()\nwith torch.cuda.stream(s):\n    B = A.sum()\n",
        "s = torch.cuda.Stream()\ne = torch.cuda.Event()\nA = torch.ones(3, device='cuda') * 2\ne.record()\ns.wait_event(e)\nwith torch.cuda.stream(s):\n    B = A.sum()\n",
        # the data prefetcher: only copies a pinned CPU batch
        "s = torch.cuda.Stream()\nbatch = next(it)\nwith torch.cuda.stream(s):\n    gpu_batch = batch.cuda(non_blocking=True)\n",
        "s = torch.cuda.Stream()\nbatch = torch.ones(3).pin_memory()\nwith torch.cuda.stream(s):\n    gpu_batch = batch.to('cuda', non_blocking=True)\n",
        # a no-op stream context, the current stream, graph capture
        "A = torch.ones(3, device='cuda') * 2\nwith torch.cuda.stream(None):\n    B = A.sum()\n",
        "A = torch.ones(3, device='cuda') * 2\nwith torch.cuda.stream(torch.cuda.current_stream()):\n    B = A.sum()\n",
        "g = torch.cuda.CUDAGraph()\nA = torch.ones(3, device='cuda') * 2\nwith torch.cuda.graph(g):\n    B = A.sum()\n",
        # Python numbers, modules, values produced in the block itself
        "s = torch.cuda.Stream()\nn = 3\nmodel = torch.nn.Linear(3, 3).cuda()\nwith torch.cuda.stream(s):\n    x = torch.ones(n, device='cuda')\n    y = model(x) * n\n",
        # a bare allocation queues no work to wait for (a reused device buffer filled on the side stream)
        "s = torch.cuda.Stream()\nbuf = torch.empty(8, device='cuda')\nfor i in range(3):\n    with torch.cuda.stream(s):\n        buf.copy_(src, non_blocking=True)\n        buf.mul_(2.0)\n",
        # produced on the same stream in an earlier block
        "s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    A = torch.ones(3, device='cuda') * 2\nwith torch.cuda.stream(s):\n    B = A.sum()\n",
    ],
)
def test_gpu301_no_finding_expected(source):
    assert only("import torch\n" + source, "GPU301") == []


# ---- GPU302 stream-result-without-wait --------------------------------------------------------------

OVERLAP = textwrap.dedent("""\
    import torch

    side = torch.cuda.Stream()


    def forward(backbone, head, aux_head, images):
        feats = backbone(images)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            aux = aux_head(feats)
        main_out = head(feats)
        return main_out.mean() + aux.mean()
""")


def test_gpu302_result_read_without_wait():
    assert only(OVERLAP, "GPU302") == ["12:30 GPU302"]
    [d] = diagnostics(OVERLAP, select=("GPU302",))
    assert d.severity.value == "error" and "record_stream" in d.help


def test_gpu302_fix_waits_just_before_the_first_use():
    assert fix(OVERLAP, "GPU302") == OVERLAP.replace(
        "    return main_out", "    torch.cuda.current_stream().wait_stream(side)\n    return main_out"
    )


def test_gpu302_fix_after_the_block_when_the_read_is_outside_its_statement_list():
    source = textwrap.dedent("""\
        import torch

        side = torch.cuda.Stream()
        x = torch.ones(3, device="cuda")
        side.wait_stream(torch.cuda.current_stream())
        if torch.cuda.is_available():
            with torch.cuda.stream(side):
                y = x * 2
        print(y)
    """)
    assert only(source, "GPU302") == ["9:7 GPU302"]
    assert fix(source, "GPU302") == source.replace("        y = x * 2\n", "        y = x * 2\n    torch.cuda.current_stream().wait_stream(side)\n")


def test_gpu302_backward_on_a_side_stream():
    source = textwrap.dedent("""\
        import torch

        s = torch.cuda.Stream()


        def step(loss, optimizer):
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                loss.backward()
            optimizer.step()
    """)
    assert only(source, "GPU302") == ["10:5 GPU302"]
    assert "torch.cuda.current_stream().wait_stream(s)\n    optimizer.step()" in fix(source, "GPU302")


PREFETCHER = textwrap.dedent("""\
    import torch


    class DataPrefetcher:
        def __init__(self, loader):
            self.loader = iter(loader)
            self.stream = torch.cuda.Stream()
            self.preload()

        def preload(self):
            try:
                self.next_input, self.next_target = next(self.loader)
            except StopIteration:
                self.next_input = None
                self.next_target = None
                return
            with torch.cuda.stream(self.stream):
                self.next_input = self.next_input.cuda(non_blocking=True)
                self.next_target = self.next_target.cuda(non_blocking=True)

        def next(self):
            torch.cuda.current_stream().wait_stream(self.stream)
            input = self.next_input
            target = self.next_target
            if input is not None:
                input.record_stream(torch.cuda.current_stream())
            if target is not None:
                target.record_stream(torch.cuda.current_stream())
            self.preload()
            return input, target
""")


def test_gpu30x_the_correct_prefetcher_is_silent():
    assert only(PREFETCHER, "GPU3") == []


def test_gpu302_prefetcher_without_the_wait():
    source = PREFETCHER.replace("        torch.cuda.current_stream().wait_stream(self.stream)\n", "")
    assert only(source, "GPU3") == ["22:17 GPU302"]  # one finding per reading function
    [d] = diagnostics(source, select=("GPU302",))
    assert d.message.startswith("`self.next_input`, `self.next_target` are produced on stream `self.stream` (line 17)")
    assert fix(source, "GPU302") == PREFETCHER


@pytest.mark.parametrize(
    "after",
    [
        "torch.cuda.current_stream().wait_stream(s)\nprint(B)\n",
        "main = torch.cuda.current_stream()\nmain.wait_stream(s)\nprint(B)\n",
        "s.synchronize()\nprint(B)\n",
        "torch.cuda.synchronize()\nprint(B)\n",
        "done = s.record_event()\ntorch.cuda.current_stream().wait_event(done)\nprint(B)\n",
        "print(B.shape)\n",  # metadata only
        "with torch.cuda.stream(s):\n    C = B * 2\n",  # read on the same stream
    ],
)
def test_gpu302_no_finding_expected(after):
    source = "import torch\ns = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    B = torch.ones(3, device='cuda')\n" + after
    assert only(source, "GPU302") == []


def test_gpu302_a_wait_inside_the_block_does_not_count():
    source = "import torch\ns = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    B = torch.ones(3, device='cuda')\n    torch.cuda.current_stream().wait_stream(s)\nprint(B)\n"
    assert only(source, "GPU302") == ["6:7 GPU302"]


# ---- GPU303 host-sync-in-loop -----------------------------------------------------------------------

TRAIN = """\
import torch
from torch import nn

device = torch.device("cuda")
model = nn.Linear(4, 2).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train(loader):
    running_loss = 0.0
    for step, (x, y) in enumerate(loader):
        out = model(x.to(device))
        loss = criterion(out, y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
{body}
"""


def train_with(body: str) -> str:
    return TRAIN.format(body=textwrap.indent(textwrap.dedent(body), " " * 8))


def test_gpu303_item_every_step():
    source = train_with("print(loss.item())\n")
    assert only(source, "GPU303") == ["18:15 GPU303"]
    [d] = diagnostics(source, select=("GPU303",))
    assert d.severity.value == "warning" and d.message.startswith("`loss.item()` waits for the GPU every training step (loop at line 12)")
    assert d.fix is None


def test_gpu303_item_under_a_logging_interval_is_fine():
    assert only(train_with("if step % 100 == 0:\n    print(loss.item())\n"), "GPU303") == []
    assert only(train_with("if (step + 1) % args.log_interval == 0:\n    print(loss.item())\n"), "GPU303") == []
    assert only(train_with("if is_logging_step:\n    print(f'{loss.item():.3f}')\n"), "GPU303") == []


def test_gpu303_running_loss_names_the_gpu_accumulator():
    source = train_with("running_loss += loss.item() * x.size(0)\n")
    [d] = diagnostics(source, select=("GPU303",))
    assert "`running_loss += loss.detach() * x.size(0)`" in d.help


@pytest.mark.parametrize(
    ("body", "expected", "named"),
    [
        ("preds = out.argmax(1).cpu().numpy()\n", "18:17", "`out.argmax(1).cpu()`"),
        ("values = out.tolist()\n", "18:18", "`out.tolist()`"),
        ("value = float(loss)\n", "18:17", "`float(loss)`"),
        ("print(loss)\n", "18:9", "`print(loss)`"),
        ("tqdm_bar.set_description(f'loss {loss}')\n", "18:41", "formatting `{loss}` in an f-string"),
        ("if torch.isnan(loss):\n    raise RuntimeError('nan')\n", "18:12", "`if torch.isnan(loss):` on a GPU tensor"),
        ("assert (out != 0).all()\n", "18:16", "`assert (out != 0).all()` on a GPU tensor"),
        ("host = out.to('cpu')\n", "18:16", "`out.to('cpu')`"),
    ],
)
def test_gpu303_each_sync_kind_is_named(body, expected, named):
    source = train_with(body)
    assert only(source, "GPU303") == [f"{expected} GPU303"]
    [d] = diagnostics(source, select=("GPU303",))
    assert d.message.startswith(named)


def test_gpu303_evaluation_loop_is_info():
    source = TRAIN.format(body="") + textwrap.dedent("""\


        def evaluate(loader):
            correct = 0
            with torch.no_grad():
                for x, y in loader:
                    correct += (model(x.to(device)).argmax(1) == y.to(device)).sum().item()
            return correct
    """)
    [d] = diagnostics(source, select=("GPU303",))
    assert d.severity.value == "info"


@pytest.mark.parametrize(
    "body",
    [
        "count = torch.tensor(3).item()\n",  # a CPU tensor
        "lr = optimizer.param_groups[0]['lr']\nprint(lr)\n",
        "n = float(step)\n",
        "ok = bool(check(loss))\n",  # a helper may return a Python bool
        "if loss is None:\n    break\n",
        "print(f'step {step}')\n",
        "try:\n    pass\nexcept RuntimeError:\n    print(loss.item())\n",
        "if step == 0:\n    print(out.shape, loss.item())\n",
        "host = out.to('cpu', non_blocking=True)\n",  # no sync (GPU205's business)
    ],
)
def test_gpu303_no_finding_expected(body):
    assert only(train_with(body), "GPU303") == []


def test_gpu303_once_per_epoch_and_after_the_loop_is_fine():
    source = textwrap.dedent("""\
        import torch

        device = torch.device("cuda")


        def fit(model, optimizer, loader, epochs):
            for epoch in range(epochs):
                total = torch.zeros((), device=device)
                for x in loader:
                    loss = model(x.to(device)).sum()
                    loss.backward()
                    optimizer.step()
                    total += loss.detach()
                print(epoch, total.item())
            return total.item()
    """)
    assert only(source, "GPU303") == []


def test_gpu303_module_moved_to_the_cpu_is_not_a_tensor_sync():
    # pytorch/examples distributed/rpc/batch: the parameter server needs the gradients on the CPU
    source = textwrap.dedent("""\
        import torch


        def train(ps, loader, loss_fn):
            m = ps.get_model().cuda()
            for inputs, labels in loader:
                loss_fn(m(inputs.cuda()), labels.cuda()).backward()
                m = ps.update([p.grad for p in m.cpu().parameters()]).cuda()
    """)
    assert only(source, "GPU303") == []


def test_gpu303_module_moved_at_module_level_and_batches_from_a_helper():
    # karpathy/nanoGPT train.py: `model.to(device)` at module level, `get_batch` returns GPU tensors
    source = textwrap.dedent("""\
        import torch

        device = "cuda"
        model = GPT(config)
        model.to(device)


        def get_batch(split):
            x, y = load(split)
            return x.to(device), y.to(device)


        @torch.no_grad()
        def estimate_loss(iters):
            model.eval()
            losses = torch.zeros(iters)
            for k in range(iters):
                X, Y = get_batch("val")
                logits, loss = model(X, Y)
                losses[k] = loss.item()
            return losses.mean()
    """)
    assert only(source, "GPU303") == ["20:21 GPU303"]
    [d] = diagnostics(source, select=("GPU303",))
    assert d.severity.value == "info"


# ---- GPU304 synchronize-in-loop ---------------------------------------------------------------------


def test_gpu304_synchronize_every_step():
    source = train_with("torch.cuda.synchronize()\n")
    assert only(source, "GPU304") == ["18:9 GPU304"]
    [d] = diagnostics(source, select=("GPU304",))
    assert d.severity.value == "warning" and d.fix is None


@pytest.mark.parametrize(
    "body",
    [
        "torch.cuda.synchronize()\nelapsed = time.perf_counter() - start\n",  # timing code
        "if step % 50 == 0:\n    torch.cuda.synchronize()\n",
        "host = out.to('cpu', non_blocking=True)\ntorch.cuda.synchronize()\nprint(host)\n",  # makes the copy safe
    ],
)
def test_gpu304_no_finding_expected(body):
    assert only("import time\n" + train_with(body), "GPU304") == []


def test_gpu304_not_in_evaluation_or_outside_loops():
    source = TRAIN.format(body="") + "\ntorch.cuda.synchronize()\nfor x in loader:\n    model(x.cuda())\n    torch.cuda.synchronize()\n"
    assert only(source, "GPU304") == []


# ---- GPU305 empty-cache-in-loop ---------------------------------------------------------------------


def test_gpu305_every_step_is_deleted_by_the_unsafe_fix():
    source = train_with("torch.cuda.empty_cache()\n")
    assert only(source, "GPU305") == ["18:9 GPU305"]
    [d] = diagnostics(source, select=("GPU305",))
    assert d.severity.value == "warning"
    assert fix(source, "GPU305", unsafe=False) == source
    assert fix(source, "GPU305", unsafe=True) == train_with("")


STEP = "import torch\nfor x in loader:\n    model(x.cuda()).sum().backward()\n    opt.step()\n"


def test_gpu305_only_statement_becomes_pass():
    source = STEP + "    if x is None:\n        torch.cuda.empty_cache()\n"
    assert fix(source, "GPU305", unsafe=True) == STEP + "    if x is None:\n        pass\n"
    source = STEP + "    if x is None: torch.cuda.empty_cache()\n"
    assert fix(source, "GPU305", unsafe=True) == STEP + "    if x is None: pass\n"
    source = STEP + "    f(x); torch.cuda.empty_cache()\n"
    assert fix(source, "GPU305", unsafe=True) == STEP + "    f(x)\n"
    source = STEP + "    torch.cuda.empty_cache(); f(x)\n"
    assert fix(source, "GPU305", unsafe=True) == STEP + "    f(x)\n"


def test_gpu305_under_a_cadence_is_info_and_once_per_epoch_is_silent():
    guarded = train_with("if step % 1000 == 0:\n    torch.cuda.empty_cache()\n")
    [d] = diagnostics(guarded, select=("GPU305",))
    assert d.severity.value == "info"
    # One sync and one round of re-allocation per epoch: nothing measurable.
    epochs = "import torch\nfor epoch in range(3):\n    for x in loader:\n        model(x.cuda()).sum().backward()\n        opt.step()\n    torch.cuda.empty_cache()\n"
    assert diagnostics(epochs, select=("GPU305",)) == []


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nfor x in loader:\n    try:\n        step(x)\n    except torch.cuda.OutOfMemoryError:\n        torch.cuda.empty_cache()\n",
        "import torch\nfor x in loader:\n    try:\n        step(x)\n    finally:\n        torch.cuda.empty_cache()\n",
        "import torch\ntrain()\ntorch.cuda.empty_cache()\nevaluate()\n",
        # a loop over models or configurations: phase boundaries
        "import torch\nfor name in names:\n    run(name)\n    torch.cuda.empty_cache()\n",
        # retry after an out-of-memory error with a smaller batch (timm's benchmark.py)
        "import torch\nwhile batch_size:\n    try:\n        torch.cuda.empty_cache()\n        return bench(batch_size)\n    except RuntimeError:\n        batch_size //= 2\n",
    ],
)
def test_gpu305_no_finding_expected(source):
    assert only(source, "GPU305") == []


def test_training_step_hidden_in_a_loss_scaler_is_still_training():
    # facebookresearch/mae engine_finetune.py: backward and step happen inside `loss_scaler(...)`
    source = textwrap.dedent("""\
        import torch


        def train_one_epoch(model, criterion, loader, optimizer, loss_scaler, device):
            for samples, targets in loader:
                outputs = model(samples.to(device, non_blocking=True))
                loss = criterion(outputs, targets.to(device, non_blocking=True))
                loss_value = loss.item()
                loss_scaler(loss, optimizer, parameters=model.parameters())
                optimizer.zero_grad()
                torch.cuda.synchronize()
    """)
    assert findings(source, select=("GPU303", "GPU304")) == ["8:22 GPU303", "11:9 GPU304"]
    assert {d.severity.value for d in diagnostics(source, select=("GPU303", "GPU304"))} == {"warning"}


def test_argparse_opt_is_not_an_optimizer():
    # pytorch/examples dcgan: `opt = parser.parse_args()` is passed around in evaluation code
    source = textwrap.dedent("""\
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        opt = parser.parse_args()
        model = torch.nn.Linear(2, 2).cuda()
        for x in loader:
            out = model(x.cuda())
            report(out.sum().item(), opt)
    """)
    [d] = diagnostics(source, select=("GPU303",))
    assert d.severity.value == "info"
