"""The verification run: profile a user's training script, and A/B-test gpulint's fixes on it.

Importing this package is cheap: torch and pynvml are only imported inside the functions that need them.
"""

from gpulint.profile.options import ProfileOptions

__all__ = ["ProfileOptions", "run_profile", "run_verify", "step"]

_step_hook = None  # set by the profiling bootstrap inside a profiled run, and only there


def step() -> None:
    """Mark the end of one training step for `gpulint profile` and `gpulint fix --verify`.

    For loops gpulint cannot see (no torch.optim optimizer, no DataLoader: manual SGD, generation, RL). Outside
    a profiled run it does nothing (one global read), so it can stay in the script.
    """
    hook = _step_hook
    if hook is not None:
        hook()


def run_profile(command, options):  # noqa: D103 - thin lazy re-export
    from gpulint.profile.profile_run import run_profile as _run_profile

    return _run_profile(command, options)


def run_verify(command, fixes, options):  # noqa: D103 - thin lazy re-export
    from gpulint.profile.verify import run_verify as _run_verify

    return _run_verify(command, fixes, options)
