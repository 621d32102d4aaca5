"""The loader-to-loop data flow behind GPU101-GPU106: which loops take a loader's batches, which names hold
them, which of them go to CUDA, and whether a loop trains or evaluates."""

from __future__ import annotations

import textwrap

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.analysis.loader_flow import EVAL, TRAIN, UNKNOWN


def flow(source: str):
    text = HEADER + textwrap.dedent(source)
    model = SemanticModel(cst.parse_module(text), "train.py", text)
    return model, model.loader_flow.infos


def moved(model, info) -> list[str]:
    return [model.code(move.call) for move in info.moves]


HEADER = """\
import torch
from torch.utils.data import DataLoader
device = torch.device("cuda")
"""


def test_direct_loop_with_enumerate_and_tuple_target():
    model, [info] = flow("""
        loader = DataLoader(ds, batch_size=64)
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device), y.cuda()
            loss = model(x, y)
            loss.backward()
    """)
    [iteration] = info.iterations
    assert iteration.batch_names == {"x", "y"} and iteration.whole_batch is None
    assert moved(model, info) == ["x.to(device)", "y.cuda()"]
    assert info.role == TRAIN


def test_tqdm_zip_and_subscripts_and_dict_values():
    model, [a, b] = flow("""
        from tqdm import tqdm
        loader_a = DataLoader(ds_a, batch_size=64)
        loader_b = DataLoader(ds_b, batch_size=64)
        for batch_a, batch_b in tqdm(zip(loader_a, loader_b)):
            inputs = {k: v.to(device) for k, v in batch_a.items()}
            target = batch_b["label"].to(device=device)
    """)
    assert moved(model, a) == ["v.to(device)"]
    assert moved(model, b) == ['batch_b["label"].to(device=device)']


def test_unpacked_batch_elements_and_list_comprehension():
    model, [info] = flow("""
        loader = DataLoader(ds, batch_size=64)
        for batch in loader:
            ids, mask = batch
            batch = [t.to(device) for t in batch]
            ids.to("cuda:0")
    """)
    assert moved(model, info) == ["t.to(device)", 'ids.to("cuda:0")']


def test_dtype_moves_and_other_tensors_are_not_batch_moves():
    model, [info] = flow("""
        loader = DataLoader(ds, batch_size=64)
        for x in loader:
            x.to(torch.float16)
            weights.to(device)
            x.float().to(device)
    """)
    assert moved(model, info) == []


def test_loader_passed_into_a_function_and_returned_from_a_factory():
    model, [train_info, val_info] = flow("""
        def loaders():
            train = DataLoader(ds, batch_size=64, shuffle=True)
            return train, DataLoader(val_ds, batch_size=64)

        def fit(model, loader, opt):
            for x, y in loader:
                opt.zero_grad()
                model(x.to(device)).backward()
                opt.step()

        def evaluate(model, loader):
            model.eval()
            for x, y in loader:
                model(x.to(device))

        def main():
            train_loader, val_loader = loaders()
            for epoch in range(10):
                fit(model, train_loader, opt)
                evaluate(model, loader=val_loader)
    """)
    assert moved(model, train_info) == ["x.to(device)"]
    assert moved(model, val_info) == ["x.to(device)"]
    assert train_info.role == TRAIN and val_info.role == EVAL
    [iteration] = train_info.iterations
    assert [model.code(call) for call in iteration.via] == ["fit(model, train_loader, opt)"]
    assert model.line_of(model.loader_flow.epoch_loop(train_info, iteration)) == 22


def test_iter_and_next():
    model, [info] = flow("""
        loader = DataLoader(ds, batch_size=64)
        it = iter(loader)
        while True:
            batch = next(it)
            batch.cuda()
            loss.backward()
    """)
    [iteration] = info.iterations
    assert not iteration.is_for and isinstance(iteration.loop, cst.While)
    assert moved(model, info) == ["batch.cuda()"]


