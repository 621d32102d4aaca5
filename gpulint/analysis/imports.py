"""Import resolution: map local names to qualified names without LibCST's costly scope providers."""

from __future__ import annotations

import ast

import libcst as cst

# Re-exports that name the same object: the canonical spelling is the key rules match on.
CANONICAL_NAMES = {
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.utils.data.dataset.Dataset": "torch.utils.data.Dataset",
    "torch.utils.data.dataset.IterableDataset": "torch.utils.data.IterableDataset",
    "torch.utils.data.dataset.TensorDataset": "torch.utils.data.TensorDataset",
    "torch.utils.data.dataloader.get_worker_info": "torch.utils.data.get_worker_info",
    "torch.utils.data._utils.worker.get_worker_info": "torch.utils.data.get_worker_info",
    "torch.nn.parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.data_parallel.DataParallel": "torch.nn.DataParallel",
    "torch.nn.parallel.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.cuda.memory.memory_cached": "torch.cuda.memory_cached",
    "torch.cuda.memory.max_memory_cached": "torch.cuda.max_memory_cached",
    "torch.cuda.memory.reset_max_memory_cached": "torch.cuda.reset_max_memory_cached",
    "torch.cuda.amp.autocast_mode.autocast": "torch.cuda.amp.autocast",
    "torch.cuda.amp.autocast_mode.custom_fwd": "torch.cuda.amp.custom_fwd",
    "torch.cuda.amp.autocast_mode.custom_bwd": "torch.cuda.amp.custom_bwd",
    "torch.cuda.amp.grad_scaler.GradScaler": "torch.cuda.amp.GradScaler",
}


# The public names (`__all__`) of library modules whose star import (`from torch.utils.data import *`, common in
# lessons) binds the classes rules match on; any other library's star import binds nothing known.
STAR_EXPORTS = {
    "torch.utils.data": (
        "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler", "IterableDataset",
        "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset", "SubsetRandomSampler", "TensorDataset",
        "WeightedRandomSampler", "default_collate", "default_convert", "get_worker_info", "random_split",
    ),
}  # fmt: skip
# Libraries whose star import re-exports torch's data classes under their own `__all__` (read in their source):
# torch_snippets/__init__.py runs `from .torch_loader import *`, and torch_loader.py has `from torch.utils.data
# import Dataset, DataLoader` with both in its `__all__` (a course book's notebooks start `from torch_snippets
# import *`). Only these names are bound; the library's other exports stay unknown.
STAR_REEXPORTS = {
    "torch_snippets": {"Dataset": "torch.utils.data.Dataset", "DataLoader": "torch.utils.data.DataLoader"},
}


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def ast_dotted_name(node: ast.AST) -> str | None:
    """`a.b.c` for an `ast` Name/Attribute chain (the summaries read `ast` trees), else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def canonical(qualified: str) -> str:
    return CANONICAL_NAMES.get(qualified, qualified)


class ImportTable:
    """Local binding -> qualified name, for every import statement in the module (any depth)."""

    def __init__(self) -> None:
        self.bindings: dict[str, str] = {}

    def add_import(self, node: cst.Import) -> list[str]:
        """Records the statement's bindings; returns the local names it binds."""
        if isinstance(node.names, cst.ImportStar):
            return []
        bound = []
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.bindings[alias.asname.name.value] = full
                bound.append(alias.asname.name.value)
            else:
                # `import torch.utils.data` binds `torch`; attribute access resolves the rest.
                root = full.split(".", 1)[0]
                self.bindings[root] = root
                bound.append(root)
        return bound

    def add_import_from(self, node: cst.ImportFrom) -> list[str]:
        """Records the statement's bindings; returns the local names it binds."""
        if node.relative or node.module is None:
            return []
        module = dotted_name(node.module)
        if module is None:
            return []
        if isinstance(node.names, cst.ImportStar):
            bound = []
            for name in STAR_EXPORTS.get(module, ()):  # `from torch.utils.data import *`: its `__all__`
                self.bindings[name] = canonical(f"{module}.{name}")
                bound.append(name)
            for name, qualified in STAR_REEXPORTS.get(module, {}).items():  # `from torch_snippets import *`
                self.bindings[name] = qualified
                bound.append(name)
            return bound
        bound = []
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.bindings[local] = f"{module}.{alias.name.value}"
            bound.append(local)
        return bound

    def resolve(self, dotted: str) -> str | None:
        """Qualified name of a dotted expression whose root is an imported name."""
        root, _, rest = dotted.partition(".")
        target = self.bindings.get(root)
        if target is None:
            return None
        full = f"{target}.{rest}" if rest else target
        return canonical(full)

    def is_imported(self, module: str) -> bool:
        return self.bindings.get(module) == module
