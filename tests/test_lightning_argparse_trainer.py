"""Lightning 1.x `Trainer.from_argparse_args(args)`: its accelerator comes from the command line (`--gpus`), so
it may run on a GPU; the loaders handed to its `fit` feed that GPU (GPU102), as with `Trainer(...)`."""

from __future__ import annotations

from tests.conftest import diagnostics

SCRIPT = """\
    from argparse import ArgumentParser

    import pytorch_lightning as pl
    from torch.utils.data import DataLoader

    from model import LitClassifier


    def cli_main():
        parser = ArgumentParser()
        parser = pl.Trainer.add_argparse_args(parser)
        args = parser.parse_args()
        train_loader = DataLoader(mnist_train, batch_size=32, num_workers=4)
        trainer = pl.Trainer.from_argparse_args(args{arguments})
        trainer.fit(LitClassifier(), train_loader)


    if __name__ == "__main__":
        cli_main()
    """


def test_loaders_fed_to_a_trainer_built_from_argparse_args_need_pinned_memory():
    [finding] = [d for d in diagnostics(SCRIPT.format(arguments="")) if d.code == "GPU102"]
    assert finding.location.row == 13
    assert finding.message == "`DataLoader` has no `pin_memory` but its batches are copied to the GPU by `trainer.fit(...)` at line 15"


def test_a_trainer_from_argparse_args_on_the_cpu_feeds_no_gpu():
    assert [d for d in diagnostics(SCRIPT.format(arguments=', accelerator="cpu"')) if d.code == "GPU102"] == []
