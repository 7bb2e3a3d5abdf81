"""XLA105 missing-mp-fn: the process entry point XLA launchers call is missing or
cannot take the process index.

``xmp.spawn(fn, args)`` and ``torch_xla.launch(fn, args)`` call ``fn(index, *args)``
in every process. HF's ``xla_spawn.py`` and SageMaker's ``pytorchxla`` distribution
import the training script and call its module-level ``_mp_fn(index)``. So:

(a) a function given to the launcher (or a module-level ``_mp_fn``) that takes no
    parameter fails with ``TypeError`` in every process;
(b) an entry-point script that only runs ``main()`` (or ``train()``...) under
    ``if __name__ == "__main__":`` cannot be started by those launchers at all.
"""

from __future__ import annotations

import ast

from xlalint.analysis.scripts import SPAWN, calls_to
from xlalint.analysis.semantic import keyword, string_value
from xlalint.engine.rule import Invalid, Rule, Valid
from xlalint.model import AddParameter, InsertStatement, ReplaceExpr

# Calls that only make sense with one process per device (docs/rules.md, XLA105).
MULTIPROCESS_APIS = frozenset(
    {
        "torch_xla.runtime.world_size",
        "torch_xla.runtime.global_ordinal",
        "torch_xla.core.xla_model.optimizer_step",
        "torch_xla.core.xla_model.all_reduce",
        "torch_xla.core.xla_model.reduce_gradients",
        # Removed in 2.7, still in old scripts.
        "torch_xla.core.xla_model.xrt_world_size",
        "torch_xla.core.xla_model.get_ordinal",
        "torch.utils.data.DistributedSampler",
        "torch.utils.data.distributed.DistributedSampler",
    }
)
INIT_PROCESS_GROUP = "torch.distributed.init_process_group"
USE_SPMD = frozenset({"torch_xla.runtime.use_spmd"})
# Environment variables torchrun sets for each process it starts (and only it).
TORCHRUN_VARIABLES = frozenset({"LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"})
HF_TRAINERS = frozenset(
    {
        "transformers.Trainer",
        "transformers.Seq2SeqTrainer",
        "transformers.trainer.Trainer",
        "transformers.trainer_seq2seq.Seq2SeqTrainer",
    }
)
# A single parameter of `main` with one of these names is the process index.
INDEX_NAMES = frozenset({"index", "idx", "rank", "ordinal", "process_index", "local_rank", "device_index", "i"})
FunctionDef = ast.FunctionDef | ast.AsyncFunctionDef

# The packages of the launchers: a module that binds nothing of them calls none.
SPAWN_ROOTS = frozenset(name.split(".", 1)[0] for name in SPAWN)


def _positional_count(func: FunctionDef | ast.Lambda) -> int | None:
    """How many positional arguments ``func`` accepts (None: any number, ``*args``)."""
    if func.args.vararg is not None:
        return None
    return len(func.args.posonlyargs) + len(func.args.args)


def _required(func: FunctionDef) -> list[str]:
    """The parameters a call must fill (positional without default, keyword-only
    without default)."""
    positional = [*func.args.posonlyargs, *func.args.args]
    required = positional[: len(positional) - len(func.args.defaults)]
    required += [a for a, d in zip(func.args.kwonlyargs, func.args.kw_defaults) if d is None]
    return [a.arg for a in required]


def _is_main_guard(stmt: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either way round)."""
    if not (isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1):
        return False
    sides = [stmt.test.left, stmt.test.comparators[0]]
    return (
        isinstance(stmt.test.ops[0], ast.Eq)
        and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
        and any(string_value(s) == "__main__" for s in sides)
    )


def _called_by_statement(stmt: ast.stmt) -> str | None:
    """``f`` of a statement ``f(...)`` or ``sys.exit(f(...))`` (any wrapper call of one argument)."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if isinstance(call, ast.Call) and not isinstance(call.func, ast.Name) and len(call.args) == 1:
        call = call.args[0]
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
        return call.func.id
    return None


