"""Command-line flags declared with absl (`flags.DEFINE_integer("num_workers", 4, "workers")`, read as
`FLAGS.num_workers` where `FLAGS = flags.FLAGS`): the default of the flag a read names, as argparse's `default=`
is for `args.num_workers`. A flag declared twice, or read through another object, says nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_FLAGS = "absl.flags.FLAGS"
_DEFINE = "absl.flags.DEFINE_"


def flag_default(model: SemanticModel, attr: cst.Attribute) -> Optional[cst.BaseExpression]:
    """The default expression of the absl flag `FLAGS.<name>` reads, or None."""
    if not (isinstance(attr.value, cst.Name) and _is_flags(model, attr.value)):
        return None
    defaults = [d for d in _defaults(model).get(attr.attr.value, [])]
    return defaults[0] if len(defaults) == 1 else None


def _is_flags(model: SemanticModel, name: cst.Name) -> bool:
    """`FLAGS` bound once to `flags.FLAGS` (or the imported `FLAGS` itself)."""
    if model.qualified_name(name) == _FLAGS:
        return True
    binders = model.bindings_of(name.value, name)
    return (
        len(binders) == 1
        and isinstance(binders[0], cst.Assign)
        and model.qualified_name(binders[0].value) == _FLAGS
    )  # fmt: skip


def _defaults(model: SemanticModel) -> dict[str, list[cst.BaseExpression]]:
    found: dict[str, list[cst.BaseExpression]] = {}
    for call in model.calls:
        if not (model.call_name(call) or "").startswith(_DEFINE) or any(a.star for a in call.args):
            continue
        positional = [a.value for a in call.args if a.keyword is None]
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        name = positional[0] if positional else keywords.get("name")
        default = positional[1] if len(positional) > 1 else keywords.get("default")
        if isinstance(name, cst.SimpleString) and default is not None:
            found.setdefault(name.evaluated_value, []).append(default)
    return found
