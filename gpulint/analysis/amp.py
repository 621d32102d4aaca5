"""Mixed precision: uses of the deprecated `torch.cuda.amp` names, grouped by the import they come through."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

DEPRECATED_AMP = frozenset(
    {"torch.cuda.amp.autocast", "torch.cuda.amp.GradScaler", "torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd"}
)
AMP_MODULE = "torch.cuda.amp"

# How a reference is used: what a rewrite has to change there.
CALL = "call"  # `autocast(...)`, also `@autocast()` and `with autocast():`
BARE_DECORATOR = "bare decorator"  # `@custom_fwd`
ANNOTATION = "annotation"  # `scaler: GradScaler`: no runtime effect
VALUE = "value"  # passed around (`ctx = autocast if amp else nullcontext`): cannot be rewritten


@dataclass
class AmpUse:
    node: cst.BaseExpression  # the reference: `torch.cuda.amp.autocast`, `amp.autocast`, `autocast`
    qualified: str  # `torch.cuda.amp.autocast`
    usage: str  # CALL, BARE_DECORATOR, ANNOTATION or VALUE
    call: cst.Call | None  # the call when usage is CALL
    via_import: str | None  # the local name of a `torch.cuda.amp` import the reference goes through
    compatibility: bool = False  # a fallback for old torch (`except AttributeError:`, a version check)

    @property
    def member(self) -> str:
        return self.qualified.rsplit(".", 1)[1]


@dataclass
class AmpImport:
    """An import of `torch.cuda.amp` or its members: rewriting it changes every use of its names at once."""

    statement: cst.Import | cst.ImportFrom
    names: tuple[str, ...]  # the local names it binds
    uses: list[AmpUse] = field(default_factory=list)
    # The edit that turns the import into its `torch.amp` twin: (node, new text), or None when impossible.
    rewrite: tuple[cst.CSTNode, str] | None = None


@dataclass
class DeprecatedAmp:
    uses: list[AmpUse]
    imports: dict[str, AmpImport]  # local name -> its import (for names bound by a `torch.cuda.amp` import)
    shadowed: frozenset[str]  # local names bound more than once (a fallback import, a parameter, ...)


def _usage(model: SemanticModel, node: cst.BaseExpression) -> tuple[str, cst.Call | None]:
    parent = model.parent.get(node)
    if isinstance(parent, cst.Call) and parent.func is node:
        return CALL, parent
    if isinstance(parent, cst.Decorator):
        return BARE_DECORATOR, None
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.Annotation):
            return ANNOTATION, None
        if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            break
    return VALUE, None


def _is_reference(model: SemanticModel, name: cst.Name) -> bool:
    """A Name that reads a variable (not `x.name`, a keyword, an import alias, a def name)."""
    parent = model.parent.get(name)
    if isinstance(parent, cst.Attribute) and parent.attr is name:
        return False
    if isinstance(parent, cst.Arg) and parent.keyword is name:
        return False
    binders = (cst.ImportAlias, cst.AsName, cst.FunctionDef, cst.ClassDef, cst.Param, cst.AssignTarget, cst.NameItem)
    if isinstance(parent, binders):
        return False
    if isinstance(parent, (cst.AnnAssign, cst.AugAssign, cst.NamedExpr, cst.For, cst.CompFor)) and parent.target is name:
        return False
    return not isinstance(parent, cst.Attribute) or parent.value is name


def _import_rewrite(model: SemanticModel, statement: cst.CSTNode) -> tuple[cst.CSTNode, str] | None:
    """`from torch.cuda.amp import X` -> `from torch.amp import X`, `from torch.cuda import amp` -> `from torch import amp`,
    `import torch.cuda.amp as amp` -> `import torch.amp as amp`."""
    if isinstance(statement, cst.ImportFrom) and statement.module is not None and not statement.relative:
        module = dotted_name(statement.module)
        aliases = [] if isinstance(statement.names, cst.ImportStar) else statement.names
        names = [a.name.value for a in aliases if isinstance(a.name, cst.Name)]
        if module == AMP_MODULE and names and all(f"{AMP_MODULE}.{n}" in DEPRECATED_AMP for n in names):
            return statement.module, "torch.amp"
        if module == "torch.cuda" and names == ["amp"]:
            return statement.module, "torch"
        return None
    if isinstance(statement, cst.Import) and len(statement.names) == 1:
        alias = statement.names[0]
        if alias.asname is not None and dotted_name(alias.name) == AMP_MODULE:
            return alias.name, "torch.amp"
    return None


def _amp_imports(model: SemanticModel) -> dict[str, AmpImport]:
    """Local names bound by an import of `torch.cuda.amp` (the module) or of its deprecated members."""
    found: dict[str, AmpImport] = {}
    for statement in model.import_statements:
        if isinstance(statement, cst.ImportFrom) and isinstance(statement.names, cst.ImportStar):
            continue
        local_names = []
        for alias in statement.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            elif isinstance(statement, cst.ImportFrom) and isinstance(alias.name, cst.Name):
                local = alias.name.value
            else:
                continue  # `import torch.cuda.amp` binds `torch`: its uses are plain attribute chains
            if model.imports.resolve(local) in (AMP_MODULE, *DEPRECATED_AMP):
                local_names.append(local)
        if local_names:
            record = AmpImport(statement, tuple(local_names), rewrite=_import_rewrite(model, statement))
            for local in local_names:
                found[local] = record
    return found


def _root_name(node: cst.BaseExpression) -> str | None:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def in_compatibility_code(model: SemanticModel, node: cst.CSTNode) -> bool:
    """Code for older torch: an `except` handler (the fallback when the new API is missing) or a version check."""
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.ExceptHandler):
            return True
        if isinstance(ancestor, (cst.If, cst.IfExp)):
            test = model.code(ancestor.test)
            if "version" in test.lower() or "hasattr" in test:
                return True
    return False


def find_deprecated_amp(model: SemanticModel) -> DeprecatedAmp:
    imports = _amp_imports(model)
    uses: list[AmpUse] = []
    candidates: list[cst.BaseExpression] = [a for a in model.attributes if model.qualified_name(a) in DEPRECATED_AMP]
    if imports:
        # References of the imported names (`autocast`, `amp`), in source order.
        for node in model.parent:
            if isinstance(node, cst.Name) and node.value in imports and _is_reference(model, node):
                parent = model.parent.get(node)
                if model.qualified_name(node) in DEPRECATED_AMP:
                    candidates.append(node)
                elif not (isinstance(parent, cst.Attribute) and model.qualified_name(parent) in DEPRECATED_AMP):
                    # The module used otherwise (`amp` passed around, `amp.common`): it blocks an import rewrite.
                    candidates.append(node)
    seen: set[int] = set()
    for node in candidates:
        if id(node) in seen:
            continue
        seen.add(id(node))
        usage, call = _usage(model, node)
        root = _root_name(node)
        use = AmpUse(node, model.qualified_name(node) or AMP_MODULE, usage, call, root if root in imports else None)
        use.compatibility = in_compatibility_code(model, node)
        uses.append(use)
        if use.via_import is not None:
            imports[use.via_import].uses.append(use)
    uses.sort(key=lambda u: (model.range(u.node).start.line, model.range(u.node).start.column))
    names = {local for local in imports}
    shadowed = frozenset(
        local
        for local in names
        if any(name == local for (_, name) in model.bindings)
        or sum(1 for s in model.import_statements if local in _bound_names(s)) > 1
    )
    for use in uses:
        if use.via_import is not None:
            statement = imports[use.via_import].statement
            # `try: from torch.amp import autocast` / `except ImportError: from torch.cuda.amp import autocast`
            imported_twice = sum(1 for s in model.import_statements if use.via_import in _bound_names(s)) > 1
            if imported_twice or in_compatibility_code(model, statement):
                use.compatibility = True
    return DeprecatedAmp(uses, imports, shadowed)


def _bound_names(statement: cst.CSTNode) -> list[str]:
    if isinstance(statement, cst.ImportFrom) and isinstance(statement.names, cst.ImportStar):
        return []
    names = []
    for alias in statement.names:
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            names.append(alias.asname.name.value)
        else:
            dotted = dotted_name(alias.name)
            if dotted:
                names.append(dotted.split(".")[0] if isinstance(statement, cst.Import) else dotted)
    return names


def torch_binding(model: SemanticModel) -> str | None:
    """The local name the module imports `torch` under (`torch`, `th`), if any."""
    if model.imports.bindings.get("torch") == "torch":
        return "torch"
    for local, qualified in model.imports.bindings.items():
        if qualified == "torch":
            return local
    return None
