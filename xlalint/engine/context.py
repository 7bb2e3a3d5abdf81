"""What a rule may know about the module being checked: its text, tree, settings, the
semantic layer, and the analyses (``steps``, ``loop_state``, ``distributed``, ``parallelism``,
``growing``, ``ranks``, ``launch``, ``tokenizers``, ``training_objects``, ``devices``, ``project``) built on
first use.

The analyses are given what they need (the semantic layer, each other), never the
context: this module imports them, they do not import it.
"""

from __future__ import annotations

import ast
from functools import cached_property
from typing import TYPE_CHECKING

from xlalint.analysis import told
from xlalint.analysis.devices import DeviceAnalysis
from xlalint.analysis.distributed import DistributedAnalysis
from xlalint.analysis.growing import GrowingTensors
from xlalint.analysis.launch import LaunchAnalysis
from xlalint.analysis.loop_state import LoopStateAnalysis
from xlalint.analysis.parallelism import ParallelismAnalysis
from xlalint.analysis.project import ProjectView
from xlalint.analysis.ranks import RankAnalysis
from xlalint.analysis.semantic import Semantic
from xlalint.analysis.steps import StepAnalysis
from xlalint.analysis.tokenizers import Tokenizers
from xlalint.analysis.training_objects import TrainingObjects
from xlalint.engine import source as sourcefile
from xlalint.engine.runtimes import TORCH_TPU
from xlalint.model import Import, Span, split_lines

if TYPE_CHECKING:
    from xlalint.engine.config import Settings


