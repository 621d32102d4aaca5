"""GPU401 data-parallel: `nn.DataParallel` where it can spread over several GPUs."""

from __future__ import annotations

from gpulint.diagnostics import Severity
from tests.conftest import diagnostics, findings

GPU401 = {"select": ("GPU401",)}


def test_data_parallel_over_every_visible_gpu():
    source = """\
        import torch
        from torch import nn

        model = nn.DataParallel(nn.Linear(2048, 4096)).cuda()
        """
    assert findings(source, **GPU401) == ["4:9 GPU401"]
    (diagnostic,) = diagnostics(source, **GPU401)
    assert "every visible GPU" in diagnostic.message and "DistributedDataParallel" in diagnostic.help
    assert diagnostic.fix is None
    assert diagnostic.severity == Severity.INFO  # nothing is trained in this module


def test_training_script_gets_a_warning():
    source = """\
        import torch

        model = torch.nn.parallel.DataParallel(net, device_ids=[0, 1]).cuda()
        for x in loader:
            model(x.cuda()).sum().backward()
            optimizer.step()
        """
    (diagnostic,) = diagnostics(source, **GPU401)
    assert diagnostic.severity == Severity.WARNING
    assert "`device_ids` names 2 GPUs" in diagnostic.message


def test_device_count_guard_through_a_variable():
    source = """\
        import torch

        args.n_gpu = torch.cuda.device_count()
        if args.n_gpu > 1:
            model = torch.nn.DataParallel(model, device_ids=gpus)
        """
    assert findings(source, **GPU401) == ["5:13 GPU401"]


def test_device_ids_over_all_devices():
    source = """\
        import torch

        model = torch.nn.DataParallel(model, device_ids=list(range(torch.cuda.device_count())))
        """
    assert findings(source, **GPU401) == ["3:9 GPU401"]


def test_functional_data_parallel_and_subclasses():
    source = """\
        import torch
        from torch.nn.parallel import data_parallel


        class Parallel(torch.nn.DataParallel):
            pass


        y = data_parallel(model, x.cuda())
        wrapped = Parallel(model)
        """
    assert findings(source, **GPU401) == ["9:5 GPU401", "10:11 GPU401"]


def test_single_device_is_silent():
    source = """\
        import torch

        model = torch.nn.DataParallel(model, device_ids=[0]).cuda()
        if torch.cuda.device_count() > 1:
            model = torch.nn.DataParallel(model, device_ids=[args.gpu])
        """
    assert findings(source, **GPU401) == []


def test_unknown_device_ids_without_a_guard_are_silent():
    assert findings("import torch\nmodel = torch.nn.DataParallel(model, device_ids=gpus).cuda()\n", **GPU401) == []


def test_isinstance_checks_and_ddp_are_silent():
    source = """\
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model.cuda(), device_ids=[rank])
        if isinstance(model, (torch.nn.DataParallel, DDP)):
            model = model.module
        """
    assert findings(source, **GPU401) == []


def test_other_libraries_data_parallel_is_silent():
    source = """\
        import torch
        from torch_geometric.nn import DataParallel

        model = DataParallel(model).cuda()
        """
    assert findings(source, **GPU401) == []


def test_toy_model_state_dict_demo_is_silent():
    # A 3-unit net (and `Linear(10, 1)`) wrapped only to show the `module.` prefix of its state_dict keys.
    source = """\
        import torch
        from torch import nn

        class FooNet(nn.Module):
            def __init__(self, neural_num, layers=3):
                super().__init__()
                self.linears = nn.ModuleList([nn.Linear(neural_num, neural_num, bias=False) for i in range(layers)])

            def forward(self, x):
                for linear in self.linears:
                    x = torch.relu(linear(x))
                return x

        net = nn.DataParallel(FooNet(neural_num=3, layers=3))
        net.to(torch.device("cuda"))
        small = torch.nn.Linear(10, 1).cuda()
        small = torch.nn.DataParallel(small)
        torch.save(small.state_dict(), "model.pt")
        """
    assert findings(source, **GPU401) == []


def test_large_module_list_is_still_reported():
    source = """\
        import torch
        from torch import nn

        class Deep(nn.Module):
            def __init__(self, width=1024, layers=24):
                super().__init__()
                self.linears = nn.ModuleList([nn.Linear(width, width) for _ in range(layers)])

        model = nn.DataParallel(Deep()).cuda()
        """
    assert findings(source, **GPU401) == ["9:9 GPU401"]


def test_switch_shipped_off_is_silent():
    source = """\
        import torch
        from torch import nn

        ngpu = 0  # Number of GPUs available. Use 0 for CPU mode.
        IS_PARALLEL = True if ngpu > 1 else False

        def build(net_g, net_d):
            if IS_PARALLEL and torch.cuda.device_count() > 1:
                net_g = nn.DataParallel(net_g)
            if ngpu > 1:
                net_d = nn.DataParallel(net_d)
            return net_g, net_d
        """
    assert findings(source, **GPU401) == []


