"""GPU403 deprecated-cuda-amp: `torch.cuda.amp.*` -> `torch.amp.*("cuda", ...)`, version-gated by `target-torch`."""

from __future__ import annotations

import textwrap

from tests.conftest import diagnostics, findings, fixed, run_gpulint

GPU403 = {"select": ("GPU403",)}


def fix403(source: str, **overrides) -> str:
    return fixed(source, unsafe=False, **{**GPU403, **overrides})


def test_positional_enabled_becomes_a_keyword():
    source = """\
        import torch

        with torch.cuda.amp.autocast(False):
            pass
        """
    assert findings(source, **GPU403) == ["3:6 GPU403"]
    assert fix403(source) == textwrap.dedent(
        """\
        import torch

        with torch.amp.autocast("cuda", enabled=False):
            pass
        """
    )


def test_every_positional_of_autocast_maps_to_its_keyword():
    source = """\
        import torch

        ctx = torch.cuda.amp.autocast(True, torch.bfloat16, False)
        """
    assert 'torch.amp.autocast("cuda", enabled=True, dtype=torch.bfloat16, cache_enabled=False)' in fix403(source)


def test_decorator_on_a_method_is_rewritten():
    source = """\
        import torch


        class Net(torch.nn.Module):
            @torch.cuda.amp.autocast()
            def forward(self, x):
                return x
        """
    assert findings(source, **GPU403) == ["5:6 GPU403"]
    assert '    @torch.amp.autocast("cuda")\n    def forward' in fix403(source)


def test_from_import_rewrites_the_import_and_every_use():
    source = """\
        import torch
        from torch.cuda.amp import GradScaler, autocast

        scaler = GradScaler(2.0**14)
        with autocast():
            y = torch.ones(1)
        """
    assert findings(source, **GPU403) == ["4:10 GPU403", "5:6 GPU403"]
    result = fix403(source)
    assert result == textwrap.dedent(
        """\
        import torch
        from torch.amp import GradScaler, autocast

        scaler = GradScaler("cuda", init_scale=2.0**14)
        with autocast("cuda"):
            y = torch.ones(1)
        """
    )
    exec(compile(result, "train.py", "exec"), {})  # the rewritten code runs (autocast on a CPU-only host warns)
    assert fix403(result) == result


def test_amp_module_import_is_rewritten_with_its_uses():
    source = """\
        from torch.cuda import amp

        scaler = amp.GradScaler(enabled=False)
        with amp.autocast(enabled=False):
            pass
        """
    assert fix403(source) == textwrap.dedent(
        """\
        from torch import amp

        scaler = amp.GradScaler("cuda", enabled=False)
        with amp.autocast("cuda", enabled=False):
            pass
        """
    )


def test_multiline_grad_scaler_keeps_its_layout():
    source = """\
        import torch

        scaler = torch.cuda.amp.GradScaler(
            init_scale=1024,
            enabled=True,
        )
        """
    assert fix403(source) == textwrap.dedent(
        """\
        import torch

        scaler = torch.amp.GradScaler(
            "cuda",
            init_scale=1024,
            enabled=True,
        )
        """
    )


def test_aliased_torch_keeps_its_alias():
    source = """\
        import torch as th

        ctx = th.cuda.amp.autocast(dtype=th.bfloat16)
        """
    assert 'th.amp.autocast("cuda", dtype=th.bfloat16)' in fix403(source)


def test_custom_fwd_and_custom_bwd_get_the_device_type():
    source = """\
        import torch
        from torch.cuda.amp import custom_bwd, custom_fwd


        class Scale(torch.autograd.Function):
            @staticmethod
            @custom_fwd(cast_inputs=torch.float32)
            def forward(ctx, x):
                return x * 2

            @staticmethod
            @custom_bwd
            def backward(ctx, grad):
                return grad * 2
        """
    assert findings(source, **GPU403) == ["7:6 GPU403", "12:6 GPU403"]
    result = fix403(source, target_torch=(2, 4))
    assert "from torch.amp import custom_bwd, custom_fwd" in result
    assert '@custom_fwd(cast_inputs=torch.float32, device_type="cuda")' in result
    assert '@custom_bwd(device_type="cuda")' in result
    exec(compile(result, "ops.py", "exec"), {})


def test_custom_fwd_has_no_fix_below_torch_2_4():
    source = """\
        import torch

        @torch.cuda.amp.custom_fwd
        def forward(ctx, x):
            return x
        """
    (diagnostic,) = diagnostics(source, **GPU403)
    assert diagnostic.fix is None
    assert "needs torch >= 2.4, `target-torch` is 2.3" in diagnostic.message
    assert '@torch.amp.custom_fwd(device_type="cuda")' in fix403(source, target_torch=(2, 4))


def test_target_torch_2_2_keeps_grad_scaler_but_fixes_autocast():
    source = """\
        import torch

        scaler = torch.cuda.amp.GradScaler()
        with torch.cuda.amp.autocast():
            pass
        """
    result = fix403(source, target_torch=(2, 2))
    assert "scaler = torch.cuda.amp.GradScaler()" in result
    assert 'with torch.amp.autocast("cuda"):' in result
    assert 'scaler = torch.amp.GradScaler("cuda")' in fix403(source)