class Context:
    """What a rule may know about the module being checked."""

    def __init__(
        self,
        source: str,
        path: str,
        tree: ast.Module,
        settings: Settings,
        nodes: list[ast.AST] | None = None,
        semantic: Semantic | None = None,
    ):
        self.source = source
        self.path = path
        self.tree = tree
        self.settings = settings
        self.semantic = semantic or Semantic(tree, nodes, settings.iterated_by_importers)

    def ported(self) -> Context:
        """The context of this module once the port imports torch_xla (the fact that
        makes a file an XLA script; see ``engine.lint``'s findings after the port). The
        step analysis built here is shared, not built again: nothing it finds depends
        on what the module imports but ``timm`` (``step_apis``), and the port adds only
        ``torch_xla`` (its names are bound as they were); so is what the semantic layer
        found (``Semantic.importing``)."""
        ported = Context(
            self.source, self.path, self.tree, self.settings, semantic=self.semantic.importing("torch_xla")
        )
        if "steps" in self.__dict__:  # built on first use (a cached_property)
            ported.__dict__["steps"] = self.steps
        return ported

    def release(self) -> None:
        """Let go of the tree and the analyses once the module is checked. Some analyses
        hold the context (``distributed``'s ``steps``, built on its first use), so
        without this the tree waited for the cyclic collector, which then traversed all
        of it: in the language server, a sixth of a large document's lint."""
        steps = self.__dict__.get("steps")  # shared with the ported context
        if steps is not None and steps.__dict__:
            steps.release()
        self.__dict__.clear()

    @cached_property
    def lines(self) -> list[str]:
        """The physical lines of the source, split on first use: most modules report
        nothing and never need them."""
        return split_lines(self.source)

    @property
    def in_xla_program(self) -> bool:
        """The module uses torch_xla, or a script that does (after its port) imports it
        (``Settings.xla_program``, set when imports are followed)."""
        return self.settings.xla_program or self.distributed.uses_xla

    @property
    def target_version(self) -> tuple[int, int]:
        return self.settings.target_version

    @property
    def on_torch_tpu(self) -> bool:
        """The port targets TorchTPU (``target-runtime = "torch-tpu"``), not torch_xla."""
        return self.settings.target_runtime == TORCH_TPU

    @cached_property
    def steps(self) -> StepAnalysis:
        """The step analysis (training loops, the step, sync points), built on first use."""
        return StepAnalysis(self.semantic)

    @cached_property
    def loop_state(self) -> LoopStateAnalysis:
        """The loops that are not training loops but carry device tensors across
        iterations (evaluation, sampling), built on first use."""
        return LoopStateAnalysis(self.semantic, self.steps)

    @cached_property
    def distributed(self) -> DistributedAnalysis:
        """The multi-process analysis (training loaders, optimizer steps and gradient
        reduction, model wrappers), built on first use."""
        return DistributedAnalysis(
            self.semantic, lambda: self.steps, self.parallelism, self.settings.iterated_by_importers
        )

    @cached_property
    def parallelism(self) -> ParallelismAnalysis:
        """The parallelism the file uses (multi-process, DDP, XLA FSDP, SPMD), built on first use."""
        return ParallelismAnalysis(self.semantic, self.training_objects)

    @cached_property
    def growing(self) -> GrowingTensors:
        """The tensors a loop grows with ``torch.cat`` and feeds to a model, built on first use."""
        return GrowingTensors(self.semantic, self.steps.is_module)

    @cached_property
    def ranks(self) -> RankAnalysis:
        """The values that differ between processes (ranks, ordinals), built on first use."""
        return RankAnalysis(self.semantic)

    @cached_property
    def launch(self) -> LaunchAnalysis:
        """What the parent process runs before it starts its workers, built on first use."""
        return LaunchAnalysis(self.semantic, self.parallelism)

    @cached_property
    def tokenizers(self) -> Tokenizers:
        """Which expressions are tokenizers and which calls encode text, built on first use."""
        return Tokenizers(self.semantic)

    @cached_property
    def training_objects(self) -> TrainingObjects:
        """The models, optimizers and moves of models to the XLA device, built on first use."""
        return TrainingObjects(self.semantic, self.project, self.devices)

    @cached_property
    def project(self) -> ProjectView:
        """The local modules the module imports (``from model import Transformer``), found
        from its path and read only when a rule asks about one."""
        return ProjectView(self.path, self.settings.root, self.semantic, sourcefile.read_module_text)

    def iterated_imports(self) -> list[tuple[int, str]]:
        """What this module tells the local modules it imports: the functions of theirs
        whose results a step loop here iterates (``loader = prepare_dataloader(32)``,
        ``from data import prepare_dataloader``), or whose results the scripts that
        import this module iterate (a re-export), as (level, dotted name), sorted
        (``project.resolve_functions`` finds their files); and the step callables this
        module passes their functions (``engine.train_one_epoch(5=update)``: a fact past
        the name, ``analysis/told.py``). Empty, without any analysis, when the module
        imports nothing that may be local."""
        if not self.project.may_import_local():
            return []
        found = set()
        if self.semantic.imports.imports_any():  # else no step loop: torch is not imported
            found = {self.project.origin(call.func) for call in self.distributed.iterated_calls}
        if self.semantic.imports.imports_any() or self.semantic.told:
            # A parameter the importers bind is passed on from a module that need not
            # import torch (``trainer.fit(..., scaler)`` -> ``engine.train_one_epoch``).
            found.update(self._step_callables_passed())
        # A name the importers were told of that an import binds here (`from .data import
        # prepare_dataloader` in `pkg/__init__.py`) is told on to the module it comes from,
        # with what was told of it (``analysis/told.py``).
        defined = {function.name for function in self.distributed.functions_iterated_by_importers}
        for fact in self.settings.iterated_by_importers:
            name = told.function_of(fact)
            if fact in defined or (fact != name and name in self.semantic.module_functions):
                continue
            origin = self.project.origin(ast.Name(id=name, ctx=ast.Load()))
            if origin is not None:
                found.add((origin[0], origin[1] + told.suffix_of(fact)))
        return sorted(origin for origin in found if origin is not None)

    def _step_callables_passed(self) -> set[tuple[int, str]]:
        """The step callables this module passes to the functions of the local modules it
        imports (``train_one_epoch(..., loss_scaler, ...)``, ``from engine import
        train_one_epoch``), as facts about those functions (``told.bound_fact``), by
        (level, dotted name): one look at each call that passes arguments."""
        found: set[tuple[int, str]] = set()
        for call in self.semantic.calls:
            if not (call.args or call.keywords):
                continue
            origin = self.project.origin(call.func)
            if origin is None:
                continue
            for parameter, kind in self.steps.step_callables_passed(call):
                found.add((origin[0], told.bound_fact(origin[1], parameter, kind)))
        return found

    @cached_property
    def devices(self) -> DeviceAnalysis:
        """The device analysis (which expression is a device, what a variable holds), built on first use."""
        return DeviceAnalysis(self.tree, self.semantic)

    def span(self, node: ast.AST) -> Span:
        return Span.of(node, self.lines)

    def reference(
        self, qualified: str, preferred: str | None = None, at: ast.AST | None = None
    ) -> tuple[str, tuple[Import, ...]]:
        """How to spell ``qualified`` in a fix placed at node ``at``, and the imports that
        needs. A name already bound there to something else (``xm = 5``, a parameter
        ``torch_xla``) is never reused: the import gets a fresh alias (``xm_1``). Without
        ``at``, a name bound anywhere in the file counts as taken."""
        return self.semantic.imports.reference(qualified, preferred, self.semantic.names_at(at))

    def reference_object(self, qualified: str, at: ast.AST | None = None) -> tuple[str, tuple[Import, ...]]:
        """How to spell a class or function in a fix (``from module import name`` if needed)."""
        return self.semantic.imports.reference_object(qualified, self.semantic.names_at(at))

    def xla_api(self, new: str, old: str, at: ast.AST | None = None) -> tuple[str, tuple[Import, ...]]:
        """Code for an API that moved in torch_xla 2.4, e.g. ``xla_api("sync", "mark_step")``:
        ``torch_xla.sync`` for targets >= 2.4, ``xm.mark_step`` before (names as ``reference``)."""
        if self.target_version >= (2, 4):
            module, imports = self.reference("torch_xla", at=at)
            return f"{module}.{new}", imports
        module, imports = self.reference("torch_xla.core.xla_model", "xm", at)
        return f"{module}.{old}", imports

    def header_span(self, stmt: ast.AST) -> Span:
        """The header of a compound statement: ``for x in y``, ``def f``, ``if __name__ == ...``."""
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            last: ast.AST = stmt.iter
        elif isinstance(stmt, (ast.While, ast.If)):
            last = stmt.test
        elif isinstance(stmt, (ast.With, ast.AsyncWith)) and stmt.items:
            last = stmt.items[-1].context_expr
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            keyword = {"FunctionDef": "def ", "AsyncFunctionDef": "async def ", "ClassDef": "class "}
            start = Span.of(stmt, self.lines)
            return Span(start.line, start.col, start.line, start.col + len(keyword[type(stmt).__name__] + stmt.name))
        else:
            return Span(stmt.lineno, Span.of(stmt, self.lines).col, stmt.lineno, len(self.lines[stmt.lineno - 1]))
        start, end = Span.of(stmt, self.lines), Span.of(last, self.lines)
        return Span(start.line, start.col, end.end_line, end.end_col)

    def source_of(self, node: ast.AST) -> str:
        """The source text of ``node``, as ``ast.get_source_segment`` gives it, from line
        offsets found once per file (that function splits the whole file on every call)."""
        if getattr(node, "end_lineno", None) is None or getattr(node, "end_col_offset", None) is None:
            return ""
        span = Span.of(node, self.lines)
        starts = self._line_starts
        return self.source[starts[span.line - 1] + span.col : starts[span.end_line - 1] + span.end_col]

    @cached_property
    def _line_starts(self) -> list[int]:
        """Where each physical line starts in ``source`` (a character offset)."""
        starts = [0]
        for line in split_lines(self.source, keepends=True):
            starts.append(starts[-1] + len(line))
        return starts
