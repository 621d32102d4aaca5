"""The eighth corpus's "steps that wait anyway" and "DataParallel in an evaluation or sampling tool" noise classes
(`analysis/step_waits.py`, `analysis/inference_tools.py`). Minimal shapes of our own after lingua's training loops
(a per-step `torch.cuda.synchronize()` for the iteration timer, then a logging block that reads the loss) and
ddim's / CutMix's evaluation and sampling scripts; the findings next to them stay."""

from __future__ import annotations

import textwrap

from tests.conftest import diagnostics, findings

HEADER = """\
import time

import torch
from torch import nn

device = torch.device("cuda")
model = nn.TransformerEncoder(nn.TransformerEncoderLayer(1024, 16), 24).to(device)
optimizer = torch.optim.AdamW(model.parameters())


"""


def gpu303(body: str) -> list[str]:
    return findings(HEADER + textwrap.dedent(body), select=("GPU303",))


# ---- the step synchronizes every iteration, and the read comes after it with no step work between --------


def test_reads_in_the_logging_block_after_the_timer_synchronize_are_not_reported():
    # lingua: `end_timer.record(); torch.cuda.synchronize()` every step, then metrics (helpers of unknown
    # modules, a FLOP count from the model's configuration, an all-reduce of a dict) and `loss.item()`.
    assert gpu303("""\
        def train(loader, log_freq, world):
            start_timer = torch.cuda.Event(enable_timing=True)
            end_timer = torch.cuda.Event(enable_timing=True)
            for step, (x, y) in enumerate(loader):
                start_timer.record()
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                end_timer.record()
                torch.cuda.synchronize()
                iter_time = start_timer.elapsed_time(end_timer) * 1e-3
                if every_n_steps(step, log_freq):
                    wps = x.numel() / iter_time
                    flops = wps * model.flops_per_token()
                    metrics = flatten_dict({"speed": {"wps": wps, "flops": flops}})
                    to_sync = {"loss": loss.item()}
                    metrics.update(dist_mean_dict(to_sync))
                    print(f"step {step} loss {round(loss.item(), 4)}")
                    for i in range(len(counts)):
                        counts[i] = counts[i].item()
    """) == []


def test_a_per_step_read_in_a_loop_that_does_not_otherwise_wait_is_still_reported():
    body = """\
        def train(loader):
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                print(f"loss {loss.item()}")
    """
    assert gpu303(body) == ["17:23 GPU303"]
    [d] = diagnostics(HEADER + textwrap.dedent(body), select=("GPU303",))
    assert d.message == "`loss.item()` waits for the GPU every training step (loop at line 12)"


def test_a_read_after_a_synchronize_at_the_top_of_the_step_is_still_reported():
    # The read waits for the forward, backward and update queued since: up to the host work after it.
    assert gpu303("""\
        def train(loader):
            for x, y in loader:
                torch.cuda.synchronize()
                start = time.time()
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                print(f"loss {loss.item()} in {time.time() - start:.3f}s")
    """) == ["18:23 GPU303"]


def test_a_read_before_the_synchronize_is_still_reported():
    assert gpu303("""\
        def train(loader):
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
                torch.cuda.synchronize()
    """) == ["16:23 GPU303"]


def test_an_evaluation_or_a_forward_between_the_synchronize_and_the_read_is_still_reported():
    assert gpu303("""\
        def train(loader, probe):
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                torch.cuda.synchronize()
                score = evaluate(model, probe)
                print(loss.item(), score)
    """) == ["18:15 GPU303"]
    assert gpu303("""\
        def train(loader, probe):
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                torch.cuda.synchronize()
                probe_loss = model(probe).mean()
                print(loss.item(), probe_loss)
    """) == ["18:9 GPU303"]  # (`print` of the tensor: the statement's first wait)


def test_a_synchronize_on_some_steps_only_does_not_count():
    assert gpu303("""\
        def train(loader):
            for step, (x, y) in enumerate(loader):
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    torch.cuda.synchronize()
                print(loss.item())
    """) == ["18:15 GPU303"]


# ---- DataParallel in a tool that only evaluates or samples ----------------------------------------------

EVALUATE = """\
import torch
from torch import nn


def validate(loader, model):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x.cuda()).argmax(1) == y.cuda()).sum()
    return correct


def train(loader, model, optimizer):
    for x, y in loader:
        nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
        optimizer.step()


"""


def gpu401(body: str) -> list[str]:
    return findings(EVALUATE + textwrap.dedent(body), select=("GPU401",))


def test_data_parallel_in_an_evaluation_script_is_not_reported():
    assert gpu401("""\
        def main(args, loader):
            model = build(args)
            model = torch.nn.DataParallel(model).cuda()
            model.load_state_dict(torch.load(args.pretrained)["state_dict"])
            print(model)
            print(sum(p.numel() for p in model.parameters()))
            print(validate(loader, model))
    """) == []


