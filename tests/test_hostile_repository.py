"""A cloned repository cannot make gpulint write outside it, hide findings through the cache, or configure it
from above its root: through the real CLI, with the repository's files as an attacker would ship them."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

import pytest

from gpulint.cache import CACHE_DIR_NAME, secret_key
from tests.conftest import run_gpulint

TRAIN = "import torch\n\nprint(torch.cuda.memory_cached())\n"
FINDING = "train.py:3:7: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home folder of its own, where gpulint keeps the cache key (`~/.cache/gpulint/cache-key`)."""
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / ".git").mkdir()
    (folder / "train.py").write_text(TRAIN, encoding="utf-8")
    return folder


def gpulint(repo: Path, home: Path, *args: str, env: dict | None = None):
    result = run_gpulint(*args, cwd=repo, env={"HOME": str(home), "XDG_CACHE_HOME": "", **(env or {})})
    assert result.returncode in (0, 1), result.stderr.decode()
    return result


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# GPU303 reports the probe's one read a step only with `unproven-cost` (its cost is not shown: `read_cost.py`).
EVERY_READ = "\n[tool.gpulint.rules.GPU303]\nunproven-cost = true\n"


def configure(repo: Path, text: str) -> None:
    (repo / "pyproject.toml").write_text(f"[tool.gpulint]\n{text}\n{EVERY_READ}", encoding="utf-8")


# ---- cache-dir --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cache_dir", "problem"),
    [
        ("~", "is not a path inside the project"),
        ("../outside_cache", "points outside the project"),
        ("{outside}", "is not a path inside the project"),
        (".", "is the project folder itself"),
        ("src", "is a folder that is not a gpulint cache"),
    ],
)
def test_a_cache_dir_from_the_config_cannot_leave_the_project(repo, home, tmp_path, cache_dir, problem):
    outside = tmp_path / "abs_outside"
    (repo / "src").mkdir()
    (repo / "src" / "model.py").write_text("x = 1\n", encoding="utf-8")
    configure(repo, f"cache-dir = {json.dumps(cache_dir.format(outside=outside))}")
    result = gpulint(repo, home, "check", "--output-format", "concise", ".")
    assert result.stdout.decode().splitlines()[0] == FINDING
    warning = result.stderr.decode()
    assert warning.startswith("gpulint: warning: cache-dir = ") and problem in warning
    assert f"; using {repo / CACHE_DIR_NAME} instead" in warning and "--cache-dir or GPULINT_CACHE_DIR" in warning
    # Nothing was written where the config pointed: no CACHEDIR.TAG to hide a home folder from backups.
    assert files_under(home) == [".cache", ".cache/gpulint", ".cache/gpulint/cache-key"]
    assert not (tmp_path / "outside_cache").exists() and not outside.exists()
    assert not (repo / "CACHEDIR.TAG").exists() and files_under(repo / "src") == ["model.py"]
    assert (repo / CACHE_DIR_NAME / "CACHEDIR.TAG").is_file()  # the default took its place
    assert "GPU402" in gpulint(repo, home, "check", "--output-format", "concise", ".").stdout.decode()  # and works


