"""The model's name resolution: an imported name names its import only until an assignment rebinds it
(`import models.crnn as crnn` then `crnn = crnn.CRNN(...)`: from there on `crnn` is the model object)."""

from __future__ import annotations

import textwrap

import libcst as cst

from gpulint.analysis import SemanticModel


def resolved(source: str) -> dict[tuple[str, int], str | None]:
    """(dotted code, line) -> its qualified name, for every `name.attr` of the module."""
    source = textwrap.dedent(source)
    model = SemanticModel(cst.parse_module(source), "train.py", source)
    return {
        (model.code(node), model.line_of(node)): model.qualified_name(node)
        for node in model.attributes
        if isinstance(node.value, cst.Name)
    }


def test_an_assignment_after_the_import_rebinds_the_name_from_there_on():
    names = resolved(
        """\
        import models.crnn as crnn
        old = crnn.CRNN(1)
        crnn = crnn.CRNN(2)
        crnn.cuda()
        def val():
            crnn.eval()
        """
    )
    assert names[("crnn.CRNN", 2)] == "models.crnn.CRNN"
    assert names[("crnn.CRNN", 3)] == "models.crnn.CRNN"  # its own value reads the import, before the binding
    assert names[("crnn.cuda", 4)] is None
    assert names[("crnn.eval", 6)] is None  # a function runs after the module's code: it sees the model


def test_an_assignment_in_a_branch_or_handler_leaves_the_import_on_the_other_path():
    names = resolved(
        """\
        import torch
        try:
            import wandb
        except ImportError:
            wandb = None
        if small:
            torch = fake_torch
        wandb.init()
        torch.zeros(1)
        def log():
            wandb.log({})
        """
    )
    assert names[("wandb.init", 8)] == "wandb.init"
    assert names[("torch.zeros", 9)] == "torch.zeros"
    assert names[("wandb.log", 11)] == "wandb.log"


def test_an_assignment_before_the_import_or_in_another_function_does_not_rebind_it():
    names = resolved(
        """\
        torch = None
        import torch
        torch.zeros(1)
        def build():
            nn = make()
            return nn
        import torch.nn as nn
        nn.Linear(1, 1)
        """
    )
    assert names[("torch.zeros", 3)] == "torch.zeros"
    assert names[("nn.Linear", 8)] == "torch.nn.Linear"


def test_a_local_binding_makes_the_name_local_in_its_function():
    names = resolved(
        """\
        import numpy as np
        def f(np):
            np.sum()
        def g():
            np = np_like()
            np.mean()
        def h():
            import numpy as np
            np.max()
            np = np.array(3)
            np.min()
        """
    )
    assert names[("np.sum", 3)] is None
    assert names[("np.mean", 6)] is None
    assert names[("np.max", 9)] == "numpy.max"
    assert names[("np.array", 10)] == "numpy.array"
    assert names[("np.min", 11)] is None


def test_a_loop_variable_rebinds_the_name_only_in_the_loop_body():
    names = resolved(
        """\
        import models
        for models in zoo.models():
            models.fit()
        models.build()
        """
    )
    assert names[("models.fit", 3)] is None
    assert names[("models.build", 4)] == "models.build"


def test_the_main_guard_assignment_is_what_a_function_sees():
    names = resolved(
        """\
        import model
        def train():
            model.train()
        if __name__ == "__main__":
            model = model.Net()
            train()
        """
    )
    assert names[("model.train", 3)] is None
    assert names[("model.Net", 5)] == "model.Net"


def test_a_global_declaration_makes_the_function_bind_the_module_name():
    names = resolved(
        """\
        import models.crnn as crnn
        def build():
            global crnn
            if True:
                crnn = crnn.CRNN(2)
            crnn.cuda()
        """
    )
    assert names[("crnn.CRNN", 5)] == "models.crnn.CRNN"
    assert names[("crnn.cuda", 6)] == "models.crnn.cuda"  # the assignment is in a branch: the import may still hold


def test_a_global_assignment_binds_from_there_on_in_its_function():
    names = resolved(
        """\
        import models.crnn as crnn
        def build():
            global crnn
            crnn = crnn.CRNN(2)
            crnn.cuda()
        """
    )
    assert names[("crnn.CRNN", 4)] == "models.crnn.CRNN"
    assert names[("crnn.cuda", 5)] is None
