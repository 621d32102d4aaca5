"""Value resolution: follow an expression to the literal that defines it, remembering where that is."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis import handed_configs
from gpulint.analysis.absl_flags import flag_default
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.settings_defaults import CONFIG_NAME

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

LITERAL = "literal"
MODULE_CONSTANT = "module constant"
LOCAL_VARIABLE = "local variable"
FUNCTION_DEFAULT = "function default"
ARGPARSE_DEFAULT = "argparse default"
# the default of an option another module's parser defines (`from opts import parser`, `args = get_args()`): shown
# where it is written; a fix here cannot edit it (analysis/imported_options.py)
IMPORTED_ARGPARSE_DEFAULT = "argparse default of another module"
CONFIG_DICT = "config dict"
SETTINGS_FILE = "YAML setting"  # a default in a YAML file of the repository (analysis/settings_files.py)
SETTINGS_DEFAULT = "settings default"  # a yacs default in a module of the project (analysis/settings_defaults.py)
SETTINGS_ORIGINS = (SETTINGS_FILE, SETTINGS_DEFAULT, IMPORTED_ARGPARSE_DEFAULT)
# the default of a method parameter an object keeps and hands to this function (`analysis/held_defaults.py`)
HELD_DEFAULT = "method default every call hands in"
_YAML_LOADERS = frozenset({"yaml.safe_load", "yaml.load", "yaml.full_load", "omegaconf.OmegaConf.load"})

# Parameters that conventionally hold the parsed command line (`def main(args): ...`).
ARGS_PARAMETER_NAMES = frozenset({"args", "opt", "opts", "options", "hparams", "flags", "hp"})
_MAX_DEPTH = 6


@dataclass(frozen=True)
class ResolvedValue:
    value: object
    node: cst.BaseExpression  # the literal to edit when a fix changes this value (the read, for a setting file)
    origin: str
    where: str = ""  # for a setting file: `configs/data/mnist.yaml:4`

    def describe(self, model: SemanticModel) -> str:
        """`argparse default at train.py:21`; empty for a literal written at the use site."""
        if self.origin == LITERAL:
            return ""
        if self.where:
            return f"{self.origin} at {self.where}"
        return f"{self.origin} at {model.path}:{model.line_of(self.node)}"


@dataclass(frozen=True)
class ArgparseOption:
    call: cst.Call
    dest: str

    def keyword(self, name: str) -> cst.Arg | None:
        for arg in self.call.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg
        return None


@dataclass(frozen=True)
class Keywords:
    """The keyword arguments a `**mapping` passes on a GPU run, as far as they are known."""

    values: dict[str, cst.BaseExpression]  # passed on every GPU run, with this value
    maybe: frozenset[str] = frozenset()  # passed on some runs only, or with one of several values

    def then(self, later: Keywords, surely: bool = True) -> Keywords:
        """These keywords updated by `later` (`kwargs.update(later)`), which runs always or only maybe."""
        if not surely:
            changed = set(later.values) | later.maybe
            return Keywords({k: v for k, v in self.values.items() if k not in changed}, self.maybe | changed)
        values = {k: v for k, v in self.values.items() if k not in later.maybe}
        values.update(later.values)
        return Keywords(values, (self.maybe - set(later.values)) | later.maybe)

    def without(self, key: str, surely: bool) -> Keywords:
        values = {k: v for k, v in self.values.items() if k != key}
        return Keywords(values, (self.maybe - {key}) if surely else (self.maybe | ({key} & set(self.values))))

    @staticmethod
    def either(options: list[Keywords]) -> Keywords:
        """One of several mappings: a key is sure only when every option passes it with the same code."""
        first, rest = options[0], options[1:]
        values = {k: v for k, v in first.values.items() if all(_same_code(o.values.get(k), v) for o in rest)}
        everything = set().union(*(set(o.values) | o.maybe for o in options))
        return Keywords(values, frozenset(everything - set(values)))


def _same_code(a: cst.BaseExpression | None, b: cst.BaseExpression) -> bool:
    return a is not None and (a is b or a.deep_equals(b))


def as_int(value: object) -> int | None:
    """`value` when it is an int, else None (a bool is no count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def literal_value(node: cst.BaseExpression) -> tuple[bool, object]:
    """(True, value) for int/float/str/bool/None literals and their negations."""
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
        try:
            return True, ast.literal_eval(node.value)
        except (ValueError, SyntaxError):
            return False, None
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return True, {"True": True, "False": False, "None": None}[node.value]
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        ok, value = literal_value(node.expression)
        if ok and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, -value
    return False, None


def _string_value(node: cst.BaseExpression) -> str | None:
    ok, value = literal_value(node)
    return value if ok and isinstance(value, str) else None


def _is_parse_call(call: cst.Call, method: str) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == method


def _dest_of(call: cst.Call) -> str | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dest":
            return _string_value(arg.value)
    flags = [s for s in (_string_value(a.value) for a in call.args if a.keyword is None) if s is not None]
    if not flags:
        return None
    long_flags = [f for f in flags if f.startswith("--")]
    chosen = long_flags[0] if long_flags else flags[0]
    return re.sub(r"^-+", "", chosen).replace("-", "_")


class ValueResolver:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model

    @cached_property
    def argparse_options(self) -> dict[str, list[ArgparseOption]]:
        options: dict[str, list[ArgparseOption]] = {}
        for call in self.model.method_calls("add_argument"):
            dest = _dest_of(call)
            if dest:
                options.setdefault(dest, []).append(ArgparseOption(call, dest))
        return options

    @cached_property
    def parse_args_names(self) -> frozenset[str]:
        """Names bound to `parser.parse_args()` (or the first element of `parse_known_args()`), directly or
        through a function of this module that returns it (`args = get_args()`)."""
        names = set()
        for call in self.model.calls:
            parent = self.model.parent.get(call)
            if not (isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1):
                continue
            target = parent.targets[0].target
            if _is_parse_call(call, "parse_known_args") and isinstance(target, cst.Tuple) and target.elements:
                target = target.elements[0].value
            elif not self.is_parsed_args(call):
                continue
            if isinstance(target, cst.Name):
                names.add(target.value)
        return frozenset(names)

    def is_parsed_args(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """`expr` is the parsed command line: `parser.parse_args()`, `parser.parse_known_args()[0]`, a name
        bound to one, or a call of a function of this module whose every `return` gives one."""
        if depth > _MAX_DEPTH:
            return False
        if isinstance(expr, cst.Call):
            if _is_parse_call(expr, "parse_args"):
                return True
            callee = expr.func
            if isinstance(callee, cst.Name) and callee.value in self._parsing_functions:
                functions = [f for f in self.model.functions.get(callee.value, []) if not self._is_method(f)]
                return bool(functions) and all(self.returns_parsed_args(f, depth + 1) for f in functions)
            return False
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Call) and _is_parse_call(expr.value, "parse_known_args"):
            index = expr.slice[0].slice if len(expr.slice) == 1 else None
            return isinstance(index, cst.Index) and literal_value(index.value) == (True, 0)
        if isinstance(expr, cst.IfExp):
            return self.is_parsed_args(expr.body, depth + 1) and self.is_parsed_args(expr.orelse, depth + 1)
        if isinstance(expr, cst.Name):
            binders = self.model.bindings_of(expr.value, expr)
            return bool(binders) and all(self._binds_parsed_args(b, expr.value, depth) for b in binders)
        return False

    def _binds_parsed_args(self, binder: cst.CSTNode, name: str, depth: int) -> bool:
        if not (isinstance(binder, cst.Assign) and len(binder.targets) == 1):
            return False
        target = binder.targets[0].target
        if isinstance(target, cst.Name):
            return self.is_parsed_args(binder.value, depth + 1)
        # `args, unknown = parser.parse_known_args()`
        return (
            isinstance(target, cst.Tuple) and bool(target.elements) and isinstance(target.elements[0].value, cst.Name)
            and target.elements[0].value.value == name
            and isinstance(binder.value, cst.Call) and _is_parse_call(binder.value, "parse_known_args")
        )  # fmt: skip

    def _is_method(self, func: cst.FunctionDef) -> bool:
        return isinstance(self.model.parent.get(self.model.parent.get(func)), cst.ClassDef)

    @cached_property
    def _parsing_functions(self) -> frozenset[str]:
        """Names of functions that parse the command line, or call one that does (a cheap filter: reading a
        function's returns costs a walk of its body)."""
        model = self.model
        found = {
            func.name.value
            for call in [*model.method_calls("parse_args"), *model.method_calls("parse_known_args")]
            if (func := model.enclosing_function(call)) is not None
        }
        for _ in range(_MAX_DEPTH if found else 0):
            callers = {
                func.name.value
                for call in model.calls
                if isinstance(call.func, cst.Name) and call.func.value in found and (func := model.enclosing_function(call)) is not None
            }
            if callers <= found:
                break
            found |= callers
        return frozenset(found)

    def returns_parsed_args(self, func: cst.FunctionDef, depth: int = 0) -> bool:
        """Every `return` of `func` gives the parsed command line (`def get_args(): ... return p.parse_args()`)."""
        returns = self.model.returns_of(func)
        return bool(returns) and all(r.value is not None and self.is_parsed_args(r.value, depth) for r in returns)

    def resolve(self, expr: cst.BaseExpression, depth: int = 0) -> ResolvedValue | None:
        if depth > _MAX_DEPTH:
            return None
        ok, value = literal_value(expr)
        if ok:
            return ResolvedValue(value, expr, CONFIG_DICT if self._is_dict_entry(expr) else LITERAL)
        if isinstance(expr, cst.Name):
            return self._resolve_name(expr, depth)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            return self._resolve_argparse(expr, depth)
        if isinstance(expr, cst.Subscript):
            return self._resolve_config_item(expr, depth)
        return None

    def setting(self, expr: cst.BaseExpression, depth: int = 0) -> ResolvedValue | None:
        """`resolve`, and else the default a YAML file of the repository gives `cfg.data.num_workers` (a config
        loaded from a literal path, or Hydra's `config_path` / `config_name`); None when that file is not known."""
        found = self.resolve(expr)
        if found is not None or depth > _MAX_DEPTH:
            return found
        if isinstance(expr, cst.Name):
            binder = self._single_binding(expr)
            if isinstance(binder, cst.Assign) and len(binder.targets) == 1 and isinstance(binder.targets[0].target, cst.Name):
                return self.setting(binder.value, depth + 1)
            return None
        read = _settings_read(expr)
        if read is None:
            return None
        root, keys = read
        found_in = self._settings_lookup(root, keys) or self._handed_lookup(expr)
        if found_in is None:
            candidates = self.settings_defaults(expr)
            # the yacs default, when every value the project may give the setting is the same
            return candidates[0] if candidates and all(c.value == candidates[0].value for c in candidates) else None
        value, line, path = found_in
        if path not in self.model.project.settings:
            return None  # not part of the module's context (so not of its cache key): unknown
        from gpulint.linter import display_path

        return ResolvedValue(value, expr, SETTINGS_FILE, f"{display_path(path)}:{line}")

    def agreed_setting(self, expr: cst.BaseExpression) -> ResolvedValue | None:
        """`setting`, for a value read from settings files: only when every YAML file shipped beside the one
        loaded that has the setting agrees with it (a user may pass any of them); None otherwise."""
        from gpulint.analysis import settings_files

        found = self.setting(expr)
        if found is None or found.origin != SETTINGS_FILE:
            return found
        read = _settings_read(expr)
        path = self._settings_file(read[0]) if read is not None else None
        keys = read[1] if read is not None else []
        if path is None:
            source = handed_configs.config_source(self.model, expr)  # a Hydra config, or a config handed down
            if source is None:
                return None
            if source.kind == handed_configs.HYDRA:
                return found if handed_configs.hydra_agreed(source.where, list(source.keys), found.value) else None
            path, keys = source.where, list(source.keys)
        for candidate in settings_files.shipped_alternatives(path):
            other = settings_files.lookup(candidate, keys)
            if other is not None and other[0] != found.value or other is None and settings_files.has_entry(candidate, keys):
                return None
        return found

    def settings_defaults(self, expr: cst.BaseExpression) -> list[ResolvedValue] | None:
        """For `config.DATA.NUM_WORKERS` with a yacs default in the project: that default, then every other value
        the project may give the setting (written by its code, or in one of its YAML files). None when the read
        is not such a setting, or one of those values is not a literal."""
        from gpulint.analysis.settings_defaults import UNKNOWN

        read = _settings_read(expr)
        if read is None or not all(isinstance(k, str) for k in read[1]) or read[0].value in ("self", "cls"):
            return None
        if not CONFIG_NAME.search(read[0].value):
            return None  # `x.device` of a tensor or a module, not `config.device`
        known = self.model.project.config_defaults.get(".".join(read[1]))
        if known is None or self.resolve(read[0]) is not None:
            return None
        default, where, values = known
        if any(v == UNKNOWN for v in values):
            return None
        return [ResolvedValue(v, expr, SETTINGS_DEFAULT, where) for v in [default, *values[1:]]]

    def settings_mappings(self, expr: cst.BaseExpression) -> list[tuple[str, dict]] | None:
        """For `cfg["trainer_params"]` (a mapping of a YAML file loaded from a known path): (file, {key: (value,
        line)}) in that file and in each file shipped beside it that has a mapping there too (a user may pass any
        of them instead). None when the file is not known, is not part of the module's context, has no mapping
        there, or a file beside it has something else there."""
        from gpulint.analysis import settings_files

        read = _settings_read(expr)
        path = self._settings_file(read[0]) if read is not None else None
        if path is None or path not in self.model.project.settings:
            return None
        found = []
        alternatives = settings_files.shipped_alternatives(path)
        for candidate in [path, *(p for p in alternatives if p != path)]:
            entries = settings_files.mapping_keys(candidate, read[1])
            if entries is None:
                if candidate == path or settings_files.has_entry(candidate, read[1]):
                    return None  # the default file has no mapping there, or another file has something else
                continue  # a file for another script (or without these settings): not an alternative
            if candidate not in self.model.project.settings:
                return None  # not part of the module's context (so not of its cache key)
            found.append((candidate, entries))
        return found

    def _settings_lookup(self, root: cst.Name, keys: list) -> tuple | None:
        """(value, line, file) of `keys` in the YAML file `root` was loaded from."""
        from gpulint.analysis import settings_files

        model = self.model
        binder = self._single_binding(root)
        if isinstance(binder, cst.Param):
            func = model.parent.get(model.parent.get(binder))
            for decorator in func.decorators if isinstance(func, cst.FunctionDef) else ():
                call = decorator.decorator
                if isinstance(call, cst.Call) and model.call_name(call) == "hydra.main":
                    given = {a.keyword.value: _string_value(a.value) for a in call.args if a.keyword is not None}
                    given = {k: ... if v is None else v for k, v in given.items()}  # written, not a string
                    config = settings_files.hydra_config(given.get("config_path"), given.get("config_name"))
                    if config is not None:
                        return settings_files.hydra_lookup(settings_files.hydra_folder(model.path, config[0]), config[1], keys)
            return None
        path = self._settings_file(root)
        found = settings_files.lookup(path, keys) if path is not None else None
        return (*found, path) if found is not None else None

    def _handed_lookup(self, expr: cst.BaseExpression) -> tuple | None:
        """(value, line, file) of a read of a config handed down from a Hydra main or a loaded YAML file
        (`self.cfg.device`, `make_loader(cfg.data)`'s `data_cfg.num_workers`: analysis/handed_configs.py)."""
        source = handed_configs.config_source(self.model, expr)
        return handed_configs.lookup(source) if source is not None and source.keys else None

    def _settings_file(self, root: cst.Name) -> str | None:
        """The YAML file `root` was loaded from (`cfg = yaml.safe_load(open("configs/x.yaml"))`), if known."""
        from gpulint.analysis import settings_files

        model = self.model
        binder = self._single_binding(root)
        if not (isinstance(binder, cst.Assign) and isinstance(binder.value, cst.Call) and binder.value.args):
            return None
        if model.call_name(binder.value) not in _YAML_LOADERS:
            return None
        source = binder.value.args[0].value
        written = self._path_written(source)
        if isinstance(source, cst.Name):  # `with open("configs/x.yaml") as f: cfg = yaml.safe_load(f)`
            items = [i for a in model.ancestors(binder) if isinstance(a, cst.With) for i in a.items]
            source = next((i.item for i in items if i.asname is not None and dotted_name(i.asname.name) == source.value), source)
        opens = isinstance(source, cst.Call) and isinstance(source.func, cst.Name) and source.func.value == "open"
        if written is None and opens and source.args and not model.bindings_of("open", source):
            written = self._path_written(source.args[0].value)
        return settings_files.existing(model.path, written) if written else None

    def _path_written(self, expr: cst.BaseExpression) -> str | None:
        """A YAML path given as a literal, a constant or an argparse default (`open(args.config)`)."""
        if isinstance(expr, cst.Call):
            return None
        found = self.resolve(expr)
        return found.value if found is not None and isinstance(found.value, str) and found.value.endswith((".yaml", ".yml")) else None

    def _is_dict_entry(self, expr: cst.BaseExpression) -> bool:
        """A value written in a dict (`{"num_workers": 0}`, `dict(num_workers=0)`, `kwargs.update(num_workers=0)`)."""
        parent = self.model.parent.get(expr)
        if isinstance(parent, cst.DictElement):
            return parent.value is expr
        if isinstance(parent, cst.Arg) and parent.keyword is not None:
            call = self.model.parent.get(parent)
            return isinstance(call, cst.Call) and (
                (isinstance(call.func, cst.Name) and call.func.value == "dict")
                or (isinstance(call.func, cst.Attribute) and call.func.attr.value == "update")
            )
        return False

    # ---- `**mapping` ------------------------------------------------------------------------------

    def keywords(self, expr: cst.BaseExpression, depth: int = 0) -> Keywords | None:
        """The keywords `**expr` passes: a dict display, `dict(...)`, or a name bound to one in the same function
        and changed there only by `.update(...)`, `[key] = value` or `.pop(key)`.
        Changes under `if use_cuda:` count as made (GPU runs); changes on other branches make their keys "maybe".
        None when something else may add keywords (a parameter, a call that receives the dict, a computed key)."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Dict):
            result = Keywords({})
            for element in expr.elements:
                if isinstance(element, cst.StarredDictElement):
                    inner = self.keywords(element.value, depth + 1)
                else:
                    key = _string_value(element.key)
                    inner = Keywords({key: element.value}) if key is not None else None
                if inner is None:
                    return None
                result = result.then(inner)
            return result
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
            return None if self.model.bindings_of("dict", expr) else self._call_keywords(expr, depth)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "copy" and not expr.args:
            return self.keywords(expr.func.value, depth + 1)
        if isinstance(expr, cst.IfExp):
            body, orelse = self.keywords(expr.body, depth + 1), self.keywords(expr.orelse, depth + 1)
            if body is not None and self.model.residency.holds_on_gpu_runs(expr.test):
                return body
            return Keywords.either([body, orelse]) if body is not None and orelse is not None else None
        if isinstance(expr, cst.Name):
            return self._name_keywords(expr, depth)
        return None

    def _call_keywords(self, call: cst.Call, depth: int) -> Keywords | None:
        """`dict(base, key=value, **more)` / `kwargs.update(base, key=value)`: what the call adds."""
        result = Keywords({})
        for index, arg in enumerate(call.args):
            if arg.keyword is not None:
                inner: Keywords | None = Keywords({arg.keyword.value: arg.value})
            elif arg.star == "**" or (not arg.star and index == 0):
                inner = self.keywords(arg.value, depth + 1)
            else:
                inner = None
            if inner is None:
                return None
            result = result.then(inner)
        return result

    def _name_keywords(self, name: cst.Name, depth: int) -> Keywords | None:
        model, flow = self.model, self.model.dataflow
        scope = model.scope_of(name)
        writes = flow.reaching_writes(name.value, name)
        if not writes or any(w.value is None or w.is_augmented or model.scope_of(w.statement) is not scope for w in writes):
            return None
        # The latest write that a GPU run surely makes, and the ones after it that it may make.
        options = []
        for write in writes:  # latest first
            runs = self._runs_on_gpu(write.statement, name)
            if runs is False:
                continue
            keywords = self.keywords(write.value, depth + 1)
            if keywords is None:
                return None
            options.append(keywords)
            if runs:
                break
        else:
            return None  # no write surely runs before the use
        result = Keywords.either(options)
        for statement, change in self._changes(name, [w.statement for w in writes], depth):
            runs = self._runs_on_gpu(statement, name)
            if runs is False:
                continue
            if change is None:
                return None
            result = change(result, bool(runs))
        return result

    def _changes(self, name: cst.Name, writes: list[cst.CSTNode], depth: int):
        """(statement, how it changes the mapping) for each use of `name` after its `writes` and before `name`
        in their function; the change is None when the use may change it in an unknown way."""
        model, flow = self.model, self.model.dataflow
        scope = model.scope_of(name)
        loops = model.enclosing_loops(name)
        earliest = min(writes, key=lambda w: flow.order[w])
        latest = max(writes, key=lambda w: flow.order[w])
        for read in flow.reads.get(name.value, ()):
            if read is name or model.scope_of(read) is not scope or flow.before(read, earliest):
                continue
            if any(flow.inside(read, w) for w in writes):
                continue  # `kwargs = dict(kwargs, ...)`: part of a write
            if not flow.before(read, name) and not any(flow.inside(read, loop) for loop in loops):
                continue  # after the use, and not carried to it by a loop
            # A change between two writes that may each be the one in effect applies to only one of them.
            change = self._change(read, depth + 1) if not flow.before(read, latest) else None
            yield model.enclosing_statement(read), change

    def _change(self, read: cst.Name, depth: int):
        """How the use `read` of a mapping changes it: a function `(keywords, surely) -> keywords`, a no-op, or None."""
        model = self.model
        parent = model.parent.get(read)
        unchanged = lambda keywords, surely: keywords  # noqa: E731
        if isinstance(parent, cst.Arg) and parent.star == "**":
            return unchanged
        if isinstance(parent, cst.Arg) and not parent.star:
            call = model.parent.get(parent)
            func = call.func if isinstance(call, cst.Call) else None
            # Read, not changed: `print(kwargs)`, `dict(kwargs)`, `other.update(kwargs)`; any other callee may change it.
            reads_only = (isinstance(func, cst.Name) and func.value in ("print", "len", "dict")) or (
                isinstance(func, cst.Attribute) and func.attr.value == "update"
            )
            return unchanged if reads_only else None
        if isinstance(parent, cst.Subscript) and parent.value is read:
            key = _string_value(parent.slice[0].slice.value) if len(parent.slice) == 1 and isinstance(parent.slice[0].slice, cst.Index) else None
            holder = model.parent.get(parent)
            if isinstance(holder, cst.AssignTarget):
                statement = model.parent.get(holder)
                if key is None or not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
                    return None
                return lambda keywords, surely: keywords.then(Keywords({key: statement.value}), surely)
            if isinstance(holder, (cst.AugAssign, cst.Del)) or isinstance(model.parent.get(holder), cst.Del):
                return None
            return unchanged  # a read of one entry
        if isinstance(parent, cst.Attribute) and parent.value is read:
            call = model.parent.get(parent)
            if not (isinstance(call, cst.Call) and call.func is parent):
                return None
            method = parent.attr.value
            if method in ("get", "items", "keys", "values", "copy", "__contains__"):
                return unchanged
            if method == "update":
                added = self._call_keywords(call, depth)
                return None if added is None else lambda keywords, surely: keywords.then(added, surely)
            key = _string_value(call.args[0].value) if call.args and not call.args[0].star else None
            if method == "pop" and key is not None:
                return lambda keywords, surely: keywords.without(key, surely)
            return None
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            return unchanged  # `"pin_memory" in kwargs`
        return None

    def _runs_on_gpu(self, statement: cst.CSTNode, at: cst.CSTNode) -> bool | None:
        """Whether `statement` runs before `at` on a GPU run: True (always), False (never: the `else` of an
        `if use_cuda:`), None (on some paths)."""
        model = self.model
        child = statement
        surely: bool | None = True
        for ancestor in model.ancestors(statement):
            if model.is_inside(at, ancestor):
                return surely
            if isinstance(ancestor, cst.If):
                on_gpu = model.residency.holds_on_gpu_runs(ancestor.test)
                if child is ancestor.body:
                    surely = surely if on_gpu else None
                elif on_gpu:
                    return False  # the `else` / `elif` of a test that GPU runs pass
                else:
                    surely = None
            elif isinstance(ancestor, (cst.For, cst.While, cst.Try, cst.ExceptHandler, cst.Match, cst.FunctionDef, cst.Lambda)):
                surely = None
            child = ancestor
        return surely

    def _single_binding(self, name: cst.Name) -> cst.CSTNode | None:
        binders = self.model.bindings_of(name.value, name)
        return binders[0] if len(binders) == 1 else None

    def _resolve_name(self, name: cst.Name, depth: int) -> ResolvedValue | None:
        binder = self._single_binding(name)
        if isinstance(binder, cst.Assign) and len(binder.targets) == 1 and isinstance(binder.targets[0].target, cst.Name):
            inner = self.resolve(binder.value, depth + 1)
            if inner is None:
                return None
            if inner.origin != LITERAL:
                return inner
            in_module = self.model.scope_of(binder) is self.model.module
            return ResolvedValue(inner.value, inner.node, MODULE_CONSTANT if in_module else LOCAL_VARIABLE)
        if isinstance(binder, cst.AnnAssign) and binder.value is not None and isinstance(binder.target, cst.Name):
            inner = self.resolve(binder.value, depth + 1)
            if inner is None:
                return None
            in_module = self.model.scope_of(binder) is self.model.module
            origin = inner.origin if inner.origin != LITERAL else (MODULE_CONSTANT if in_module else LOCAL_VARIABLE)
            return ResolvedValue(inner.value, inner.node, origin)
        if isinstance(binder, cst.Param):
            held = self._held_argument(binder)
            if held is not None:
                return ResolvedValue(held[0], name, HELD_DEFAULT, held[1])
        if isinstance(binder, cst.Param) and binder.default is not None:
            if self._callers_pass(binder):
                return None
            inner = self.resolve(binder.default, depth + 1)
            if inner is None or self._default_overridden(binder, inner.value):
                return None
            origin = inner.origin if inner.origin != LITERAL else FUNCTION_DEFAULT
            return ResolvedValue(inner.value, inner.node, origin)
        return None

    def _held_argument(self, param: cst.Param) -> list | None:
        """[value, where] when every call in the project gives this parameter of a module-level function one value,
        through a method default an object keeps (`create_dataloaders(..., self.num_workers, ...)` with `fit(...,
        num_workers=0)`: `analysis/held_defaults.py`)."""
        func = self.model.parent.get(self.model.parent.get(param))
        if not isinstance(func, cst.FunctionDef) or self.model.parent.get(func) is not self.model.module:
            return None
        held = getattr(self.model.project, "held_arguments", None) or {}
        return held.get(f"{func.name.value}.{param.name.value}")

    def _default_overridden(self, param: cst.Param, default: object) -> bool:
        """True when every call in the project, all in sight, gives `param` a value other than its default:
        `get_loaders(256, num_workers=2)` at each caller, so `num_workers=0` never ships."""
        from gpulint.analysis.shipped_paths import project_values

        func = self.model.parent.get(self.model.parent.get(param))
        values = project_values(self.model, func, param) if isinstance(func, cst.FunctionDef) else None
        return values is not None and not any(type(v) is type(default) and v == default for v in values)

    def _callers_pass(self, param: cst.Param) -> bool:
        """True when some call in the module passes this parameter, so its default may not apply."""
        func = self.model.parent.get(self.model.parent.get(param))
        if not isinstance(func, cst.FunctionDef):
            return True
        positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
        index = positional.index(param.name.value) if param.name.value in positional else None
        if index is not None and positional and positional[0] in ("self", "cls"):
            index -= 1
        for call in self.model.calls:
            callee = call.func
            callee_name = callee.attr.value if isinstance(callee, cst.Attribute) else getattr(callee, "value", None)
            if callee_name != func.name.value:
                continue
            for i, arg in enumerate(call.args):
                if arg.star:
                    return True
                if arg.keyword is not None and arg.keyword.value == param.name.value:
                    return True
                if arg.keyword is None and index is not None and i == index:
                    return True
        return False

    def argparse_default(self, attr: cst.BaseExpression) -> cst.BaseExpression | None:
        """The `default=` expression of the one option `args.<attr>` reads, whatever it is (`min(8, ...)` too)."""
        if not isinstance(attr, cst.Attribute) or not isinstance(attr.value, cst.Name):
            return None
        base = attr.value
        flag = flag_default(self.model, attr)
        if flag is not None:
            return flag  # `FLAGS.num_workers`: an absl flag's default
        if base.value not in self.parse_args_names:
            binder = self._single_binding(base)
            if not (isinstance(binder, cst.Param) and base.value in ARGS_PARAMETER_NAMES):
                return None
        options = self.argparse_options.get(attr.attr.value, [])
        if len(options) != 1:
            return None
        default = options[0].keyword("default")
        return default.value if default is not None else None

    def _resolve_argparse(self, attr: cst.Attribute, depth: int) -> ResolvedValue | None:
        default = self.argparse_default(attr)
        if default is None:
            from gpulint.analysis.imported_options import imported_default

            found = imported_default(self.model, attr)  # `from opts import parser; args = parser.parse_args()`
            return ResolvedValue(found[0], attr, IMPORTED_ARGPARSE_DEFAULT, found[1]) if found is not None else None
        inner = self.resolve(default, depth + 1)
        if inner is None:
            return None
        origin = ARGPARSE_DEFAULT if inner.origin == LITERAL else inner.origin
        return ResolvedValue(inner.value, inner.node, origin)

    def _resolve_config_item(self, sub: cst.Subscript, depth: int) -> ResolvedValue | None:
        """`config["workers"]` where `config = {"workers": 0, ...}` is bound once."""
        if not isinstance(sub.value, cst.Name) or len(sub.slice) != 1:
            return None
        index = sub.slice[0].slice
        if not isinstance(index, cst.Index):
            return None
        key = _string_value(index.value)
        binder = self._single_binding(sub.value)
        if isinstance(binder, cst.Param):  # `def get_dataflow(config)`, every call handing it the module's dict
            from gpulint.analysis.handed_dicts import dict_handed_in

            binder = dict_handed_in(self.model, binder)
        if key is None or not isinstance(binder, cst.Assign) or not isinstance(binder.value, cst.Dict):
            return None
        for element in binder.value.elements:
            if isinstance(element, cst.DictElement) and _string_value(element.key) == key:
                inner = self.resolve(element.value, depth + 1)
                if inner is None:
                    return None
                origin = CONFIG_DICT if inner.origin == LITERAL else inner.origin
                return ResolvedValue(inner.value, inner.node, origin)
        return None


def _settings_read(expr: cst.BaseExpression) -> tuple[cst.Name, list] | None:
    """(`cfg`, ["data", "num_workers"]) for `cfg.data.num_workers` / `cfg["data"]["num_workers"]`."""
    keys: list = []
    root = expr
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        if isinstance(root, cst.Attribute):
            keys.append(root.attr.value)
        else:
            index = root.slice[0].slice if len(root.slice) == 1 else None
            ok, key = literal_value(index.value) if isinstance(index, cst.Index) else (False, None)
            if not ok or not isinstance(key, (str, int)):
                return None
            keys.append(key)
        root = root.value
    if not keys or not isinstance(root, cst.Name):
        return None
    keys.reverse()
    return root, keys
