"""GPU201-GPU205: where tensors and modules are created and moved."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import diagnostics, findings, fixed

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

DEVICE = ("GPU2",)


def only(source: str, code: str) -> list[str]:
    return findings(source, select=(code,))


def fix(source: str, code: str, unsafe: bool = True) -> str:
    result = fixed(source, unsafe=unsafe, select=(code,))
    assert fixed(result, unsafe=unsafe, select=(code,)) == result  # idempotent
    compile(result, "train.py", "exec")
    return result


HEADER = """\
import torch

device = torch.device("cuda")
"""


# ---- GPU201 tensor-created-then-moved --------------------------------------------------------------


def test_gpu201_factory_then_to_device_in_training_loop():
    source = HEADER + textwrap.dedent("""\
        for x, y in loader:
            pos = torch.arange(x.shape[1]).to(device)
            model(x.to(device) + pos).sum().backward()
            opt.step()
    """)
    assert only(source, "GPU201") == ["5:11 GPU201"]
    [d] = diagnostics(source, select=("GPU201",))
    assert d.severity.value == "warning"
    assert "pos = torch.arange(x.shape[1], device=device)" in fix(source, "GPU201", unsafe=False)


@pytest.mark.parametrize("code", ["GPU201", "GPU202"])
def test_a_factory_under_a_logging_interval_is_not_every_step(code):
    # wgan-style: a noise batch for the logged images every 100 steps; the same line unguarded is reported.
    factory = "torch.randn(x.size(0), 100).cuda()" if code == "GPU201" else "torch.FloatTensor(x.size(0), 100).normal_().cuda()"
    guarded = HEADER + textwrap.dedent(f"""\
        for i, (x, y) in enumerate(loader):
            model(x.to(device)).sum().backward()
            opt.step()
            if (i + 1) % 100 == 0:
                z = {factory}
                log_images(generator(z))
    """)
    assert only(guarded, code) == []
    every_step = guarded.replace("    if (i + 1) % 100 == 0:\n        z =", "    z =").replace("        log_images", "    log_images")
    assert len(only(every_step, code)) == 1


def in_step(code: str) -> str:
    """`code` in the body of a training loop (its first line is row 5, indented by 4)."""
    return HEADER + "for x in loader:\n" + textwrap.indent(textwrap.dedent(code), "    ") + "    model(x).sum().backward()\n"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("w = torch.zeros(1024, 4096).cuda()", 'w = torch.zeros(1024, 4096, device="cuda")'),  # 16 MB
        ("w = torch.ones(n).cuda(1)", 'w = torch.ones(n, device="cuda:1")'),  # (`n`: a size not known)
        ("w = torch.full((n,), 7).to(device, torch.float16)", "w = torch.full((n,), 7, dtype=torch.float16, device=device)"),
        ("w = torch.zeros(n, dtype=torch.int8).to(device=device, dtype=torch.float16)", "w = torch.zeros(n, dtype=torch.float16, device=device)"),
        ("w = torch.arange(n).to('cuda', non_blocking=True)", "w = torch.arange(n, device='cuda')"),
        ("w = torch.eye(n).to(torch.device('cuda:0'))", "w = torch.eye(n, device=torch.device('cuda:0'))"),
    ],
)
def test_gpu201_safe_fixes(line, expected):
    source = in_step(line + "\n")
    assert only(source, "GPU201") == ["5:9 GPU201"]
    assert fix(source, "GPU201", unsafe=False) == in_step(expected + "\n")


@pytest.mark.parametrize(
    "line",
    [
        "w = torch.tensor([1.0, 2.0]).cuda()",  # carries data: `device=` would copy it just the same
        "w = torch.as_tensor(values).to(device)",
        "w = torch.from_numpy(array).cuda()",
    ],
)
def test_gpu201_data_factories_are_not_reported(line):
    assert only(in_step(line + "\n"), "GPU201") == []


@pytest.mark.parametrize(
    "line",
    [
        "real = torch.ones(BATCH_SIZE, 1).to(device)",  # GAN labels: 100 floats a step
        "z = torch.randn(BATCH_SIZE, 100).to(device)",  # 40 KB of noise
        "g = torch.randint(0, 10, (BATCH_SIZE,)).to(device)",
        "mask = torch.ones(BATCH_SIZE, SEQ).bool().to(device)",
        "src = torch.randint(2, 18, (BATCH_SIZE, SEQ)).long().to(device)",
        "w = torch.zeros(3, 4).cuda()",
        "idx = torch.randperm(BATCH_SIZE).cuda()",
        "pos = torch.arange(SEQ).to(device)",
        "eye = torch.eye(SEQ).cuda()",
        "w = torch.zeros(256, 256).cuda()",  # 512 KiB at 8 bytes an element: the line itself
    ],
)
def test_gpu201_known_small_factories_are_not_reported(line):
    # At most 512 KiB (`SMALL_BATCH_BYTES`): a copy of tens of µs, measured at the noise of the smallest steps
    # (bench/results/cost_facts.md; analysis/factory_bytes.py).
    source = HEADER + "BATCH_SIZE = 100\nSEQ = 32\n" + "for x in loader:\n    " + line + "\n    model(x).sum().backward()\n"
    assert only(source, "GPU201") == []


@pytest.mark.parametrize(
    "line",
    [
        "z = torch.randn(BATCH_SIZE, 1024).to(device)",  # 100 x 1024 x 8 bytes: 800 KB
        "w = torch.zeros(256, 257).cuda()",  # just over the line
        "z = torch.randn(x.size(0), 100).to(device)",  # a size from a tensor: not known
        "idx = torch.randperm(n).cuda()",  # a name with no known value
        "pos = torch.arange(4 * SEQ * SEQ * SEQ).to(device)",  # 131072 x 8 bytes: 1 MiB
    ],
)
def test_gpu201_large_or_unknown_factories_stay_reported(line):
    source = HEADER + "BATCH_SIZE = 100\nSEQ = 32\n" + "for x in loader:\n    " + line + "\n    model(x).sum().backward()\n"
    assert len(only(source, "GPU201")) == 1


def test_gpu201_one_time_set_up_is_not_reported():
    assert only(HEADER + "w = torch.zeros(3).cuda()\n", "GPU201") == []
    source = HEADER + textwrap.dedent("""\
        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.pos = torch.arange(16).cuda()
    """)
    assert only(source, "GPU201") == []


def test_gpu201_in_an_evaluation_loop_is_info():
    source = HEADER + "model = torch.nn.Linear(3, 3).cuda()\nwith torch.no_grad():\n    for x in loader:\n        y = model(x) + torch.ones(x.shape[1]).cuda()\n"
    [d] = diagnostics(source, select=("GPU201",))
    assert d.severity.value == "info"
    assert d.message == "`torch.ones(...)` fills on the CPU, then `.cuda()` copies it to the GPU every evaluation step (loop at line 6)"
    assert d.help == "Create it there with `device=`"


def test_gpu201_random_factory_fix_is_unsafe():
    source = in_step("noise = torch.randn(n, 4).cuda()\n")
    assert only(source, "GPU201") == ["5:13 GPU201"]
    [d] = diagnostics(source, select=("GPU201",))
    assert "different numbers" in d.help
    assert fix(source, "GPU201", unsafe=False) == source
    assert fix(source, "GPU201") == in_step('noise = torch.randn(n, 4, device="cuda")\n')


def test_gpu201_requires_grad_fix_is_unsafe():
    source = in_step("w = torch.zeros(n, requires_grad=True).cuda()\n")
    assert fix(source, "GPU201", unsafe=False) == source
    assert fix(source, "GPU201") == in_step('w = torch.zeros(n, requires_grad=True, device="cuda")\n')


def test_gpu201_keeps_a_multiline_layout():
    source = in_step("""\
        w = torch.zeros(
            n,
            4,
        ).to(device)
    """)
    assert fix(source, "GPU201") == in_step("""\
        w = torch.zeros(
            n,
            4,
            device=device,
        )
    """)


@pytest.mark.parametrize(
    "line",
    [
        "h = torch.ones(2).to(torch.float16)",  # a dtype, not a device
        "h = torch.ones(2).to(x)",  # a tensor: device and dtype of x
        "h = torch.ones(2).to(x.dtype)",
        "h = torch.ones(2).to('cpu')",  # not the GPU
        "h = torch.ones(2, device=device).float()",
        "h = torch.normal(mean, std).cuda()",  # tensor overload: takes no device
        "h = np.zeros(3).cuda()",
        "h = torch.zeros(*shape).cuda()",
    ],
)
def test_gpu201_no_finding_expected(line):
    assert only(in_step(line + "\n"), "GPU201") == []


@pytest.mark.parametrize(
    "setup",
    [
        'gpu_ref = torch.ones(3, device="cuda")\n',  # a tensor whose name starts with gpu_
        "cuda_dtype = torch.float16\n",  # a dtype whose name starts with cuda_
        "gpu = torch.zeros(2, device=device)\n",  # a device-like name bound to a tensor
        "dev = x.dtype\n",  # a device-like name bound to a dtype
    ],
)
def test_gpu201_to_a_name_bound_to_a_tensor_or_dtype_is_not_a_move(setup):
    name = setup.split(" =")[0]
    source = HEADER + setup + f"for x in loader:\n    h = torch.zeros(3).to({name})\n"
    assert only(source, "GPU201") == []
    assert fix(source, "GPU201") == source


def test_gpu201_no_fix_with_out_or_memory_format():
    source = in_step("a = torch.zeros(n, out=buf).cuda()\nb = torch.ones(n, 2).to(device, memory_format=torch.channels_last)\n")
    assert only(source, "GPU201") == ["5:9 GPU201", "6:9 GPU201"]
    assert fix(source, "GPU201") == source


RNN = HEADER + textwrap.dedent("""\
    class RNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(28, 128, 2, batch_first=True)
            self.register_buffer("scale", self.make_scale())

        def make_scale(self):
            return torch.ones(128).to(device)

        def forward(self, x):
            h0 = torch.zeros(2, x.size(0), 128).to(device)
            out, _ = self.lstm(x, (h0, h0))
            return out * self.scale


    class Sampler:
        def draw(self, n):
            return torch.zeros(n).to(device)
