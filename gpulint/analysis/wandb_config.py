"""Values a Weights & Biases run's configuration gives a key: `config.batch_size` where `config = wandb.config`
(or `run.config` of `run = wandb.init(...)`, `with wandb.init(...) as run`), and this module's `wandb.init`
calls hand `config={"batch_size": 128, ...}` written out.

`wandb.config` holds the dictionary the run was started with, so its keys are the written values. Anything that
can change them after the start makes the value unknown (None): a sweep (`wandb.agent`, `wandb.sweep`: the agent
sets the keys it searches), `config.update(...)`, a write `config.key = ...` / `config["key"] = ...`, or a
`config=` of `wandb.init` that is not a written-out dict (a command-line namespace, a YAML file).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst
import libcst.matchers as matchers

from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_INIT = "wandb.init"
_CONFIG = "wandb.config"
_SWEEPS = frozenset({"wandb.agent", "wandb.sweep"})


def wandb_config_values(model: SemanticModel, expr: cst.BaseExpression) -> Optional[list[cst.BaseExpression]]:
    """For `<config>.<key>` whose `<config>` is a W&B run's configuration: the values this module's
    `wandb.init(config={...})` calls give `key` (one per call that has it); None otherwise or when the
    configuration may be changed after the start."""
    if not isinstance(expr, cst.Attribute) or not _is_run_config(model, expr.value):
        return None
    dicts = _init_configs(model)
    if dicts is None:
        return None
    key = expr.attr.value
    values = [value for written in dicts for name, value in written if name == key]
    return values or None


def _is_run_config(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`wandb.config`, `run.config` of a run `wandb.init` starts, or a name bound to one of them."""
    if model.qualified_name(expr) == _CONFIG:
        return True
    if isinstance(expr, cst.Attribute) and expr.attr.value == "config":
        return _starts_run(model, expr.value)
    sources = model.batch_cost.expression_sources(expr) if isinstance(expr, cst.Name) else None
    return bool(sources) and all(s is not expr and _is_run_config(model, s) for s in sources)  # type: ignore[union-attr]


def _starts_run(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`wandb.init(...)`, or a name bound to it (`run = wandb.init(...)`, `with wandb.init(...) as run`)."""
    if isinstance(expr, cst.Call):
        return model.call_name(expr) == _INIT
    if not isinstance(expr, cst.Name):
        return False
    for node in model.calls:
        if model.call_name(node) != _INIT:
            continue
        item = model.parent.get(node)
        if isinstance(item, cst.WithItem) and isinstance(item.asname, cst.AsName) and isinstance(item.asname.name, cst.Name):
            if item.asname.name.value == expr.value:
                return True
    sources = model.batch_cost.expression_sources(expr)
    return bool(sources) and all(isinstance(s, cst.Call) and model.call_name(s) == _INIT for s in sources)


def _init_configs(model: SemanticModel) -> Optional[list[list[tuple[str, cst.BaseExpression]]]]:
    """The (key, value) pairs of each `wandb.init` call's `config=` dict in this module; None when one of them
    is not written out, or when the module can change a run's configuration after its start."""
    memo = model.memo("wandb.init configurations")
    if model.module in memo:
        return memo[model.module]
    found: Optional[list[list[tuple[str, cst.BaseExpression]]]] = []
    for call in model.calls:
        name = model.call_name(call) or ""
        if name in _SWEEPS or _updates_config(model, call):
            found = None
            break
        if name != _INIT:
            continue
        given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "config"), None)
        if given is None:
            continue
        pairs = _written_dict(model, given)
        if pairs is None:
            found = None
            break
        found.append(pairs)
    if found is not None and _writes_config(model):
        found = None
    memo[model.module] = found
    return found


def _written_dict(model: SemanticModel, expr: cst.BaseExpression) -> Optional[list[tuple[str, cst.BaseExpression]]]:
    sources = model.batch_cost.expression_sources(expr)
    if not sources or len(sources) != 1:
        return None
    written = sources[0]
    if isinstance(written, cst.Call) and isinstance(written.func, cst.Name) and written.func.value == "dict":
        if model.module_bindings("dict") or any(a.keyword is None for a in written.args):
            return None  # `dict(defaults, ...)`, `dict(**kw)`: keys not written here
        return [(a.keyword.value, a.value) for a in written.args]  # type: ignore[union-attr]
    if not isinstance(written, cst.Dict):
        return None
    pairs = []
    for element in written.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
            return None  # `**defaults`: keys not written here
        pairs.append((element.key.evaluated_value, element.value))
    return pairs  # type: ignore[return-value]


def _updates_config(model: SemanticModel, call: cst.Call) -> bool:
    """`wandb.config.update(...)` / `config.update(...)` / `run.config.setdefaults(...)`."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value in ("update", "setdefaults", "__setitem__")):
        return False
    owner = dotted_name(func.value) or ""
    return owner.endswith("config")


def _writes_config(model: SemanticModel) -> bool:
    """An assignment to a key of a configuration (`config.lr = 0.1`, `wandb.config["lr"] = 0.1`)."""
    for node in matchers.findall(model.module, matchers.Assign()):
        for target in node.targets:  # type: ignore[attr-defined]
            owner = target.target
            if isinstance(owner, (cst.Attribute, cst.Subscript)):
                name = dotted_name(owner.value) or ""
                if name.endswith("config"):
                    return True
    return False
