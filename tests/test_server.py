"""`gpulint server`, driven over stdio by a real LSP client (tests/lsp_client.py): initialize, diagnostics on
open and change, each code action applied to the text, configuration from pyproject.toml and from the client,
a file that does not parse, clients with few capabilities, shutdown and exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint import api
from tests.conftest import UNPROVEN_COST_TOML, REPO
from tests.lsp_client import LspClient, apply_text_edits, edits_of
from tests.sample_training import TRAIN

pytest.importorskip("pygls")

URL = "https://github.com/gpulint/gpulint/blob/main/rules/"


def span(line: int, start: int, end_line: int, end: int) -> dict:
    return {"start": {"line": line, "character": start}, "end": {"line": end_line, "character": end}}


def codes(diagnostics: list[dict]) -> list[str]:
    return [d["code"] for d in diagnostics]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\n" + UNPROVEN_COST_TOML, encoding="utf-8")
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    return tmp_path


@pytest.fixture
def client(project: Path):
    session = LspClient(project)
    yield session
    session.kill()


def ready(client: LspClient, initialization_options=None) -> dict:
    """Initialize, and wait for the end of `initialized` (its last step registers the file watcher)."""
    result = client.initialize(initialization_options)
    client.wait_for(lambda m: m["method"] == "client/registerCapability")
    return result


def code_actions(client: LspClient, uri: str, diagnostic: dict, only: list[str] | None = None) -> list[dict]:
    context: dict = {"diagnostics": [diagnostic]}
    if only is not None:
        context["only"] = only
    return client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": diagnostic["range"], "context": context})


def test_a_session_diagnostics_code_actions_and_shutdown(client, project):
    result = client.initialize()
    capabilities = result["capabilities"]
    assert result["serverInfo"]["name"] == "gpulint"
    assert capabilities["positionEncoding"] == "utf-16"
    assert capabilities["textDocumentSync"] == {"openClose": True, "change": 1, "save": {"includeText": False}}
    assert capabilities["codeActionProvider"] == {"codeActionKinds": ["quickfix", "source.fixAll.gpulint"], "resolveProvider": True}
    registration = client.wait_for(lambda m: m["method"] == "client/registerCapability")["params"]["registrations"]
    assert registration == [
        {"id": "gpulint-configuration", "method": "workspace/didChangeWatchedFiles", "registerOptions": {"watchers": [{"globPattern": "**/pyproject.toml"}]}}
    ]

    uri = client.open(project / "train.py", TRAIN)
    gpu101, gpu303, gpu402 = client.diagnostics(uri, 1)
    related = {"uri": uri, "range": span(6, 51, 6, 51)}
    assert gpu101 == {
        "range": span(12, 13, 12, 90),
        # The short message, then the help on its own line: editors show both where the finding is hovered.
        "message": "`DataLoader` uses `num_workers=0` (argparse default at train.py:7): batches load in the training process\n"
        "The GPU waits while the training process loads each batch",
        "severity": 2,
        "code": "GPU101",
        "codeDescription": {"href": URL + "GPU101.md"},
        "source": "gpulint",
        "relatedInformation": [{"location": related, "message": "the argparse default"}],
    }
    # UTF-16 columns: the astral character before `loss.item()` counts twice.
    assert gpu303["range"] == span(17, 25, 17, 36)
    assert gpu303["relatedInformation"] == [{"location": {"uri": uri, "range": span(13, 4, 13, 4)}, "message": "the training loop"}]
    assert gpu402["range"] == span(18, 10, 18, 34)
    assert gpu402["severity"] == 2 and "relatedInformation" not in gpu402

    # A safe fix: a preferred quick fix, and suppressing the finding instead.
    fix, noqa = code_actions(client, uri, gpu402, only=["quickfix"])
    assert (fix["title"], fix["kind"], fix["isPreferred"]) == ("Fix GPU402: Replace with `memory_reserved`", "quickfix", True)
    assert fix["diagnostics"] == [gpu402]
    assert apply_text_edits(TRAIN, edits_of(fix["edit"], uri)) == TRAIN.replace("memory_cached", "memory_reserved")
    assert fix["edit"]["documentChanges"][0]["textDocument"] == {"uri": uri, "version": 1}
    assert noqa["title"] == "Disable GPU402 for this line"
    suppressed = apply_text_edits(TRAIN, edits_of(noqa["edit"], uri))
    assert suppressed == TRAIN.replace("memory_cached())\n", "memory_cached())  # noqa: GPU402\n")

    # An unsafe fix is labelled and never preferred; its two edits (an import, the default) apply together.
    unsafe, noqa_101 = code_actions(client, uri, gpu101)[:2]
    assert unsafe["title"] == "Fix GPU101 (unsafe: may change behaviour): Change the argparse default at train.py:7 to a worker count"
    assert unsafe["isPreferred"] is False
    expected = api.fix(api.Source(TRAIN, str(project / "train.py")), api.discover_settings(project), unsafe=True).files[0].fixed
    expected = expected.replace("memory_reserved", "memory_cached")  # only this finding's fix
    assert apply_text_edits(TRAIN, edits_of(unsafe["edit"], uri)) == expected
    assert noqa_101["title"] == "Disable GPU101 for this line"

    # No fix for GPU303: only the noqa action; and no actions away from any finding.
    assert [a["title"] for a in code_actions(client, uri, gpu303, only=["quickfix"])] == ["Disable GPU303 for this line"]
    nowhere = {"textDocument": {"uri": uri}, "range": span(1, 0, 1, 0), "context": {"diagnostics": []}}
    assert [a["kind"] for a in client.request("textDocument/codeAction", nowhere)] == ["source.fixAll.gpulint"]

    # Fix all: resolved lazily when listed, computed at once when asked for by kind (on save).
    (listed,) = [a for a in code_actions(client, uri, gpu402) if a["kind"] == "source.fixAll.gpulint"]
    assert listed["title"] == "gpulint: fix all safe fixes" and "edit" not in listed
    resolved = client.request("codeAction/resolve", listed)
    fixed_all = api.fix(api.Source(TRAIN, str(project / "train.py")), api.discover_settings(project)).files[0].fixed
    assert apply_text_edits(TRAIN, edits_of(resolved["edit"], uri)) == fixed_all == TRAIN.replace("memory_cached", "memory_reserved")
    (on_save,) = code_actions(client, uri, gpu402, only=["source.fixAll"])
    assert apply_text_edits(TRAIN, edits_of(on_save["edit"], uri)) == fixed_all

    # The suppressed text, then a file that does not parse, then the fixed text again.
    after = len(client.messages)
    client.change(uri, suppressed, 2)
    assert codes(client.diagnostics(uri, 2, after=after)) == ["GPU101", "GPU303"]
    broken = TRAIN.replace("for x in loader:", "for x in loader")
    client.change(uri, broken, 3)
    (syntax,) = client.diagnostics(uri, 3, after=after)
    assert syntax == {
        "range": span(13, 19, 13, 19),
        "message": "SyntaxError: expected ':'",
        "severity": 1,
        "code": "invalid-syntax",
        "source": "gpulint",
    }
    assert client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": syntax["range"], "context": {"diagnostics": [syntax]}}) == []
    client.change(uri, fixed_all, 4)
    assert codes(client.diagnostics(uri, 4, after=after)) == ["GPU101", "GPU303"]

    after = len(client.messages)
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri, after=after) == []
    assert client.shutdown() == 0


def test_pyproject_changes_and_errors_apply_without_a_restart(client, project):
    ready(client)
    uri = client.open(project / "train.py", TRAIN)
    assert codes(client.diagnostics(uri, 1)) == ["GPU101", "GPU303", "GPU402"]

    after = len(client.messages)
    (project / "pyproject.toml").write_text('[tool.gpulint]\nignore = ["GPU402"]\n' + UNPROVEN_COST_TOML, encoding="utf-8")
    client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": (project / "pyproject.toml").as_uri(), "type": 2}]})
    assert codes(client.diagnostics(uri, 1, after=after)) == ["GPU101", "GPU303"]

    after = len(client.messages)
    (project / "pyproject.toml").write_text("[tool.gpulint]\nignore = GPU402\n", encoding="utf-8")
    client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": (project / "pyproject.toml").as_uri(), "type": 2}]})
    assert client.diagnostics(uri, 1, after=after) == []
    shown = client.wait_for(lambda m: m["method"] == "window/showMessage", after=after)["params"]
    assert shown["type"] == 1
    assert shown["message"].startswith(f"gpulint: {project / 'pyproject.toml'} is not valid TOML: ")
    assert shown["message"].endswith("train.py is not checked until it is fixed")

    # Without a watcher notification, the next check reads the settings again too.
    after = len(client.messages)
    (project / "pyproject.toml").write_text('[tool.gpulint]\nselect = ["GPU4"]\n', encoding="utf-8")
    client.change(uri, TRAIN, 2)
    assert codes(client.diagnostics(uri, 2, after=after)) == ["GPU402"]

    # Typing: changes faster than checks. Whatever is published is labelled with the version it was computed
    # for (version N has N deprecated calls), and the last version is always published.
    after = len(client.messages)
    for version in range(3, 9):
        client.change(uri, TRAIN + "torch.cuda.memory_cached()\n" * version, version)
    client.diagnostics(uri, 8, after=after)
    published = [m["params"] for m in client.messages[after:] if m["method"] == "textDocument/publishDiagnostics"]
    assert all(len(p["diagnostics"]) == 1 + p["version"] for p in published)
    assert published[-1]["version"] == 8
    assert client.shutdown() == 0


def test_client_settings_initialization_options_and_configuration_changes(project):
    client = LspClient(project, configuration={"select": ["GPU1"]})
    try:
        ready(client, {"gpulint": {"showSyntaxErrors": False, "ignore": ["GPU303"], "select": ["GPU4"]}})
        # `initialized` pulls the `gpulint` section: its keys override the initialization options' keys.
        uri = client.open(project / "train.py", TRAIN)
        assert codes(client.diagnostics(uri, 1)) == ["GPU101"]

        after = len(client.messages)
        client.configuration = {"ignore": ["GPU101"], "select": ["GPU"], "unsafeFixes": True}
        client.notify("workspace/didChangeConfiguration", {"settings": None})
        gpu303, gpu402 = client.diagnostics(uri, 1, after=after)
        (fix_all,) = [a for a in code_actions(client, uri, gpu402) if a["kind"] == "source.fixAll.gpulint"]
        assert fix_all["title"] == "gpulint: fix all (unsafe fixes included)"

        after = len(client.messages)
        client.change(uri, TRAIN.replace("for x in loader:", "for x in loader"), 2)
        assert client.diagnostics(uri, 2, after=after) == []  # showSyntaxErrors: false

        after = len(client.messages)
        client.configuration = {"run": "never", "colour": "blue", "select": ["GPU999"]}
        client.notify("workspace/didChangeConfiguration", {"settings": None})
        messages = [
            client.wait_for(lambda m, text=text: m["method"] == "window/showMessage" and text in m["params"]["message"], after=after)["params"]
            for text in ("`run` must be", "unknown setting `colour`", "Unknown rule selector: `GPU999`")
        ]
        assert [m["type"] for m in messages] == [2, 2, 1]
        assert messages[0]["message"] == 'gpulint: editor settings: `run` must be "onType" or "onSave"; ignored'
        assert client.shutdown() == 0
    finally:
        client.kill()


def test_a_client_with_few_capabilities(project):
    """No `workspace/configuration`, no `documentChanges`, no resolve, no related information: the server adapts."""
    client = LspClient(project, capabilities={})
    try:
        result = client.initialize({"select": ["GPU1", "GPU4"]})
        assert result["capabilities"]["positionEncoding"] == "utf-16"
        assert client.registrations == []
        uri = client.open(project / "train.py", TRAIN)
        gpu101, gpu402 = client.diagnostics(uri, 1)
        assert "relatedInformation" not in gpu101

        actions = code_actions(client, uri, gpu402)
        assert [a["kind"] for a in actions] == ["quickfix", "quickfix"]  # fix all needs resolve, or `only`
        assert set(actions[0]["edit"]) == {"changes"}
        (fix_all,) = code_actions(client, uri, gpu402, only=["source.fixAll.gpulint"])
        assert "memory_reserved" in apply_text_edits(TRAIN, edits_of(fix_all["edit"], uri))

        after = len(client.messages)
        client.notify("workspace/didChangeConfiguration", {"settings": {"gpulint": {"select": ["GPU4"]}}})
        assert codes(client.diagnostics(uri, 1, after=after)) == ["GPU402"]

        # Documents gpulint does not check: a notebook cell, another language; an unsaved Python buffer is checked.
        after = len(client.messages)
        client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": "vscode-notebook-cell:/nb.ipynb#W0sZmlsZQ%3D%3D", "languageId": "python", "version": 1, "text": TRAIN}},
        )
        client.open(project / "notes.md", TRAIN, language="markdown")
        untitled = "untitled:Untitled-1"
        client.notify("textDocument/didOpen", {"textDocument": {"uri": untitled, "languageId": "python", "version": 1, "text": TRAIN}})
        assert codes(client.diagnostics(untitled, 1, after=after)) == ["GPU402"]
        published = {m["params"]["uri"] for m in client.messages[after:] if m["method"] == "textDocument/publishDiagnostics"}
        assert published == {untitled}

        client.notify("exit", None)  # exit without shutdown: status 1, as the protocol says
        assert client.process.wait(30) == 1
    finally:
        client.kill()


def test_excluded_files_get_no_findings(project):
    (project / "pyproject.toml").write_text('[tool.gpulint]\nextend-exclude = ["legacy"]\n' + UNPROVEN_COST_TOML, encoding="utf-8")
    (project / "legacy").mkdir()
    client = LspClient(project)
    try:
        ready(client)
        excluded = client.open(project / "legacy" / "old.py", TRAIN)
        checked = client.open(project / "train.py", TRAIN)
        assert codes(client.diagnostics(checked, 1)) == ["GPU101", "GPU303", "GPU402"]
        assert client.diagnostics(excluded, 1) == []
        assert client.shutdown() == 0
    finally:
        client.kill()


def test_server_without_pygls_says_how_to_install_it(tmp_path):
    fake = tmp_path / "site"
    (fake / "pygls").mkdir(parents=True)
    (fake / "pygls" / "__init__.py").write_text("raise ImportError('No module named pygls')\n")
    result = subprocess.run(
        [sys.executable, "-m", "gpulint", "server"],
        env={"PYTHONPATH": f"{fake}:{REPO}", "PATH": ""},
        capture_output=True,
        timeout=120,
        input=b"",
    )
    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.decode() == (
        "gpulint failed\n  Cause: the language server needs pygls (No module named pygls): pip install 'gpulint[server]'\n"
    )


def test_client_settings_are_parsed_leniently():
    from gpulint.server.client_settings import ClientSettings, parse_client_settings

    assert parse_client_settings(None) == parse_client_settings() == (ClientSettings(), [])
    assert parse_client_settings({"gpulint": {"ignore": ["GPU1"], "preview": True}}, {}, {"preview": False})[0] == ClientSettings(
        ignore=("GPU1",), preview=False
    )
    settings, problems = parse_client_settings({"settings": {"select": ["gpu1"], "preview": True, "debounce": 0, "run": "onSave"}})
    assert settings == ClientSettings(select=("GPU1",), preview=True, debounce=0, run="onSave")
    assert problems == []
    settings, problems = parse_client_settings({"gpulint": {"select": "GPU1", "debounce": -5, "fixAll": True}})
    assert settings == ClientSettings()
    assert problems == [
        "`select` must be a list of rule codes; ignored",
        "`debounce` must be milliseconds from 0 to 10000; ignored",
        "unknown setting `fixAll` (known: select, ignore, extendSelect, preview, unsafeFixes, configuration, run, debounce, showSyntaxErrors)",
    ]
    assert parse_client_settings([1]) == (ClientSettings(), ["settings must be an object, got list"])


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [("utf-16", 5), ("utf-8", 7), ("utf-32", 4)],
)
def test_positions_in_each_encoding(encoding, expected):
    """`x="😋"`: the closing quote (column 5) is at 5 UTF-16 units, 7 UTF-8 bytes, 4 characters (0-based)."""
    from lsprotocol import types

    from gpulint.diagnostics import Location
    from gpulint.server.positions import TextIndex

    index = TextIndex('x="😋"\n', encoding)
    assert index.position(Location(1, 5)) == types.Position(line=0, character=expected)
    assert index.location(types.Position(line=0, character=expected)) == Location(1, 5)


def test_positions_split_lines_as_lsp_does():
    """Form feeds and U+2028 do not end a line; \\r\\n, \\r and \\n do; a row past the end is the document's end."""
    from lsprotocol import types

    from gpulint.diagnostics import Location
    from gpulint.server.positions import TextIndex

    index = TextIndex("a\x0cb\u2028c\r\nd\re\n")
    assert index.lines == ["a\x0cb\u2028c", "d", "e"]
    assert index.position(Location(3, 2)) == types.Position(line=2, character=1)
    assert index.position(Location(9, 1)) == types.Position(line=3, character=0)
    no_final_break = TextIndex("x = 1\ny")
    assert no_final_break.position(Location(3, 1)) == types.Position(line=1, character=1)
    assert no_final_break.location(types.Position(line=0, character=99)) == Location(1, 6)


