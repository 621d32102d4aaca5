"""Values through calls and containers, in one module: the parsed command line returned by a helper, `**kwargs`
dicts built nearby, loaders kept in dicts and tuples or handed to a class, batches taken through wrappers and
generators, and the legacy `Tensor` alias / `Variable` moves. Each fact shows up in the findings a user gets."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import diagnostics, findings, fixed

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")


def codes(source: str, select: tuple[str, ...] = ("GPU1",)) -> list[str]:
    return findings(source, select=select)


def fix(source: str, select: tuple[str, ...], unsafe: bool = False) -> str:
    result = fixed(source, unsafe=unsafe, select=select)
    compile(result, "train.py", "exec")
    return result


def messages(source: str, code: str) -> list[str]:
    return [d.message for d in diagnostics(source, select=(code,))]


TRAIN_STEP = """\
            loss = model(x.to(device)).sum()
            loss.backward()
            optimizer.step()
"""


# ---- the parsed command line returned by a function of this module ----------------------------------


GET_ARGS = """\
import argparse
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--workers", type=int, default=0)
    return parser.parse_args()


def main():
    opts = get_args()
    loader = DataLoader(ds, batch_size=opts.batch_size, num_workers=opts.workers, shuffle=True)
    for x, y in loader:
        loss = model(x.to(device)).sum()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_get_args_resolves_argparse_defaults_and_the_fix_edits_them():
    assert codes(GET_ARGS, ("GPU101", "GPU103")) == ["17:14 GPU101", "17:14 GPU103"]
    [workers] = messages(GET_ARGS, "GPU101")
    assert "`num_workers=0` (argparse default at train.py:11)" in workers
    [batch] = messages(GET_ARGS, "GPU103")
    assert "`batch_size=8` (argparse default at train.py:10)" in batch
    assert 'parser.add_argument("--batch-size", type=int, default=64)' in fix(GET_ARGS, ("GPU103",), unsafe=True)


def test_parse_opt_with_parse_known_args_and_a_name_returned():
    source = GET_ARGS.replace(
        "    return parser.parse_args()",
        "    opt = parser.parse_known_args()[0] if known else parser.parse_args()\n    return opt",
    ).replace("def get_args():", "def get_args(known=False):")
    assert codes(source, ("GPU101", "GPU103")) == ["18:14 GPU101", "18:14 GPU103"]


def test_a_helper_that_returns_something_else_is_not_the_command_line():
    # `vars(...)` is a dict, a YAML config may set anything: nothing is claimed about its values.
    for returned in ("vars(parser.parse_args())", "load_config(parser.parse_args().config)"):
        source = GET_ARGS.replace("return parser.parse_args()", f"return {returned}")
        assert codes(source, ("GPU101", "GPU103")) == []


# ---- `**kwargs` dicts built nearby ---------------------------------------------------------------------


ACCEL_KWARGS = """\
import torch
from torch.utils.data import DataLoader


def main(args):
    use_cuda = not args.no_cuda and torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    train_kwargs = {"batch_size": 64}
    if use_cuda:
        cuda_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}
        train_kwargs.update(cuda_kwargs)
    loader = DataLoader(dataset, **train_kwargs)
    for epoch in range(10):
        for x, y in loader:
            loss = model(x.to(device)).sum()
            loss.backward()
            optimizer.step()
"""


def test_keywords_set_under_if_use_cuda_are_seen_on_gpu_runs():
    # Pinned with a worker on GPU runs: the blocking copy is the finding, not missing pinning or workers.
    assert codes(ACCEL_KWARGS) == ["12:14 GPU104", "15:26 GPU105"]
    assert "x.to(device, non_blocking=True)" in fix(ACCEL_KWARGS, ("GPU105",))


def test_a_key_set_on_a_user_flag_branch_is_maybe_and_never_claimed_missing():
    source = ACCEL_KWARGS.replace("if use_cuda:", "if args.fast_loading:")
    # pin_memory and num_workers may be set: no GPU101/GPU102/GPU104 claim, no GPU105 (pinning unknown).
    assert codes(source) == []


def test_a_key_missing_on_every_path_is_reported_and_the_fix_keeps_the_unpacking():
    source = ACCEL_KWARGS.replace('"num_workers": 1, "pin_memory": True, ', "")
    assert codes(source, ("GPU101", "GPU102")) == ["12:14 GPU101", "12:14 GPU102"]
    assert "    loader = DataLoader(dataset, **train_kwargs, pin_memory=torch.cuda.is_available())\n" in fix(
        source, ("GPU102",), unsafe=True
    )