def test_switch_from_the_command_line_or_the_hardware_is_reported():
    # A command-line default is changed at launch; a device count is only known at run time.
    source = """\
        import argparse
        import torch
        from torch import nn

        parser = argparse.ArgumentParser()
        parser.add_argument("--ngpu", type=int, default=1)
        opt = parser.parse_args()
        ngpu = 2
        ngpu = torch.cuda.device_count()
        if opt.ngpu > 1:
            net_g = nn.DataParallel(net_g)
        if ngpu > 1:
            net_d = nn.DataParallel(net_d)
        """
    assert findings(source, **GPU401) == ["11:13 GPU401", "13:13 GPU401"]


_SPLIT_BATCH = """\
    import torch
    import torch.nn as nn

    batch_size = 64
    num_gpus = {count}


    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(100, 256 * 7 * 7)
            self.conv = nn.ConvTranspose2d(256, 1, 4, 4)

        def forward(self, z):
            out = self.fc(z).view(batch_size // num_gpus, 256, 7, 7)  # each replica's share of the batch
            return self.conv(out)


    generator = nn.DataParallel(Generator()).cuda()
    optimizer = torch.optim.Adam(generator.parameters())
    for epoch in range(100):
        loss = generator(torch.randn(batch_size, 100).cuda()).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """


def test_code_written_for_the_one_gpu_it_names_is_silent():
    # `num_gpus = 1`, read where the model splits its batch: DataParallel runs on one GPU as shipped (a pass-through)
    assert findings(_SPLIT_BATCH.format(count=1), **GPU401) == []


def test_code_written_for_several_gpus_it_names_is_reported():
    assert findings(_SPLIT_BATCH.format(count=4), **GPU401) == ["19:13 GPU401"]


def test_a_gpu_count_that_is_computed_or_set_twice_is_no_shipped_count():
    computed = _SPLIT_BATCH.format(count="torch.cuda.device_count()")
    assert findings(computed, **GPU401) == ["19:13 GPU401"]
    overridden = _SPLIT_BATCH.format(count=1).replace("    optimizer = ", "    num_gpus = 2\n    optimizer = ")
    assert findings(overridden, **GPU401) == ["19:13 GPU401"]
    unread = _SPLIT_BATCH.format(count=1).replace("batch_size // num_gpus", "batch_size")
    assert findings(unread, **GPU401) == ["19:13 GPU401"]  # a count the code never reads says nothing
    index = _SPLIT_BATCH.format(count=1).replace("num_gpus", "gpu")
    assert findings(index, **GPU401) == ["19:13 GPU401"]  # `gpu = 1` names a device, not a count


GPUS_FLAG = """\
    import argparse
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", nargs="+", type=int, default=DEFAULT)
    args = parser.parse_args()
    model = torch.nn.DataParallel(torch.nn.Linear(4096, 4096), device_ids=args.gpus).cuda()
    """


def test_device_ids_from_a_flag_that_defaults_to_none_spread_over_every_gpu():
    # temporal-shift-module's `--gpus` (eighteenth corpus): left out, DataParallel takes every visible GPU
    (diagnostic,) = diagnostics(GPUS_FLAG.replace("DEFAULT", "None"), **GPU401)
    assert diagnostic.message == (
        "`DataParallel` (`device_ids` is `None` unless given, the argparse default at train.py:5: it spreads over every "
        "visible GPU) runs one process with a thread per GPU"
    )


def test_device_ids_from_a_flag_with_a_list_default_or_one_shipped_gpu_stay_silent():
    assert findings(GPUS_FLAG.replace("DEFAULT", "[0]"), **GPU401) == []
    one_gpu = GPUS_FLAG.replace("DEFAULT", "None").replace("args = parser.parse_args()\n", "args = parser.parse_args()\n    num_gpus = 1\n    batch = 64 // num_gpus\n")
    assert findings(one_gpu, **GPU401) == []


EVAL_SCRIPT = """\
    import torch
    from models import TSN

    net_list = []
    for weights in ["a.pth", "b.pth"]:
        net = TSN(400)
        net.load_state_dict(torch.load(weights))
        net = torch.nn.DataParallel(net.cuda())
        net.eval()
        net_list.append(net)

    with torch.no_grad():
        for batch in loader:
            outputs = [net(batch.cuda()) for net in net_list]
    """


def test_dataparallel_in_an_evaluation_script_that_trains_nothing_is_silent():
    # temporal-shift-module's test_models.py: the wrapper kept in a list of models, every use under no_grad
    assert findings(EVAL_SCRIPT, **GPU401) == []


def test_dataparallel_in_a_script_that_trains_or_in_a_function_stays_reported():
    training = EVAL_SCRIPT.replace(
        "outputs = [net(batch.cuda()) for net in net_list]", "loss = net_list[0](batch.cuda()).sum()\n            loss.backward()"
    )
    assert findings(training, **GPU401) == ["8:11 GPU401"]
    fitted = EVAL_SCRIPT + "trainer.fit(net_list[0])\n"
    assert findings(fitted, **GPU401) == ["8:11 GPU401"]
    no_eval = EVAL_SCRIPT.replace("        net.eval()\n", "").replace("with torch.no_grad():", "if True:")
    assert findings(no_eval, **GPU401) == ["8:11 GPU401"]  # nothing says it evaluates: a bare wrap
