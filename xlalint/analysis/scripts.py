"""Whole-module facts about a script (docs/rules.md, "Scope"): is it a multi-process XLA
script, does it run its loop through a library that syncs for it, is it meant for XLA."""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import Semantic, string_value

SPAWN = frozenset({"torch_xla.distributed.xla_multiprocessing.spawn", "torch_xla.launch"})
WORLD = frozenset(
    {
        "torch_xla.runtime.world_size",
        "torch_xla.runtime.global_ordinal",
        "torch_xla.runtime.local_ordinal",
    }
)
# Names that say a script (an accelerate one, which need not import torch_xla) runs on XLA.
XLA_WORDS = frozenset({"XLA", "TPU", "is_torch_xla_available", "is_tpu_available", "is_torch_tpu_available"})
INIT_PROCESS_GROUP = frozenset({"torch.distributed.init_process_group"})
TRAINERS = frozenset(
    {
        "transformers.Trainer",
        "transformers.Seq2SeqTrainer",
        "transformers.trainer.Trainer",
        "transformers.trainer_seq2seq.Seq2SeqTrainer",
        "accelerate.Accelerator",
        "accelerate.accelerator.Accelerator",
    }
)


def calls_to(semantic: Semantic, names: frozenset[str]) -> list[ast.Call]:
    """The calls of any of the qualified ``names``, in source order (an outer call
    before the call it starts with)."""
    # By the own name of what is called first (``calls_of``, indexed once per module):
    # most calls are none of these, and need no qualified name.
    lasts = {name.rsplit(".", 1)[-1] for name in names}
    found = [call for call in semantic.calls_of(*lasts) if semantic.call_name(call) in names]
    if len(lasts) > 1:
        found.sort(key=lambda c: (c.lineno, c.col_offset, -(c.end_lineno or 0), -(c.end_col_offset or 0)))
    return found


def defines_mp_fn(tree: ast.Module) -> bool:
    return any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "_mp_fn" for s in tree.body)


def is_multiprocess_xla_script(semantic: Semantic) -> bool:
    """Imports torch_xla and spawns/launches itself, defines ``_mp_fn``, calls
    ``dist.init_process_group("xla")``, or asks for the world size or its ordinal."""
    if not semantic.imports.imports_module("torch_xla"):
        return False
    if defines_mp_fn(semantic.tree) or calls_to(semantic, SPAWN | WORLD):
        return True
    for call in calls_to(semantic, INIT_PROCESS_GROUP):
        backend = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "backend"), None)
        if string_value(backend) == "xla":
            return True
    return False


def uses_syncing_library(semantic: Semantic) -> bool:
    """HF Trainer/Seq2SeqTrainer or accelerate's Accelerator drive the loop (they sync)."""
    if calls_to(semantic, TRAINERS):
        return True
    # A subclass of Trainer counts too: `class MyTrainer(Trainer)`.
    for node in semantic.nodes_of(ast.ClassDef):
        if any(semantic.qualified_name(b) in TRAINERS for b in node.bases):
            return True
    return False


def targets_xla(semantic: Semantic) -> bool:
    """The file imports torch_xla or names XLA/TPU (``DistributedType.XLA``,
    ``is_torch_xla_available()``): accelerate or the HF Trainer then run it on XLA devices."""
    if semantic.imports.imports_module("torch_xla"):
        return True
    return any(node.attr in XLA_WORDS for node in semantic.nodes_of(ast.Attribute)) or any(
        node.id in XLA_WORDS for node in semantic.nodes_of(ast.Name)
    )