""")


def test_gpu201_in_a_models_forward():
    # The model runs once per batch, whatever loop calls it (yunjey's RNN tutorial builds its h0 so).
    [diagnostic] = diagnostics(RNN, select=("GPU201",))
    assert (diagnostic.location.row, diagnostic.severity.value) == (14, "info")
    assert diagnostic.message == "`torch.zeros(...)` fills on the CPU, then `.to()` copies it to the GPU on every call of the model (`forward` at line 13)"
    assert "h0 = torch.zeros(2, x.size(0), 128, device=device)" in fix(RNN, "GPU201")


def test_gpu201_set_up_methods_of_a_model_and_other_classes_are_silent():
    # `make_scale` runs from `__init__` only; `Sampler` is not a module.
    assert [f for f in only(RNN, "GPU201") if not f.startswith("14:")] == []


GENERATOR = HEADER + textwrap.dedent("""\
    def run_trainer(model, opt, rank):
        def get_next_batch(rank):
            offsets = torch.zeros(2).to(device)
            for _ in range(10):
                n = random.randint(20, 50)
                target = torch.LongTensor(n).random_(8).to(device)
                noise = torch.zeros(n).to(device)
                yield offsets, target, noise

        for epoch in range(100):
            for offsets, target, noise in get_next_batch(rank):
                loss = criterion(model(offsets) + noise, target)
                loss.backward()
                opt.step()
