"""What a class inherits from a project base class, in its own module or another one.

- `inherited_init`: the constructor a call of the class runs when the class defines none and a project base
  does (`SequenceTrainer(model=model.to(device), ...)` runs `Trainer.__init__`): its callers fill that
  constructor's parameters.
- `inherited_attributes`: the attributes that constructor sets from its parameters (`self.model = model`) and the
  class itself never sets: in the subclass's methods `self.model` is what the subclass's callers gave.
- `placed_attributes`: the attributes a project base class of another module sets in its own methods to a device
  (`self.device = torch.device(define_device(self.device_name))`) or to an instance of a project module class moved
  there (`self.network = TabNet(...).to(self.device)` in `_set_network`) and the class itself never sets: in the
  subclass's methods (`TabNetClassifier.predict_proba` in another module) they are the GPU module and the CUDA
  device the base's own methods use.
- `overridden_steps`: the methods of a class that override a base-class method the project runs on every step
  (`Trainer.train_iteration` calls `self.train_step()` in its training loop; `SequenceTrainer.train_step`
  overrides it): for an instance of the subclass, the base's loop runs the override every step.

Shapes after decision-transformer's gym trainers (eleventh corpus): `Trainer` in trainer.py holds the loop,
`SequenceTrainer(Trainer)` in seq_trainer.py only overrides `train_step`, and experiment.py builds it with the
model moved to `--device` (default "cuda").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

# Levels of project base classes followed (a deeper hierarchy says nothing more here).
_MAX_DEPTH = 3
# The key of `ClassSummary.attributes` that records which project class `self.<attribute> = Cls(...).to(device)`
# built (the attribute itself keeps `("moved", None)`): `("moved_instance", "tab_network.TabNet")`.
_MOVED = "§moved@"


def moved_attribute(attribute: str) -> str:
    return f"{_MOVED}{attribute}"


def project_bases(index: ProjectIndex, record: ModuleRecord, name: str, depth: int = 0) -> Iterator[tuple[ModuleRecord, str]]:
    """The project classes that class `name` of `record` derives from, nearest first (depth first)."""
    info = record.summary.classes.get(name)
    if info is None or depth >= _MAX_DEPTH:
        return
    for base in info.bases:
        found = index.symbol(record, base) or index.qualified_symbol(record, base)
        if found is not None and found[0] == "class" and (found[1], found[2]) != (record, name):
            yield found[1], found[2]
            yield from project_bases(index, found[1], found[2], depth + 1)


def inherited_init(index: ProjectIndex, record: ModuleRecord, name: str) -> Optional[tuple[ModuleRecord, str]]:
    """(module, class) of the project base whose `__init__` a call of class `name` runs; None when the class
    defines `__init__` itself or no project base does (a library base: unknown)."""
    if f"{name}.__init__" in record.summary.functions:
        return None
    for base_record, base in project_bases(index, record, name):
        if f"{base}.__init__" in base_record.summary.functions:
            return base_record, base
    return None


def inherited_attributes(index: ProjectIndex, record: ModuleRecord, name: str) -> dict[str, str]:
    """`self.<attribute>` -> the parameter of the inherited constructor that sets it (`self.model = model`), for the
    attributes class `name` never sets itself."""
    found = inherited_init(index, record, name)
    if found is None:
        return {}
    base_record, base = found
    own = record.summary.classes[name].attributes
    held = base_record.summary.classes[base].attributes
    return {attr: value[1] for attr, value in held.items() if isinstance(value, tuple) and value[:1] == ("init",) and attr not in own}


def placed_attributes(index: ProjectIndex, record: ModuleRecord, name: str) -> dict[str, list[str]]:
    """`self.<attribute>` -> ["cuda_device"] / ["gpu_module"] for the attributes of class `name` that a project base
    class in another module, GPU code itself, sets in its own methods to a device or to a moved instance of a
    project module class, and that neither the class nor a nearer base sets."""
    own = record.summary.classes[name].attributes
    found: dict[str, list[str]] = {}
    seen = {a for a in own if not a.startswith("§")}
    for base_record, base in project_bases(index, record, name):
        held = base_record.summary.classes[base].attributes
        if base_record is not record and index.gpu_reason(base_record) is not None:
            for attribute, value in held.items():
                if attribute.startswith("§") or attribute in seen:
                    continue
                moved = held.get(moved_attribute(attribute))
                if value == ("device",):
                    found[attribute] = ["cuda_device"]  # (a CPU device is `("cpu",)`; a constructor's parameter `("init", ...)`)
                elif value == ("gpu_module",) or (
                    value == ("moved", None) and isinstance(moved, tuple) and moved[:1] == ("moved_instance",)
                    and _module_class(index, base_record, moved[1])
                ):
                    found[attribute] = ["gpu_module"]
        seen.update(a for a in held if not a.startswith("§"))
    return found


def _module_class(index: ProjectIndex, record: ModuleRecord, ref: str) -> bool:
    """`ref` (`tab_network.TabNet` as `record` calls it) names a project `nn.Module` class."""
    found = index.symbol(record, ref) or index.qualified_symbol(record, ref)
    return found is not None and found[0] == "class" and index.is_module_class(found[1], found[2])


def overridden_steps(index: ProjectIndex, record: ModuleRecord, own: dict[str, str]) -> dict[str, str]:
    """`Class.method` of `record` -> where a training loop runs it: the class overrides a method of a project base
    that the project runs on every step (`own`: this module's stepped methods found so far; another module's from
    the index)."""
    found: dict[str, str] = {}
    for name, info in record.summary.classes.items():
        for method in info.methods:
            key = f"{name}.{method}"
            if method.startswith("__") or key not in record.summary.functions or key in own:
                continue
            for base_record, base in project_bases(index, record, name):
                stepped = own if base_record is record else index.stepped_of(base_record)
                where = stepped.get(f"{base}.{method}")
                if where is not None and _called_from_kept_method(base_record, base, method, info.methods):
                    found[key] = where
                    break
    return found


def _called_from_kept_method(record: ModuleRecord, base: str, method: str, overrides: tuple[str, ...]) -> bool:
    """A method of `base` that the subclass keeps (does not override) calls `self.<method>()`: the base's loop
    runs on the subclass's instances too (a subclass that brings its own loop, or a loop elsewhere over base
    instances, says nothing of the override)."""
    ref = f"{base}.{method}"
    return any(
        key.startswith(f"{base}.") and key.split(".", 1)[1] not in overrides and any(call[0] == ref for call in f.calls)
        for key, f in record.summary.functions.items()
    )  # fmt: skip
