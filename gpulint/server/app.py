"""The language server: documents in, diagnostics and code actions out, all through `gpulint.api`.

Each open Python document is checked in a worker thread (one at a time, so typing never queues up checks:
a check whose document changed meanwhile is not published, and the newest version is checked next). While
typing, a document is checked once no change has come for `debounce` milliseconds; on open and save at once.

`_analyse` is the one place a document is checked (`api.check` on its text, with the settings of its folder).
A project index (summaries of every module, cached by content) belongs there: kept per settings root, told
about each open document's unsaved text on change and about files changed on disk (the watcher), so that a
change re-summarises one module and the open documents depending on it are checked again.
"""

from __future__ import annotations

import asyncio
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from gpulint import __version__, api
from gpulint.diagnostics import is_applicable, rule_url
from gpulint.server.client_settings import ClientSettings, SettingsCache, parse_client_settings
from gpulint.server.positions import TextIndex

log = logging.getLogger("gpulint.server")

FIX_ALL = "source.fixAll.gpulint"
PYTHON_SUFFIXES = (".py", ".pyi")
SEVERITIES = {
    api.Severity.ERROR: types.DiagnosticSeverity.Error,
    api.Severity.WARNING: types.DiagnosticSeverity.Warning,
    api.Severity.INFO: types.DiagnosticSeverity.Information,
}
CONFIG_WATCHER = "gpulint-configuration"
CONFIGURATION_TIMEOUT = 5  # seconds to wait for the editor's settings


@dataclass
class Analysis:
    """One version of a document and what checking it found."""

    uri: str
    version: int | None
    source: api.Source
    index: TextIndex
    settings: api.Settings | None  # None: they could not be read (`error` says why) and nothing was checked
    diagnostics: list[api.Diagnostic] = field(default_factory=list)
    error: str | None = None


@dataclass
class Document:
    path: str  # what findings are reported under (relative to the server's folder, as `gpulint check` shows it)
    folder: Path  # where the settings are looked for
    pending: asyncio.Task | None = None
    analysis: Analysis | None = None