""")


def test_gpu201_and_gpu202_in_a_generator_of_batches_that_a_training_loop_iterates():
    # pytorch/examples' ddp_rpc builds each batch in a generator: the part of it that runs per item runs every
    # step of the loop that iterates it; `offsets`, before its loop, is built once per pass.
    assert only(GENERATOR, "GPU201") == ["10:21 GPU201"]
    assert only(GENERATOR, "GPU202") == ["9:22 GPU202"]
    [diagnostic] = diagnostics(GENERATOR, select=("GPU201",))
    assert diagnostic.message == "`torch.zeros(...)` fills on the CPU, then `.to()` copies it to the GPU every training step (loop at line 14)"


def test_gpu201_in_a_generator_nobody_trains_on_is_silent():
    source = GENERATOR.replace("loss.backward()", "print(loss)").replace("opt.step()", "pass")
    assert only(source, "GPU201") == []


ADVANCED = textwrap.dedent("""\
    import torch


    def cycle(length):
        while True:
            seq = torch.randint(0, 2, (256, length)).cuda()
            yield seq, seq.cumsum(dim=-1) % 2


    train_dl = cycle(128)
    model = Net().cuda()
    for step in range(10000):
        seq, labels = next(train_dl)
        loss = criterion(model(seq), labels)
        loss.backward()
        optimizer.step()
