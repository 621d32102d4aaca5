"""Step functions handed to ignite's `Engine` through a project factory in another module.

    # trainers/basic.py
    def create_trainer(train_step, output_names, model, ...):
        trainer = Engine(train_step)                  # ignite calls it once per iteration
        ...

    # main.py
    def train_step(engine, batch):
        ...
        return {"loss": loss.item()}                  # read on every iteration
    trainer = trainers.create_trainer(train_step, output_names=["loss"], ...)

`engine_step_parameters(record, function)` names the parameters of a project function that it hands to ignite's
`Engine(...)` as the process function (its first argument, a bare parameter). The index records them as the
parameter effect `("engine_step", where)`; `Frameworks` then treats a function handed at that parameter as an
ignite step function, exactly as if it were passed to `Engine(...)` in the caller's own module.

A parameter only forwarded through `*args` / `**kwargs`, wrapped (`Engine(partial(step, ...))`) or stored for later
is not followed: unknown stays unknown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord
    from gpulint.analysis.summary import FunctionSummary

# ignite/engine/engine.py (0.4-0.5): `Engine(process_function)`; re-exported by `ignite.engine`.
_ENGINES = frozenset({"ignite.engine.Engine", "ignite.engine.engine.Engine"})
ENGINE_STEP = "engine_step"


def engine_step_parameters(record: ModuleRecord, f: FunctionSummary) -> Iterator[tuple[str, int]]:
    """(parameter, line) for each `Engine(param)` call of `f` (the summary's calls, import-resolved)."""
    for call in f.calls:
        ref, line, args = call[0], call[1], call[2]
        if _qualified(record, ref) not in _ENGINES or not args:
            continue
        first = args[0]
        if isinstance(first, tuple) and len(first) == 2 and first[0] == "src" and first[1].startswith("p:") and "|" not in first[1]:
            param = first[1][2:]
            if param in f.params or param in f.kwonly:
                yield param, line


def _qualified(record: ModuleRecord, ref: str) -> str:
    """`Engine` -> `ignite.engine.Engine` (`from ignite.engine import Engine`), `ignite.engine.Engine` as written."""
    head, _, rest = ref.partition(".")
    imported = record.summary.imports.get(head)
    if imported is None:
        return ref
    level, module, name = imported
    if level:
        return ""  # a relative import is project code, never ignite
    base = f"{module}.{name}" if name else module
    return f"{base}.{rest}" if rest else base
