"""Command-line options of a parser another module defines (`from opts import parser; args = parser.parse_args()`,
temporal-shift-module's layout): value resolution reads their defaults where that module writes them
(`analysis/imported_options.py`), for every rule that reads an argparse default."""

from __future__ import annotations

from tests.projects_helper import lint, lint_written, write

OPTS = """\
    import argparse

    parser = argparse.ArgumentParser(description="video models")
    parser.add_argument("--gpus", nargs="+", type=int, default={gpus})
    parser.add_argument("--debug", action="store_true"{debug})
    parser.add_argument("--epochs", type=int, default=10)
"""
MAIN = """\
    import torch
    import torchvision
    from torch import nn

    {import_line}


    def main(loader):
        args = {parse}
        model = torchvision.models.resnet50()
        model = torch.nn.DataParallel(model, device_ids=args.gpus).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(args.epochs):
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                if args.debug:
                    print(loss.item())


    if __name__ == "__main__":
        main([])
"""
FROM_IMPORT = {"import_line": "from opts import parser", "parse": "parser.parse_args()"}


def _project(tmp_path, monkeypatch, gpus="None", debug="", **main):
    files = {"opts.py": OPTS.format(gpus=gpus, debug=debug), "main.py": MAIN.format(**{**FROM_IMPORT, **main})}
    return lint_written(tmp_path, files, monkeypatch)


def test_device_ids_from_an_imported_parser_that_default_to_none_spread_over_every_gpu(tmp_path, monkeypatch):
    assert "main.py:11 GPU401" in _project(tmp_path, monkeypatch)
    (diagnostic,) = [d for d in lint(tmp_path, monkeypatch) if d.code == "GPU401"]
    assert diagnostic.message == (
        "`DataParallel` (`device_ids` is `None` unless given, the argparse default of another module at opts.py:4: "
        "it spreads over every visible GPU) runs one process with a thread per GPU"
    )


def test_the_module_and_its_parser_imported_whole_or_with_known_args(tmp_path, monkeypatch):
    whole = {"import_line": "import opts", "parse": "opts.parser.parse_args()"}
    assert "main.py:11 GPU401" in _project(tmp_path, monkeypatch, **whole)
    known = {"parse": "parser.parse_known_args()[0]"}
    assert "main.py:11 GPU401" in _project(tmp_path / "known", monkeypatch, **known)


def test_device_ids_from_an_imported_parser_with_a_list_default_stay_silent(tmp_path, monkeypatch):
    assert "main.py:11 GPU401" not in _project(tmp_path, monkeypatch, gpus="[0]")


def test_a_parser_built_here_under_the_same_name_is_not_the_imported_one(tmp_path, monkeypatch):
    # `parser` rebound in this module: its own options (none named `gpus` here), not opts.py's
    local = {"import_line": "import argparse", "parse": "argparse.ArgumentParser().parse_args()"}
    assert "main.py:11 GPU401" not in _project(tmp_path, monkeypatch, **local)


def test_a_debug_switch_of_an_imported_parser_is_off_as_shipped(tmp_path, monkeypatch):
    found = _project(tmp_path, monkeypatch)
    assert "main.py:20 GPU303" not in found  # `if args.debug: print(loss.item())`: off unless `--debug` is given
    on = _project(tmp_path / "on", monkeypatch, debug=", default=True")
    assert "main.py:20 GPU303" in on


def test_a_worker_count_of_an_imported_parser_is_read_without_a_fix_here(tmp_path, monkeypatch):
    opts = OPTS.format(gpus="None", debug="") + '    parser.add_argument("--workers", type=int, default=0)\n'
    main = """\
        import torch
        from opts import parser

        args = parser.parse_args()


        class Frames(torch.utils.data.Dataset):
            def __len__(self):
                return 10000

            def __getitem__(self, i):
                return torch.load(f"frames/{i}.pt")


        loader = torch.utils.data.DataLoader(Frames(), batch_size=64, num_workers=args.workers)
        model = torch.nn.Linear(4096, 4096).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(args.epochs):
            for x in loader:
                loss = model(x.cuda()).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """
    write(tmp_path, {"opts.py": opts, "main.py": main})
    diagnostics = [d for d in lint(tmp_path, monkeypatch) if d.code == "GPU101"]
    assert [d.location.row for d in diagnostics] == [15]
    assert diagnostics[0].fix is None  # the 0 is written in opts.py: not an edit of the read here
    assert "argparse default of another module at opts.py:7" in diagnostics[0].message