""")


def test_gpu201_in_a_generator_kept_in_a_name_that_the_training_loop_advances_with_next():
    # x-transformers' train_parity: `train_dl = cycle(n)` once, `next(train_dl)` every step runs the
    # generator's loop body once per step.
    assert only(ADVANCED, "GPU201") == ["6:15 GPU201"]
    [diagnostic] = diagnostics(ADVANCED, select=("GPU201",))
    assert diagnostic.message.endswith("copies it to the GPU every training step (loop at line 12)")


def test_gpu201_in_a_generator_advanced_once_or_outside_a_step_is_silent():
    # one `next` before training: the body runs once
    once = ADVANCED.replace("for step in range(10000):\n    seq, labels = next(train_dl)\n", "seq, labels = next(train_dl)\nfor step in range(10000):\n")
    assert only(once, "GPU201") == []
    # the name bound to another generator too: which one `next` advances is not known
    rebound = ADVANCED.replace("train_dl = cycle(128)\n", "train_dl = cycle(128)\ntrain_dl = other_batches()\n")
    assert only(rebound, "GPU201") == []
    # advanced in a loop that trains nothing
    untrained = ADVANCED.replace("    loss.backward()\n    optimizer.step()\n", "    print(loss)\n")
    assert only(untrained, "GPU201") == []


# ---- GPU202 legacy-tensor-constructor ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("w = torch.cuda.FloatTensor([0.2, 0.8])", 'w = torch.tensor([0.2, 0.8], dtype=torch.float32, device="cuda")'),
        ("w = torch.cuda.LongTensor([1, 2])", 'w = torch.tensor([1, 2], dtype=torch.int64, device="cuda")'),
        ("w = torch.FloatTensor(1024, 1024)\nw = w.cuda()", "w = torch.empty(1024, 1024, dtype=torch.float32)\nw = w.cuda()"),
        ("w = torch.ByteTensor(1048576)\nw = w.to(device)", "w = torch.empty(1048576, dtype=torch.uint8)\nw = w.to(device)"),
        ("w = torch.HalfTensor(1024, 2048).to(device)", "w = torch.empty(1024, 2048, dtype=torch.float16, device=device)"),
        ("w = torch.cuda.BoolTensor(4)", 'w = torch.empty(4, dtype=torch.bool, device="cuda")'),
    ],
)
def test_gpu202_fixes(line, expected):
    source = in_step(line + "\n")
    assert only(source, "GPU202") == ["5:9 GPU202"]
    assert fix(source, "GPU202", unsafe=False) == in_step(expected + "\n")


def test_gpu202_message_and_severity_in_a_training_loop():
    [diagnostic] = diagnostics(in_step("w = torch.FloatTensor(b, 8).cuda()\n"), select=("GPU202",))
    assert diagnostic.message == "`torch.FloatTensor(...)` is a legacy constructor, built on the CPU, then copied to the GPU"
    assert diagnostic.severity.value == "warning"


@pytest.mark.parametrize(
    "code",
    [
        "class_weights = torch.FloatTensor([0.2, 0.8]).cuda()\n",  # module level: built once
        "w = torch.cuda.LongTensor([1, 2])\n",
        # SentEval: the whole dev set converted once before its evaluation loop
        "def score(self, devX, devy):\n"
        "    devX = torch.FloatTensor(devX).cuda()\n"
        "    devy = torch.LongTensor(devy).cuda()\n"
        "    for i in range(0, len(devX), 64):\n"
        "        correct = self.model(devX[i:i + 64]).max(1)[1].eq(devy[i:i + 64]).sum()\n",
        # a buffer built in `__init__`
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.scale = torch.cuda.FloatTensor([0.5])\n",
        # an empty tensor grown by `torch.cat` in a char-LSTM's forward: nothing to fill or copy
        "class Tagger(torch.nn.Module):\n"
        "    def forward(self, x, words):\n"
        "        char = torch.FloatTensor()\n"
        "        for word in words:\n"
        "            char = torch.cat((char, self.char_lstm(word).cpu()), 0)\n"
        "        return self.linear(torch.cat((x, char.cuda()), 1))\n",
        # once per epoch, outside the step loop
        "for epoch in range(90):\n"
        "    idx = torch.cuda.LongTensor(range(0, 100, 5))\n"
        "    for x in loader:\n"
        "        model(x.to(device)).sum().backward()\n"
        "        opt.step()\n",
    ],
)
def test_gpu202_one_time_set_up_is_silent(code):
    # As GPU201: a tensor built once before the step loop costs nothing per step.
    assert only(HEADER + code, "GPU202") == []


def test_gpu202_in_a_models_forward_and_the_methods_it_calls():
    # The model runs once per batch whatever loop calls it: its `forward` (and `self.reparametrize`) is per step.
    source = HEADER + textwrap.dedent("""\
        class VAE(torch.nn.Module):
            def reparametrize(self, mu, logvar):
                std = logvar.mul(0.5).exp_()
                eps = torch.cuda.FloatTensor(std.size()).normal_()
                return eps.mul(std).add_(mu)

            def forward(self, x):
                return self.reparametrize(self.mu(x), self.logvar(x))

            def init_weights(self):
                self.scale = torch.cuda.FloatTensor([0.5])
    """)
    [diagnostic] = diagnostics(source, select=("GPU202",))
    assert (diagnostic.location.row, diagnostic.severity.value) == (7, "info")
    assert diagnostic.message == "`torch.cuda.FloatTensor(...)` is a legacy constructor, built on the current CUDA device"


def test_gpu202_fixed_code_builds_the_same_tensor():
    torch = pytest.importorskip("torch")
    assert torch.equal(torch.FloatTensor([0.2, 0.8]), torch.tensor([0.2, 0.8], dtype=torch.float32))
    assert torch.LongTensor(2, 3).shape == torch.empty(2, 3, dtype=torch.int64).shape
    assert torch.ByteTensor().shape == torch.empty(0, dtype=torch.uint8).shape


def test_gpu202_variable_size_is_reported_without_fix():
    source = in_step("w = torch.FloatTensor(batch_size, hidden).cuda()\n")
    assert only(source, "GPU202") == ["5:9 GPU202"]
    assert fix(source, "GPU202") == source


@pytest.mark.parametrize(
    "code",
    [
        "w = torch.FloatTensor([0.2, 0.8]).cuda()\n",  # a constant: `torch.tensor([...], device=)` copies it too
        "w = torch.HalfTensor((1, 2)).to(device)\n",
        "w = torch.Tensor([[0.1, 0.1, 0.2, 0.2]]).cuda()\n",
        "w = torch.FloatTensor(data).cuda()\n",  # one argument not shown to be an int: PyTorch reads it as data
        # dair-ai's n-gram LM: a list built per sentence, and a display of it
        "histories = []\nfor word in x:\n    histories.append(word)\nlogits = model(torch.LongTensor(histories).to(device))\n",
        "logits = model(torch.LongTensor([hist]).to(device))\n",
        "state = torch.FloatTensor(obs[np.newaxis, :]).to(device)\n",  # a row of an observation
        "w = torch.FloatTensor(data)\nw = w.cuda()\n",  # moved later: the same bytes cross
    ],
)
def test_gpu202_data_carrying_cpu_constructor_is_silent(code):
    # Data on the host crosses to the GPU whichever constructor builds the tensor (as GPU201 says of
    # `torch.tensor`): the legacy spelling costs nothing more (analysis/legacy_constructors.py).
    assert only(in_step(code), "GPU202") == []


@pytest.mark.parametrize(
    "code",
    [
        "w = torch.FloatTensor(n).cuda()\n",  # `n` below is an int (of a size not known to be small)
        "w = torch.FloatTensor(x.size(0), 4).fill_(0).cuda()\n",
        "w = torch.FloatTensor(x.size()).normal_().to(device)\n",  # a torch.Size
        "w = torch.FloatTensor(x.shape[0]).zero_().cuda()\n",
        "w = torch.LongTensor(len(x)).cuda()\n",
        "w = torch.LongTensor(range(len(x))).cuda()\n",  # generated content: `torch.arange(..., device=)`
        "w = torch.FloatTensor(data).uniform_().cuda()\n",  # filled on the CPU whatever it was given
        "w = torch.cuda.FloatTensor(data)\n",  # built on the GPU by a legacy constructor: stays as RULES.md says
    ],
)
def test_gpu202_size_and_fill_forms_stay_reported(code):
    source = HEADER + "n = int(sys.argv[1])\n" + "for x in loader:\n" + textwrap.indent(textwrap.dedent(code), "    ") + "    model(x).sum().backward()\n"
    assert only(source, "GPU202") == ["6:9 GPU202"]


@pytest.mark.parametrize(
    "code",
    [
        "h = torch.FloatTensor(b, 8).fill_(0).to(device)\n",
        "h = torch.FloatTensor(b, 8).zero_().cuda()\n",
        "w = torch.FloatTensor(b, 8).normal_()\nw = w.to(device)\n",  # the same value, moved later
    ],
)
def test_gpu202_in_place_initialisation_before_the_move_is_reported_without_fix(code):
    # `fill_`/`zero_`/`normal_` return the CPU tensor itself: it is still built on the CPU and copied. A fix
    # that rewrote the constructor would drop the initialisation, so none is offered.
    source = in_step(code)
    assert only(source, "GPU202") == ["5:9 GPU202"]
    assert fix(source, "GPU202") == source


def test_gpu202_in_place_initialisation_that_stays_on_the_cpu_is_silent():
    assert only(in_step("counts = torch.LongTensor(10).zero_()\nprint(counts)\n"), "GPU202") == []


@pytest.mark.parametrize(
    "code",
    [
        "sizes = torch.LongTensor(shape)\n",  # CPU data that never reaches the GPU
        "w = torch.FloatTensor([1.0])\nprint(w.sum())\n",
        "w = torch.FloatTensor([1.0])\nw = torch.ones(1).cuda()\nv = w.cuda()\n",  # the moved `w` is another value
    ],
)
def test_gpu202_cpu_constructor_that_stays_on_the_cpu_is_silent(code):
    assert only(in_step(code), "GPU202") == []


def test_gpu202_through_an_alias_imports_torch_names():
    source = textwrap.dedent("""\
        import torch as th
        from torch import FloatTensor

        for x in loader:
            w = FloatTensor(1024, 1024).cuda()
            loss = model(x.cuda() * w).sum()
            loss.backward()
    """)
    assert fix(source, "GPU202") == source.replace('FloatTensor(1024, 1024).cuda()', 'th.empty(1024, 1024, dtype=th.float32, device="cuda")')


def test_gpu202_no_finding_for_other_tensor_types():
    assert only(in_step("w = torch.Tensor.cuda(x)\nv = mylib.FloatTensor([1])\n"), "GPU202") == []


# ---- GPU203 module-moved-in-loop --------------------------------------------------------------------


def test_gpu203_repeated_move_is_deleted_safely():
    source = HEADER + textwrap.dedent("""\
        model = torch.nn.Linear(3, 3).to(device)
        for x in loader:
            model.to(device)
            model(x.to(device)).sum().backward()
            opt.step()
    """)
    assert only(source, "GPU203") == ["6:5 GPU203"]
    [d] = diagnostics(source, select=("GPU203",))
    assert "already moved at line 4" in d.help and d.severity.value == "warning"
    assert fix(source, "GPU203", unsafe=False) == source.replace("    model.to(device)\n", "")


RETRIED = HEADER + textwrap.dedent("""\
    def synthesize(model, codec, ids):
        for attempt in range({tries}):
            tokens = model.generate(ids.to(device))
            codec.model.to(device)
            try:
                wav = codec.decode(tokens)
            except RuntimeError:
                continue
            return wav
        raise RuntimeError("no usable tokens")


    if __name__ == "__main__":
        synthesize(model, codec, ids)