def test_data_parallel_in_a_sampling_method_of_a_class_that_also_trains_is_not_reported():
    assert gpu401("""\
        class Runner:
            def train(self, loader):
                model = torch.nn.DataParallel(build()).cuda()
                optimizer = torch.optim.Adam(model.parameters())
                for x in loader:
                    model(x.cuda()).mean().backward()
                    optimizer.step()

            def sample(self, n):
                model = build().cuda()
                model = torch.nn.DataParallel(model)
                model.eval()
                self.sample_images(model, n)

            def sample_images(self, model, n):
                with torch.no_grad():
                    for _ in range(n):
                        save(model(torch.randn(64, 3, 32, 32, device="cuda")))
    """) == ["22:17 GPU401"]


def test_data_parallel_that_is_trained_returned_or_handed_to_unknown_code_is_still_reported():
    assert gpu401("""\
        def main(args, loader):
            model = torch.nn.DataParallel(build(args)).cuda()
            train(loader, model, torch.optim.SGD(model.parameters(), lr=0.1))
    """) == ["21:13 GPU401"]
    assert gpu401("""\
        def build_parallel(args):
            model = torch.nn.DataParallel(build(args)).cuda()
            return model
    """) == ["21:13 GPU401"]
    assert gpu401("""\
        def main(args, trainer):
            model = torch.nn.DataParallel(build(args)).cuda()
            trainer.fit(model)
    """) == ["21:13 GPU401"]
    assert gpu401("""\
        model = torch.nn.DataParallel(build()).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
            optimizer.step()
    """) == ["20:9 GPU401"]


# ---- a read that runs on the first few iterations only (`analysis/first_iterations.py`) ----------------


def test_a_debug_print_of_the_first_examples_is_not_reported():
    # llm.c's hellaswag / mmlu evaluation: `if num_total < 10:` prints the first examples' losses.
    assert gpu303("""\
        def evaluate(examples):
            num_total = 0
            with torch.no_grad():
                for tokens in examples:
                    losses = model(tokens.to(device)).mean(-1)
                    num_total += 1
                    if num_total < 10:
                        for i in range(4):
                            print(f"{i} (loss: {losses[i].item():.4f})")
    """) == []
    assert gpu303("""\
        def train(loader):
            for i, (x, y) in enumerate(loader):
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                if 3 > i:
                    print("first steps", loss.item())
    """) == []


def test_a_read_past_the_first_iterations_or_under_an_unknown_bound_is_still_reported():
    body = """\
        def train(loader, n_show):
            count = 0
            for i, (x, y) in enumerate(loader):
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                count += 1
                if {test}:
                    print("loss", loss.item())
    """
    for test in ("i > 10", "i < n_show", "i < 100000", "i >= 10", "count <= 1000"):
        assert gpu303(body.replace("{test}", test)) == ["19:27 GPU303"], test
    reset = """\
        def train(loader):
            shown = 0
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                shown += 1
                if shown < 10:
                    print("loss", loss.item())
                else:
                    shown = 0
    """
    assert gpu303(reset) == ["19:27 GPU303"]


# ---- the same facts for GPU306 (an op whose output size depends on GPU data) -----------------------------


def gpu306(body: str) -> list[str]:
    return findings(HEADER + textwrap.dedent(body), select=("GPU306",))


def test_a_mask_in_the_logging_block_after_the_timer_synchronize_is_not_reported():
    body = """\
        def train(loader):
            for step, (x, y) in enumerate(loader):
                out = model(x.to(device))
                loss = nn.functional.mse_loss(out, y.to(device))
                loss.backward()
                optimizer.step()
                {sync}
                errors = out[out.isnan()]
                log(step, errors)
    """
    assert gpu306(body.replace("{sync}", "torch.cuda.synchronize()")) == []
    assert gpu306(body.replace("{sync}", "pass")) == ["18:18 GPU306"]


def test_a_mask_on_the_first_few_steps_only_is_not_reported():
    body = """\
        def train(loader):
            for step, (x, y) in enumerate(loader):
                out = model(x.to(device))
                loss = nn.functional.mse_loss(out, y.to(device))
                loss.backward()
                optimizer.step()
                if {test}:
                    log(step, out[out.isnan()])
    """
    assert gpu306(body.replace("{test}", "step < 5")) == []
    assert gpu306(body.replace("{test}", "step > 5")) == ["18:23 GPU306"]


# A loss helper of another module called every step (after yl4579/StarGANv2-VC's `compute_d_loss`): an identity
# test of its optional arguments, a boolean mask under a flag, then the loss terms read for logging on return.
LOSS_HELPER = """
import torch
import torch.nn.functional as F


def compute_loss(nets, x_real, y_org, y_trg, z_trg=None, x_ref=None, use_cls=False):
    assert (z_trg is None) != (x_ref is None)
    out = nets.discriminator(x_real, y_org)
    loss_real = F.softplus(-out).mean()
    loss_cls = torch.zeros(1).mean()
    if use_cls:
        out_de = nets.classifier(x_real)
        loss_cls = F.cross_entropy(out_de[y_org != y_trg], y_org[y_org != y_trg])
    loss = loss_real + loss_cls
    return loss, dict(real=loss_real.item(), cls=loss_cls.item())
"""

