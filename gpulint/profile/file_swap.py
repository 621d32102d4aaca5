"""Switch a set of files between their original and fixed contents, atomically, keeping permissions."""

from __future__ import annotations

import os
import pathlib
import stat
import tempfile


def write_atomic(path: pathlib.Path, data: bytes) -> None:
    """Temp file in the same folder + os.replace: a reader never sees half a file, an interrupt never leaves one."""
    path = pathlib.Path(path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".gpulint-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class FileSwap:
    """Holds both versions of every changed file; `use("original")` / `use("fixed")` writes whichever differs."""

    def __init__(self, originals: dict[pathlib.Path, bytes], fixed: dict[pathlib.Path, bytes]):
        self.originals = {pathlib.Path(p): b for p, b in originals.items()}
        fixed = {pathlib.Path(p): b for p, b in fixed.items()}
        self.fixed = {p: fixed[p] for p in self.originals}
        self.current = "fixed"  # apply_fixes() has just written the fixed versions

    @classmethod
    def after_fixes(cls, originals: dict[pathlib.Path, bytes]) -> FileSwap:
        """Capture the fixed contents that apply_fixes() just wrote."""
        fixed = {pathlib.Path(p): pathlib.Path(p).read_bytes() for p in originals}
        return cls(originals, fixed)

    def use(self, which: str) -> None:
        versions = self.originals if which == "original" else self.fixed
        for path, data in versions.items():
            try:
                if path.read_bytes() == data:
                    continue
            except FileNotFoundError:
                pass
            write_atomic(path, data)
        self.current = which