class GpulintLanguageServer(LanguageServer):
    def __init__(self) -> None:
        # Full sync: the client sends the whole text on each change, so no edit is ever applied with a line model
        # other than LSP's (pygls splits lines at form feeds too when it applies incremental changes).
        super().__init__("gpulint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.settings = SettingsCache()
        self.documents: dict[str, Document] = {}
        self.checker = ThreadPoolExecutor(1, thread_name_prefix="gpulint-check")
        self.told: set[str] = set()  # messages already shown: each problem is shown once
        self.shut_down = False  # `shutdown` came before `exit` (the exit status says so)
        self.initialization_options: Any = None  # the base the editor's later settings override

    # ---- client settings ----------------------------------------------------------------------------

    @property
    def client(self) -> ClientSettings:
        return self.settings.client

    def apply_client_settings(self, data: Any = None) -> None:
        """The initialization options, overridden by `data` (the editor's current `gpulint` settings)."""
        client, problems = parse_client_settings(self.initialization_options, data)
        if client.configuration and not os.path.isabs(client.configuration):
            root = self.workspace.root_path or os.getcwd()
            client = replace(client, configuration=os.path.join(root, client.configuration))
        for problem in problems:
            self.tell(f"gpulint: editor settings: {problem}", types.MessageType.Warning)
        self.settings.set_client(client)

    def capable(self, path: str) -> bool:
        """Whether the client declared the capability at `path` (dotted, in `ClientCapabilities`)."""
        value: Any = self.client_capabilities
        for name in path.split("."):
            value = getattr(value, name, None)
            if value is None:
                return False
        return bool(value)

    async def pull_configuration(self) -> None:
        """Read the `gpulint` section of the client's settings (`workspace/configuration`). Asked of every client:
        some answer it without declaring it (Neovim before 0.8); one that fails or does not answer in time keeps
        the settings it gave."""
        request = self.workspace_configuration_async(types.ConfigurationParams(items=[types.ConfigurationItem(section="gpulint")]))
        try:
            result = await asyncio.wait_for(request, CONFIGURATION_TIMEOUT)
        except Exception as error:  # noqa: BLE001 - an error answer, a timeout: the settings stay as they are
            log.info("workspace/configuration: no answer (%s)", error or type(error).__name__)
            return
        if result and result[0] is not None:
            self.apply_client_settings(result[0])

    async def watch_configuration(self) -> None:
        """Ask the client to report changes to configuration files (`workspace/didChangeWatchedFiles`)."""
        watchers = [types.FileSystemWatcher(glob_pattern="**/pyproject.toml")]
        if self.client.configuration:
            watchers.append(types.FileSystemWatcher(glob_pattern=Path(self.client.configuration).as_posix()))
        registration = types.Registration(
            id=CONFIG_WATCHER,
            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
        )
        try:
            await self.client_register_capability_async(types.RegistrationParams(registrations=[registration]))
        except Exception as error:  # noqa: BLE001 - settings are still read again at the next check
            log.warning("client/registerCapability failed: %s", error)

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Error) -> None:
        """Show a problem to the user (and in the editor's log), once."""
        if message not in self.told:
            self.told.add(message)
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))
            self.window_log_message(types.LogMessageParams(type=kind, message=message))

    # ---- documents ----------------------------------------------------------------------------------

    def open(self, item: types.TextDocumentItem) -> Document | None:
        """Start tracking a document gpulint checks: a Python file, or an unsaved Python buffer."""
        scheme = item.uri.split(":", 1)[0]
        if scheme == "file":
            path = to_fs_path(item.uri) or ""
            if not (path.endswith(PYTHON_SUFFIXES) or item.language_id == "python") or path.endswith(".ipynb"):
                return None
            document = Document(api.display_path(path), Path(path).parent)
        elif scheme == "untitled" and item.language_id == "python":
            document = Document(f"<{item.uri}>", Path(self.workspace.root_path or os.getcwd()))
        else:
            if scheme == "vscode-notebook-cell":
                log.info("notebook cells are not checked by the language server yet: %s", item.uri)
            return None
        self.documents[item.uri] = document
        return document

    def close(self, uri: str) -> None:
        document = self.documents.pop(uri, None)
        if document is not None:
            if document.pending is not None:
                document.pending.cancel()
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def schedule(self, uri: str, delay: float) -> None:
        """Check the document's newest version after `delay` seconds without another change."""
        document = self.documents.get(uri)
        if document is None:
            return
        if document.pending is not None and not document.pending.done():
            document.pending.cancel()
        document.pending = asyncio.get_running_loop().create_task(self._check_and_publish(uri, delay))

    def recheck_all(self) -> None:
        """Check every open document again (the settings changed)."""
        for uri, document in self.documents.items():
            document.analysis = None
            self.schedule(uri, 0)

    async def _check_and_publish(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        try:
            analysis = await self.current(uri)
        except Exception as error:  # noqa: BLE001 - a bug in gpulint: say so, keep serving the other documents
            log.exception("checking %s failed", uri)
            self.tell(f"gpulint: checking {uri} failed ({type(error).__name__}: {error}); please report it")
            return
        if analysis is not None and uri in self.documents and analysis.version == self.workspace.get_text_document(uri).version:
            self.publish(analysis)

    async def current(self, uri: str) -> Analysis | None:
        """The analysis of the document as it is now: the last one when the text has not changed since."""
        document = self.documents.get(uri)
        if document is None:
            return None
        text_document = self.workspace.get_text_document(uri)
        text, version = text_document.source, text_document.version
        if document.analysis is not None and document.analysis.version == version and document.analysis.source.text == text:
            return document.analysis
        loop = asyncio.get_running_loop()
        encoding = self.workspace.position_encoding or types.PositionEncodingKind.Utf16
        analysis = await loop.run_in_executor(self.checker, self._analyse, uri, version, text, document, encoding)
        if self.documents.get(uri) is document:
            document.analysis = analysis
        return analysis

    def _analyse(self, uri: str, version: int | None, text: str, document: Document, encoding: str) -> Analysis:
        """In the checker thread: the settings for the document's folder, then the check."""
        settings, error = self.settings.for_folder(document.folder)
        analysis = Analysis(uri, version, api.Source(text, document.path), TextIndex(text, encoding), settings, error=error)
        if settings is not None:
            analysis.diagnostics = api.check(analysis.source, settings, cache=False).diagnostics
        return analysis

    # ---- diagnostics --------------------------------------------------------------------------------

    def publish(self, analysis: Analysis) -> None:
        if analysis.error is not None:
            self.tell(f"gpulint: {analysis.error} (in pyproject.toml or the editor's gpulint settings); {analysis.source.path} is not checked until it is fixed")
        shown = [d for d in analysis.diagnostics if self.client.show_syntax_errors or d.name != "invalid-syntax"]
        diagnostics = [self.lsp_diagnostic(d, analysis) for d in shown]
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=analysis.uri, diagnostics=diagnostics, version=analysis.version))

    def lsp_diagnostic(self, d: api.Diagnostic, analysis: Analysis) -> types.Diagnostic:
        related = None
        if d.related and self.capable("text_document.publish_diagnostics.related_information"):
            related = [
                types.DiagnosticRelatedInformation(location=types.Location(uri=analysis.uri, range=analysis.index.range(at, at)), message=text)
                for text, at in d.related
            ]
        return types.Diagnostic(
            range=analysis.index.range(d.location, d.end_location),
            message=f"{d.message}\n{d.help}" if d.help else d.message,  # editors show the lines under each other
            severity=SEVERITIES[api.Severity(d.severity)],
            code=d.code or d.name,
            code_description=types.CodeDescription(href=rule_url(d.code)) if d.code else None,
            source="gpulint",
            related_information=related,
        )

    # ---- code actions -------------------------------------------------------------------------------

    async def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        uri = params.text_document.uri
        analysis = await self.current(uri)
        if analysis is None or analysis.settings is None:
            return None
        only = params.context.only
        actions: list[types.CodeAction] = []
        if _wanted(types.CodeActionKind.QuickFix, only):
            start, end = analysis.index.location(params.range.start), analysis.index.location(params.range.end)
            for d in analysis.diagnostics:
                if d.code is not None and d.location <= end and start <= d.end_location:
                    actions += self.quick_fixes(d, analysis)
        if _wanted(FIX_ALL, only) and any(is_applicable(d, analysis.settings.unsafe_fixes) for d in analysis.diagnostics):
            action = types.CodeAction(title=_fix_all_title(analysis.settings), kind=FIX_ALL, data={"uri": uri, "version": analysis.version})
            if only is not None:  # asked for by name (on save): the edit now
                action.edit = await self.fix_all_edit(analysis)
                actions.append(action)
            elif self.capable("text_document.code_action.resolve_support"):
                actions.append(action)  # the edit when chosen (`codeAction/resolve`): fixing costs several checks
        return actions

    def quick_fixes(self, d: api.Diagnostic, analysis: Analysis) -> list[types.CodeAction]:
        """Apply this finding's fix (an unsafe one says so), and suppress it on its line."""
        lsp_diagnostic = self.lsp_diagnostic(d, analysis)
        actions = []
        edits = api.fix_edits(analysis.source, d)
        if edits:
            safe = d.fix.applicability == api.Applicability.SAFE
            label = f"Fix {d.code}" if safe else f"Fix {d.code} (unsafe: may change behaviour)"
            actions.append(
                types.CodeAction(
                    title=f"{label}: {d.fix.message}",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[lsp_diagnostic],
                    is_preferred=safe,
                    edit=self.workspace_edit(analysis, edits),
                )
            )
        noqa = api.noqa_edit(analysis.source, d)
        if noqa is not None:
            actions.append(
                types.CodeAction(
                    title=f"Disable {d.code} for this line",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[lsp_diagnostic],
                    edit=self.workspace_edit(analysis, [noqa]),
                )
            )
        return actions

    async def fix_all_edit(self, analysis: Analysis) -> types.WorkspaceEdit | None:
        """Every fix the settings allow (safe ones; unsafe ones too with `unsafe-fixes`), as line edits."""
        loop = asyncio.get_running_loop()
        report = await loop.run_in_executor(self.checker, api.fix, analysis.source, analysis.settings)
        (fixed,) = report.files or (None,)
        if fixed is None or not fixed.changed:
            return None
        return self.workspace_edit(analysis, fixed.edits)

    async def resolve(self, action: types.CodeAction) -> types.CodeAction:
        data = action.data if isinstance(action.data, dict) else {}
        uri = data.get("uri")
        if action.kind == FIX_ALL and isinstance(uri, str):
            analysis = await self.current(uri)
            if analysis is not None and analysis.settings is not None:
                action.edit = await self.fix_all_edit(analysis)
        return action

    def workspace_edit(self, analysis: Analysis, edits: Iterable[api.Edit]) -> types.WorkspaceEdit:
        text_edits = [types.TextEdit(range=analysis.index.range(e.location, e.end_location), new_text=e.content) for e in edits]
        if self.capable("workspace.workspace_edit.document_changes"):
            document = types.OptionalVersionedTextDocumentIdentifier(uri=analysis.uri, version=analysis.version)
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=document, edits=text_edits)])
        return types.WorkspaceEdit(changes={analysis.uri: text_edits})

    def stop(self) -> None:
        self.shut_down = True
        for document in self.documents.values():
            if document.pending is not None:
                document.pending.cancel()
        self.checker.shutdown(wait=False, cancel_futures=True)