def test_json_rpc_framing_of_a_raw_exchange(project):
    """The bytes an editor sees: Content-Length headers and JSON bodies on stdout, nothing else."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}})
    shutdown = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    exit_ = json.dumps({"jsonrpc": "2.0", "method": "exit"})
    data = "".join(f"Content-Length: {len(m)}\r\n\r\n{m}" for m in (body, shutdown, exit_)).encode()
    result = subprocess.run([sys.executable, "-m", "gpulint", "server"], input=data, capture_output=True, cwd=project, timeout=120, env={"PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr.decode()
    frames, rest = [], result.stdout
    while rest:
        head, _, rest = rest.partition(b"\r\n\r\n")
        headers = dict(line.split(": ", 1) for line in head.decode("ascii").split("\r\n"))
        length = int(headers["Content-Length"])
        frames.append(json.loads(rest[:length]))
        rest = rest[length:]
    assert [f.get("id") for f in frames] == [1, 2]
    assert frames[0]["result"]["serverInfo"]["name"] == "gpulint"
    assert frames[1] == {"jsonrpc": "2.0", "id": 2, "result": None}


@pytest.mark.slow
def test_latency_benchmark_runs(tmp_path):
    """bench/lsp_latency.py end to end on a small script (its timings are recorded, never asserted)."""
    out = tmp_path / "latency.md"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "lsp_latency.py"), "--lines", "200", "--edits", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    assert "| edit -> diagnostics, median of 2 |" in text and "| open -> first diagnostics |" in text
