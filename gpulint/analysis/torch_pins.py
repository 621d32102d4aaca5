"""The newest torch a project allows, read from its own metadata: `torch==1.6.0` in requirements.txt.

A pin is an upper bound on the torch the code runs on: a fix or an advice that needs a newer torch cannot be
followed there (`torch.amp.GradScaler("cuda")` does not exist in torch 1.6). Read next to the module and in
the folders above it, up to the first that holds the project's own metadata (`pyproject.toml`, `setup.py`,
`setup.cfg` or `.git`; a sub-project's top (`repo/mamba/setup.py`) reads on to the repository's, for its
READMEs and Dockerfiles only): `requirements*.txt`, `<part>-requirements.txt` (and `requirements/*.txt`), `setup.py` / `setup.cfg` (the
requirement strings they hold), `pyproject.toml` (PEP 621 dependencies and Poetry's `torch = "^1.6"`),
`environment*.yml` (`pytorch=1.6.0`, `torch==1.6.0` under `pip:`). `==`, `<`, `<=`, `~=` (and Poetry's `^`,
`~`, conda's `=`) bound it; `>=`, `>`, `!=` do not; a wheel (`torch-1.6.0-cp37-...whl`) is its version. Several
files: the smallest bound wins (the code must work on each). No bound anywhere: unknown, never guessed. Files are
read as text, only when small.

A Dockerfile (`FROM pytorch/pytorch:0.3.1-...`, `pip install torch==X` or a torch wheel in a `RUN` line; also in
the folder's `docker/`; an image tag that states its torch, `rocm/pytorch:..._pytorch_2.1.2`) and a README
(`PyTorch == 0.3.1`, `conda install pytorch=0.2.0`, such an image) name the torch a project was built or
tested with, not a bound (so does a pinned package that imports only on an old torch, `timm==0.3.4`): code from 0.4 on mostly runs on newer torch, and advice that needs one is right there
(MLPerf's images of 1.7-1.13, a README's `pytorch 0.4.0`: judged so). They bind only a *legacy* torch, before
0.4 (the newest version the file names): code for 0.1-0.3 (Variables, `volatile`, `loss.data[0]`, `async=`) does
not run unchanged on any later torch, so that stack is the one it runs on. A Dockerfile or README governs its own
folder and the folders below it, never a sibling. `nvcr.io/nvidia/pytorch:<yy.mm>` names no torch release: unknown.

From 0.4 on, the torch such a file installs exactly (`pip install torch==1.11.0`, an image, a wheel) is kept apart as
the *installed* torch (`installed_torch`): no bound for advice, but the torch the project documents running on. The
pure API rules (GPU402, GPU403) read it: on that torch the old name is not deprecated and the new one may not exist
(a README that installs 1.11.0 has no `torch.amp.autocast`; the twenty-second corpus's judges: wrong).
"""

from __future__ import annotations

import functools
import os
import re
from typing import NamedTuple, Optional

_MAX_BYTES = 256 * 1024
_FOLDERS = 8  # the module's folder and those above it, up to the project's own (`dinov2/eval/segmentation_m2f/ops/modules`)
_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
ANY_MINOR = 99  # `<2.0`: some 1.x, whichever minor
LEGACY_BEFORE = (0, 4)  # a Dockerfile's or README's torch binds below this: the API before Variables merged into tensors
_NESTED = ("requirements", "docker")  # `requirements/*.txt`, `docker/Dockerfile`: the folder's own metadata


class TorchPin(NamedTuple):
    """The newest (major, minor) torch the project allows, and where it says so (`requirements.txt:3`)."""

    newest: tuple[int, int]
    where: str
    spec: str  # as written: `torch==1.6.0`
    binding: bool = True  # False: a README or Dockerfile installs this torch (from 0.4 on), no bound (module docstring)

    def describe(self) -> str:
        return f"the project {'pins' if self.binding else 'installs'} `{self.spec}` ({self.where})"


