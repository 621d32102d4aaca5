"""GPU303 through project helpers whose host read is a size the host must know: Megatron's pipeline p2p
(`p2p_communication.py`) receives the next activation's shape, `.tolist()`s it and allocates the receive
buffer with it, every microbatch. The wait is inherent; a helper whose read is returned for logging stays
reported at its call in the training loop."""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, write

P2P = """\
    import torch
    import torch.distributed as dist


    def _communicate_shapes(recv_prev):
        shape_tensor = torch.empty((3,), device=torch.cuda.current_device(), dtype=torch.int64)
        dist.recv(shape_tensor, src=0)
        recv_shape = [0, 0, 0]
        if recv_prev:
            recv_shape = shape_tensor.tolist()
        return recv_shape


    def _communicate(recv_prev, dtype):
        recv_shape = _communicate_shapes(recv_prev)
        buf = torch.empty(recv_shape, requires_grad=True, device=torch.cuda.current_device(), dtype=dtype)
        dist.recv(buf, src=0)
        return buf


    def recv_forward(dtype):
        return _communicate(True, dtype)


    def _allocate_here(dtype):
        shape_tensor = torch.empty((3,), device=torch.cuda.current_device(), dtype=torch.int64)
        dist.recv(shape_tensor, src=0)
        shape = shape_tensor.tolist()
        return torch.empty(shape, device=torch.cuda.current_device(), dtype=dtype)


    def loss_value(loss):
        value = loss.detach().float().item()
        return value
"""
SCHEDULE = """\
    import torch

    import p2p

    model = torch.nn.Linear(1024, 1024).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


    def schedule(microbatches, use_helper):
        for batch in microbatches:
            x = p2p.recv_forward(torch.bfloat16) if use_helper else p2p._allocate_here(torch.bfloat16)
            loss = model(x + batch.cuda()).mean()
            loss.backward()
            optimizer.step()
            print(p2p.loss_value(loss))
"""


# Megatron-LM allocates in a nested function that the schedule calls later (`create_tensor_recv_prev`).
IN_A_CLOSURE = (
    "        buf = torch.empty(recv_shape, requires_grad=True,",
    "        def create_recv():\n            return torch.empty(recv_shape, requires_grad=True, device=torch.cuda.current_device())\n"
    "        buf = create_recv()\n        buf2 = torch.empty((4, 4), requires_grad=True,",
)


# Megatron-LM exchanges shapes only with variable sequence lengths; the `else` branch, read last, takes a given shape.
IN_ONE_BRANCH = (
    "        recv_shape = _communicate_shapes(recv_prev)\n",
    "        if recv_prev:\n            recv_shape = _communicate_shapes(recv_prev)\n        else:\n            recv_shape = (4, 4)\n",
)


@pytest.mark.parametrize("where", ["in the caller", "in a closure of the caller", "in one branch of the caller"])
def test_a_received_shape_that_sizes_the_receive_buffer_is_not_reported(tmp_path, monkeypatch, where):
    variants = {"in the caller": P2P, "in a closure of the caller": P2P.replace(*IN_A_CLOSURE)}
    p2p = variants.get(where) or P2P.replace(*IN_ONE_BRANCH)
    diagnostics = lint(write(tmp_path, {"p2p.py": p2p, "schedule.py": SCHEDULE}), monkeypatch, select=("GPU303",))
    # Only the loss value read for printing is reported (through the helper that returns it).
    assert found(diagnostics) == ["schedule.py:15 GPU303"]
    line = 33 if where == "in the caller" else 36
    assert diagnostics[0].message == (
        f"`p2p.loss_value(loss)` (`.item()` at p2p.py:{line}) waits for the GPU every training step (loop at line 10)"
    )


def test_a_returned_read_the_caller_does_not_size_with_is_still_reported(tmp_path, monkeypatch):
    p2p = P2P.replace(
        "buf = torch.empty(recv_shape, requires_grad=True,", "print(recv_shape)\n        buf = torch.empty((4, 4), requires_grad=True,"
    )
    diagnostics = lint(write(tmp_path, {"p2p.py": p2p, "schedule.py": SCHEDULE}), monkeypatch, select=("GPU303",))
    assert found(diagnostics) == ["schedule.py:11 GPU303", "schedule.py:15 GPU303"]
    assert "(`.tolist()` at p2p.py:10)" in diagnostics[0].message