def test_a_symlinked_cache_folder_is_not_written_through(repo, home, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (repo / CACHE_DIR_NAME).symlink_to(victim)
    result = gpulint(repo, home, "check", "--output-format", "concise", ".")
    assert result.stdout.decode().splitlines()[0] == FINDING
    assert f"{repo / CACHE_DIR_NAME} is a symlink, so no cache is used" in result.stderr.decode()
    assert files_under(victim) == []


def test_a_symlinked_version_folder_inside_the_cache_is_not_written_through(repo, home, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (repo / CACHE_DIR_NAME).mkdir()
    (repo / CACHE_DIR_NAME / __import__("gpulint").__version__).symlink_to(victim)
    gpulint(repo, home, "check", ".")
    assert files_under(victim) == []


def test_the_user_can_put_the_cache_anywhere(repo, home, tmp_path):
    for option, folder in (("--cache-dir", tmp_path / "from_cli"), ("env", tmp_path / "from_env")):
        args = ["check", f"--cache-dir={folder}", "."] if option == "--cache-dir" else ["check", "."]
        result = gpulint(repo, home, *args, env={"GPULINT_CACHE_DIR": str(folder)} if option == "env" else None)
        assert result.stderr == b""
        assert (folder / "CACHEDIR.TAG").is_file()
        assert sorted(p.name.split("-")[0] for p in folder.rglob("*.json")) == [cache_file(folder, folder="").name.split("-")[0], "project", "summaries"]
    assert not (repo / CACHE_DIR_NAME).exists()


# ---- cache integrity ----------------------------------------------------------------------------------------


def cache_file(repo: Path, kind: str = "result", folder: str = CACHE_DIR_NAME) -> Path:
    """The result cache (`<key>.json`) or the project index's `project-<key>.json` / `summaries-<key>.json`."""
    (path,) = (p for p in (repo / folder).rglob("*.json") if p.name.startswith(f"{kind}-") or kind == "result" and "-" not in p.name)
    return path


def forge(path: Path, change, key: bytes | None) -> None:
    """Edit the cache's records; sign them with `key` (None: keep the old MAC line)."""
    mac, _, payload = path.read_bytes().partition(b"\n")
    data = json.loads(payload)
    change(data)
    payload = json.dumps(data).encode()
    if key is not None:
        mac = hmac.new(key, payload, hashlib.sha256).hexdigest().encode()
    path.write_bytes(mac + b"\n" + payload)


def clean(data: dict) -> None:
    for entry in data["files"].values():
        entry["diagnostics"] = []


@pytest.mark.parametrize("signer", ["no-new-mac", "another-key"])
def test_a_cache_that_claims_clean_files_without_this_users_key_is_ignored(repo, home, signer):
    gpulint(repo, home, "check", ".")
    forge(cache_file(repo), clean, None if signer == "no-new-mac" else os.urandom(32))
    result = gpulint(repo, home, "check", "--output-format", "concise", ".")
    assert result.returncode == 1 and result.stdout.decode().splitlines()[0] == FINDING
    # ... and is rewritten with this run's results, under this user's key.
    mac, _, payload = cache_file(repo).read_bytes().partition(b"\n")
    assert hmac.compare_digest(mac.decode(), hmac.new(key_of(home), payload, hashlib.sha256).hexdigest())


def test_a_cache_shipped_from_another_machine_is_ignored(repo, home, tmp_path):
    # The same project checked by another user (another key) first: its cache travels with the repository.
    other_home = tmp_path / "other_home"
    other_home.mkdir()
    gpulint(repo, other_home, "check", ".")
    forge(cache_file(repo), clean, key_of(other_home))
    assert gpulint(repo, other_home, "check", ".").returncode == 0  # that user's own (doctored) cache is trusted
    result = gpulint(repo, home, "check", "--output-format", "concise", ".")
    assert result.returncode == 1 and result.stdout.decode().splitlines()[0] == FINDING


def key_of(home: Path) -> bytes:
    return bytes.fromhex((home / ".cache" / "gpulint" / "cache-key").read_text())


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["location"].update(row="5"),
        lambda d: d["location"].update(column=None),
        lambda d: d.update(code=["GPU402"]),
        lambda d: d.update(message={"text": "x"}),
        lambda d: d.update(noqa_row=True),
        lambda d: d["fix"]["edits"][0].update(content=7),
        lambda d: d.update(related=[["a", "1", 2]]),
        lambda d: d["fix"].update(applicability=["safe"]),
        lambda d: d.pop("code"),
    ],
    ids=[
        "row-string", "column-null", "code-list", "message-dict", "noqa-bool", "edit-content-int", "related-string",
        "applicability-list", "no-code",
    ],  # fmt: skip
)
@pytest.mark.parametrize("format_name", ["concise", "junit"])
def test_a_wrongly_typed_record_is_a_miss_not_an_error(repo, home, damage, format_name):
    # Even with this user's key (a bug, a disk error): every run would otherwise fail with a TypeError.
    gpulint(repo, home, "check", ".")

    def change(data):
        for entry in data["files"].values():
            damage(entry["diagnostics"][0])

    forge(cache_file(repo), change, key_of(home))
    for _ in range(2):
        result = gpulint(repo, home, "check", "--output-format", format_name, ".")
        assert result.returncode == 1 and result.stderr == b""
        assert "memory_cached` is deprecated" in result.stdout.decode()