def test_the_else_branch_of_a_cuda_test_does_not_run_on_gpu_runs():
    source = ACCEL_KWARGS.replace(
        '        cuda_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}\n        train_kwargs.update(cuda_kwargs)\n',
        '        train_kwargs["num_workers"] = 2\n        train_kwargs["pin_memory"] = True\n    else:\n        train_kwargs["pin_memory"] = False\n',
    )
    assert codes(source, ("GPU101", "GPU102", "GPU105")) == ["17:26 GPU105"]


def test_dict_call_in_a_conditional_expression_and_a_value_that_lives_in_the_dict():
    source = textwrap.dedent("""\
        import torch
        cuda = torch.cuda.is_available()
        loader_args = dict(shuffle=True, batch_size=512, num_workers=0, pin_memory=True) if cuda else dict(shuffle=True)
        train_loader = torch.utils.data.DataLoader(train, **loader_args)
    """)
    [message] = messages(source, "GPU101")
    assert message.startswith("`DataLoader` uses `num_workers=0` (config dict at train.py:3)")


def test_pop_removes_a_key_for_sure():
    source = ACCEL_KWARGS.replace("    loader = DataLoader", '    train_kwargs.pop("pin_memory")\n    loader = DataLoader')
    assert codes(source, ("GPU102",)) == ["13:14 GPU102"]


def test_a_dict_that_another_function_may_change_is_unknown():
    for change in ("    configure(train_kwargs)\n", "    train_kwargs[key] = value\n", "    del train_kwargs['pin_memory']\n"):
        source = ACCEL_KWARGS.replace("    loader = DataLoader", change + "    loader = DataLoader")
        assert codes(source) == [], change
    as_parameter = ACCEL_KWARGS.replace("def main(args):", "def main(args, **train_kwargs):").replace(
        '    train_kwargs = {"batch_size": 64}\n', ""
    )
    assert codes(as_parameter) == []


# ---- loaders kept in containers, handed to classes, iterated through wrappers ------------------------------


HEADER = """\
import itertools
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

device = torch.device("cuda")
"""


def gpu102(body: str) -> list[str]:
    return [line.split(" ")[0] for line in findings(HEADER + textwrap.dedent(body), select=("GPU102",))]


def test_loaders_in_a_dict_only_the_iterated_entry_reports():
    assert gpu102("""
        loaders = {"train": DataLoader(train_set, batch_size=64, num_workers=4), "val": DataLoader(val_set, batch_size=64, num_workers=4)}
        for x, y in loaders["train"]:
            out = model(x.to(device))
        for x, y in loaders["val"]:
            out = model(x)
    """) == ["8:21"]


def test_loaders_in_a_dict_comprehension_and_a_subscript_by_phase():
    assert gpu102("""
        dataloaders = {p: DataLoader(sets[p], batch_size=64, num_workers=4) for p in ["train", "val"]}
        for phase in ["train", "val"]:
            for inputs, labels in dataloaders[phase]:
                out = model(inputs.to(device))
    """) == ["8:19"]


def test_loaders_in_tuples_assigned_and_returned():
    assert gpu102("""
        train_loader, val_loader = DataLoader(a, batch_size=64, num_workers=4), DataLoader(b, batch_size=64, num_workers=4)
        for x in val_loader:
            out = model(x.cuda())

        def make_loaders():
            return DataLoader(a, batch_size=64, num_workers=4), DataLoader(b, batch_size=64, num_workers=4)

        loaders = make_loaders()
        for x in loaders[0]:
            out = model(x.cuda())
    """) == ["8:73", "13:12"]


def test_a_loader_given_to_a_class_and_iterated_in_a_method():
    assert gpu102("""
        class Trainer:
            def __init__(self, model, train_loader):
                self.model = model
                self.train_loader = train_loader

            def fit(self):
                for x, y in self.train_loader:
                    loss = self.model(x.to(device)).sum()
                    loss.backward()

        Trainer(model, DataLoader(ds, batch_size=64, num_workers=4)).fit()
    """) == ["18:16"]


def test_wrappers_bound_to_names_islice_and_generators_of_this_module():
    assert gpu102("""
        def forever(data):
            while True:
                yield from data

        def batches(loader):
            for batch in loader:
                yield batch

        a = DataLoader(ds, batch_size=64, num_workers=4)
        pbar = tqdm(a)
        for i, batch in enumerate(pbar):
            out = model(batch.cuda())
        b = DataLoader(ds, batch_size=64, num_workers=4)
        for batch in itertools.islice(b, 100):
            out = model(batch.cuda())
        c = DataLoader(ds, batch_size=64, num_workers=4)
        for step, batch in enumerate(forever(c)):
            out = model(batch.cuda())
        d = DataLoader(ds, batch_size=64, num_workers=4)
        for x in batches(d):
            out = model(x.cuda())
    """) == ["16:5", "20:5", "23:5", "26:5"]


