"""The "the step waits anyway" noise class (N5 of the tenth to twelfth corpora): host copies the loop needs anyway
and reads after a per-step drain. Minimal shapes of our own after the Stable Diffusion validation images written to
PNG files and build-nanogpt's step timed with `synchronize()` under `if device_type == "cuda":`. A second copy right after a first one, and reads around a written-out copy, stay."""

from __future__ import annotations

import textwrap

from tests.conftest import findings

HEADER = """\
import numpy as np
import torch
from torch import nn

device = torch.device("cuda")
model = nn.TransformerEncoder(nn.TransformerEncoderLayer(1024, 16), 24).to(device)
optimizer = torch.optim.AdamW(model.parameters())


"""


def gpu303(body: str) -> list[str]:
    return findings(HEADER + textwrap.dedent(body), select=("GPU303",))


# ---- a second copy right after a first one stays its own finding (judged right on corpora 10-12) ---------


def test_a_second_copy_right_after_a_copy_to_numpy_stays_its_own_finding():
    # pretrain-gnns / YOLOv4 / decision-transformer: the judges call each `.cpu()` copy of the step an avoidable wait
    assert gpu303("""\
        def train(loader, log):
            for x, y in loader:
                out = model(x.to(device))
                loss = nn.functional.mse_loss(out, y.to(device))
                loss.backward()
                optimizer.step()
                log.append(loss.detach().cpu().item())
                log.append(out.detach().cpu().numpy().mean())
    """) == ["16:20 GPU303", "17:20 GPU303"]


def test_a_forward_between_the_copy_and_the_next_read_keeps_both():
    body = """\
        def validate(loader, metrics, meter, extra):
            with torch.no_grad():
                for x, y in loader:
                    x, y = x.to(device), y.to(device)
                    out = model(x)
                    pred = out.max(1)[1].cpu().numpy()
                    metrics.update(pred)
                    val_loss = nn.functional.cross_entropy(model(extra.to(device)), y)
                    meter.update(val_loss.item())
    """
    assert gpu303(body) == ["15:20 GPU303", "18:26 GPU303"]


# ---- a host copy the loop writes out: not reported; the reads around it keep their findings ---------------


def test_a_loss_read_after_the_written_copy_and_another_forward_is_reported():
    assert gpu303("""\
        def extract(loader, out_dir, probe):
            total = 0.0
            with torch.no_grad():
                for i, (x, y) in enumerate(loader):
                    feats = model(x.to(device))
                    np.save(f"{out_dir}/{i}.npy", feats.cpu().numpy())
                    loss = nn.functional.mse_loss(model(probe.to(device)), y.to(device))
                    total += loss.item()
            return total
    """) == ["17:22 GPU303"]


def test_a_loss_read_before_the_written_copy_is_reported():
    assert gpu303("""\
        def extract(loader, out_dir):
            total = 0.0
            with torch.no_grad():
                for i, (x, y) in enumerate(loader):
                    feats = model(x.to(device))
                    loss = nn.functional.mse_loss(feats, y.to(device))
                    total += loss.item()
                    np.save(f"{out_dir}/{i}.npy", feats.cpu().numpy())
            return total
    """) == ["16:22 GPU303"]


def test_images_built_around_the_copy_and_saved_as_png_are_the_output():
    # Stable Diffusion's validation: each sample scaled and rearranged on the host in one expression, then saved
    assert gpu303("""\
        from PIL import Image

        def save_samples(batches, out_dir):
            with torch.no_grad():
                for i, z in enumerate(batches):
                    samples = torch.clamp(model(z.to(device)), 0.0, 1.0)
                    for j, sample in enumerate(samples):
                        sample = 255.0 * np.transpose(sample.cpu().numpy(), (1, 2, 0))
                        img = Image.fromarray(sample.astype(np.uint8))
                        img.save(f"{out_dir}/{i}_{j}.png")
    """) == []


def test_samples_built_around_the_copy_but_only_kept_in_memory_are_reported():
    assert gpu303("""\
        def collect(batches):
            kept = []
            with torch.no_grad():
                for z in batches:
                    samples = torch.clamp(model(z.to(device)), 0.0, 1.0)
                    arr = 255.0 * np.transpose(samples.cpu().numpy(), (0, 2, 3, 1))
                    kept.append(arr.astype(np.uint8))
            return kept
    """) == ["15:40 GPU303"]


# ---- a per-step synchronize() under a test that holds on every GPU run ------------------------------------


def test_reads_after_a_timing_synchronize_under_a_device_type_test_are_silent():
    # build-nanogpt: `if device_type == "cuda": torch.cuda.synchronize()` ends every step before the loss is printed
    assert gpu303("""\
        import time

        device_type = "cuda" if device.type == "cuda" else "cpu"

        def train(loader, steps):
            for step in range(steps):
                t0 = time.time()
                x, y = next(loader)
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                if device_type == "cuda":
                    torch.cuda.synchronize()
                dt = time.time() - t0
                print(f"step {step} | loss {loss.item():.4f} | dt {dt * 1000:.1f}ms")
    """) == []


def test_a_synchronize_under_a_test_that_may_fail_on_a_gpu_run_drains_nothing():
    # `if profile:` holds only when the user asks for it: the loss read waits for the step otherwise
    assert gpu303("""\
        import time

        def train(loader, steps, profile):
            for step in range(steps):
                x, y = next(loader)
                loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                optimizer.step()
                if profile:
                    torch.cuda.synchronize()
                print(f"step {step} | loss {loss.item():.4f}")
    """) == ["20:37 GPU303"]