def metadata_files(module_path: str) -> list[str]:
    """The metadata files that may pin torch for `module_path` (those that exist)."""
    folder = os.path.dirname(os.path.abspath(module_path))
    found: list[str] = []
    nested = False  # past a sub-project's own metadata (`repo/mamba/setup.py`): only the repository's install notes
    for _ in range(_FOLDERS):
        package = os.path.isfile(os.path.join(folder, "__init__.py"))  # its `setup.py` is a module, not metadata
        files = [f for f in _files_in(folder) if not (package and os.path.basename(f) == "setup.py")]
        found.extend(f for f in files if not nested or _installs_below(f))
        if not package and any(os.path.exists(os.path.join(folder, m)) for m in _MARKERS):
            if nested or os.path.exists(os.path.join(folder, ".git")):
                break
            # a sub-project vendored in a repository is installed by the repository's README or Dockerfile, which
            # governs the folders below it (`pip install torch==2.1.1` at the top, `pip install -e mamba/`): read on
            # to the repository's root (`.git`) or the next project up
            nested = True
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return found


def _files_in(folder: str) -> list[str]:
    try:
        stat = os.stat(folder)
    except OSError:
        return []
    nested = []
    for name in _NESTED:
        try:
            nested.append(os.stat(os.path.join(folder, name)).st_mtime_ns)
        except OSError:
            nested.append(0)
    return list(_listed(folder, stat.st_mtime_ns, tuple(nested)))