""")


def test_gpu203_move_in_a_retry_loop_of_a_handful_of_tries_is_not_reported():
    # the loop ends at its first success and repeats only after a failed try: a handful of moves in all (round 24b)
    assert only(RETRIED.format(tries=5), "GPU203") == []


def test_gpu203_move_in_a_retry_loop_of_many_tries_is_still_reported():
    assert only(RETRIED.format(tries=1000), "GPU203") == ["7:9 GPU203"]


def test_gpu203_module_moved_away_before_the_loop_is_not_deleted():
    source = HEADER + textwrap.dedent("""\
        model = torch.nn.Linear(3, 3)
        model.to(device)
        model.cpu()
        torch.save(model.state_dict(), "init.pt")
        for x in loader:
            model.to(device)
            model(x.to(device)).sum().backward()
            opt.step()
    """)
    assert only(source, "GPU203") == ["9:5 GPU203"]
    [d] = diagnostics(source, select=("GPU203",))
    assert "already moved" not in d.help
    assert fix(source, "GPU203", unsafe=False) == source  # deleting it would train on the CPU


def test_gpu203_move_back_after_moving_away_is_the_earlier_move():
    source = HEADER + "model = torch.nn.Linear(3, 3)\nmodel.to(device)\nmodel.cpu()\nmodel.to(device)\nfor epoch in range(3):\n    model.to(device)\n"
    [d] = diagnostics(source, select=("GPU203",))
    assert "already moved at line 7" in d.help
    assert fix(source, "GPU203", unsafe=False) == source.replace("for epoch in range(3):\n    model.to(device)\n", "for epoch in range(3):\n    pass\n")


def test_gpu203_move_without_earlier_move_is_hoisted_unsafely():
    source = HEADER + textwrap.dedent("""\
        def train(model, loader, opt):
            model.train()
            for x in loader:
                model = model.cuda()
                model(x.to(device)).sum().backward()
                opt.step()
    """)
    assert only(source, "GPU203") == ["7:17 GPU203"]
    assert fix(source, "GPU203", unsafe=False) == source
    assert fix(source, "GPU203") == HEADER + textwrap.dedent("""\
        def train(model, loader, opt):
            model.train()
            model = model.cuda()
            for x in loader:
                model(x.to(device)).sum().backward()
                opt.step()
    """)


def test_gpu203_recognises_module_subclasses_and_builders():
    source = HEADER + textwrap.dedent("""\
        from torch import nn


        class Net(nn.Module):
            pass


        def build() -> nn.Module:
            return Net()


        a = Net()
        b = build()
        for epoch in range(3):
            a.cuda()
            b.to(device)
    """)
    assert only(source, "GPU203") == ["18:5 GPU203", "19:5 GPU203"]


def test_gpu203_only_statement_in_loop_leaves_pass():
    source = HEADER + "model = torch.nn.Linear(2, 2)\nfor epoch in range(3):\n    model.to(device)\n"
    assert fix(source, "GPU203") == HEADER + "model = torch.nn.Linear(2, 2)\nmodel.to(device)\nfor epoch in range(3):\n    pass\n"


@pytest.mark.parametrize(
    "loop",
    [
        "for model in models:\n    model.to(device)\n",  # a different module each time
        "for epoch in range(3):\n    model = torch.nn.Linear(2, 2)\n    model.to(device)\n",  # rebuilt each time
        "for device in devices:\n    model.to(device)\n",  # the device changes
        "for epoch in range(3):\n    model.cpu()\n    save(model)\n    model.to(device)\n",  # moved away and back
        "for epoch in range(3):\n    if epoch == 0:\n        model.to(device)\n",  # once
        "for epoch in range(3):\n    model.to(torch.float16)\n",  # a dtype, not a device
        "for epoch in range(3):\n    batch = batch.to(device)\n",  # a tensor
    ],
)
def test_gpu203_no_finding_expected(loop):
    source = HEADER + "model = torch.nn.Linear(2, 2)\nmodels = [model]\n" + loop
    assert only(source, "GPU203") == []


# ---- GPU204 loop-invariant-transfer -----------------------------------------------------------------


def test_gpu204_invariant_copy_is_hoisted():
    source = HEADER + textwrap.dedent("""\
        def train(model, opt, loader, class_weights):
            for x, y in loader:
                weights = class_weights.to(device)
                loss = (model(x.to(device)) * weights).sum()
                loss.backward()
                opt.step()
    """)
    assert only(source, "GPU204") == ["6:19 GPU204"]
    [d] = diagnostics(source, select=("GPU204",))
    assert d.severity.value == "warning" and "`class_weights` does not change" in d.help
    assert fix(source, "GPU204") == HEADER + textwrap.dedent("""\
        def train(model, opt, loader, class_weights):
            weights = class_weights.to(device)
            for x, y in loader:
                loss = (model(x.to(device)) * weights).sum()
                loss.backward()
                opt.step()
    """)


def test_gpu204_copy_changed_in_place_is_reported_without_fix():
    source = HEADER + textwrap.dedent("""\
        mask = torch.ones(3)
        for x in loader:
            m = mask.cuda()
            m.mul_(x.cuda())
    """)
    assert only(source, "GPU204") == ["6:9 GPU204"]
    assert fix(source, "GPU204") == source


@pytest.mark.parametrize(
    "body",
    [
        "    x = x.to(device)\n",  # the loop's own batch
        "    y = x.to(device)\n",  # derived from the loop target
        "    m = mask.cuda()\n    mask = mask * 2\n",  # changes in the loop
        "    m = mask.cuda()\n    mask.add_(1)\n",  # changed in place
        "    m = mask.cuda()\n    mask[0] = 1\n",
        "    g = on_gpu.cuda()\n",  # already on the GPU: free
        "    m = mask.to(torch.float16)\n",  # a dtype
        "    if x is None:\n        m = mask.cuda()\n",  # conditional
        "    m = unknown.cuda()\n",  # never defined here: unknown
    ],
)
def test_gpu204_no_finding_expected(body):
    source = HEADER + "mask = torch.ones(3)\non_gpu = torch.ones(3, device=device)\nfor x in loader:\n" + body
    assert only(source, "GPU204") == []


# ---- GPU205 non-blocking-device-to-host -------------------------------------------------------------


def test_gpu205_read_before_synchronize():
    source = HEADER + textwrap.dedent("""\
        def predict(model, images):
            logits = model(images.to(device))
            predictions = logits.argmax(1).to("cpu", non_blocking=True)
            return predictions.tolist()
    """)
    assert only(source, "GPU205") == ["6:19 GPU205"]
    [d] = diagnostics(source, select=("GPU205",))
    assert d.severity.value == "error" and "read at line 7" in d.message and d.fix is None


def test_gpu205_used_at_once():
    source = HEADER + "x = torch.ones(3, device=device)\nprint(x.to('cpu', non_blocking=True).numpy())\n"
    assert only(source, "GPU205") == ["5:7 GPU205"]


@pytest.mark.parametrize(
    "tail",
    [
        "host = x.to('cpu', non_blocking=True)\ntorch.cuda.synchronize()\nprint(host)\n",
        "host = x.to('cpu', non_blocking=True)\ndone = torch.cuda.Event()\ndone.record()\ndone.synchronize()\nprint(host)\n",
        "host = x.to('cpu', non_blocking=False)\nprint(host)\n",
        "host = x.to('cpu')\nprint(host)\n",
        "host = x.to('cuda:1', non_blocking=True)\nprint(host)\n",  # device to device
        "host = cpu_tensor.to('cpu', non_blocking=True)\nprint(host)\n",  # not a GPU tensor
        "def f():\n    return x.to('cpu', non_blocking=True)\n",  # the caller's business
    ],
)
def test_gpu205_no_finding_expected(tail):
    source = HEADER + "x = torch.ones(3, device=device)\ncpu_tensor = torch.ones(3)\n" + tail
    assert only(source, "GPU205") == []


PADDED_BATCH = """\
import torch


