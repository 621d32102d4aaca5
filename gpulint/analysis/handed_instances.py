"""Objects a constructor is handed: `self.model = model` in `__init__`, then `self.model(x)` or
`self.vocab.label_to_string(row)` in a method, is an instance of the project class every call of the constructor in
the project hands it.

    # train.py                                   # solver.py
    encoder = Encoder(...)                       class Solver:
    model = Transformer(encoder, decoder)            def __init__(self, data, model, optimizer, args):
    model.cuda()                                         self.model = model
    solver = Solver(data, model, opt, args)          def _run_one_epoch(self):
                                                         for data in self.tr_loader:
    # transformer.py                                         pred, gold = self.model(x, lengths, y)   # Transformer.forward
    class Transformer(nn.Module):
        def __init__(self, encoder, decoder):
            self.encoder = encoder
        def forward(self, x, lengths, y):
            out = self.encoder(x, lengths)           # Encoder.forward, which reads `lengths` per utterance

Pass one (`summary.py`) records such a call under a reference of its own (`§handed@Solver/model.__call__`: the
class, the attribute, what is called on it). The index resolves it: the attribute's constructor parameter, then
what every call of the class (or of a subclass that inherits that constructor) in the project gives it, followed
through the caller's own parameters the same way (`SupervisedTrainer(vocab=vocab)` with `vocab =
KsponSpeechVocabulary(...)`): an instance of a project class (`Encoder(...)`, `Encoder(...).cuda()`). Every call
must give one and the same class, and a test module's calls say nothing; otherwise (a library object, a class
chosen by a flag, a value of unknown origin) the call stays unresolved, as before. Only an attribute that is the
parameter itself counts (`self.vocab = vocab`; not `self.opt = model.optimizer()`, which pass one also ties to the
parameter). The result of such a call is that call's result as well as the attribute's (`train_loader, valid_loader =
self.dataset.get_data_loaders()`: the loaders the method of the handed class returns, iterated by the caller's loops). A submodule the handed object keeps (`self.faster_rcnn.rpn(x)`, with `self.rpn = RegionProposalNetwork(...)`
or `self.rpn = rpn` in its class or a project base) runs that class's `forward`. The method of that class then
composes like any project helper: its reads of what the step hands it are the step's reads (GPU303).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

MARKER = "§handed@"  # no dots: what is called on the instance is `<reference>.__call__` / `<reference>.update`
SUPER_INIT = "§super-init"  # `super().__init__(...)` in a constructor: what the base's constructor is handed
_MAX_DEPTH = 4


def handed(class_name: str, attribute: str) -> str:
    """The reference pass one records a call on `self.<attribute>` of class `class_name` under."""
    return f"{MARKER}{class_name.replace('.', '/')}/{attribute}"


def handed_attribute(attribute: str) -> str:
    """The key of `ClassSummary.attributes` that marks `self.<attribute> = <parameter>` in `__init__`, the parameter
    itself (`attributes[attribute]` is `("init", parameter)` for anything derived from it too)."""
    return f"{MARKER}{attribute}"


def resolve(index: ProjectIndex, record: ModuleRecord, head: str, tail: list[str]) -> Optional[tuple[str, ModuleRecord, str]]:
    """What `<handed instance>.method` is: the method of the class every constructor call hands it; None when
    that is not one project class."""
    from gpulint.analysis.instantiated import member

    if not head.startswith(MARKER) or len(tail) != 1:
        return None
    owner, _, attribute = head[len(MARKER) :].rpartition("/")
    owner = owner.replace("/", ".")
    info = record.summary.classes.get(owner)
    held = info.attributes.get(attribute) if info is not None else None
    if not (isinstance(held, tuple) and len(held) == 2 and held[0] == "init") or handed_attribute(attribute) not in info.attributes:
        return None
    given = given_class(index, record, owner, held[1], 0)
    return member(index, given, tail[0]) or (_submodule_call(index, given, tail[0]) if given is not None else None)


def _submodule_call(index: ProjectIndex, given: tuple[ModuleRecord, str], attribute: str) -> Optional[tuple[str, ModuleRecord, str]]:
    """`self.faster_rcnn.rpn(features)`: what calling the instance's attribute runs, when the class (or a project base
    whose constructor it runs) keeps an instance of a project class there (`self.rpn = RegionProposalNetwork(...)`, or
    `self.rpn = rpn` with every construction handing one)."""
    from gpulint.analysis.inherited_members import project_bases

    for record, name in [given, *project_bases(index, *given)]:
        info = record.summary.classes.get(name)
        held = info.attributes.get(attribute) if info is not None else None
        if not isinstance(held, tuple) or len(held) != 2:
            continue
        if held[0] == "made" and isinstance(held[1], str):
            found = index.symbol(record, held[1])
            made = (found[1], found[2]) if found is not None and found[0] == "class" else None
        elif held[0] == "init" and handed_attribute(attribute) in info.attributes:
            made = given_class(index, record, name, held[1], 0)
        else:
            return None
        return index.called_method(*made) if made is not None else None
    return None


def given_class(index: ProjectIndex, record: ModuleRecord, owner: str, param: str, depth: int) -> Optional[tuple[ModuleRecord, str]]:
    """(module, class) of the instance every call of class `owner`'s constructor passes for `param`."""
    init = record.summary.functions.get(f"{owner}.__init__")
    if init is None or param not in init.params or depth > _MAX_DEPTH:
        return None
    found: set[tuple[int, str]] = set()
    classes: dict[tuple[int, str], tuple[ModuleRecord, str]] = {}
    calls = [*index.direct_callers(record, owner), *(c for sub in _inheriting(index, record, owner) for c in index.direct_callers(*sub))]
    calls += _super_calls(index, record, owner)  # `super().__init__(vocab)` in a subclass's own constructor
    for caller, caller_key, position in calls:
        if index.is_test(caller):
            continue  # a unit test's stand-in says nothing of what training hands the class
        call = caller.summary.functions[caller_key].calls[position]
        value = _argument(call, init.params, param)
        made = _class_of(index, caller, caller_key, value, depth) if value is not None else None
        if made is None:
            return None
        key = (id(made[0]), made[1])
        found.add(key)
        classes[key] = made
    return classes[found.pop()] if len(found) == 1 else None


