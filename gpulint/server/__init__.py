"""`gpulint server`: a language server (LSP over stdin/stdout) for editors, built on pygls (`gpulint[server]`).

What it does:
- diagnostics for open Python files (`.py`, `.pyi`, unsaved Python buffers) on open, on save and while typing
  (after `debounce` ms without a change), each with its rule code, severity, a link to the rule's document
  (`codeDescription`) and related places (the argparse default a value comes from, the loop a sync runs in);
- code actions: apply one finding's fix (`quickfix`; an unsafe fix is labelled so and never preferred), add
  `# noqa: CODE` on the finding's line, and fix everything the settings allow (`source.fixAll.gpulint`);
- settings from `[tool.gpulint]` of the nearest pyproject.toml, read again when it changes, overridden by the
  editor's `gpulint` settings (initialization options, `workspace/configuration`, `didChangeConfiguration`).

Not supported yet: Jupyter notebooks (no LSP notebook sync; cells and `.ipynb` files get no diagnostics), and
facts from other modules of the project: each document is checked on its own, as `gpulint check -` checks
standard input.
"""

from __future__ import annotations

import logging
import sys

from gpulint.config import ConfigError


def serve() -> int:
    """Serve LSP over stdin/stdout until the client says `exit` (or closes stdin). Returns the exit status: 0
    after `shutdown` and `exit`, 1 when the client went away without `shutdown` (as the protocol says)."""
    try:
        from gpulint.server.app import create_server
    except ImportError as error:
        raise ConfigError(f"the language server needs pygls ({error}): pip install 'gpulint[server]'") from None
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="gpulint server: %(levelname)s: %(message)s")
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout carries the protocol: a stray print must not corrupt it
    server = create_server()
    server.start_io(stdin, stdout)
    status = 0 if server.shut_down else 1
    server.stop()
    return status
