"""The verification run: profile a user's training script, and A/B-test gpulint's fixes on it.

Importing this package is cheap: torch and pynvml are only imported inside the functions that need them.
"""

from gpulint.profile.options import ProfileOptions

__all__ = ["ProfileOptions", "run_profile", "run_verify"]


def run_profile(command, options):  # noqa: D103 - thin lazy re-export
    from gpulint.profile.profile_run import run_profile as _run_profile

    return _run_profile(command, options)


def run_verify(command, apply_fixes, options):  # noqa: D103 - thin lazy re-export
    from gpulint.profile.verify import run_verify as _run_verify

    return _run_verify(command, apply_fixes, options)