def _argument(call: tuple, params: tuple, param: str) -> Any:
    """The value `call` (a constructor call as pass one records it) gives `param`; None when it names none."""
    if call[6]:
        return None  # `*args` / `**kwargs`: positions unknown
    given = call[3]
    if param in given:
        return given[param]
    position = params.index(param) - (1 if params[:1] == ("self",) else 0)
    return call[2][position] if 0 <= position < len(call[2]) else None


def _class_of(index: ProjectIndex, record: ModuleRecord, key: str, value: Any, depth: int) -> Optional[tuple[ModuleRecord, str]]:
    """The project class `value` (a summary value in function `key` of `record`) is an instance of: a call of the
    class (moved or not), or a parameter every caller fills with one."""
    from gpulint.analysis.summary import sources_of

    if not isinstance(value, tuple) or not value:
        return None
    if value[0] == "moved" and len(value) > 1:
        return _class_of(index, record, key, value[1], depth)
    if value[0] == "made" and len(value) > 1 and isinstance(value[1], str):
        found = index.symbol(record, value[1])
        return (found[1], found[2]) if found is not None and found[0] == "class" else None
    if value[0] != "src":
        return None
    sources = sources_of(value)
    if len(sources) != 1:
        return None
    source = sources[0]
    f = record.summary.functions[key]
    if source.startswith("c:") and source[2:].isdigit() and int(source[2:]) < len(f.calls):
        found = index.symbol(record, f.calls[int(source[2:])][0])
        return (found[1], found[2]) if found is not None and found[0] == "class" else None
    if source.startswith("p:") and key.endswith(".__init__"):
        return given_class(index, record, key[: -len(".__init__")], source[2:], depth + 1)
    if source.startswith("p:") and "." not in key:
        return _passed_to_function(index, record, key, source[2:], depth + 1)
    return None


def _passed_to_function(index: ProjectIndex, record: ModuleRecord, key: str, param: str, depth: int) -> Optional[tuple[ModuleRecord, str]]:
    """(module, class) of what every call of module-level function `key` passes for `param`."""
    f = record.summary.functions.get(key)
    if f is None or param not in f.params or depth > _MAX_DEPTH:
        return None
    found: set[tuple[int, str]] = set()
    classes: dict[tuple[int, str], tuple[ModuleRecord, str]] = {}
    for caller, caller_key, position in index.direct_callers(record, key):
        if index.is_test(caller):
            continue
        value = _argument(caller.summary.functions[caller_key].calls[position], f.params, param)
        made = _class_of(index, caller, caller_key, value, depth) if value is not None else None
        if made is None:
            return None
        found.add((id(made[0]), made[1]))
        classes[(id(made[0]), made[1])] = made
    return classes[found.pop()] if len(found) == 1 else None


def _inheriting(index: ProjectIndex, record: ModuleRecord, owner: str) -> list[tuple[ModuleRecord, str]]:
    """The project classes whose construction runs `owner.__init__` of `record` (no `__init__` of their own)."""
    return index.computed("inheriting_classes", lambda: _inheriting_classes(index)).get((id(record), owner), [])


def _super_calls(index: ProjectIndex, record: ModuleRecord, owner: str) -> list[tuple[ModuleRecord, str, int]]:
    """The `super().__init__(...)` calls of the constructors of `owner`'s direct project subclasses."""
    return index.computed("super_init_calls", lambda: _super_init_calls(index)).get((id(record), owner), [])


def _super_init_calls(index: ProjectIndex) -> dict[tuple[int, str], list[tuple[ModuleRecord, str, int]]]:
    found: dict[tuple[int, str], list[tuple[ModuleRecord, str, int]]] = {}
    for other in index.records.values():
        for name, info in other.summary.classes.items():
            init = other.summary.functions.get(f"{name}.__init__")
            calls = [i for i, call in enumerate(init.calls) if call[0] == SUPER_INIT] if init is not None else []
            if not calls:
                continue
            base = next(
                (b for b in (index.symbol(other, base) or index.qualified_symbol(other, base) for base in info.bases) if b is not None),
                None,
            )  # the first base is what `super()` runs in single inheritance
            if base is not None and base[0] == "class" and (base[1], base[2]) != (other, name):
                found.setdefault((id(base[1]), base[2]), []).extend((other, f"{name}.__init__", i) for i in calls)
    return found


def _inheriting_classes(index: ProjectIndex) -> dict[tuple[int, str], list[tuple[ModuleRecord, str]]]:
    from gpulint.analysis.inherited_members import inherited_init

    found: dict[tuple[int, str], list[tuple[ModuleRecord, str]]] = {}
    for other in index.records.values():
        for name in other.summary.classes:
            base = inherited_init(index, other, name)
            if base is not None:
                found.setdefault((id(base[0]), base[1]), []).append((other, name))
    return found
