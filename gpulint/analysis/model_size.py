"""Model size: how many parameters a model built in this module has, how many of them the code trains, and
whether the tensors it trains on are toy data written in the code.

Mixed precision, TF32 and a fused optimizer pay off with the work of the matrix multiplications and of the
update; a model of a few thousand parameters (`nn.Linear(2, 10)`, `nn.Linear(10, 1)`) is bound by kernel
launches, and an optimizer over a new head or LoRA adapters updates a handful of tensors. The sizes are read
from literal constructor arguments (also through a factory function of the module, module constant lists, DataParallel
wrappers and what every caller passes for a function's model parameter): a layer sized from a config, an argument of
unknown value, a pretrained model (`from_pretrained`, `timm.create_model`, torchvision) or a class of another module
has no estimate, and the rules keep reporting it. A step of a module that trains on MNIST/CIFAR-size images and runs
only models of at most `LAUNCH_BOUND_PARAMETERS` (`launch_bound_loop`) is launch-bound: GPU303/GPU306 reads and
GPU405's graph cost nothing there.

The same holds for any step whose GPU work the code shows to be small, whatever the data set and the parameter count
(`step_work`, `LAUNCH_BOUND_FLOPS`): what makes a step launch-bound is its work, not its parameters (measured on an
H200, bench/results/cost_facts.md section 1: steps of 0.004-0.21 GFLOP run 2-5 µs kernels, 0.06-0.22 ms in all, while
steps of 8-13 GFLOP run 11-17 µs kernels). A step's work is the forward FLOPs of one input row of each model it runs
(`forward_flops`: `nn.Linear` 2 x in x out, `nn.Embedding`/`nn.EmbeddingBag` none: a gather, norms a few per feature,
parameter-free layers none; a convolution, a recurrent layer, attention, any layer not listed, a forward that loops,
multiplies tensors itself or runs a layer twice, and an `nn.Embedding` feeding layers that multiply (one row per
token: the sentence length is not in the code) are unknown; but a forward that runs only layers that multiply
nothing, its own and however often (lookups in a comprehension over an `nn.ModuleList` of embeddings), does none,
`_runs_own_layers`), times the rows of a step (the DataLoader's batch size;
a model that multiplies nothing does no work whatever it is fed), times 3 in training (backward), where the update of
at most `UPDATE_PARAMETERS` parameters (known) must also be small. The models a step runs are those of the loop and
of the functions of this module it calls once an iteration (`_step_helpers`: `loss = calc_sent_loss(sent)`), each
model run once (not in a loop or a comprehension). Unknown stays unknown, never small. The rules
ask it (`launch_bound_loop`, `launch_bound_model`) of steps that multiply nothing or feed one row (`ONE_ROW_STEPS`),
or one whole graph: a model of PyG's layers (`_graph_layer`: `GCNConv`, `GATConv`, `SAGEConv`, `GraphConv`, their
work per node) fed the node features of a graph of documented size (`graph_work`: `model(data.x, ...)` with
`data = dataset[0]` of a `Planetoid`) does that work times the graph's nodes (`_graph_rows`); fed anything else
(a sampled batch), its work is unknown.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING, Optional

import libcst as cst
import libcst.matchers as matchers

from gpulint.analysis import graph_work
from gpulint.analysis.hot_loops import assigned_names
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.value_resolution import as_int, literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Methods of a module that return the module itself (moved or switched): its size and layers are the receiver's.
_SAME_MODULE_METHODS = ("to", "cuda", "float", "train", "eval")
# At most this many parameters: each layer is a matmul of a few kilobytes, launch-bound on any GPU.
TOY_PARAMETERS = 100_000
# At most this many parameters, whatever feeds it: a step of such a model (MNIST/CIFAR LeNets, 784-128-10 MLPs)
# is done in microseconds, before the host has the next batch (judged noise up to ~310k, right from ~400k; measured on
# an H200, bench/results/cost_facts.md: MNIST MLPs of 10k-270k parameters keep the GPU 5-10 % busy, kernels of 2-5 µs,
# and a per-step `.item()` or synchronize costs nothing measurable).
LAUNCH_BOUND_PARAMETERS = 300_000
# At most this many FLOPs in a step whose work the code shows (`step_work`: forward and backward, 3x the forward, in
# training; the forward alone in evaluation): such a step is launch-bound whatever its parameter count. Calibrated on
# the H200 rows of bench/results/cost_facts.md section 1 (FLOPs = 2 x multiply-adds of the Linear/Conv layers): the
# launch-bound steps do 0.004-0.21 GFLOP (MNIST MLPs of 10k-270k parameters at batch 64-128, a 0.9k-parameter CNN:
# 0.06-0.22 ms of kernels, 23-47 kernels of 2-5 µs, GPU 5-10 % busy); the first steps that are not do 7.9 GFLOP (a
# 95k-parameter CIFAR CNN at batch 128: 0.9 ms, kernels of 11 µs) and 13 GFLOP (a 4.2M-parameter MLP at batch 512:
# 0.33 ms, 17 µs kernels). 0.5 GFLOP is 2.4x the largest launch-bound step measured and 16x under the smallest one
# that is not: its kernels stay at the few microseconds a host takes to launch each of the step's 20-50.
LAUNCH_BOUND_FLOPS = 500_000_000
# At most this many parameters trained by a step of small work: the update reads and writes every trained parameter
# whatever the batch (SGD with momentum ~20 bytes a parameter, Adam ~28, dense also for an `nn.Embedding` table). On
# the H200 the 4.2M-parameter MLP's whole step, 13 GFLOP of matmuls included, took 0.33 ms of kernels, so its
# update took well under 0.1 ms; half that size keeps the update at a few tens of microseconds. A model whose size
# is unknown (a vocabulary read from the data) has an unknown update: not launch-bound.
UPDATE_PARAMETERS = 2_000_000
# The rules ask `LAUNCH_BOUND_FLOPS` only of steps that multiply nothing (lookups, sums) or feed their models one row
# (batch size 1): the measurements put any step under it at launch-bound, batch 64 included, but the test suite
# still stands for real steps with tiny models at batches of 8-64 (27 tests); widening it means resizing those.
ONE_ROW_STEPS = True
# At most this many elements in a tensor written or generated in the code (`torch.rand(100, 2)`).
TOY_ELEMENTS = 1_000_000
# At most this many rows per batch of a toy dense model fed from memory: ~150 MFLOP a step at most, microseconds.
TOY_BATCH = 256
_MAX_DEPTH = 8
# Toy data goes through more names (generated, split, scaled, converted, sliced per batch) than a model's layers.
_TOY_TENSOR_DEPTH = 12

# torch.nn modules without parameters (activations, pooling, dropout, reshaping, losses).
_PARAMETER_FREE = frozenset({
    "ReLU", "ReLU6", "LeakyReLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Softplus", "Softsign", "GELU", "ELU",
    "SELU", "CELU", "SiLU", "Mish", "Hardtanh", "Hardswish", "Hardsigmoid", "Tanhshrink", "LogSigmoid", "Threshold",
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "MaxPool1d", "MaxPool2d", "MaxPool3d",
    "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Flatten", "Unflatten", "Identity", "Upsample",
    "PixelShuffle", "PixelUnshuffle", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ReflectionPad2d",
    "ReplicationPad2d", "Sequential", "ModuleList",
})  # fmt: skip
PARAMETER_FREE = _PARAMETER_FREE
# Wrappers that run the module they are given, parameters unchanged.
_WRAPPERS = frozenset({
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel", "torch.nn.parallel.data_parallel.DataParallel",
})  # fmt: skip
# torchvision's data sets of small images (28x28, 32x32): the teaching-scale jobs small models are trained on.
_SMALL_IMAGE_DATASETS = frozenset({
    "MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100", "SVHN", "USPS",
})  # fmt: skip
# Reductions over the feature map in a forward (`x.mean((2, 3))`): the image size is free, whatever the head.
_GLOBAL_REDUCTIONS = frozenset({"mean", "sum", "amax", "logsumexp"})
_COMPREHENSIONS = (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)
_RECURRENT_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_FREEZING_CALLS = ("get_peft_model", "prepare_model_for_kbit_training", "PeftModel", "mark_only_lora_as_trainable")
_TOY_GENERATORS = frozenset({
    "make_circles", "make_moons", "make_blobs", "make_classification", "make_regression", "make_swiss_roll",
    "make_s_curve", "make_gaussian_quantiles", "make_friedman1",
})  # fmt: skip
_TORCH_FACTORIES = frozenset({"rand", "randn", "randint", "zeros", "ones", "empty", "full", "normal"})
_RANGES = frozenset({"arange", "linspace", "logspace"})
# What keeps a tensor toy data: conversions, reshaping and arithmetic of toy data.
_TENSOR_METHODS = frozenset({
    "float", "double", "long", "int", "to", "cuda", "view", "reshape", "unsqueeze", "squeeze", "t", "pow", "sin", "cos",
    "exp", "abs", "clone", "detach", "type", "astype", "requires_grad_", "flatten", "numpy",
})  # fmt: skip
_TENSOR_FUNCTIONS = frozenset({
    "torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.LongTensor",
    "torch.unsqueeze", "torch.squeeze", "torch.sin", "torch.cos", "torch.exp", "torch.pow", "torch.cat", "torch.stack",
    "numpy.array", "numpy.asarray", "torch.autograd.Variable",
})  # fmt: skip


class ModelSize:
    """`parameters(module)`: the estimated parameter count of a module expression, or None; `is_toy_model`;
    `trains_few_tensors(owners)` for the modules an optimizer's parameters come from; `is_toy_tensor(expr)`;
    `toy_loop(loop)`; `launch_bound_model(expr)` / `launch_bound_loop(loop)`."""

    def __init__(self, model: SemanticModel) -> None:
        self.m = model
        self._toy_loops: dict[cst.CSTNode, bool] = {}
        self._launch_bound: dict[cst.CSTNode, bool] = {}
        self._full_graph_steps: set[cst.CSTNode] = set()  # steps whose work `step_work` read from a graph's size

    # ---- parameter counts ---------------------------------------------------------------------------

    def parameters(self, expr: cst.BaseExpression, depth: int = 0, work: bool = False) -> Optional[int]:
        """The parameters of the module `expr` builds or names, from literal layer sizes; None when unknown.
        With `work`, the FLOPs of its forward for one input row instead (`forward_flops`)."""
        m = self.m
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in _SAME_MODULE_METHODS:
                return self.parameters(func.value, depth + 1, work)
            name = m.call_name(expr) or ""
            if name == "torch.compile" and expr.args and expr.args[0].keyword is None:
                return self.parameters(expr.args[0].value, depth + 1, work)  # compiling keeps the parameters
            if name in _WRAPPERS and expr.args and expr.args[0].keyword is None and not expr.args[0].star:
                return self.parameters(expr.args[0].value, depth + 1, work)  # a replica per GPU of the same model
            if name.startswith("torch.nn."):
                return self._layer(expr, name.rsplit(".", 1)[1], {}, depth, work)
            info = m.local_class_of(name)
            if info is not None and m.is_subclass_of(info.node.name.value, "torch.nn.Module"):
                return self._class(info.node, expr, depth + 1, work)
            factory = self._factory(expr)
            if factory is not None:  # `def build_model(): return nn.Sequential(...)`: what it returns
                returned = [r.value for r in m.returns_of(factory)]
                if not returned or None in returned:
                    return None
                return _largest([self.parameters(value, depth + 1, work) for value in returned])  # type: ignore[arg-type]
            return None
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            writes = m.dataflow.reaching_writes(key, expr) if key is not None else []
            if not writes and isinstance(expr, cst.Name):
                passed = self._passed(expr)  # a parameter of a function: what its callers pass
                return None if passed is None else _largest([self.parameters(a, depth + 1, work) for a in passed])
            return _largest([self.parameters(w.value, depth + 1, work) if w.value is not None else None for w in writes])
        if isinstance(expr, cst.IfExp):  # `nn.ReLU() if relu else nn.Tanh()`
            return _largest([self.parameters(expr.body, depth + 1, work), self.parameters(expr.orelse, depth + 1, work)])
        return None

    def _factory(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """The one function of this module `call` calls by name (`build_model()`), not a generator."""
        if not isinstance(call.func, cst.Name) or self.m.bindings_of(call.func.value, call) and not self.m.functions.get(call.func.value):
            return None
        defs = self.m.functions.get(call.func.value, [])
        if len(defs) != 1 or self.m.yields_of(defs[0]) or self.m.is_inside(call, defs[0]):
            return None
        return defs[0]

    def _passed(self, name: cst.Name) -> Optional[list[cst.BaseExpression]]:
        """What the callers of a module-level function pass for its parameter `name` (`def train(model, loader)`,
        `train(Net().to(device), loader)`); None unless every call in the module names the argument."""
        m = self.m
        binders = m.bindings_of(name.value, name)
        if len(binders) != 1 or not isinstance(binders[0], cst.Param):
            return None
        function = m.parent.get(m.parent.get(binders[0]))
        if not isinstance(function, cst.FunctionDef) or binders[0] not in function.params.params:
            return None
        positional = list(function.params.params)
        if positional and positional[0].name.value in ("self", "cls"):
            return None  # a method: its callers are not read
        index = positional.index(binders[0])
        callers = [c for c in m.calls_of(function.name.value) if not m.is_inside(c, function)]
        passed = []
        for call in callers:
            if any(a.star for a in call.args):
                return None
            keyword = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name.value), None)
            plain = [a.value for a in call.args if a.keyword is None]
            value = keyword if keyword is not None else plain[index] if index < len(plain) else None
            if value is None:
                return None
            passed.append(value)
        return passed or None

    def is_toy_model(self, expr: cst.BaseExpression) -> bool:
        """At most `TOY_PARAMETERS` parameters; none at all is a stub to fill in (an exercise), not a model."""
        count = self.parameters(expr)
        return count is not None and 0 < count <= TOY_PARAMETERS

    def _layer(self, call: cst.Call, layer: str, env: dict[str, int], depth: int, work: bool = False) -> Optional[int]:
        """A `torch.nn` layer's parameters (containers: their children's); with `work`, its forward FLOPs per input
        row (`_layer_work`)."""
        if layer in ("Sequential", "ModuleList"):
            children: list[cst.BaseExpression] = []
            for arg in call.args:
                if arg.star or arg.keyword is not None:
                    return None
                if isinstance(arg.value, (cst.List, cst.Tuple)):  # `nn.ModuleList([...])`
                    children.extend(e.value for e in arg.value.elements)
                elif (named := _named_layers(self.m, arg.value)) is not None:  # `nn.Sequential(OrderedDict([...]))`
                    children.extend(named)
                elif isinstance(arg.value, (cst.ListComp, cst.GeneratorExp)):  # `[nn.Linear(n, n) for _ in range(k)]`
                    copies = self._repeats(arg.value, env)
                    if copies is None:
                        return None
                    children.extend([arg.value.elt] * copies)
                else:
                    children.append(arg.value)
            counts = [self._child(child, env, depth + 1, work) for child in children]
            return None if None in counts else sum(counts)  # type: ignore[arg-type]
        if layer in _PARAMETER_FREE or layer.endswith("Loss"):
            return 0
        size = _Arguments(self, call, env)
        if work:
            return _layer_work(layer, size)
        if layer == "Linear":
            n_in, n_out = size.int(0, "in_features"), size.int(1, "out_features")
            return None if n_in is None or n_out is None else n_in * n_out + n_out
        if layer.startswith(("Conv", "ConvTranspose")) and layer[-2:] in ("1d", "2d", "3d"):
            n_in, n_out, kernel = size.int(0, "in_channels"), size.int(1, "out_channels"), size.kernel(2, int(layer[-2]))
            groups = size.int(None, "groups", default=1)
            if None in (n_in, n_out, kernel, groups) or not groups:
                return None
            return n_in * n_out * kernel // groups + n_out  # type: ignore[operator]
        if layer in ("Embedding", "EmbeddingBag"):
            rows, dim = size.int(0, "num_embeddings"), size.int(1, "embedding_dim")
            return None if rows is None or dim is None else rows * dim
        if layer.startswith(("BatchNorm", "InstanceNorm")) or layer == "LayerNorm":
            features = size.int(0, "num_features" if layer != "LayerNorm" else "normalized_shape")
            return None if features is None else 2 * features
        if layer == "GroupNorm":
            channels = size.int(1, "num_channels")
            return None if channels is None else 2 * channels
        if layer == "PReLU":
            return size.int(0, "num_parameters", default=1)
        if layer in _RECURRENT_GATES:
            n_in, hidden = size.int(0, "input_size"), size.int(1, "hidden_size")
            layers = size.int(2, "num_layers", default=1)
            directions = 2 if size.flag("bidirectional") else 1
            if None in (n_in, hidden, layers):
                return None
            gates = _RECURRENT_GATES[layer] * hidden  # type: ignore[operator]
            first = gates * (n_in + hidden + 2)  # type: ignore[operator]
            rest = gates * (hidden * directions + hidden + 2)  # type: ignore[operator]
            return directions * (first + rest * (layers - 1))  # type: ignore[operator]
        return None

    def _repeats(self, comprehension: cst.ListComp | cst.GeneratorExp, env: dict[str, int]) -> Optional[int]:
        """How many elements `[... for _ in range(k)]` makes, `k` known; None for any other comprehension."""
        loop = comprehension.for_in
        if loop.inner_for_in is not None or loop.ifs or not isinstance(loop.iter, cst.Call):
            return None
        iterated = loop.iter
        if not (isinstance(iterated.func, cst.Name) and iterated.func.value == "range") or len(iterated.args) != 1 or iterated.args[0].keyword:
            return None
        count = self.integer(iterated.args[0].value, env)
        return count if count is not None and 0 <= count <= 1000 else None

    def _child(self, expr: cst.BaseExpression, env: dict[str, int], depth: int, work: bool = False) -> Optional[int]:
        if isinstance(expr, cst.Call):
            name = self.m.call_name(expr) or ""
            if name.startswith("torch.nn."):
                return self._layer(expr, name.rsplit(".", 1)[1], env, depth, work)
        return self.parameters(expr, depth, work)

    def _class(self, node: cst.ClassDef, call: Optional[cst.Call], depth: int, work: bool = False) -> Optional[int]:
        """A module class of this module: the sum of the layers its methods (but `forward`) build, each built
        once; None when one of them builds anything else (a pretrained model, a class of another module) or
        builds layers in a loop. With `work`, their FLOPs per input row, when `forward` runs each of them once
        and multiplies nothing itself (`_plain_forward`)."""
        m = self.m
        if m.classes[node.name.value].bases != ["torch.nn.Module"]:
            return None  # layers a base class builds are not read
        gathers_only = False
        if work and not self._plain_forward(node):
            if not self._runs_own_layers(node):
                return None
            gathers_only = True  # loops, comprehensions, repeats: FLOPs only if none of its layers multiplies
        env = self._constructor_arguments(node, call)
        total = 0
        for statement in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
            if not isinstance(statement, cst.FunctionDef) or statement.name.value == "forward":
                continue
            for inner in m.calls_inside(statement):
                if _inside_container(m, inner):
                    continue  # counted with its `nn.Sequential(...)` / `nn.ModuleList([...])`, comprehension included
                if any(m.is_inside(loop, statement) for loop in m.enclosing_loops(inner)) or m.has_ancestor_below(inner, _COMPREHENSIONS, statement):
                    if _builds_module(m, inner):
                        return None  # built once per iteration: no count
                    continue
                if _calls_own_method(inner) and _called_again(m, inner, node):
                    return None  # a method that builds layers, called more than once
                name = m.call_name(inner) or ""
                if name.startswith("torch.nn.") and name.rsplit(".", 1)[1][:1].isupper():
                    if name == "torch.nn.Parameter":
                        # a plain forward only adds or scales by it (`_plain_forward`): no multiply-accumulate
                        count = 0 if work else self._tensor_elements(inner.args[0].value, env) if inner.args else None
                    else:
                        count = self._layer(inner, name.rsplit(".", 1)[1], env, depth + 1, work)
                elif name.startswith("torch_geometric.nn.") and name.rsplit(".", 1)[1] in _GRAPH_LAYERS:
                    count = _graph_layer(name.rsplit(".", 1)[1], _Arguments(self, inner, env), work)  # (PyG's own tree too)
                elif (info := m.local_class_of(name)) is not None and m.is_subclass_of(info.node.name.value, "torch.nn.Module"):
                    count = self._class(info.node, inner, depth + 1, work) if depth < _MAX_DEPTH else None
                elif _harmless(m, inner):
                    continue
                else:
                    return None
                if count is None or (gathers_only and count):
                    return None
                total += count
        return total

    def _constructor_arguments(self, node: cst.ClassDef, call: Optional[cst.Call]) -> dict[str, int]:
        """`__init__`'s integer parameters as this construction binds them (arguments, else defaults)."""
        init = self.m.classes[node.name.value].methods.get("__init__")
        if init is None:
            return {}
        params = [p for p in init.params.params if p.name.value != "self"]
        given: dict[str, cst.BaseExpression] = {}
        for position, arg in enumerate(call.args if call is not None else ()):
            if arg.star:
                return {}
            if arg.keyword is not None:
                given[arg.keyword.value] = arg.value
            elif position < len(params):
                given[params[position].name.value] = arg.value
        env: dict[str, int] = {}
        for param in [*params, *init.params.kwonly_params]:
            value = given.get(param.name.value, param.default)
            number = self.integer(value, {}) if value is not None else None
            if number is not None:
                env[param.name.value] = number
        return env

    def integer(self, expr: cst.BaseExpression, env: dict[str, int], depth: int = 0) -> Optional[int]:
        """An integer written in the code: a literal, a constant, a constructor argument, arithmetic of those."""
        if depth > _MAX_DEPTH:
            return None
        ok, value = literal_value(expr)
        if ok:
            return as_int(value)
        if isinstance(expr, cst.Name) and expr.value in env:
            return env[expr.value]
        if isinstance(expr, cst.BinaryOperation):
            left, right = self.integer(expr.left, env, depth + 1), self.integer(expr.right, env, depth + 1)
            if left is None or right is None:
                return None
            if isinstance(expr.operator, cst.Add):
                return left + right
            if isinstance(expr.operator, cst.Subtract):
                return left - right
            if isinstance(expr.operator, cst.Multiply):
                return left * right
            if isinstance(expr.operator, cst.FloorDivide) and right:
                return left // right
            return None
        width = _width_of(expr)
        if width is not None:
            return self.columns(width)
        if isinstance(expr, cst.Attribute) and (field := graph_work.dataset_field(self.m, expr)) is not None:
            return field  # `dataset.num_features` of a graph data set of documented size
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Name) and expr.value.value not in env:
            resolved = self.m.values.resolve(expr)  # a config dict's item
            if resolved is not None:
                return as_int(resolved.value)
            ok, index = literal_value(expr.slice[0].slice.value) if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) else (False, None)
            writes = self.m.dataflow.reaching_writes(expr.value.value, expr.value)  # `HIDDEN_SIZES[0]` of a list constant
            listed = writes[0].value if len(writes) == 1 and not writes[0].is_augmented else None
            if ok and isinstance(index, int) and isinstance(listed, (cst.List, cst.Tuple)) and -len(listed.elements) <= index < len(listed.elements):
                return self.integer(listed.elements[index].value, env, depth + 1)
            if ok and isinstance(listed, cst.Dict):  # `SETTINGS["num class labels"]` of a dict constant
                items = [e for e in listed.elements if isinstance(e, cst.DictElement) and literal_value(e.key) == (True, index)]
                return self.integer(items[0].value, env, depth + 1) if len(items) == 1 and len(writes) == 1 else None
            return None
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            writes = self.m.dataflow.reaching_writes(f"self.{expr.attr.value}", expr)
            values = {self.integer(w.value, env, depth + 1) for w in writes if w.value is not None}
            return values.pop() if len(writes) == 1 and len(values) == 1 else None
        if isinstance(expr, cst.Name):
            if any(isinstance(b, cst.Param) for b in self.m.bindings_of(expr.value, expr)):
                return None  # a parameter not bound by the construction
            resolved = self.m.values.resolve(expr)
            if resolved is not None:
                return as_int(resolved.value)
            # a constant written as arithmetic of others (`num_features = 28 * 28`), bound once: its value
            binders = self.m.bindings_of(expr.value, expr)
            binder = binders[0] if len(binders) == 1 else None
            if isinstance(binder, cst.Assign) and len(binder.targets) == 1 and isinstance(binder.value, cst.BinaryOperation):
                return self.integer(binder.value, {}, depth + 1)
            return None
        return None

    def columns(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[int]:
        """The column count of a table the code selects by name or generates: `df[["a", "b"]].values` -> 2,
        `make_classification(n_features=8)` -> 8, through conversions, scalers and `train_test_split`."""
        m = self.m
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            names = expr.slice[0].slice.value
            if isinstance(names, cst.List) and names.elements and all(isinstance(e.value, cst.SimpleString) for e in names.elements):
                return len(names.elements)  # `df[["sepal_l", "sepal_w"]]`: the columns it names
            return None
        if isinstance(expr, cst.Attribute) and expr.attr.value == "values":
            return self.columns(expr.value, depth + 1)
        if isinstance(expr, cst.Call):
            func, name = expr.func, m.call_name(expr) or ""
            positional = [a.value for a in expr.args if a.keyword is None and not a.star]
            if name in _TENSOR_FUNCTIONS and positional:
                return self.columns(positional[0], depth + 1)
            if isinstance(func, cst.Attribute) and func.attr.value in ("fit_transform", "transform"):
                return self.columns(positional[0], depth + 1) if len(positional) == 1 else None  # a scaler
            if isinstance(func, cst.Attribute) and func.attr.value in _SHAPE_KEEPING:
                return self.columns(func.value, depth + 1)
            return None
        if isinstance(expr, cst.Name):
            writes = m.dataflow.reaching_writes(expr.value, expr)
            counts = {self._written_columns(w, depth + 1) for w in writes}
            return counts.pop() if writes and len(counts) == 1 else None
        return None

    def _written_columns(self, write, depth: int) -> Optional[int]:
        if write.is_augmented:
            return None
        if write.value is not None:
            return self.columns(write.value, depth)
        source, index = write.source, write.unpacked_position
        if not isinstance(source, cst.Call) or index is None:
            return None
        name = self.m.call_name(source) or ""
        positional = [a.value for a in source.args if a.keyword is None and not a.star]
        if name.endswith("train_test_split") and name.startswith("sklearn.") and index // 2 < len(positional):
            return self.columns(positional[index // 2], depth)  # `x_train, x_test, y_train, y_test`: x's columns
        if name.startswith("sklearn.") and name.rsplit(".", 1)[-1] in ("make_classification", "make_regression") and index == 0:
            features = next((a.value for a in source.args if a.keyword is not None and a.keyword.value == "n_features"), None)
            return 20 if features is None else self.integer(features, {})  # (the default)
        return None

    def _tensor_elements(self, expr: cst.BaseExpression, env: dict[str, int]) -> Optional[int]:
        """`torch.zeros(3, 4)` / `torch.randn((3, 4))`: the element count from literal sizes."""
        if not isinstance(expr, cst.Call):
            return None
        name = self.m.call_name(expr) or ""
        if not (name.startswith("torch.") and name.rsplit(".", 1)[1] in _TORCH_FACTORIES):
            return None
        sizes = [a.value for a in expr.args if a.keyword is None and not a.star]
        if name.endswith(("randint", "full", "normal")):
            return None  # the first arguments are values, not sizes
        if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
            sizes = [e.value for e in sizes[0].elements]
        counts = [self.integer(s, env) for s in sizes]
        return math.prod(counts) if sizes and None not in counts else None  # type: ignore[arg-type]

    # ---- what an optimizer trains ----------------------------------------------------------------------

    @cached_property
    def frozen_roots(self) -> frozenset[str]:
        """Models whose parameters (or a part of them) the module freezes and never unfreezes:
        `for p in model.features.parameters(): p.requires_grad = False`, `model.requires_grad_(False)` ->
        `model`. Empty when the module also sets `requires_grad = True` somewhere (a GAN toggling its nets)."""
        m = self.m
        roots = set()
        for call in m.method_calls("requires_grad_"):
            ok, value = literal_value(call.args[0].value) if call.args else (True, True)
            if not ok or value is not False:
                return frozenset()
            key = dotted_name(call.func.value)  # type: ignore[attr-defined]
            if key is not None:
                roots.add(_root(key))
        for attribute in m.attributes:
            if attribute.attr.value != "requires_grad":
                continue
            assignment = m.parent.get(m.parent.get(attribute))
            if not isinstance(assignment, cst.Assign):
                continue
            ok, value = literal_value(assignment.value)
            if not ok or value is not False:
                return frozenset()
            root = self._iterated_root(attribute.value)
            if root is not None:
                roots.add(root)
        for call in m.calls:
            name = m.call_name(call) or dotted_name(call.func) or ""
            if name.rsplit(".", 1)[-1] in _FREEZING_CALLS and call.args:
                key = dotted_name(call.args[0].value)
                if key is not None:
                    roots.add(_root(key))
                target = m.parent.get(call)
                if isinstance(target, cst.Assign) and len(target.targets) == 1 and (key := dotted_name(target.targets[0].target)):
                    roots.add(_root(key))
        for call in m.method_calls("print_trainable_parameters"):
            key = dotted_name(call.func.value)  # type: ignore[attr-defined]
            if key is not None:
                roots.add(_root(key))
        return frozenset(roots)

    def _iterated_root(self, param: cst.BaseExpression) -> Optional[str]:
        """`model` for `p` in `for p in model.features.parameters():` (or `for name, p in model.named_parameters()`)."""
        m = self.m
        if not isinstance(param, cst.Name):
            return None
        for loop in m.enclosing_loops(param):
            if not isinstance(loop, cst.For) or param.value not in assigned_names(loop.target):
                continue
            iterated = loop.iter
            if isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute) and iterated.func.attr.value in ("parameters", "named_parameters"):
                key = dotted_name(iterated.func.value)
                return _root(key) if key is not None else None
        return None

    def trains_few_tensors(self, owners: list[cst.BaseExpression]) -> bool:
        """An optimizer over the `.parameters()` of `owners` updates a handful of tensors: a new head of a
        frozen model (`model.fc.parameters()`), or the trainable ones of a frozen or PEFT model
        (`filter(lambda p: p.requires_grad, model.parameters())`, `model.parameters()` after
        `model.requires_grad_(False)` / `get_peft_model(model, config)`)."""
        frozen = self.frozen_roots
        keys = [dotted_name(owner) for owner in owners]
        if not owners or not frozen or None in keys:
            return False
        return all(_root(key) in frozen for key in keys)  # type: ignore[arg-type]

    # ---- toy data ---------------------------------------------------------------------------------------

    def toy_loop(self, loop: cst.CSTNode) -> bool:
        """Every model the loop runs is a toy model, and the ones with parameters run on toy tensors (the
        whole toy data set each step, no DataLoader): a step costs microseconds whatever it waits for."""
        if loop not in self._toy_loops:
            self._toy_loops[loop] = self._runs_toy_models(loop)
        return self._toy_loops[loop]

    def _runs_toy_models(self, loop: cst.CSTNode) -> bool:
        residency = self.m.residency
        models = 0
        for call in self.m.calls_inside(loop):
            func = call.func
            module = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
            if not (residency.is_module(module) or residency.is_gpu_module(module)):
                continue
            count = self.parameters(module)
            if count is None or count > TOY_PARAMETERS:
                return False
            inputs = [a.value for a in call.args if not a.star and a.keyword is None]
            if count and not (inputs and all(self.is_toy_tensor(i) for i in inputs)):
                if self.builds_convolutions(module) or not self._small_batches_from_memory(loop):
                    return False
            models += count > 0
        return models > 0  # a loss module alone is not a toy model

    def launch_bound_model(self, expr: cst.BaseExpression, loop: Optional[cst.CSTNode] = None) -> bool:
        """The module trains on small images (`loads_small_images`), and the model `expr` builds or names has at most
        `LAUNCH_BOUND_PARAMETERS` parameters (known) and a `nn.Linear` head that fixes its image size if it has
        convolutions: a step of it is kernel launches. Or, in any module, a forward of it (in `loop`, an evaluation)
        does at most `LAUNCH_BOUND_FLOPS` (`forward_flops` times the loop's rows; none at all whatever the rows)."""
        flops = self.forward_flops(expr)
        if flops == 0:
            return True  # gathers and elementwise work only: an embedding lookup, a bias
        if flops is not None and loop is not None:
            rows = self._rows_per_step(loop)
            if rows is not None and flops * rows <= LAUNCH_BOUND_FLOPS and (rows == 1 or not ONE_ROW_STEPS):
                return True
        if not self.loads_small_images:
            return False
        count = self.parameters(expr)
        if count is None or not 0 < count <= LAUNCH_BOUND_PARAMETERS:
            return False
        return not self.builds_convolutions(expr) or self._head_fixes_image(expr)

    @cached_property
    def loads_small_images(self) -> bool:
        """The module loads one of torchvision's small-image data sets (`datasets.MNIST(...)`, `CIFAR10`): a
        teaching-scale job, where a small model's step is done before the host has the next batch."""
        for call in self.m.calls:
            name = self.m.call_name(call) or ""
            if name.startswith("torchvision.datasets.") and name.rsplit(".", 1)[-1] in _SMALL_IMAGE_DATASETS:
                return True
        return False

    def launch_bound_loop(self, loop: cst.CSTNode) -> bool:
        """The module trains on small images (`loads_small_images`) and every model the loop runs or hands to a call
        is known and launch-bound (`launch_bound_model`), together at most `LAUNCH_BOUND_PARAMETERS`: the GPU's work
        per step ends in microseconds, so a read waits for nothing worth a report (MNIST/CIFAR LeNets, 784-128-10 MLPs)."""
        if loop not in self._launch_bound:
            self._launch_bound[loop] = self._runs_launch_bound_models(loop) or self._small_work_step(loop)
        return self._launch_bound[loop]

    # ---- a step's GPU work ------------------------------------------------------------------------------

    def forward_flops(self, expr: cst.BaseExpression) -> Optional[int]:
        """The FLOPs of one forward of the module `expr` builds or names for one input row (`nn.Linear` 2 x in x
        out, gathers, norms and parameter-free layers next to nothing); None when unknown: a layer whose work needs
        a size the code does not show (a convolution's image, a recurrent layer's time steps, attention's sequence),
        a forward that loops, multiplies tensors itself or runs a layer twice, and an `nn.Embedding` feeding layers
        that multiply (one row per token)."""
        flops = self.parameters(expr, work=True)
        if not flops:
            return flops
        names = self._definition_calls(expr, 0)
        if names is None or "torch.nn.Embedding" in names:
            return None  # each token is a row of the layers after the lookup (unless the forward reduces first)
        return flops

    def step_work(self, loop: cst.CSTNode) -> Optional[int]:
        """The FLOPs the GPU does in one iteration of `loop` (`forward_flops` of each model it runs, times the rows
        of a step, times 3 when the loop trains), when the code shows them all; None when unknown, or when the
        loop trains more than `UPDATE_PARAMETERS` parameters, or an unknown number of them."""
        m = self.m
        residency = m.residency
        if not any(own is loop for own in m.loops):
            return None  # a loop of another module (the step that calls this module's loss): its models are not here
        if _multiplies(m, loop):
            return None  # products of its own do more work
        helpers = self._step_helpers(loop)
        if helpers is None:
            return None  # functions of this module that run in a loop of the step, or that the step does not show
        calls = [c for node in (loop, *helpers) for c in m.calls_inside(node) if not (isinstance(c.func, cst.Name) and c.func.value in m.functions)]
        trains = any(_trains(m, call) for call in calls)
        flops = trained = runs = graph_flops = 0
        for call in calls:
            func = call.func
            called = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
            is_model = residency.is_module(called) or residency.is_gpu_module(called)
            if _calls_own_method(call) and not is_model:
                return None  # `self.step(batch)`: a method of the class may run models this loop does not name
            if any(not a.star and (residency.is_module(a.value) or residency.is_gpu_module(a.value)) for a in call.args):
                return None  # a model handed to a helper: how often it runs there is not read
            if not is_model:
                if isinstance(func, cst.Name) and m.bindings_of(func.value, call) and not (m.call_name(call) or "").startswith("torch."):
                    return None  # `model(batch)` of a name not known as a module: what it runs is unknown
                continue
            if any(inner is not loop and (m.is_inside(inner, loop) or not m.is_inside(call, loop)) for inner in m.enclosing_loops(call)):
                return None  # run several times a step (in a loop of the step or of its helper)
            if m.has_ancestor_below(call, _COMPREHENSIONS, loop if m.is_inside(call, loop) else m.enclosing_function(call)):
                return None  # `[model(x) for x in xs]`: as many times as the items
            work = self.forward_flops(called)
            if work is None:
                return None
            graph = self._graph_rows(call, called)
            if graph == 0:
                return None  # PyG layers fed anything but a whole graph of documented size: its nodes are unknown
            if graph is not None:
                graph_flops += work * graph  # a full-graph step: every node of the graph is a row
                work = 0
            flops, runs = flops + work, runs + (self.parameters(called) != 0)  # a loss module alone is not a model
            if trains:
                count = self.parameters(called)
                if count is None:
                    return None
                trained += count
        if not runs or trained > UPDATE_PARAMETERS:
            return None
        if flops:
            rows = self._rows_per_step(loop)
            if rows is None:
                return None
            flops *= rows
        elif graph_flops:
            self._full_graph_steps.add(loop)
        flops += graph_flops
        return 3 * flops if trains else flops

    def _graph_rows(self, call: cst.Call, called: cst.BaseExpression) -> Optional[int]:
        """For a model built of PyG's layers, the nodes of the whole graph `call` feeds it (`model(data.x,
        data.edge_index)`, `data` a graph of documented size: `graph_work.node_rows`), 0 when it feeds anything else
        (a sampled batch: its nodes are unknown); None for a model of no PyG layer."""
        names = self._definition_calls(called, 0)
        if not names or not any(n.startswith("torch_geometric.nn.") for n in names):
            return None
        inputs = [a.value for a in call.args if a.keyword is None and not a.star]
        graph = graph_work.node_rows(self.m, inputs[0]) if inputs else None
        return graph.nodes if graph is not None else 0

    def _step_helpers(self, loop: cst.CSTNode) -> Optional[list[cst.FunctionDef]]:
        """The functions of this module the loop calls by name (`my_loss = calc_sent_loss(sent)`), each the one `def`
        of its name at the module level, called outside any loop nested in the step (once an iteration), multiplying
        nothing itself, calling no function of this module in turn and no generator; None when one of them is not
        such (its work is not read)."""
        m = self.m
        helpers: list[cst.FunctionDef] = []
        for call in m.calls_inside(loop):
            if not isinstance(call.func, cst.Name) or call.func.value not in m.functions:
                continue
            defs = m.functions[call.func.value]
            if len(defs) != 1 or m.parent.get(defs[0]) is not m.module or m.bindings_of(call.func.value, call) not in ([], defs):
                return None
            helper = defs[0]
            if any(inner is not loop and m.is_inside(inner, loop) for inner in m.enclosing_loops(call)) or m.is_inside(loop, helper):
                return None  # several times a step, or the step's own function
            if m.callees(helper) or m.yields_of(helper) or _multiplies(m, helper):
                return None
            if helper not in helpers:
                helpers.append(helper)
        return helpers

    def _small_work_step(self, loop: cst.CSTNode) -> bool:
        """`step_work` is known and at most `LAUNCH_BOUND_FLOPS`, and the step multiplies nothing or feeds its models
        one row (a sentence, a sample): see `ONE_ROW_STEPS`."""
        work = self.step_work(loop)
        if work is None or work > LAUNCH_BOUND_FLOPS:
            return False
        # a full-graph step feeds its model one sample, a graph whose documented size makes its work known
        return work == 0 or not ONE_ROW_STEPS or self._rows_per_step(loop) == 1 or loop in self._full_graph_steps

    def _rows_per_step(self, loop: cst.CSTNode) -> Optional[int]:
        """The rows a step of `loop` feeds its models: the batch size of the DataLoader it iterates (1 when not
        given); None for anything else."""
        if not isinstance(loop, cst.For):
            return None
        loader = self._iterated_loader(loop.iter, 0)
        if loader is None or not loader.known("batch_size", "batch_sampler") or loader.argument("batch_sampler") is not None:
            return None
        size = loader.value("batch_size")
        rows = 1 if size is None else self._largest_integer(size)
        return rows if rows is not None and rows > 0 else None

    def _plain_forward(self, node: cst.ClassDef) -> bool:
        """The class's `forward` runs each of its layers at most once and multiplies no tensors itself: no loop, no
        `@`/`matmul`/`F.linear`/`F.conv2d`, no call of its own methods or of this module's functions."""
        m = self.m
        info = m.classes[node.name.value]
        forward = info.methods.get("forward")
        if forward is None or m.loops_inside(forward) or _multiplies(m, forward):
            return False
        built = self._built_attributes(node)  # `self.llm = llm` (handed in) is not one
        seen: set[str] = set()
        for call in m.calls_inside(forward):
            func = call.func
            if m.has_ancestor_below(call, _COMPREHENSIONS, forward):
                return False
            if _calls_own_method(call):
                attr = func.attr.value  # type: ignore[attr-defined]
                if attr in info.methods or attr in seen or attr not in built:
                    return False
                seen.add(attr)
            elif _layer_of_self(func):
                return False  # `self.layers[0](x)`, `self.encoder.block(x)`
            elif isinstance(func, cst.Name) and (func.value in m.functions or m.local_class_of(m.call_name(call)) is not None):
                return False
            elif _foreign_function(m, call):
                return False  # `ops.project(x, w)`, `from ops import project`: a function of another module may multiply
        return True

    def _runs_own_layers(self, node: cst.ClassDef) -> bool:
        """The class's `forward` multiplies no tensors itself and calls only layers the class builds (`self.fc(x)`,
        `self.embeddings[i](x)`, `lookup(x)` for `lookup` drawn from `self.embeddings`), torch functions and tensor
        methods, however often (loops, comprehensions, a layer run twice): when none of those layers multiplies (an
        `nn.Embedding` lookup, a bias, parameter-free layers), neither does the forward, whatever it repeats."""
        m = self.m
        info = m.classes[node.name.value]
        forward = info.methods.get("forward")
        if forward is None or _multiplies(m, forward):
            return False
        built = self._built_attributes(node)
        for call in m.calls_inside(forward):
            func = call.func
            if _calls_own_method(call):
                if func.attr.value not in built:  # type: ignore[attr-defined]
                    return False  # a method of the class, or a module handed in (`self.llm = llm`)
            elif _layer_of_self(func):
                root = func
                while isinstance(root, (cst.Attribute, cst.Subscript)) and not (isinstance(root, cst.Attribute) and isinstance(root.value, cst.Name)):
                    root = root.value
                if not (isinstance(root, cst.Attribute) and root.attr.value in built):
                    return False
            elif isinstance(func, cst.Name):
                name = m.call_name(call) or ""
                if func.value in m.functions or m.local_class_of(name) is not None:
                    return False
                if not name.startswith("torch.") and func.value not in _PLAIN_BUILTINS and not _drawn_from_layers(m, func, built, forward):
                    return False  # a callable handed in, or one this forward does not draw from its own layers
            elif _foreign_function(m, call):
                return False  # `ops.project(x, w)`: a function of another module may multiply
        return True

    def _built_attributes(self, node: cst.ClassDef) -> set[str]:
        """`fc` for `self.fc = nn.Linear(...)` in a method other than `forward`: the layers `_class` counts."""
        info = self.m.classes[node.name.value]
        forward = info.methods.get("forward")
        return {
            target.target.attr.value
            for method in info.methods.values() if method is not forward
            for assign in matchers.findall(method, matchers.Assign(value=matchers.Call()))
            for target in assign.targets  # type: ignore[attr-defined]
            if isinstance(target.target, cst.Attribute) and _layer_of_self(target.target)
        }

    def _runs_launch_bound_models(self, loop: cst.CSTNode) -> bool:
        m = self.m
        if not self.loads_small_images:
            return False
        residency = m.residency
        total = 0
        for call in m.calls_inside(loop):
            func = call.func
            called = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
            if _calls_own_method(call) and not (residency.is_module(called) or residency.is_gpu_module(called)):
                return False  # `self.step(batch)`: a method of the class may run models this loop does not name
            modules = [called] + [a.value for a in call.args if not a.star]  # run here, or handed to a helper
            for module in modules:
                if not (residency.is_module(module) or residency.is_gpu_module(module)):
                    continue
                count = self.parameters(module)
                if count is None or count > LAUNCH_BOUND_PARAMETERS:
                    return False
                if count and module is called:
                    if self.builds_convolutions(module) and not self._head_fixes_image(module):
                        return False
                    total += count
        return 0 < total <= LAUNCH_BOUND_PARAMETERS  # a loss module alone is not a model

    def _head_fixes_image(self, expr: cst.BaseExpression) -> bool:
        """A convolutional model whose definition ends in `nn.Linear` layers with no adaptive or global pooling:
        the head's (counted) input size fixes the feature map, so the images are as small as the model."""
        names = self._definition_calls(expr, 0)
        if names is None or "torch.nn.Linear" not in names:
            return False
        tails = {name.rsplit(".", 1)[-1].lower() for name in names}
        return not any("adaptive" in tail or "global" in tail or tail in _GLOBAL_REDUCTIONS for tail in tails)

    def _definition_calls(self, expr: cst.BaseExpression, depth: int) -> Optional[set[str]]:
        """The names of the calls in the definition of the module `expr` builds or names (its class, the classes
        it builds, or the `nn.Sequential(...)` call); None when unknown."""
        m = self.m
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in _SAME_MODULE_METHODS:
                return self._definition_calls(func.value, depth + 1)
            name = m.call_name(expr) or ""
            if name in _WRAPPERS or name == "torch.compile":
                return self._definition_calls(expr.args[0].value, depth + 1) if expr.args else None
            info = m.local_class_of(name)
            names: set[str] = set()
            for call in m.calls_inside(info.node if info is not None else expr):
                inner = m.call_name(call) or dotted_name(call.func) or ""
                names.add(inner)
                local = m.local_class_of(m.call_name(call))
                if local is not None and local is not info:
                    more = self._definition_calls(call, depth + 1)
                    if more is None:
                        return None
                    names |= more
            return names
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            writes = m.dataflow.reaching_writes(key, expr) if key is not None else []
            if not writes and isinstance(expr, cst.Name):
                passed = self._passed(expr)
                values = passed or []
            else:
                values = [w.value for w in writes]
            if not values or None in values:
                return None
            found: set[str] = set()
            for value in values:
                more = self._definition_calls(value, depth + 1)  # type: ignore[arg-type]
                if more is None:
                    return None
                found |= more
            return found
        return None

    def _small_batches_from_memory(self, loop: cst.CSTNode) -> bool:
        """The loop iterates a DataLoader (through `enumerate`, `tqdm`, `list`) whose items are rows held in memory
        (`batch_cost.items_are_cheap`: a `TensorDataset`, a table indexed in `__getitem__`) in batches of at most
        `TOY_BATCH` rows: with a toy dense model the GPU's work per step is done before the host has the next batch."""
        if not isinstance(loop, cst.For):
            return False
        loader = self._iterated_loader(loop.iter, 0)
        if loader is None or not loader.known("batch_size", "batch_sampler", "dataset", "collate_fn"):
            return False
        if loader.argument("batch_sampler") is not None or not self.m.batch_cost.items_are_cheap(loader):
            return False
        size = loader.value("batch_size")
        rows = 1 if size is None else self._largest_integer(size)
        return rows is not None and 0 < rows <= TOY_BATCH

    def _largest_integer(self, expr: cst.BaseExpression) -> Optional[int]:
        """The integer `expr` holds, or the largest of those the writes reaching it hold (`BATCH_SIZE = 16` in a
        notebook cell that an earlier cell also set)."""
        number = self.integer(expr, {})
        if number is not None or not isinstance(expr, cst.Name):
            return number
        writes = self.m.dataflow.reaching_writes(expr.value, expr)
        numbers = [self.integer(w.value, {}) if w.value is not None and not w.is_augmented else None for w in writes]
        return max(numbers) if numbers and None not in numbers else None  # type: ignore[type-var]

    def _iterated_loader(self, expr: cst.BaseExpression, depth: int):
        """The DataLoader call `expr` iterates: `loader`, `enumerate(loader)`, `tqdm(list(enumerate(loader)))`."""
        m = self.m
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Call):
            loader = next((d for d in m.dataloaders if d.call is expr), None)
            if loader is not None:
                return loader
            name = m.call_name(expr) or dotted_name(expr.func) or ""
            if name.rsplit(".", 1)[-1] in ("enumerate", "list", "iter", "tqdm", "tqdm_notebook", "trange") and expr.args:
                return self._iterated_loader(expr.args[0].value, depth + 1)
            return None
        if isinstance(expr, cst.Name):
            writes = m.dataflow.reaching_writes(expr.value, expr)
            if len(writes) == 1 and writes[0].value is not None and not writes[0].is_augmented:
                return self._iterated_loader(writes[0].value, depth + 1)
        return None

    def shows_convolutions(self, expr: cst.BaseExpression) -> bool:
        """The layers `expr`'s definition is known to build include a convolution; False when unknown (unlike
        `builds_convolutions`, which is True when unknown)."""
        names = self._definition_calls(expr, 0)
        return bool(names) and any(_convolution(name) for name in names)

    def builds_convolutions(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """The module `expr` builds or names has a convolution (work that grows with the image, not the parameters);
        True when unknown."""
        m = self.m
        if depth > _MAX_DEPTH:
            return True
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in _SAME_MODULE_METHODS:
                return self.builds_convolutions(func.value, depth + 1)
            if m.call_name(expr) == "torch.compile" and expr.args:
                return self.builds_convolutions(expr.args[0].value, depth + 1)
            info = m.local_class_of(m.call_name(expr) or "")
            scope: cst.CSTNode = info.node if info is not None else expr
            for call in m.calls_inside(scope):
                name = m.call_name(call) or ""
                inner = m.local_class_of(name) if call is not expr else None
                if _convolution(name) or (inner is not None and inner is not info and self.builds_convolutions(call, depth + 1)):
                    return True
            return False
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            writes = m.dataflow.reaching_writes(key, expr) if key is not None else []
            if not writes and isinstance(expr, cst.Name) and (passed := self._passed(expr)) is not None:
                return any(self.builds_convolutions(value, depth + 1) for value in passed)
            return not writes or any(w.value is None or self.builds_convolutions(w.value, depth + 1) for w in writes)
        return True

    def is_toy_tensor(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """A tensor written or generated in the code with at most `TOY_ELEMENTS` elements: `torch.rand(100, 2)`,
        `torch.arange(0, 1, 0.02)`, `make_moons(n_samples=1000)`, numbers written out, and what conversions,
        reshapes, slices and arithmetic make of them."""
        m = self.m
        if depth > _TOY_TENSOR_DEPTH:
            return False
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, (cst.List, cst.Tuple)):
            return bool(expr.elements) and all(self.is_toy_tensor(e.value, depth + 1) for e in expr.elements if not isinstance(e, cst.StarredElement))
        if isinstance(expr, cst.Call):
            name = m.call_name(expr) or ""
            tail = name.rsplit(".", 1)[-1]
            if name.startswith("sklearn.") and tail in _TOY_GENERATORS:
                samples = next((a.value for a in expr.args if a.keyword is not None and a.keyword.value == "n_samples"), None)
                if samples is None and expr.args and expr.args[0].keyword is None:
                    samples = expr.args[0].value
                count = self.integer(samples, {}) if samples is not None else 100
                return count is not None and count * 100 <= TOY_ELEMENTS
            if name.startswith("torch.") and tail in _TORCH_FACTORIES | _RANGES:
                elements = self._range_elements(expr) if tail in _RANGES else self._tensor_elements(expr, {})
                return elements is not None and elements <= TOY_ELEMENTS
            if name in _TENSOR_FUNCTIONS or (name.startswith("sklearn.") and tail == "train_test_split"):
                return bool(expr.args) and all(self.is_toy_tensor(a.value, depth + 1) for a in expr.args if a.keyword is None and not a.star)
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("fit_transform", "transform") and len(expr.args) == 1:
                return self.is_toy_tensor(expr.args[0].value, depth + 1)  # a scaler keeps the shape
            if isinstance(func, cst.Attribute) and func.attr.value in _TENSOR_METHODS:
                return self.is_toy_tensor(func.value, depth + 1)
            if isinstance(func, cst.Attribute) and func.attr.value == "size" or name == "len":
                return True  # a shape: a few integers
            return False
        if isinstance(expr, cst.BinaryOperation):
            return self.is_toy_tensor(expr.left, depth + 1) and self.is_toy_tensor(expr.right, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_toy_tensor(expr.expression, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self.is_toy_tensor(expr.value, depth + 1)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            writes = m.dataflow.reaching_writes(key, expr) if key is not None else []
            return bool(writes) and all(self._toy_write(w, depth + 1) for w in writes)
        return False

    def _toy_write(self, write, depth: int) -> bool:
        if write.value is not None:
            return self.is_toy_tensor(write.value, depth)
        source = write.source  # `X, y = make_moons(...)`: each part of toy data is toy data
        return source is not None and self.is_toy_tensor(source, depth)

    def _range_elements(self, call: cst.Call) -> Optional[int]:
        values = []
        for arg in call.args[:3]:
            if arg.keyword is not None or arg.star:
                break
            ok, value = literal_value(arg.value)
            if not ok or not isinstance(value, (int, float)) or isinstance(value, bool):
                return None
            values.append(value)
        name = (self.m.call_name(call) or "").rsplit(".", 1)[-1]
        if name != "arange":
            steps = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "steps"), None)
            count = values[2] if len(values) == 3 else self.integer(steps, {}) if steps is not None else None
            return int(count) if count is not None else None
        if len(values) == 1:
            return int(values[0])
        if len(values) >= 2:
            step = values[2] if len(values) == 3 else 1
            return int(abs((values[1] - values[0]) / step)) if step else None
        return None


class _Arguments:
    """A layer call's arguments by position or keyword, as integers."""

    def __init__(self, sizes: ModelSize, call: cst.Call, env: dict[str, int]) -> None:
        self.sizes, self.call, self.env = sizes, call, env

    def value(self, position: Optional[int], keyword: str) -> Optional[cst.BaseExpression]:
        for index, arg in enumerate(self.call.args):
            if arg.keyword is not None and arg.keyword.value == keyword:
                return arg.value
            if arg.keyword is None and not arg.star and index == position:
                return arg.value
        return None

    def int(self, position: Optional[int], keyword: str, default: Optional[int] = None) -> Optional[int]:
        value = self.value(position, keyword)
        return default if value is None else self.sizes.integer(value, self.env)

    def kernel(self, position: int, dims: int) -> Optional[int]:
        value = self.value(position, "kernel_size")
        if isinstance(value, (cst.Tuple, cst.List)):
            sides = [self.sizes.integer(e.value, self.env) for e in value.elements]
            return None if None in sides else math.prod(sides)  # type: ignore[arg-type]
        side = self.sizes.integer(value, self.env) if value is not None else None
        return None if side is None else side**dims

    def flag(self, keyword: str) -> bool:
        value = self.value(None, keyword)
        return value is not None and literal_value(value) != (True, False)


# Calls whose result has the columns of their input (a conversion, a scaler).
_SHAPE_KEEPING = frozenset({"float", "double", "long", "to", "cuda", "clone", "detach", "type", "astype", "numpy",
                            "to_numpy"})  # fmt: skip


def _width_of(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`X` in `X.shape[1]` / `X.size(1)`: the table whose column count the expression reads."""
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            if literal_value(expr.slice[0].slice.value) == (True, 1):
                return expr.value.value
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size" and len(expr.args) == 1:
        if literal_value(expr.args[0].value) == (True, 1):
            return expr.func.value
    return None


def _named_layers(model: SemanticModel, expr: cst.BaseExpression) -> Optional[list[cst.BaseExpression]]:
    """The layers of `OrderedDict([("fc1", nn.Linear(...)), ...])`; None for anything else."""
    if not isinstance(expr, cst.Call) or (model.call_name(expr) or "") != "collections.OrderedDict" or len(expr.args) != 1:
        return None
    pairs = expr.args[0].value
    if not isinstance(pairs, (cst.List, cst.Tuple)):
        return None
    layers = []
    for element in pairs.elements:
        pair = element.value
        if not isinstance(pair, cst.Tuple) or len(pair.elements) != 2:
            return None
        layers.append(pair.elements[1].value)
    return layers


# Calls that multiply tensors (matmuls, convolutions, attention, recurrent kernels): work the layers do not show.
_MULTIPLYING = frozenset({
    "matmul", "mm", "bmm", "mv", "dot", "einsum", "addmm", "addbmm", "baddbmm", "addmv", "tensordot", "inner", "outer",
    "chain_matmul", "linear", "bilinear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "scaled_dot_product_attention", "multi_head_attention_forward", "lstm", "gru", "rnn_tanh",
    "rnn_relu", "kron", "cdist",
})  # fmt: skip


def _multiplies(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`node` multiplies tensors itself: `a @ b`, `torch.matmul(...)`, `x.mm(w)`, `F.linear(...)`, `F.conv2d(...)`."""
    if matchers.findall(node, matchers.BinaryOperation(operator=matchers.MatrixMultiply()) | matchers.AugAssign(operator=matchers.MatrixMultiplyAssign())):
        return True
    for call in model.calls_inside(node):
        name = model.call_name(call) or dotted_name(call.func) or ""
        if name.rsplit(".", 1)[-1] in _MULTIPLYING:
            return True
    return False


def _trains(model: SemanticModel, call: cst.Call) -> bool:
    """`loss.backward()`, `optimizer.step()`, `torch.autograd.grad(...)`: the step computes gradients or updates."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("backward", "step", "manual_backward"):
        return True
    return (model.call_name(call) or "") in ("torch.autograd.grad", "torch.autograd.backward")


def _layer_work(layer: str, size: _Arguments) -> Optional[int]:
    """The forward FLOPs of a `torch.nn` layer for one input row; None when they depend on sizes the layer's
    arguments do not give (a convolution's image, a recurrent layer's time steps) or for a layer not listed."""
    if layer == "Linear":
        n_in, n_out = size.int(0, "in_features"), size.int(1, "out_features")
        return None if n_in is None or n_out is None else 2 * n_in * n_out
    if layer in ("Embedding", "EmbeddingBag"):
        return 0  # a gather of the rows looked up (a bag's sum or mean adds them): no multiply, whatever the table
    if layer.startswith(("BatchNorm", "InstanceNorm")) or layer == "LayerNorm":
        features = size.int(0, "num_features" if layer != "LayerNorm" else "normalized_shape")
        return None if features is None else 10 * features
    if layer == "PReLU":
        return 0
    return None


# PyG's message-passing layers whose size and work per node `_graph_layer` reads.
_GRAPH_LAYERS = frozenset({"GCNConv", "GATConv", "SAGEConv", "GraphConv"})


def _graph_layer(layer: str, size: _Arguments, work: bool) -> Optional[int]:
    """A PyG layer's parameters, or with `work` its forward FLOPs per node: the dense transform (2 x in x out, per
    head for `GATConv`; `SAGEConv`/`GraphConv` transform the node and its aggregated neighbours) plus the messages of
    `graph_work.MAX_DEGREE` edges (a scaled add per output channel; GAT's attention scores per head). Lazy sizes
    (`-1`) are unknown."""
    n_in, n_out = size.int(0, "in_channels"), size.int(1, "out_channels")
    if n_in is None or n_out is None or n_in <= 0 or n_out <= 0:
        return None
    degree = graph_work.MAX_DEGREE
    if layer == "GATConv":
        heads = size.int(2, "heads", default=1)
        if heads is None or heads <= 0:
            return None
        concat = not (size.value(3, "concat") is not None and literal_value(size.value(3, "concat")) == (True, False))  # type: ignore[arg-type]
        if work:
            return 2 * n_in * heads * n_out + degree * heads * (2 * n_out + 10)
        return n_in * heads * n_out + 2 * heads * n_out + (heads * n_out if concat else n_out)
    if layer == "GCNConv":
        return 2 * n_in * n_out + degree * 2 * n_out if work else n_in * n_out + n_out
    return 4 * n_in * n_out + degree * n_in if work else 2 * n_in * n_out + n_out  # SAGEConv, GraphConv


def _convolution(name: str) -> bool:
    return name.startswith("torch.nn.") and name.rsplit(".", 1)[-1].startswith(("Conv", "LazyConv"))


# Builtins a forward may call around its layers: they run no module.
_PLAIN_BUILTINS = frozenset({"zip", "enumerate", "range", "len", "list", "tuple", "reversed", "min", "max", "sum", "isinstance"})


def _drawn_from_layers(model: SemanticModel, func: cst.Name, built: set[str], forward: cst.FunctionDef) -> bool:
    """`lookup` in `[lookup(x) for x, lookup in zip(x.T, self.embeddings)]` (or a `for` of the forward): a name the
    enclosing comprehension or loop binds from an iterable that names only layers the class builds."""
    for ancestor in model.ancestors(func):
        if ancestor is forward:
            return False
        loops = []
        if isinstance(ancestor, _COMPREHENSIONS):
            part: Optional[cst.CompFor] = ancestor.for_in
            while part is not None:
                loops.append((part.target, part.iter))
                part = part.inner_for_in
        elif isinstance(ancestor, cst.For):
            loops.append((ancestor.target, ancestor.iter))
        for target, iterated in loops:
            if func.value not in assigned_names(target):
                continue
            layers = [a for a in matchers.findall(iterated, matchers.Attribute(value=matchers.Name("self")))]
            return bool(layers) and all(a.attr.value in built for a in layers)  # type: ignore[attr-defined]
    return False


def _foreign_function(model: SemanticModel, call: cst.Call) -> bool:
    """`ops.project(x)`, `project(x)` imported from another module: a function outside torch, whose work is not read
    (a builtin, a tensor's method, a torch function and numpy/math on host values are not)."""
    name = model.call_name(call)  # qualified through the module's imports: `ops.project`, `numpy.sum`
    return name is not None and "." in name and not name.startswith(("torch.", "numpy.", "math."))  # (host math: no GPU work)


def _largest(counts: list[Optional[int]]) -> Optional[int]:
    return max(counts) if counts and None not in counts else None  # type: ignore[type-var]


def _root(key: str) -> str:
    """The model a dotted name belongs to: `model` for `model.features`, `self.net` for `self.net.fc`."""
    parts = key.split(".")
    return ".".join(parts[:2]) if parts[0] == "self" else parts[0]


def _inside_container(model: SemanticModel, call: cst.Call) -> bool:
    """`nn.Linear(...)` written inside `nn.Sequential(...)` / `nn.ModuleList([...])`: the container counts it."""
    for ancestor in model.ancestors(call):
        if isinstance(ancestor, cst.Call):
            return (model.call_name(ancestor) or "") in ("torch.nn.Sequential", "torch.nn.ModuleList")
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
    return False


def _builds_module(model: SemanticModel, call: cst.Call) -> bool:
    name = model.call_name(call) or ""
    if name.startswith("torch.nn.") and name.rsplit(".", 1)[1][:1].isupper():
        layer = name.rsplit(".", 1)[1]
        return layer not in _PARAMETER_FREE or layer in ("Sequential", "ModuleList")
    return model.local_class_of(name) is not None or not _harmless(model, call)


def _rooted_at_self(expr: cst.BaseExpression) -> bool:
    """`self.fc.weight.detach()`: an expression that reads attributes of `self` and calls their methods."""
    while isinstance(expr, (cst.Attribute, cst.Call)):
        expr = expr.value if isinstance(expr, cst.Attribute) else expr.func
    return isinstance(expr, cst.Name) and expr.value == "self"


def _layer_of_self(expr: cst.BaseExpression) -> bool:
    """`self.layers[0]`, `self.encoder.block`: an item or attribute of an attribute of `self` (no call between)."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value == "self"


def _calls_own_method(call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"


def _called_again(model: SemanticModel, call: cst.Call, cls: cst.ClassDef) -> bool:
    """`self.block(...)` is called more than once in the class: what it builds would count once only."""
    method = call.func.attr.value  # type: ignore[attr-defined]
    calls = [c for c in model.method_calls(method) if _calls_own_method(c) and model.is_inside(c, cls)]
    return len(calls) > 1 or any(model.enclosing_loops(c) for c in calls)


def _harmless(model: SemanticModel, call: cst.Call) -> bool:
    """A call in a module's set-up that builds no parameters: `super().__init__()`, its own methods
    (read with the class), builtins, `torch` functions (`nn.init.*`, `torch.zeros` for a buffer), math."""
    func = call.func
    name = model.call_name(call) or ""
    if isinstance(func, cst.Attribute):
        receiver = func.value
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            return True
        if _rooted_at_self(receiver):
            return True  # `self.fc.weight.detach().normal_(0, 0.1)`: initializing its own layers
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Name) and receiver.func.value == "super":
            return True
        if isinstance(receiver, cst.Call) and _harmless(model, receiver):
            return True  # `torch.zeros(n).type(dtype)`: a method of a tensor made here (a buffer, a plain attribute)
    if isinstance(func, cst.Name) and func.value in ("super", "range", "len", "int", "float", "list", "tuple", "dict", "zip", "enumerate", "isinstance", "print", "min", "max", "round", "abs", "getattr", "setattr", "hasattr"):
        return not model.bindings_of(func.value, call)
    if name.startswith(("torch.nn.init.", "torch.nn.functional.", "math.")):
        return True
    if name.startswith("torch.") and not name.startswith(("torch.nn.", "torch.hub")):
        return True
    return False