def _wanted(kind: str, only: list[str] | None) -> bool:
    """`kind` is asked for: no filter, or a filter naming it or a kind above it (`source.fixAll`, `source`)."""
    return only is None or any(kind == o or kind.startswith(o + ".") for o in only)


def _fix_all_title(settings: api.Settings) -> str:
    return "gpulint: fix all (unsafe fixes included)" if settings.unsafe_fixes else "gpulint: fix all safe fixes"


def create_server() -> GpulintLanguageServer:
    server = GpulintLanguageServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: GpulintLanguageServer, params: types.InitializeParams) -> None:
        ls.initialization_options = params.initialization_options
        ls.apply_client_settings()

    @server.feature(types.INITIALIZED)
    async def initialized(ls: GpulintLanguageServer, params: types.InitializedParams) -> None:
        await ls.pull_configuration()
        if ls.capable("workspace.did_change_watched_files.dynamic_registration"):
            await ls.watch_configuration()
        ls.recheck_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: GpulintLanguageServer, params: types.DidChangeConfigurationParams) -> None:
        if ls.capable("workspace.configuration") or params.settings is None:
            await ls.pull_configuration()
        else:
            ls.apply_client_settings(params.settings)
        ls.recheck_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: GpulintLanguageServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.recheck_all()  # each check reads the settings again if a configuration file changed

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GpulintLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        if ls.open(params.text_document) is not None:
            ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GpulintLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        if ls.client.run == "onType":
            ls.schedule(params.text_document.uri, ls.client.debounce / 1000)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: GpulintLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)  # answered from the last check when the text is unchanged

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GpulintLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.close(params.text_document.uri)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=True),
    )
    async def code_action(ls: GpulintLanguageServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        return await ls.code_actions(params)

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: GpulintLanguageServer, params: types.CodeAction) -> types.CodeAction:
        return await ls.resolve(params)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: GpulintLanguageServer, params: None) -> None:
        ls.stop()

    return server