def test_a_generator_that_yields_something_else_is_not_a_passthrough():
    # `make_pairs` yields new values: its callers' loops do not take the loader's batches.
    assert gpu102("""
        def make_pairs(loader):
            for batch in loader:
                yield batch, len(batch)

        loader = DataLoader(ds, batch_size=64, num_workers=4)
        for pair in make_pairs(loader):
            out = model(pair.cuda())
    """) == []


# ---- the legacy `Tensor` alias and `Variable` -------------------------------------------------------------


GAN = """\
import torch
from torch.autograd import Variable

cuda = True if torch.cuda.is_available() else False
if cuda:
    generator.cuda()
dataloader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4)
Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
LongTensor = torch.cuda.LongTensor if cuda else torch.LongTensor
for epoch in range(10):
    for i, (imgs, labels) in enumerate(dataloader):
        real_imgs = Variable(imgs.type(Tensor))
        fake_labels = Variable(LongTensor(imgs.size(0)).fill_(1))
        loss = criterion(generator(real_imgs), fake_labels)
        loss.backward()
        optimizer.step()
        accuracy = (fake_labels.data.cpu().numpy() == 1).mean()
"""


NUMPY_ACCURACY = "accuracy = (fake_labels.data.cpu().numpy() == 1).mean()"
GPU_ACCURACY = "accuracy = (fake_labels.data == 1).float().mean()"


def test_type_to_the_alias_is_a_copy_to_the_gpu():
    [message] = messages(GAN, "GPU102")
    assert "(`imgs.type(Tensor)` at line 12)" in message
    pinned = GAN.replace("num_workers=4)", "num_workers=4, pin_memory=True)")
    # the per-step `.cpu()` read drains the queue before the next copy: GPU105 waits for GPU303 (step_syncs)
    assert codes(pinned, ("GPU102", "GPU105")) == []
    pinned = pinned.replace(NUMPY_ACCURACY, GPU_ACCURACY)
    assert codes(pinned, ("GPU102", "GPU105")) == ["12:30 GPU105"]
    assert "Variable(imgs.type(Tensor, non_blocking=True))" in fix(pinned, ("GPU105",))


def test_tensors_built_from_the_alias_are_gpu_tensors():
    assert codes(GAN, ("GPU303",)) == ["17:21 GPU303"]  # `fake_labels.data.cpu()` every step


def test_a_cpu_only_alias_moves_nothing():
    for cpu in ("torch.FloatTensor", "torch.Tensor"):
        source = GAN.replace("torch.cuda.FloatTensor if cuda else torch.FloatTensor", cpu)
        # No copy is seen; the batches still reach the GPU model the loop trains, which is what is reported.
        [d] = diagnostics(source, select=("GPU102",))
        assert "imgs.type" not in d.message and "(they feed the training loop at line 11, which runs a GPU model)" in d.help
    torch_tensor_else = GAN.replace("else torch.FloatTensor", "else torch.Tensor")
    assert codes(torch_tensor_else, ("GPU102",)) == ["7:14 GPU102"]


def test_variable_of_a_batch_then_cuda_moves_the_batch():
    source = GAN.replace("Variable(imgs.type(Tensor))", "Variable(imgs).cuda()").replace(
        "num_workers=4)", "num_workers=4, pin_memory=True)"
    ).replace(NUMPY_ACCURACY, GPU_ACCURACY)
    assert codes(source, ("GPU105",)) == ["12:21 GPU105"]
    assert "Variable(imgs).cuda(non_blocking=True)" in fix(source, ("GPU105",))


def test_a_change_between_two_possible_bindings_makes_the_dict_unknown():
    source = ACCEL_KWARGS.replace(
        "    if use_cuda:\n        cuda_kwargs",
        '    train_kwargs["pin_memory"] = False\n    if args.reset:\n        train_kwargs = {"batch_size": 64}\n    if use_cuda:\n        cuda_kwargs',
    ).replace('"num_workers": 1, "pin_memory": True, ', '"num_workers": 1, ')
    # `pin_memory=False` holds only when the dict was not rebuilt: nothing is claimed about it.
    assert codes(source, ("GPU102",)) == []