@functools.lru_cache(maxsize=256)
def _listed(folder: str, mtime: int, nested_mtimes: tuple[int, ...]) -> tuple[str, ...]:
    """The metadata files of `folder` (listed again only when its entries change: every module of it asks)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return ()
    found = [os.path.join(folder, n) for n in names if _is_metadata(n)]
    for name in _NESTED:
        nested = os.path.join(folder, name)
        if os.path.isdir(nested):
            try:
                listed = sorted(os.listdir(nested))
            except OSError:
                continue
            wanted = (lambda n: n.endswith(".txt")) if name == "requirements" else _is_dockerfile
            found.extend(os.path.join(nested, n) for n in listed if wanted(n))
    return tuple(f for f in found if os.path.isfile(f))


def _is_metadata(name: str) -> bool:
    lowered = name.lower()
    if (lowered.startswith("requirements") or lowered.endswith(("-requirements.txt", "_requirements.txt"))) and lowered.endswith(".txt"):
        # `requirements-dev.txt`, and a part's own list named before it (`det-requirements.txt`)
        return True
    if lowered.startswith(("environment", "conda", "env")) and lowered.endswith((".yml", ".yaml")):
        return True
    return lowered in ("setup.py", "setup.cfg", "pyproject.toml") or _is_dockerfile(name) or _is_readme(name)


def _installs_below(path: str) -> bool:
    """A README or Dockerfile (also in `docker/`): the torch a repository installs for every folder below it."""
    name = os.path.basename(path)
    return _is_readme(name) or _is_dockerfile(name)


def _is_dockerfile(name: str) -> bool:
    lowered = name.lower()
    return lowered.startswith("dockerfile") or lowered.endswith(".dockerfile")


def _is_readme(name: str) -> bool:
    lowered = name.lower()
    return lowered.startswith("readme") and lowered.endswith((".md", ".rst", ".txt", "readme"))


def torch_pin(module_path: str) -> Optional[TorchPin]:
    """The tightest upper bound on torch that the metadata around `module_path` sets, or None."""
    return _oldest(_pins(module_path, metadata_files(module_path)), binding=True)


def installed_torch(module_path: str) -> Optional[TorchPin]:
    """The oldest torch from 0.4 on that a README or Dockerfile around `module_path` installs exactly, or None."""
    return _oldest(_pins(module_path, metadata_files(module_path)), binding=False)


def _pins(module_path: str, files: list[str]) -> list[TorchPin]:
    return [pin for path in files for pin in _file_pins(path, module_path)]


def _oldest(pins: list[TorchPin], binding: bool) -> Optional[TorchPin]:
    chosen = [pin for pin in pins if pin.binding == binding]
    return min(chosen, key=lambda p: p.newest) if chosen else None


def _file_pins(path: str, module_path: str) -> list[TorchPin]:
    try:
        stat = os.stat(path)
    except OSError:
        return []
    if stat.st_size > _MAX_BYTES:
        return []
    shown = os.path.relpath(path, os.path.dirname(os.path.abspath(module_path)))
    return [TorchPin(newest, f"{shown}:{line}", spec, binding) for newest, line, spec, binding in _pins_in(path, stat.st_mtime_ns, stat.st_size)]


# `torch==1.6.0`, `torch[extra] >= 1.6, < 2`, `"torch<=1.13"` inside a string, `pytorch=1.6.0=py3.7_cuda10.1`
_REQUIREMENT = re.compile(r"(?<![\w.\-/])(?P<name>py)?torch(?![\w.\-])\s*(?:\[[^\]]*\])?\s*(?P<spec>(?:[<>=!~]=?=?|\^)\s*[0-9][^;#\"'\n]*)")
# Poetry: `torch = "^1.6"`, `torch = { version = "1.6.0", ... }`
_POETRY = re.compile(r"^\s*torch\s*=\s*(?:\{[^}]*?version\s*=\s*)?[\"'](?P<spec>[^\"']+)[\"']")


@functools.lru_cache(maxsize=256)  # READMEs and Dockerfiles too: every folder may hold some
def _pins_in(path: str, mtime: int, size: int) -> tuple[tuple[tuple[int, int], int, str, bool], ...]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(_MAX_BYTES)
    except OSError:
        return ()
    name = os.path.basename(path)
    if _is_dockerfile(name) or _is_readme(name):
        return _legacy_pin(text, readme=_is_readme(name)) + _capped_by_packages(text)
    conda = path.endswith((".yml", ".yaml"))
    toml = path.endswith(".toml")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if path.endswith(".txt") or conda:
            line = line.split("#", 1)[0]  # a comment
        match = _POETRY.match(line) if toml else None
        wheel = _WHEEL.search(line)
        if wheel is not None:
            spec, newest = wheel.group(), upper_bound(wheel["version"])
        elif match is not None:
            spec, newest = f"torch = \"{match['spec']}\"", upper_bound(match["spec"], bare="==")
        else:
            match = _REQUIREMENT.search(line)
            if match is None or (match["name"] and not conda):
                continue  # `pytorch` on PyPI is a placeholder; conda names the package so
            written = re.split(r"\s+--?[A-Za-z]", match["spec"])[0].strip()  # `torch==1.6.0 -f https://...`
            spec = f"{'py' if match['name'] else ''}torch{written}"
            newest = upper_bound(written, bare="==", conda=conda)
        if newest is not None:
            found.append((newest, number, spec, True))
    return tuple(found) + _capped_by_packages(text)


# Packages whose pinned releases import only on an old torch, each with why (keep it tiny, each cap citable):
# timm 0.3.x: `timm/models/layers/helpers.py` imports `torch._six.container_abcs`, gone from torch 1.9 on
# ("cannot import name 'container_abcs' from 'torch._six'").
_CAPPING = ((re.compile(r"(?<![\w.\-])timm\s*==\s*0\.3(?:\.[0-9]+)?(?![\w.])"), (1, 8)),)


def _capped_by_packages(text: str) -> tuple[tuple[tuple[int, int], int, str, bool], ...]:
    """The torch a pinned package (`timm==0.3.4`) caps: the installed stack runs that torch or older (not binding:
    what the package caps is the torch the project ran, read by the pure API rules like an image's)."""
    if "timm" not in text:
        return ()
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, newest in _CAPPING:
            match = pattern.search(line)
            if match is not None:
                found.append((newest, number, match.group(), False))
    return tuple(found)


# a wheel's file name: `torch-0.2.0.post3-cp27-cp27mu-manylinux1_x86_64.whl`, `torch-1.6.0%2Bcu101-cp37-...`
_WHEEL = re.compile(r"(?<![\w.\-])torch-(?P<version>[0-9][0-9.]*[0-9])[^/\s]*?-cp[0-9]+-[^/\s]*\.whl", re.IGNORECASE)
# a torch image: `FROM pytorch/pytorch:1.0.1-cuda10.0-cudnn7-runtime`, `ARG FROM_IMAGE_NAME=pytorch/pytorch:1.7.0-...`
_IMAGE = re.compile(r"(?<![\w.\-])pytorch/pytorch:(?P<version>[0-9]+\.[0-9]+(?:\.[0-9]+)?)")
# an image whose tag states its torch: `rocm/pytorch:rocm6.1_ubuntu22.04_py3.10_pytorch_2.1.2`,
# `..._pytorch_release-2.1.2` (ROCm's images name the torch they ship after `pytorch_`)
_TAGGED_IMAGE = re.compile(r"(?<![\w.\-])[\w.\-/]*pytorch:[\w.\-]*?[_\-]pytorch[_\-](?:release[_\-])?v?(?P<version>[0-9]+\.[0-9]+(?:\.[0-9]+)?)")
# prose and install lines: `PyTorch == 0.3.1`, `pytorch 0.2`, `* pytorch1.2.0`, `PyTorch v0.3`, `torch==0.3.1`
_NAMED = re.compile(r"(?<![\w.\-/])(?:py)?torch\s*(?:version\s*)?(?P<op>[<>=~!]=?=?|\^)?\s*v?(?P<version>[0-9]+\.[0-9]+(?:\.[0-9]+)?)(?![\w.])(?P<later>\s*(?:\+|or (?:later|higher|newer|above)|and (?:later|higher|newer|above)))?", re.IGNORECASE)


def _legacy_pin(text: str, readme: bool) -> tuple[tuple[tuple[int, int], int, str, bool], ...]:
    """The pin a Dockerfile or a README sets: the newest torch it names, when that predates `LEGACY_BEFORE` and
    is written as a requirement (binding); from 0.4 on, the torch it installs (not binding). In a README that is
    `PyTorch == 0.3.1`, `conda install pytorch=0.3.1` (prose such as "Make sure you have PyTorch 0.3.0" is often
    stale: no pin); a lower bound (`>= 0.3`, `0.3+`) never is."""
    named: list[tuple[tuple[int, int], int, str, bool]] = []  # (version, line, as written, a requirement)
    for number, line in enumerate(text.splitlines(), 1):
        if not readme and line.lstrip().startswith("#"):
            continue  # a Dockerfile comment: `# ARG FROM_IMAGE_NAME=nvcr.io/...`
        installs = re.search(r"\b(?:pip3?|conda)\s+install\b", line) is not None
        for pattern in (_WHEEL, _IMAGE, _TAGGED_IMAGE, _NAMED):
            for match in pattern.finditer(line):
                numbers, _ = _numbers(match["version"])
                if len(numbers) < 2:
                    continue
                if pattern is _NAMED:
                    op = match["op"] or ""
                    lower = op.startswith((">", "!")) or bool(match["later"])
                    required = not lower and (op in ("==", "===", "=") or installs or not readme)
                else:
                    required = True  # a wheel or an image: exactly that torch
                named.append(((numbers[0], numbers[1]), number, match.group().strip(), required))
    if not named:
        return ()
    newest = max(named, key=lambda n: (n[0], n[3]))
    if not newest[3]:
        return ()  # stale prose or a lower bound: the code's own torch may be newer
    # from 0.4 on the code mostly runs on newer torch too: the torch it installs, not a bound
    return ((newest[0], newest[1], newest[2], newest[0] < LEGACY_BEFORE),)


_CLAUSE = re.compile(r"^\s*(?P<op>===|==|<=|>=|~=|!=|<|>|\^|~|=)?\s*(?P<version>[0-9][0-9A-Za-z.*+!_-]*)\s*$")


def upper_bound(spec: str, bare: str = "==", conda: bool = False) -> Optional[tuple[int, int]]:
    """The newest (major, minor) a version specifier allows, or None when it sets no upper bound.
    `==1.6.0` -> (1, 6); `<2.0` -> (1, ANY_MINOR); `~=1.6` -> (1, ANY_MINOR); `>=1.6` -> None."""
    bounds = []
    for clause in re.split(r"[,|]", spec) if "|" not in spec else []:
        if not clause.strip():
            continue
        match = _CLAUSE.match(clause.split("=py", 1)[0] if conda else clause)
        if match is None:
            return None  # a URL, a marker we do not read: unknown
        op = match["op"] or bare
        if conda and op == "=":
            op = "==" if "*" in match["version"] else "=prefix"
        bound = _clause_bound(op, match["version"])
        if bound is not None:
            bounds.append(bound)
    return min(bounds) if bounds else None


def _numbers(version: str) -> tuple[list[int], bool]:
    """The release numbers of `version` (`1.6.0+cu101` -> [1, 6, 0]), and whether it ends in `.*`."""
    release = re.split(r"[+!]", version)[0]
    wildcard = release.endswith(".*")
    numbers = []
    for part in release.rstrip(".*").split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        numbers.append(int(digits.group()))
        if digits.group() != part:
            break  # `0rc1`: a pre-release of this number
    return numbers, wildcard


def _clause_bound(op: str, version: str) -> Optional[tuple[int, int]]:
    numbers, wildcard = _numbers(version)
    if not numbers:
        return None
    major, minor = numbers[0], numbers[1] if len(numbers) > 1 else None
    if op in ("==", "==="):
        if minor is None:
            return (major, ANY_MINOR) if wildcard else (major, 0)
        return (major, minor)
    if op == "=prefix":  # conda `pytorch=1.6`: any 1.6.x
        return (major, ANY_MINOR if minor is None else minor)
    if op == "<=":
        return (major, minor or 0)
    if op == "<":
        rest = numbers[2:]
        if minor is not None and any(rest):
            return (major, minor)  # `<2.3.1`: 2.3.0 is allowed
        if minor:
            return (major, minor - 1)
        return (major - 1, ANY_MINOR) if major else None
    if op in ("~=", "~"):  # `~=1.6` -> 1.*, `~=1.6.0` -> 1.6.*; Poetry's `~1.6` -> 1.6.*
        if op == "~=" and len(numbers) <= 2:
            return (major, ANY_MINOR)
        return (major, minor) if minor is not None else (major, ANY_MINOR)
    if op == "^":  # Poetry: `^1.6` -> <2.0, `^0.4` -> <0.5
        return (major, ANY_MINOR) if major else (0, minor or 0)
    return None  # `>=`, `>`, `!=`: no upper bound


def for_module(module_path: str) -> Optional[tuple[Optional[list], Optional[list], list[str]]]:
    """(the pin and the installed torch as `ModuleContext.torch_pin` / `installed_torch` keep them, the metadata
    files read), or None when there are none."""
    if not module_path or module_path.startswith("<"):
        return None  # standard input without a file name: no folder to read
    files = metadata_files(module_path)
    if not files:
        return None
    pins = _pins(module_path, files)
    pin, installed = (_oldest(pins, binding) for binding in (True, False))
    return _kept(pin), _kept(installed), files


def _kept(pin: Optional[TorchPin]) -> Optional[list]:
    return [*pin.newest, pin.where, pin.spec] if pin is not None else None
