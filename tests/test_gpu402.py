"""GPU402 deprecated-memory-api."""

from __future__ import annotations

import textwrap

from tests.conftest import findings, fixed


def test_every_spelling_is_reported_without_gpu_context_and_fixed_safely():
    source = """\
        import torch
        import torch.cuda as tc
        from torch import cuda

        a = torch.cuda.memory_cached()
        b = tc.max_memory_cached(0)
        cuda.reset_max_memory_cached()
        """
    assert findings(source) == ["5:5 GPU402", "6:5 GPU402", "7:1 GPU402"]
    assert fixed(source, unsafe=False) == textwrap.dedent(
        """\
        import torch
        import torch.cuda as tc
        from torch import cuda

        a = torch.cuda.memory_reserved()
        b = tc.max_memory_reserved(0)
        cuda.reset_peak_memory_stats()
        """
    )


def test_from_import_is_renamed_so_every_use_keeps_working():
    source = """\
        from torch.cuda import memory_cached
        print(memory_cached())
        """
    assert findings(source) == ["1:24 GPU402"]
    assert fixed(source, unsafe=False) == "from torch.cuda import memory_reserved as memory_cached\nprint(memory_cached())\n"


def test_each_import_is_reported_once_with_its_fix():
    source = """\
        from torch.cuda import memory_cached
        from torch.cuda import memory_cached as mc
        print(memory_cached(), mc())
        """
    assert findings(source) == ["1:24 GPU402", "2:24 GPU402"]
    assert fixed(source, unsafe=False) == textwrap.dedent(
        """\
        from torch.cuda import memory_reserved as memory_cached
        from torch.cuda import memory_reserved as mc
        print(memory_cached(), mc())
        """
    )


def test_other_objects_with_the_same_attribute_are_silent():
    source = """\
        import mylib
        mylib.cuda.memory_cached()
        def memory_cached(): ...
        memory_cached()
        from mylib import memory_cached
        """
    assert findings(source) == []
