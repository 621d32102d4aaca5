"""A small LSP client for tests and benchmarks: starts `gpulint server` as a subprocess and speaks JSON-RPC with
it over stdio (Content-Length framing), as an editor does. Requests from the server (`workspace/configuration`,
`client/registerCapability`) are answered from what the test sets; notifications are kept for inspection."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent

# What a capable editor declares (the parts gpulint looks at).
CAPABILITIES = {
    "general": {"positionEncodings": ["utf-16"]},
    "textDocument": {
        "synchronization": {"didSave": True},
        "publishDiagnostics": {"relatedInformation": True, "versionSupport": True, "codeDescriptionSupport": True},
        "codeAction": {
            "codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix", "source", "source.fixAll"]}},
            "resolveSupport": {"properties": ["edit"]},
            "isPreferredSupport": True,
        },
    },
    "workspace": {
        "configuration": True,
        "didChangeConfiguration": {"dynamicRegistration": True},
        "didChangeWatchedFiles": {"dynamicRegistration": True},
        "workspaceEdit": {"documentChanges": True},
    },
}


class LspError(Exception):
    pass


class LspClient:
    def __init__(self, root: Path, *, capabilities: dict | None = None, configuration: Any = None, env: dict | None = None) -> None:
        self.root = root
        self.capabilities = CAPABILITIES if capabilities is None else capabilities
        self.configuration = configuration  # answers `workspace/configuration` for the `gpulint` section
        self.registrations: list[dict] = []
        self.messages: list[dict] = []  # every notification and request from the server, in order
        self._responses: dict[int, dict] = {}
        self._condition = threading.Condition()
        self._write_lock = threading.Lock()
        self._next_id = 0
        full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gpulint", "server"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._stderr: list[bytes] = []
        threading.Thread(target=lambda: self._stderr.extend(self.process.stderr), daemon=True).start()

    # ---- wire ----------------------------------------------------------------------------------------

    def _send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        with self._write_lock:
            self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.process.stdin.flush()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    with self._condition:
                        self._condition.notify_all()
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value.strip())
            message = json.loads(stream.read(length))
            if "method" in message and "id" in message:
                self._answer(message)
            with self._condition:
                if "method" in message:
                    self.messages.append(message)
                else:
                    self._responses[message["id"]] = message
                self._condition.notify_all()

    def _answer(self, request: dict) -> None:
        """Answer what the declared capabilities cover; anything else is `MethodNotFound`, as an editor answers."""
        method = request["method"]
        workspace = self.capabilities.get("workspace", {})
        if method == "workspace/configuration" and workspace.get("configuration"):
            self._send({"id": request["id"], "result": [self.configuration for _ in request["params"]["items"]]})
        elif method == "client/registerCapability" and workspace.get("didChangeWatchedFiles", {}).get("dynamicRegistration"):
            self.registrations.extend(request["params"]["registrations"])
            self._send({"id": request["id"], "result": None})
        else:
            self._send({"id": request["id"], "error": {"code": -32601, "message": f"Unhandled method {method}"}})

    # ---- requests and notifications ----------------------------------------------------------------------

    def request(self, method: str, params: Any, timeout: float = 60) -> Any:
        self._next_id += 1
        ident = self._next_id
        self._send({"id": ident, "method": method, "params": params})
        with self._condition:
            if not self._condition.wait_for(lambda: ident in self._responses or self.process.poll() is not None, timeout):
                raise TimeoutError(f"no answer to {method} in {timeout} s")
            if ident not in self._responses:
                raise LspError(f"the server exited ({self.process.returncode}): {self.stderr}")
            response = self._responses.pop(ident)
        if "error" in response:
            raise LspError(response["error"])
        return response.get("result")

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float = 60, after: int = 0) -> dict:
        """The first message from the server (from index `after` on) that satisfies `predicate`."""
        with self._condition:
            found: list[dict] = []

            def seen() -> bool:
                found[:] = [m for m in self.messages[after:] if predicate(m)][:1]
                return bool(found) or self.process.poll() is not None

            if not self._condition.wait_for(seen, timeout) or not found:
                raise TimeoutError(f"no such message in {timeout} s; got {[m['method'] for m in self.messages[after:]]}; stderr: {self.stderr}")
            return found[0]

    def diagnostics(self, uri: str, version: int | None = None, timeout: float = 60, after: int = 0) -> list[dict]:
        """The diagnostics the server publishes for `uri` (at `version`, when given)."""
        message = self.wait_for(
            lambda m: m["method"] == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == uri
            and (version is None or m["params"].get("version") == version),
            timeout,
            after,
        )
        return message["params"]["diagnostics"]

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    # ---- a session -------------------------------------------------------------------------------------

    def initialize(self, initialization_options: Any = None) -> dict:
        params = {
            "processId": os.getpid(),
            "rootUri": self.root.as_uri(),
            "workspaceFolders": [{"uri": self.root.as_uri(), "name": self.root.name}],
            "capabilities": self.capabilities,
        }
        if initialization_options is not None:
            params["initializationOptions"] = initialization_options
        result = self.request("initialize", params)
        self.notify("initialized", {})
        return result

    def open(self, path: Path, text: str, version: int = 1, language: str = "python") -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": language, "version": version, "text": text}})
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]})

    def shutdown(self, timeout: float = 30) -> int:
        """`shutdown` then `exit`, as an editor closes: the exit status of the server."""
        self.request("shutdown", None)
        self.notify("exit", None)
        return self.process.wait(timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            stream.close()


def apply_text_edits(text: str, edits: list[dict]) -> str:
    """`text` with LSP `TextEdit`s (UTF-16 columns) applied, as an editor applies a workspace edit."""
    import re

    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]

    def offset(position: dict) -> int:
        if position["line"] >= len(starts):
            return len(text)
        start = starts[position["line"]]
        units = 0
        index = start
        while units < position["character"]:
            units += 2 if ord(text[index]) > 0xFFFF else 1
            index += 1
        return index

    for edit in sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]), reverse=True):
        text = text[: offset(edit["range"]["start"])] + edit["newText"] + text[offset(edit["range"]["end"]) :]
    return text


def edits_of(workspace_edit: dict, uri: str) -> list[dict]:
    """The text edits a `WorkspaceEdit` makes to `uri` (`documentChanges` or `changes`)."""
    if "documentChanges" in workspace_edit:
        return [e for change in workspace_edit["documentChanges"] if change["textDocument"]["uri"] == uri for e in change["edits"]]
    return workspace_edit["changes"][uri]
