"""Understanding the user's command and building the bootstrap / torchrun command line."""

import sys

import pytest
from profile_helpers import FIXTURES, PY

from gpulint.profile.command import CHILD_BOOTSTRAP, CommandError, child_argv, plan_command


def test_python_script_args():
    plan = plan_command([PY, "-u", str(FIXTURES / "tiny_train.py"), "--epochs", "2"])
    assert plan.kind == "script"
    assert plan.interpreter == PY  # a venv's python symlink is kept, not resolved to the base interpreter
    assert plan.interpreter_flags == ["-u"]
    assert plan.target == str((FIXTURES / "tiny_train.py").resolve())
    assert plan.args == ["--epochs", "2"]


def test_relative_script_uses_cwd(tmp_path):
    (tmp_path / "train.py").write_text("pass\n")
    plan = plan_command([PY, "train.py", "x"], cwd=tmp_path)
    assert plan.target == str(tmp_path / "train.py")
    assert plan.argv0 == "train.py"  # sys.argv[0] as the user typed it
    assert plan.cwd == str(tmp_path)


def test_module_form():
    plan = plan_command([PY, "-X", "dev", "-m", "pkg.train", "--lr", "1"])
    assert (plan.kind, plan.target, plan.args, plan.interpreter_flags) == ("module", "pkg.train", ["--lr", "1"], ["-X", "dev"])
    assert plan.describe() == "python -m pkg.train --lr 1"


def test_bare_script_path_runs_with_our_interpreter():
    plan = plan_command([str(FIXTURES / "tiny_train.py"), "--epochs", "1"])
    assert plan.interpreter == sys.executable
    assert plan.kind == "script" and plan.args == ["--epochs", "1"]


@pytest.mark.parametrize(
    "command, message",
    [
        ([], "no command given"),
        ([PY, "does_not_exist.py"], "script not found: does_not_exist.py"),
        (["does_not_exist.py"], "script not found: does_not_exist.py"),
        ([PY, "-c", "print(1)"], "-c CODE"),
        ([PY], "no script given"),
        (["torchrun", "--nproc-per-node", "2", "train.py"], "--launcher torchrun"),
        (["bash", "run.sh"], "cannot profile 'bash'"),
        (["python-does-not-exist-xyz", "train.py"], "not found on PATH"),
        ([PY, "--weird-flag", "train.py"], "unsupported Python option"),
    ],
)
def test_bad_commands_give_a_sentence(command, message):
    with pytest.raises(CommandError) as info:
        plan_command(command)
    assert message in str(info.value)


def test_child_argv_direct_and_torchrun():
    plan = plan_command([PY, str(FIXTURES / "tiny_train.py")])
    assert child_argv(plan) == [PY, str(CHILD_BOOTSTRAP)]
    # Under torchrun the bootstrap runs the launcher in its own process (so it dies with gpulint), and each
    # rank runs the bootstrap again; both read the target and the launcher settings from the run's config.
    assert child_argv(plan, "torchrun", 2) == [PY, str(CHILD_BOOTSTRAP)]
    with pytest.raises(CommandError):
        child_argv(plan, "mpirun", 2)
    with pytest.raises(CommandError):
        child_argv(plan, "torchrun", 0)