STEP_LOOP = """
import torch

from losses import compute_loss


def train(loader, nets, optimizer, use_cls):
    device = torch.device("cuda")
    for x_real, y_org, y_trg, z_trg in loader:
        x_real, y_org = x_real.to(device), y_org.to(device)
        y_trg, z_trg = y_trg.to(device), z_trg.to(device)
        optimizer.zero_grad()
        loss, logged = compute_loss(nets, x_real, y_org, y_trg, z_trg=z_trg, use_cls=use_cls)
        loss.backward()
        optimizer.step()
"""


def _helper_findings(tmp_path, monkeypatch, loss: str) -> list[tuple[str, int, str, str]]:
    from tests.projects_helper import lint, write

    diagnostics = lint(write(tmp_path, {"losses.py": loss, "train.py": STEP_LOOP}), monkeypatch, select=("GPU303", "GPU306"))
    return sorted((d.filename, d.location.row, d.code, d.message) for d in diagnostics)


def test_an_identity_test_in_a_helper_is_no_tensor_condition_and_its_mask_waits_with_the_reads_after_it(tmp_path, monkeypatch):
    found = _helper_findings(tmp_path, monkeypatch, LOSS_HELPER)
    # no "a Python condition on a tensor at losses.py:7": `(z_trg is None) != (x_ref is None)` compares Python bools
    assert not any("losses.py:7" in message for *_, message in found)
    # the mask at line 13 is followed, on every call, by the `.item()` reads of the return: the step waits there anyway
    assert [(f, row, code) for f, row, code, _ in found if code == "GPU306"] == []


def test_a_mask_in_a_helper_with_no_read_after_it_is_still_reported(tmp_path, monkeypatch):
    no_reads = LOSS_HELPER.replace("return loss, dict(real=loss_real.item(), cls=loss_cls.item())", "return loss, dict(real=loss_real, cls=loss_cls)")
    found = _helper_findings(tmp_path, monkeypatch, no_reads)
    assert [(f, row, code) for f, row, code, _ in found] == [("train.py", 13, "GPU306")]
    assert "runs boolean-mask indexing at losses.py:13" in found[0][3]


def test_a_mask_in_a_helper_after_its_only_read_is_still_reported(tmp_path, monkeypatch):
    before = LOSS_HELPER.replace("    loss_cls = torch.zeros(1).mean()\n", "    loss_cls = torch.zeros(1).mean()\n    logged = loss_real.item()\n")
    before = before.replace("return loss, dict(real=loss_real.item(), cls=loss_cls.item())", "return loss, logged")
    found = _helper_findings(tmp_path, monkeypatch, before)
    assert ("train.py", 13, "GPU306") in [(f, row, code) for f, row, code, _ in found]


def test_a_tensor_condition_in_a_helper_is_still_reported_at_the_call(tmp_path, monkeypatch):
    tested = LOSS_HELPER.replace("assert (z_trg is None) != (x_ref is None)", "assert (x_real > 0).all()")
    tested = tested.replace("return loss, dict(real=loss_real.item(), cls=loss_cls.item())", "return loss, dict(real=loss_real, cls=loss_cls)")
    found = _helper_findings(tmp_path, monkeypatch, tested)
    assert any(code == "GPU303" and "a Python condition on a tensor at losses.py:7" in message for _, _, code, message in found)


# ---- a host helper handed a device answers about it: no GPU value in the condition (round 24b, fish-speech) ----

GRAD_NORM = """\
    from torch.utils._foreach_utils import _group_tensors_by_device_and_dtype, _has_foreach_support


    def grad_norm(parameters):
        grads = [p.grad for p in parameters if p.grad is not None]
        norms = []
        for (device, _), ([grads], _) in _group_tensors_by_device_and_dtype([grads]).items():
            if {test}:
                norms.extend(torch._foreach_norm(grads))
            else:
                norms.extend([torch.norm(g) for g in grads])
        return torch.norm(torch.stack(norms))


    def train(loader):
        for x in loader:
            model(x.to(device)).sum().backward()
            norm = grad_norm(model.parameters())
            optimizer.step()
    """


def test_a_condition_on_a_torch_helper_given_a_device_reads_no_gpu_value():
    assert gpu303(GRAD_NORM.format(test="_has_foreach_support(grads, device=device)")) == []


def test_a_condition_on_a_tensor_made_with_device_is_still_reported():
    assert gpu303(GRAD_NORM.format(test="torch.ones(1, device=device).sum() > 0")) == ["18:12 GPU303"]