def test_a_lone_next_only_sees_the_statements_after_it():
    model, [first, second] = flow("""
        def main():
            first = DataLoader(ds, batch_size=64)
            for x in first:
                x.to(device)
            second = DataLoader(ds, batch_size=64)
            x = next(iter(second))
            x.cuda()
    """)
    assert moved(model, first) == ["x.to(device)"]
    assert moved(model, second) == ["x.cuda()"]
    assert second.iterations[0].loop is None


def test_self_attribute_loader_in_another_method():
    model, [info] = flow("""
        class Trainer:
            def __init__(self, ds):
                self.loader = DataLoader(ds, batch_size=64)

            def run(self):
                for x in self.loader:
                    self.model(x.to(self.device)).sum().backward()
    """)
    assert moved(model, info) == ["x.to(self.device)"]
    assert info.role == TRAIN


def test_method_called_through_self_with_the_loader():
    model, [info] = flow("""
        class Trainer:
            def fit(self, ds):
                loader = DataLoader(ds, batch_size=64)
                for epoch in range(3):
                    self.train_epoch(loader)

            def train_epoch(self, loader):
                for x in loader:
                    self.model(x.cuda()).sum().backward()
    """)
    [iteration] = info.iterations
    assert moved(model, info) == ["x.cuda()"]
    assert model.loader_flow.epoch_loop(info, iteration) is not None


def test_roles_no_grad_eval_mode_and_train_mode_switch():
    model, infos = flow("""
        a = DataLoader(ds, batch_size=64)
        b = DataLoader(ds, batch_size=64)
        c = DataLoader(ds, batch_size=64)
        d = DataLoader(ds, batch_size=64)
        with torch.no_grad():
            for x in a:
                model(x)
        model.eval()
        for x in b:
            model(x)
        model.train()
        for x in c:
            model(x)
        for x in d:
            model(x).sum().backward()
    """)
    assert [info.role for info in infos] == [EVAL, EVAL, UNKNOWN, TRAIN]


def test_a_rebound_name_is_not_followed():
    model, [info] = flow("""
        loader = DataLoader(ds, batch_size=64)
        loader = accelerator.prepare(loader)
        for x in loader:
            x.to(device)
    """)
    assert info.iterations == [] and info.moves == []


def test_a_new_loader_every_epoch_has_no_epoch_loop():
    model, [info] = flow("""
        for epoch in range(10):
            loader = DataLoader(ds, batch_size=64, num_workers=4)
            for x in loader:
                x.to(device)
    """)
    [iteration] = info.iterations
    assert model.loader_flow.epoch_loop(info, iteration) is None


def test_worker_lower_bound_through_min_and_max():
    model, infos = flow("""
        import os
        a = DataLoader(ds, num_workers=min(8, max(1, os.cpu_count() - 1)))
        b = DataLoader(ds, num_workers=min(8, os.cpu_count()))
        c = DataLoader(ds, num_workers=4)
        d = DataLoader(ds, num_workers=0)
        e = DataLoader(ds, num_workers=min(8, os.cpu_count() - 1))
    """)
    # the CPU count is at least 1; one less may be 0
    assert [model.loader_flow.workers(i.loader)[0] for i in infos] == [True, True, True, False, False]


def test_gradient_accumulation_is_recognised():
    model, infos = flow("""
        for i, x in enumerate(DataLoader(ds)):
            loss = model(x) / accum_steps
            loss.backward()
        for i, x in enumerate(DataLoader(ds)):
            model(x).backward()
            if (i + 1) % 4 == 0:
                opt.step()
        for x in DataLoader(ds):
            with accelerator.accumulate(model):
                model(x).backward()
        for x in DataLoader(ds):
            model(x).backward()
            opt.step()
    """)
    flow_ = model.loader_flow
    assert [flow_.accumulates_gradients(info.iterations[0].loop) for info in infos] == [True, True, True, False]


def test_consuming_loops_keeps_serving_gpu101():
    from gpulint.analysis.hot_loops import consuming_loops

    model, [info] = flow("""
        def train(loader):
            for x in loader:
                pass
        train(DataLoader(ds))
    """)
    [loop] = consuming_loops(model, info.loader.call)
    assert model.line_of(loop) == 6