def translate(encoder, sentences, pad_index, eos_index, batch_size):
    encoder.cuda()
    for i in range(0, len(sentences), batch_size):
        word_ids = [torch.LongTensor(s) for s in sentences[i:i + batch_size]]
        lengths = torch.LongTensor([len(s) + 2 for s in word_ids])
        batch = torch.LongTensor(lengths.max().item(), lengths.size(0)).fill_(pad_index)
        batch[0] = eos_index
{fill}
        encoded = encoder(batch.cuda(), lengths.cuda())
        print(encoded.argmax(-1).tolist())
"""
FILL_LOOP = """\
        for j, s in enumerate(word_ids):
            batch[1:lengths[j] - 1, j].copy_(s)
            batch[lengths[j] - 1, j] = eos_index"""


@pytest.mark.parametrize(
    "fill",
    [
        FILL_LOOP,
        "        for j, s in enumerate(word_ids):\n            batch[1:lengths[j] - 1, j] = s",
    ],
)
def test_gpu202_silent_for_a_padded_batch_assembled_on_the_host_in_a_loop(fill):
    # each sentence's ids written into the host buffer, then one copy: built on the GPU, each write would be a copy
    assert only(PADDED_BATCH.format(fill=fill), "GPU202") == []


@pytest.mark.parametrize(
    "fill",
    [
        "",  # filled with the pad only: `torch.full(..., device=)` builds it on the GPU
        "        batch[1, 0] = eos_index",  # one write, in no loop of its own
        # the loop writes into another buffer
        "        other = torch.zeros(8, 8, dtype=torch.long)\n" + FILL_LOOP.replace("batch[", "other["),
    ],
)
def test_gpu202_reported_for_a_host_buffer_not_assembled_piece_by_piece(fill):
    assert only(PADDED_BATCH.format(fill=fill), "GPU202") != []