def test_a_key_others_can_read_is_not_used(repo, home):
    gpulint(repo, home, "check", ".")
    key = home / ".cache" / "gpulint" / "cache-key"
    key.chmod(0o644)
    (repo / CACHE_DIR_NAME).rename(repo / "old_cache")
    gpulint(repo, home, "check", ".")
    assert not (repo / CACHE_DIR_NAME).exists()  # no cache at all rather than one anyone could forge


def test_the_key_is_created_once_and_private(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    first = secret_key()
    assert first is not None and len(first) == 32 and secret_key() == first
    key = tmp_path / "xdg" / "gpulint" / "cache-key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "xdg" / "gpulint").stat().st_mode & 0o777 == 0o700


# ---- symlinks out of the tree -------------------------------------------------------------------------------


@pytest.fixture
def linked(repo: Path, tmp_path: Path) -> tuple[Path, bytes]:
    outside = tmp_path / "outside_src"
    outside.mkdir()
    victim = outside / "victim.py"
    victim.write_text("import torch\nfrom torch.utils.data import DataLoader\n\nloader = DataLoader(make_dataset(), batch_size=64)\n"
                      "for x in loader:\n    x = x.cuda()\nprint(torch.cuda.memory_cached())\n", encoding="utf-8")  # fmt: skip
    (repo / "evil.py").symlink_to(victim)
    (repo / "alias.py").symlink_to(repo / "train.py")  # a link that stays in the tree
    return victim, victim.read_bytes()


def test_a_walked_symlink_out_of_the_tree_is_neither_read_nor_fixed(repo, home, linked):
    victim, original = linked
    check = gpulint(repo, home, "check", "--output-format", "concise", ".")
    assert [line.split(":")[0] for line in check.stdout.decode().splitlines()[:-2]] == ["alias.py", "train.py"]
    fix = gpulint(repo, home, "fix", "--apply", "--unsafe-fixes", ".")
    assert victim.read_bytes() == original
    assert not list(victim.parent.glob(".*gpulint-tmp"))
    assert "memory_reserved" in (repo / "train.py").read_text(encoding="utf-8") and fix.returncode == 0


def test_a_symlink_named_on_the_command_line_is_the_users_choice(repo, home, linked):
    victim, original = linked
    check = gpulint(repo, home, "check", "--output-format", "concise", "evil.py")
    assert "evil.py:4:10: GPU101" in check.stdout.decode()
    gpulint(repo, home, "fix", "--apply", "--unsafe-fixes", "evil.py")
    assert b"memory_reserved" in victim.read_bytes() != original and (repo / "evil.py").is_symlink()


# ---- configuration from above the repository ----------------------------------------------------------------


def test_a_config_above_the_repository_root_does_not_apply(repo, home):
    (repo.parent / "pyproject.toml").write_text('[tool.gpulint]\nignore = ["GPU4"]\ncache-dir = "planted"\n', encoding="utf-8")
    result = gpulint(repo, home, "check", "--output-format", "concise", ".")
    assert result.stdout.decode().splitlines()[0] == FINDING and result.stderr == b""
    assert (repo / CACHE_DIR_NAME).is_dir() and not (repo.parent / "planted").exists()
    # Named with --config it applies (paths relative to it).
    named = gpulint(repo, home, "check", "--config", "../pyproject.toml", "--output-format", "concise", ".")
    assert named.returncode == 0 and (repo.parent / "planted" / "CACHEDIR.TAG").is_file()


def test_without_a_repository_the_nearest_config_above_applies(repo, home):
    (repo / ".git").rmdir()
    (repo.parent / "pyproject.toml").write_text('[tool.gpulint]\nignore = ["GPU4"]\n', encoding="utf-8")
    assert gpulint(repo, home, "check", ".").returncode == 0


def test_the_repositorys_own_config_applies_from_a_subfolder(repo, home):
    configure(repo, 'ignore = ["GPU4"]')
    (repo / "sub").mkdir()
    (repo / "sub" / "train.py").write_text(TRAIN, encoding="utf-8")
    result = run_gpulint("check", ".", cwd=repo / "sub", env={"HOME": str(home), "XDG_CACHE_HOME": ""})
    assert result.returncode == 0


# ---- the project index's cache files --------------------------------------------------------------------------

UTILS = "def log_loss(loss):\n    print(loss.item())\n"
STEP = (
    "import torch\nfrom utils import log_loss\n\n\ndef train(loader, model, optimizer):\n    for x in loader:\n"
    "        loss = model(x.cuda()).sum()\n        loss.backward()\n        optimizer.step()\n        log_loss(loss)\n"
)
HELPER_SYNC = "train.py:10:9: GPU303 `log_loss(loss)` (`.item()` at utils.py:2) waits for the GPU every training step"


@pytest.fixture
def two_modules(repo: Path) -> Path:
    """A finding that only the summary of another module (utils.py's `log_loss` syncs) can give."""
    (repo / "train.py").write_text(STEP, encoding="utf-8")
    (repo / "utils.py").write_text(UTILS, encoding="utf-8")
    configure(repo, "")
    return repo


def helper_sync_reported(repo: Path, home: Path) -> None:
    # train.py changed: its context is composed again, with utils.py's summary taken from the cache.
    (repo / "train.py").write_text(STEP + "# changed\n", encoding="utf-8")
    result = gpulint(repo, home, "check", "--output-format", "concise", ".")
    assert result.returncode == 1 and result.stderr == b""
    assert result.stdout.decode().startswith(HELPER_SYNC)


def syncs_nothing(data: dict) -> None:
    for summary in data["summaries"].values():
        if "log_loss" in summary["functions"]:
            summary["functions"]["log_loss"] = [1, ["loss"]]


@pytest.mark.parametrize("signer", ["no-new-mac", "another-key"])
def test_forged_summaries_cannot_hide_a_finding(two_modules, home, signer):
    gpulint(two_modules, home, "check", ".")
    forge(cache_file(two_modules, "summaries"), syncs_nothing, None if signer == "no-new-mac" else os.urandom(32))
    helper_sync_reported(two_modules, home)


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: s["functions"].update(log_loss="not a record"),
        lambda s: s["functions"].update(log_loss=[1, "loss"]),
        lambda s: s["functions"]["log_loss"].__setitem__(0, "1"),
        lambda s: s.update(imports=[]),
        lambda s: s.update(evidence=[["x", "2"]]),
        lambda s: s.update(ok="yes"),
        lambda s: s["classes"].update(C=[1, "Base", [], {}]),
    ],
    ids=["record-string", "params-string", "line-string", "imports-list", "evidence-line-string", "ok-string", "bases-string"],
)
def test_a_wrongly_typed_summary_is_a_miss_not_an_error(two_modules, home, damage):
    gpulint(two_modules, home, "check", ".")

    def change(data):
        for summary in data["summaries"].values():
            if "log_loss" in summary["functions"]:
                damage(summary)

    forge(cache_file(two_modules, "summaries"), change, key_of(home))
    helper_sync_reported(two_modules, home)


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["files"].update({k: [v[0], v[1], 7] for k, v in d["files"].items()}),  # a hash that is no string
        lambda d: d["files"].update({k: "x" for k in d["files"]}),
        lambda d: d["contexts"].update(modules={k: 1 for k in d["contexts"]["modules"]}),
        lambda d: d.update(contexts=[]),
    ],
    ids=["hash-int", "entry-string", "context-int", "contexts-list"],
)
def test_a_wrongly_typed_project_state_is_a_miss_not_an_error(two_modules, home, damage):
    gpulint(two_modules, home, "check", ".")
    forge(cache_file(two_modules, "project"), damage, key_of(home))
    result = gpulint(two_modules, home, "check", "--output-format", "concise", ".")
    assert result.returncode == 1 and result.stderr == b""
    assert result.stdout.decode().startswith(HELPER_SYNC)


def test_the_project_index_cache_follows_the_cache_dir_rules(two_modules, home, tmp_path):
    outside = tmp_path / "outside_cache"
    configure(two_modules, f'cache-dir = "{outside}"')
    result = gpulint(two_modules, home, "check", "--output-format", "concise", ".")
    assert result.stdout.decode().startswith(HELPER_SYNC)
    assert result.stderr.decode().count("is not a path inside the project") == 1  # warned once, for both caches
    assert not outside.exists()
    assert [p.name.split("-")[0] for p in sorted((two_modules / CACHE_DIR_NAME).rglob("*.json"))][-2:] == ["project", "summaries"]
