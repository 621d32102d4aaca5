"""Reading Python 3.6 code that Python 3.7+ rejects only because `async` or `await` is a plain name.

PyTorch up to 0.3 spelled `non_blocking` as `async` (`x.cuda(async=True)`), and code of that era names
parameters and attributes `async`. Since Python 3.7 both words are keywords, so such a file does not parse and
no rule could read it. `recover` renames each such name to a placeholder of the same length (every row and
column stays where it was), parses that text, and gives back trees whose names are the user's again: the
analysis reads the file as Python 3.6 did, and a message that quotes the code quotes the user's text. The file
is still reported as `invalid-syntax` (the linter's job), and no fix is offered in it (the fixed file could not
be checked to parse). Nothing here knows about PyTorch.
"""

from __future__ import annotations

import ast
import io
import tokenize
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst

# The words that became keywords in Python 3.7 and were names before it.
_WORDS = ("async", "await")
# `async` is the keyword only before these; as a name it is followed by `=`, `)`, `,`, `.`, ...
_AFTER_ASYNC_KEYWORD = frozenset(("def", "for", "with"))
# What may follow `await` as a name (`await = 1`, `f(await)`, `x.await.y`); before anything else (`await x`,
# `await (x)`, `await -x`) it is read as the keyword and left alone.
_AFTER_NAME = frozenset(("=", ")", ",", ".", "]", "}", ":", ";", "==", "!=", "+=", "-=", "*=", "/=", "|=", "&="))
_LINE_END = (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER)


@dataclass(frozen=True)
class Recovered:
    """A file Python 3.7+ cannot parse, read as Python 3.6 did."""

    error: SyntaxError  # CPython's error on the user's text: the `invalid-syntax` finding
    text: str  # the text parsed: the user's, with each name renamed to a placeholder of the same length
    tree: ast.Module  # CPython's tree of `text`, with the user's names
    placeholders: tuple[tuple[str, str], ...]  # (placeholder, the user's word)

    @property
    def explanation(self) -> str:
        """The help of the `invalid-syntax` finding: why the file does not parse, and what was checked."""
        words = " and ".join(f"`{word}`" for _, word in self.placeholders)
        verb = "are keywords" if len(self.placeholders) > 1 else "is a keyword"
        return f"{words} {verb} since Python 3.7; the rest of the file was checked as Python 3.6 reads it, and no fix is offered in it"

    def restore(self, module: cst.Module) -> cst.Module | None:
        """LibCST's tree of `text` with the user's names: its code is the user's text byte for byte (None if
        it is not, which never happens for a module parsed from `text`)."""
        import libcst as cst

        names = dict(self.placeholders)

        class _Restore(cst.CSTTransformer):
            def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
                return updated.with_changes(value=names[updated.value]) if updated.value in names else updated

        restored = module.visit(_Restore())
        return restored if restored.code == _original(self.text, self.placeholders) else None


def recover(text: str, error: SyntaxError) -> Recovered | None:
    """`text` read as Python 3.6 code when `async` / `await` used as names is all that keeps CPython from
    parsing it (`error` is CPython's error on it); None otherwise: a file with another syntax error, or one
    where the word is the keyword in a broken statement (`async x = 1`), or a name inside an `async def` (a
    keyword there in 3.6 too)."""
    if not any(word in text for word in _WORDS):
        return None
    spans = _name_spans(text)
    if not spans:
        return None
    placeholders = tuple((_placeholder(word, text), word) for word in _WORDS if any(w == word for _, _, w in spans))
    chosen = {word: placeholder for placeholder, word in placeholders}
    repaired = _rename(text, [(start, end, chosen[word]) for start, end, word in spans])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # `"\d"` and friends: not ours to report
            tree = ast.parse(repaired)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not _restore_tree(tree, dict(placeholders)):
        return None
    return Recovered(error, repaired, tree, placeholders)


def _name_spans(text: str) -> list[tuple[int, int, str]]:
    """(start offset, end offset, word) of each `async` / `await` that is a name, read from the tokens."""
    starts = [0]
    for line in io.StringIO(text):
        starts.append(starts[-1] + len(line))
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in (tokenize.NL, tokenize.COMMENT)]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    spans = []
    for i, token in enumerate(tokens):
        if token.type != tokenize.NAME or token.string not in _WORDS:
            continue
        before = tokens[i - 1].string if i else ""
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        if _is_name(token.string, before, after):
            start = starts[token.start[0] - 1] + token.start[1]
            spans.append((start, start + len(token.string), token.string))
    return spans


def _is_name(word: str, before: str, after: tokenize.TokenInfo | None) -> bool:
    if before in (".", "def", "class", "import", "as"):
        return True
    if after is None or after.type in _LINE_END:
        return True
    if word == "async":
        return after.string not in _AFTER_ASYNC_KEYWORD
    return after.type == tokenize.OP and after.string in _AFTER_NAME


def _placeholder(word: str, text: str) -> str:
    """A name as long as `word` that `text` nowhere contains (so every one in the parsed text is a renamed word)."""
    candidates = ["_" + word[:-1], word[:-1] + "_"] + [f"_{n:0{len(word) - 1}d}" for n in range(10 ** (len(word) - 1))]
    return next(c for c in candidates if c not in text)


def _rename(text: str, spans: list[tuple[int, int, str]]) -> str:
    parts, last = [], 0
    for start, end, placeholder in spans:
        parts.append(text[last:start])
        parts.append(placeholder)
        last = end
    parts.append(text[last:])
    return "".join(parts)


def _original(text: str, placeholders: tuple[tuple[str, str], ...]) -> str:
    for placeholder, word in placeholders:
        text = text.replace(placeholder, word)
    return text


def _restore_tree(tree: ast.Module, names: dict[str, str]) -> bool:
    """Give `tree`'s names back their user's spelling, in place; False when one is inside an `async def`,
    where Python 3.6 read the word as the keyword too (the file is broken, not old)."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_async = stack.pop()
        in_async = in_async or isinstance(node, ast.AsyncFunctionDef)
        for field, value in ast.iter_fields(node):
            if isinstance(value, str) and any(p in value for p in names):
                if in_async:
                    return False
                setattr(node, field, _original(value, tuple(names.items())))
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, str) and any(p in item for p in names):
                        if in_async:
                            return False
                        value[i] = _original(item, tuple(names.items()))
                    elif isinstance(item, ast.AST):
                        stack.append((item, in_async))
            elif isinstance(value, ast.AST):
                stack.append((value, in_async))
    return True
