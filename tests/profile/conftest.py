"""Fixtures for the profiling tests; shared helpers live in profile_helpers.py (a unique module name)."""

import pytest
from profile_helpers import FIXTURES


@pytest.fixture
def fixtures_copy(tmp_path):
    """Copy a fixture script into tmp_path (tests that rewrite files must never touch the repo's copy)."""

    def copy(name: str):
        dest = tmp_path / name
        dest.write_bytes((FIXTURES / name).read_bytes())
        return dest

    return copy