def test_torch_older_than_1_12_gets_no_fix():
    source = """\
        import torch

        with torch.cuda.amp.autocast():
            pass
        """
    (diagnostic,) = diagnostics(source, target_torch=(1, 11), **GPU403)
    assert diagnostic.fix is None


def test_target_torch_from_pyproject_changes_the_fix(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\ntarget-torch = "2.2"\n')
    script = tmp_path / "train.py"
    script.write_text("import torch\n\nscaler = torch.cuda.amp.GradScaler()\n")
    result = run_gpulint("fix", "--apply", "train.py", cwd=tmp_path)
    assert result.returncode == 1  # the finding remains: no fix below 2.3
    assert script.read_text() == "import torch\n\nscaler = torch.cuda.amp.GradScaler()\n"
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\ntarget-torch = "2.3"\n')
    result = run_gpulint("fix", "--apply", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert script.read_text() == 'import torch\n\nscaler = torch.amp.GradScaler("cuda")\n'


def test_name_used_as_a_value_blocks_the_import_rewrite():
    source = """\
        from contextlib import nullcontext

        from torch.cuda.amp import autocast

        ctx = autocast if USE_AMP else nullcontext
        with autocast():
            pass
        """
    found = diagnostics(source, **GPU403)
    assert [f"{d.location.row}:{d.location.column}" for d in found] == ["5:7", "6:6"]
    assert all(d.fix is None for d in found)
    assert "used as a value at line 5" in found[1].message


def test_fallback_import_blocks_the_fix():
    source = """\
        try:
            from torch.cuda.amp import autocast
        except ImportError:
            autocast = None

        with autocast():
            pass
        """
    (diagnostic,) = diagnostics(source, **GPU403)
    assert diagnostic.fix is None


def test_star_args_to_autocast_cannot_be_keywordised():
    source = """\
        import torch

        ctx = torch.cuda.amp.autocast(*flags)
        """
    (diagnostic,) = diagnostics(source, **GPU403)
    assert diagnostic.fix is None


def test_star_args_to_grad_scaler_only_get_the_device():
    source = """\
        import torch

        scaler = torch.cuda.amp.GradScaler(*settings)
        """
    assert 'torch.amp.GradScaler("cuda", *settings)' in fix403(source)


def test_changed_autocast_defaults_block_the_fix():
    source = """\
        import torch

        torch.set_autocast_dtype("cuda", torch.bfloat16)
        with torch.cuda.amp.autocast():
            pass
        """
    (diagnostic,) = diagnostics(source, **GPU403)
    assert diagnostic.fix is None


def test_annotation_alone_is_not_reported_and_survives_the_import_rewrite():
    source = """\
        from torch.cuda.amp import GradScaler


        def step(scaler: GradScaler) -> None:
            scaler.update()


        step(GradScaler())
        """
    assert findings(source, **GPU403) == ["8:6 GPU403"]
    result = fix403(source)
    assert "from torch.amp import GradScaler" in result and 'step(GradScaler("cuda"))' in result


def test_new_api_and_other_amp_modules_are_silent():
    source = """\
        import torch
        from torch.amp import GradScaler
        from apex import amp

        scaler = GradScaler("cuda")
        with torch.autocast("cuda"), torch.amp.autocast("cuda"):
            pass
        model, optimizer = amp.initialize(model, optimizer)
        ok = torch.cuda.amp.common.amp_definitely_not_available()
        """
    assert findings(source, **GPU403) == []


def test_module_import_used_for_other_names_is_not_rewritten():
    source = """\
        from torch.cuda import amp

        if not amp.common.amp_definitely_not_available():
            scaler = amp.GradScaler()
        """
    (diagnostic,) = diagnostics(source, **GPU403)
    assert diagnostic.fix is None


def test_fires_without_gpu_context():
    assert findings("from torch.cuda.amp import autocast\nwith autocast():\n    pass\n", **GPU403) == ["2:6 GPU403"]


def test_fallback_for_old_torch_in_an_except_handler_is_silent():
    # pytorch-image-models timm/utils/cuda.py: the old API only where the new one is missing.
    source = """\
        import torch


        class NativeScaler:
            def __init__(self, device="cuda"):
                try:
                    self._scaler = torch.amp.GradScaler(device=device)
                except (AttributeError, TypeError):
                    self._scaler = torch.cuda.amp.GradScaler()
        """
    assert findings(source, **GPU403) == []


def test_import_fallback_and_version_checks_are_silent():
    source = """\
        import torch

        try:
            from torch.amp import autocast
        except ImportError:
            from torch.cuda.amp import autocast

        if hasattr(torch, "amp"):
            scaler = torch.amp.GradScaler("cuda")
        else:
            scaler = torch.cuda.amp.GradScaler()
        ctx = torch.cuda.amp.autocast() if TORCH_VERSION < (1, 12) else torch.autocast("cuda")
        with autocast():
            pass
        """
    assert findings(source, **GPU403) == []