class MissingMpFn(Rule):
    code = "XLA105"
    name = "missing-mp-fn"
    summary = "The XLA launcher entry point is missing or takes no process index"
    explanation = """
## Why
`xmp.spawn(fn, args)` and `torch_xla.launch(fn, args)` call `fn(index, *args)` in each
process: a function without the `index` parameter fails with `TypeError` in every
process. HF's `xla_spawn.py` and SageMaker's `pytorchxla` distribution import the
training script and call its module-level `_mp_fn(index)`: a script without one cannot
be started by them.

## What is flagged
- (a) a function passed to `xmp.spawn`/`torch_xla.launch`, or a module-level `_mp_fn`,
  that takes no parameter (or fewer than `1 + len(args)`); reported at its `def`;
- (b) an entry-point script with no module-level `_mp_fn`: its
  `if __name__ == "__main__":` block calls a module-level function directly (`main()`
  wherever it is called, else the last function it calls as a statement: `train()`,
  `sys.exit(run(args))`), and the
  file either imports torch_xla and uses a multi-process API (`xr.world_size()`,
  `xr.global_ordinal()`, `xm.optimizer_step`, `xm.all_reduce`, `DistributedSampler`,
  `dist.init_process_group("xla")`) or builds an HF `Trainer`/`Seq2SeqTrainer`
  (a subclass too). Reported at the `if __name__` line.

## Not flagged
SPMD scripts (`xr.use_spmd()`: one process per host), scripts started by torchrun (they
read `LOCAL_RANK`/`LOCAL_WORLD_SIZE` from the environment) that build no HF Trainer,
modules without a `__main__`
block, scripts that spawn/launch a function themselves (anywhere in the file: that
includes launcher scripts that spawn another module's `_mp_fn`), files that define
`_mp_fn` already.

## Fix (safe)
(a) add an `index` parameter first (no fix when the function is also called directly in
the file: those calls would break). (b) add, right before the `__main__` block:
```python
def _mp_fn(index):
    # The entry point of XLA launchers (xla_spawn.py, SageMaker), which pass the process index.
    main()
```
calling that function (`train()`, `run()`), with the index when its only required
parameter is one (`main(index)` for `main(rank)`; also `index`, `ordinal`...). When it
needs other arguments there is no fix: write `_mp_fn` by hand.
"""
    fix_availability = "sometimes"

    VALID = [
        Valid(
            """
            import torch_xla.distributed.xla_multiprocessing as xmp
            def _mp_fn(index):
                pass
            if __name__ == "__main__":
                xmp.spawn(_mp_fn, args=())
            """
        ),
        # Spawns another module's entry point (HF xla_spawn.py).
        Valid(
            """
            import importlib
            import torch_xla.distributed.xla_multiprocessing as xmp
            def main():
                mod = importlib.import_module(args.training_script)
                xmp.spawn(mod._mp_fn, args=())
            if __name__ == "__main__":
                main()
            """
        ),
        # Started by torchrun, which sets LOCAL_RANK: no XLA launcher calls it.
        Valid(
            """
            import os
            import torch.distributed as dist
            import torch_xla.distributed.xla_backend
            def main():
                local_rank = int(os.environ["LOCAL_RANK"])
                dist.init_process_group("xla", init_method="xla://")
            if __name__ == "__main__":
                main()
            """
        ),
        # SPMD: one process per host, no launcher.
        Valid(
            """
            import torch_xla.runtime as xr
            def main():
                xr.use_spmd()
                print(xr.world_size())
            if __name__ == "__main__":
                main()
            """
        ),
        # No __main__ block: a library module.
        Valid(
            """
            from transformers import Trainer
            def main():
                Trainer(model=model).train()
            """
        ),
        # Already has the entry point; spawns itself through torch_xla.launch.
        Valid(
            """
            from transformers import Trainer
            def main():
                Trainer(model=model).train()
            def _mp_fn(index):
                main()
            if __name__ == "__main__":
                main()
            """
        ),
        Valid(
            """
            import torch_xla
            import torch_xla.runtime as xr
            def train(index, lr):
                print(xr.global_ordinal())
            def main():
                torch_xla.launch(train, args=(0.1,))
            if __name__ == "__main__":
                main()
            """
        ),
        # A single-process script: nothing multi-process, no Trainer.
        Valid(
            """
            import torch_xla
            def main():
                print(torch_xla.device())
            if __name__ == "__main__":
                main()
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch_xla.distributed.xla_multiprocessing as xmp
            def train():
                pass
            xmp.spawn(train, args=())
            """,
            fixed="""
            import torch_xla.distributed.xla_multiprocessing as xmp
            def train(index):
                pass
            xmp.spawn(train, args=())
            """,
            count=1,
        ),
        # The launcher passes the index first, then `args`.
        Invalid(
            """
            import torch_xla
            def train(lr):
                pass
            torch_xla.launch(train, args=(0.1,))
            """,
            fixed="""
            import torch_xla
            def train(index, lr):
                pass
            torch_xla.launch(train, args=(0.1,))
            """,
            count=1,
        ),
        Invalid(
            """
            import torch
            def _mp_fn():
                main()
            """,
            fixed="""
            import torch
            def _mp_fn(index):
                main()
            """,
            count=1,
        ),
        # Also called directly: a new parameter would break that call, no fix.
        Invalid(
            """
            import torch_xla
            def _mp_fn():
                train()
            if __name__ == "__main__":
                _mp_fn()
            """,
            count=1,
        ),
        Invalid(
            """
            from torch_xla.distributed import xla_multiprocessing
            xla_multiprocessing.spawn(lambda: run(), args=())
            """,
            fixed="""
            from torch_xla.distributed import xla_multiprocessing
            xla_multiprocessing.spawn(lambda index: run(), args=())
            """,
            count=1,
        ),
        Invalid(
            """
            import torch_xla.core.xla_model as xm


            def main():
                xm.optimizer_step(opt)


            if __name__ == "__main__":
                main()
            """,
            fixed="""
            import torch_xla.core.xla_model as xm


            def main():
                xm.optimizer_step(opt)


            def _mp_fn(index):
                # The entry point of XLA launchers (xla_spawn.py, SageMaker), which pass the process index.
                main()


            if __name__ == "__main__":
                main()
            """,
            count=1,
        ),
        Invalid(
            """
            import torch_xla.runtime as xr
            from torch.utils.data.distributed import DistributedSampler
            def main(rank):
                DistributedSampler(ds, num_replicas=xr.world_size(), rank=rank)
            if __name__ == "__main__":
                main(0)
            """,
            fixed="""
            import torch_xla.runtime as xr
            from torch.utils.data.distributed import DistributedSampler
            def main(rank):
                DistributedSampler(ds, num_replicas=xr.world_size(), rank=rank)


            def _mp_fn(index):
                # The entry point of XLA launchers (xla_spawn.py, SageMaker), which pass the process index.
                main(index)


            if __name__ == "__main__":
                main(0)
            """,
            count=1,
        ),
        # The entry function is `train`, not `main`; `_mp_fn` calls it (the rest of the block is not run).
        Invalid(
            """
            import torch_xla.runtime as xr


            def train():
                print(xr.global_ordinal())


            if __name__ == "__main__":
                torch.manual_seed(0)
                train()
            """,
            fixed="""
            import torch_xla.runtime as xr


            def train():
                print(xr.global_ordinal())


            def _mp_fn(index):
                # The entry point of XLA launchers (xla_spawn.py, SageMaker), which pass the process index.
                train()


            if __name__ == "__main__":
                torch.manual_seed(0)
                train()
            """,
            count=1,
        ),
        # An HF Trainer subclass; `main(args)` needs arguments `_mp_fn` cannot give: no fix.
        Invalid(
            """
            import sys
            from transformers import Trainer
            class MyTrainer(Trainer):
                pass
            def main(args):
                MyTrainer(model=model, args=args).train()
            if __name__ == "__main__":
                sys.exit(main(parse()))
            """,
            count=1,
        ),
    ]

    def begin(self) -> None:
        # (a) function -> how many positional arguments the launcher passes it; a
        # function may be both `_mp_fn` and spawned, so it is judged once, in finish().
        self.entries: dict[FunctionDef, int] = {}
        if not self.ctx.semantic.imports.binds_any(SPAWN_ROOTS):
            self.skipped_visits.add(ast.Call)  # no call can be a launcher

    def finish(self) -> None:
        for func, needed in self.entries.items():
            self.check_entry(func, needed)
        self.check_entry_point()

    # -- (a) functions the launcher calls ------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        if self.ctx.semantic.call_name(node) not in SPAWN:
            return
        fn = node.args[0] if node.args else getattr(keyword(node, "fn"), "value", None)
        args = node.args[1] if len(node.args) > 1 else getattr(keyword(node, "args"), "value", None)
        extra = len(args.elts) if isinstance(args, ast.Tuple) else 0 if args is None else None
        if extra is None:
            return  # `args=some_tuple`: cannot count what the launcher passes
        if isinstance(fn, ast.Lambda):
            self.check_lambda(fn, 1 + extra)
        elif isinstance(fn, ast.Name):
            target = self.function_named(fn.id, node)
            if target is not None:
                self.entries[target] = max(self.entries.get(target, 0), 1 + extra)

    def visit_FunctionDef(self, node: FunctionDef) -> None:
        if node.name == "_mp_fn" and node in self.ctx.tree.body:
            self.entries[node] = max(self.entries.get(node, 0), 1)

    visit_AsyncFunctionDef = visit_FunctionDef

    def function_named(self, name: str, call: ast.Call) -> FunctionDef | None:
        """The function ``name`` defined in the module, or beside the call (a nested
        ``def`` in the function that spawns)."""
        scope: ast.AST | None = call
        while scope is not None:
            scope = getattr(scope, "parent", None)
            body = getattr(scope, "body", None)
            if isinstance(body, list):
                for stmt in body:
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                        return stmt
        return None

    def check_entry(self, func: FunctionDef, needed: int) -> None:
        accepted = _positional_count(func)
        if accepted is None or accepted >= needed:
            return
        message = (
            f"`{func.name}` is called as `{func.name}(index{', *args' if needed > 1 else ''})` by the XLA "
            "launcher but takes no process index"
        )
        if self.called_directly(func):
            # A new first parameter would break those calls: leave it to the author.
            self.report(func, f"{message} (no fix: also called directly)")
            return
        taken = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
        param = next(n for n in ("index", "process_index", "_index") if n not in taken)
        fix = self.fix("safe", f"Add a `{param}` parameter", AddParameter(self.ctx.header_span(func), param))
        self.report(func, message, fix=fix)

    def called_directly(self, func: FunctionDef) -> bool:
        return any(isinstance(c.func, ast.Name) and c.func.id == func.name for c in self.ctx.semantic.calls)

    def check_lambda(self, fn: ast.Lambda, needed: int) -> None:
        accepted = _positional_count(fn)
        if accepted is None or accepted >= needed:
            return
        fix = None
        if not (fn.args.args or fn.args.posonlyargs or fn.args.kwonlyargs or fn.args.kwarg):
            op = ReplaceExpr(self.ctx.span(fn), "lambda index: {body}", (("body", self.ctx.span(fn.body)),))
            fix = self.fix("safe", "Add an `index` parameter", op)
        self.report(fn, "The XLA launcher calls this lambda with the process index, but it takes none", fix=fix)

    # -- (b) entry-point scripts without `_mp_fn` ----------------------------------------
    def check_entry_point(self) -> None:
        tree, sem = self.ctx.tree, self.ctx.semantic
        guard = next((s for s in tree.body if _is_main_guard(s)), None)
        if guard is None or "_mp_fn" in sem.module_functions:
            return
        entry = self.entry_function(guard)
        if entry is None or calls_to(sem, SPAWN | USE_SPMD):
            return
        if (
            not (self.uses_multiprocess_api() and not self.reads_torchrun_environment())
            and not self.builds_hf_trainer()
        ):
            return
        required = _required(entry)
        message = "no module-level `_mp_fn(index)`, which XLA launchers (xla_spawn.py, SageMaker) call"
        positional = {a.arg for a in (*entry.args.posonlyargs, *entry.args.args)}
        if not required or (len(required) == 1 and required[0] in INDEX_NAMES and required[0] in positional):
            call = f"{entry.name}(index)" if required else f"{entry.name}()"
            code = (
                "def _mp_fn(index):\n"
                "    # The entry point of XLA launchers (xla_spawn.py, SageMaker), which pass the process index.\n"
                f"    {call}\n"
            )
            op = InsertStatement(self.ctx.header_span(guard), code, where="before")
            self.report(guard, message, fix=self.fix("safe", f"Add `_mp_fn(index)` calling `{call}`", op))
        else:
            names = "`, `".join(required[:2]) + ("`, ..." if len(required) > 2 else "`")
            self.report(guard, f"{message} (no fix: `{entry.name}` needs `{names})")

    def entry_function(self, guard: ast.If) -> FunctionDef | None:
        """The module-level function the ``__main__`` block runs the program with: ``main``
        wherever the block calls it, else the last module-level function it calls as a
        statement of its own (``train()``, ``sys.exit(run(args))``)."""
        functions = self.ctx.semantic.module_functions
        called = [
            n.func.id
            for n in ast.walk(guard)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in functions
        ]
        if "main" in called:
            return functions["main"]
        entries = [name for stmt in guard.body if (name := _called_by_statement(stmt)) in functions]
        return functions[entries[-1]] if entries else None

    def uses_multiprocess_api(self) -> bool:
        sem = self.ctx.semantic
        if not sem.imports.imports_module("torch_xla"):
            return False
        if calls_to(sem, MULTIPROCESS_APIS):
            return True
        for call in calls_to(sem, frozenset({INIT_PROCESS_GROUP})):
            backend = call.args[0] if call.args else getattr(keyword(call, "backend"), "value", None)
            if string_value(backend) == "xla":
                return True
        return False

    def reads_torchrun_environment(self) -> bool:
        """The script reads what torchrun sets (``os.environ["LOCAL_RANK"]``,
        ``os.getenv("LOCAL_WORLD_SIZE")``): torchrun starts it as it is, one process per
        device, with no ``_mp_fn``."""
        for node in ast.walk(self.ctx.tree):
            if isinstance(node, ast.Subscript):
                key = node.slice
            elif isinstance(node, ast.Call) and node.args:
                key = node.args[0]
            else:
                continue
            if string_value(key) in TORCHRUN_VARIABLES:
                return True
        return False

    def builds_hf_trainer(self) -> bool:
        sem = self.ctx.semantic
        if calls_to(sem, HF_TRAINERS):
            return True
        return any(
            isinstance(node, ast.ClassDef) and any(sem.qualified_name(b) in HF_TRAINERS for b in node.bases)
            for node in ast.walk(self.ctx.tree)
        )
