"""Values that differ between processes: ranks, ordinals, "am I the main process".

An expression *differs between processes* when it reads one of:

- a call of a rank API: ``xm.is_master_ordinal()``, ``xm.get_ordinal()``,
  ``xm.get_local_ordinal()``, ``xr.global_ordinal()``, ``xr.local_ordinal()``,
  ``xr.process_index()``, ``dist.get_rank()``;
- an attribute that names one (accelerate's ``accelerator.is_main_process``,
  ``is_local_main_process``, ``process_index``, ``local_process_index``; ``args.local_rank``),
  or ``os.environ["RANK"]``/``["LOCAL_RANK"]`` (also ``.get``/``os.getenv``);
- a variable assigned from one (``rank = xr.global_ordinal()``, ``is_master = rank == 0``,
  ``self.rank = ...``), followed transitively within the file;
- the index the launcher passes to each worker (the first parameter of the function given
  to ``xmp.spawn``/``torch_xla.launch``/``torch.multiprocessing.spawn``), a parameter named
  ``rank``/``local_rank``/``global_rank``/``ordinal``, or a parameter that every call site
  in the module fills with a value that differs.

A comparison of such a value with one no rank takes asks only whether this is a
distributed launch, which every process answers alike: ``int(os.environ.get("RANK",
-1)) != -1``, ``args.local_rank == -1``, ``rank >= 0``, ``rank < 0``, ``rank is None``,
``os.environ.get("RANK") is not None`` (and ``"RANK" in os.environ`` reads no rank).

A *rank test* is the test of an ``if``/``while``/conditional expression that differs, or
an ``if <rank test>: return`` (``continue``/``break``/``raise``) before a statement in
its block. Flow-insensitive within one file, like ``xlalint.linter.values``.

Built once per module on first use (``Context.ranks``).
"""

from __future__ import annotations

import ast

from xlalint.linter.semantic import Semantic, ancestors, string_value
from xlalint.linter.values import FUNCTIONS, call_sites, enclosing, enclosing_scopes, parameter_names, passed_argument

XM = "torch_xla.core.xla_model"
RANK_CALLS = frozenset(
    {
        f"{XM}.is_master_ordinal",
        f"{XM}.get_ordinal",
        f"{XM}.get_local_ordinal",
        "torch_xla.runtime.global_ordinal",
        "torch_xla.runtime.local_ordinal",
        "torch_xla.runtime.process_index",
        "torch.distributed.get_rank",
        "torch.distributed.distributed_c10d.get_rank",
    }
)
RANK_ATTRIBUTES = frozenset(
    {"is_main_process", "is_local_main_process", "process_index", "local_process_index", "local_rank"}
)
RANK_PARAMETERS = frozenset({"rank", "local_rank", "global_rank", "ordinal"})
RANK_ENVIRONMENT = frozenset({"RANK", "LOCAL_RANK"})
LAUNCHERS = frozenset(
    {
        "torch_xla.distributed.xla_multiprocessing.spawn",
        "torch_xla.launch",
        "torch.multiprocessing.spawn",
    }
)
_EXITS = (ast.Return, ast.Continue, ast.Break, ast.Raise)
_MAX_ROUNDS = 4


class RankAnalysis:
    """Which names hold a per-process value, and which tests differ between processes."""

    def __init__(self, semantic: Semantic):
        self.semantic = semantic
        #: Per scope (function or module; a class for ``self.<attr>``), the names that
        #: hold a per-process value; None until first asked.
        self._known: dict[int, set[str]] | None = None

    @property
    def _names(self) -> dict[int, set[str]]:
        if self._known is None:
            self._known = {}
            self._find_names(self._known)
        return self._known

    def _find_names(self, names: dict[int, set[str]]) -> None:
        """Seeds, then assignments and call sites to a fixed point (``differs`` reads the
        names found so far while this runs)."""
        functions = self.semantic.nodes_of(*FUNCTIONS)
        for function in functions:
            seeds = parameter_names(function) & RANK_PARAMETERS
            if seeds:
                names.setdefault(id(function), set()).update(seeds)
        for call in self.semantic.calls:
            if self.semantic.call_name(call) in LAUNCHERS and call.args and isinstance(call.args[0], ast.Name):
                target = self.semantic.module_functions.get(call.args[0].id)
                if target is not None and (target.args.posonlyargs or target.args.args):
                    first = (*target.args.posonlyargs, *target.args.args)[0].arg
                    names.setdefault(id(target), set()).add(first)
        assignments = self.semantic.nodes_of(ast.Assign, ast.AnnAssign)
        for _round in range(_MAX_ROUNDS):
            changed = False
            for node in assignments:
                if node.value is None or not self.differs(node.value):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    changed |= self._bind(target)
            for function in functions:
                changed |= self._bind_parameters(function)
            if not changed:
                break

    def differs(self, expr: ast.AST | None) -> bool:
        """``expr`` reads a value that differs between processes (see the module docstring)."""
        if expr is None:
            return False
        known = self._names
        stack = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Compare) and _asks_whether_launched(node):
                continue  # the same on every process, whatever the rank reads
            stack.extend(ast.iter_child_nodes(node))
            if isinstance(node, ast.Call):
                if self.semantic.call_name(node) in RANK_CALLS or _reads_rank_environment(node):
                    return True
            elif isinstance(node, ast.Attribute):
                if node.attr in RANK_ATTRIBUTES:
                    return True
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    cls = enclosing(node, ast.ClassDef)
                    if cls is not None and f"self.{node.attr}" in known.get(id(cls), ()):
                        return True
            elif isinstance(node, ast.Subscript):
                if _is_environ(node.value) and string_value(node.slice) in RANK_ENVIRONMENT:
                    return True
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                for scope in enclosing_scopes(node):
                    if node.id in known.get(id(scope), ()):
                        return True
        return False

    def rank_test(self, node: ast.AST, depth: int = 0) -> ast.AST | None:
        """The test that decides, differently in each process, whether ``node`` runs: the
        ``if``/``while``/conditional expression around it, an earlier
        ``if <test>: return`` in a block around it (the ``if`` is returned), or, in a
        function that the module calls only under such tests, the test of its first
        call. None when every process runs it (as far as this file shows)."""
        child = node
        for anc in ancestors(node):
            if isinstance(child, ast.stmt):
                exit_test = self._earlier_exit(anc, child)
                if exit_test is not None:
                    return exit_test
            if isinstance(anc, FUNCTIONS):
                return self._test_of_every_call(anc, depth)
            if isinstance(anc, (ast.Lambda, ast.ClassDef)):
                return None
            if isinstance(anc, (ast.If, ast.While, ast.IfExp)) and child is not anc.test and self.differs(anc.test):
                return anc
            child = anc
        return None

    def _test_of_every_call(self, function: ast.FunctionDef | ast.AsyncFunctionDef, depth: int) -> ast.AST | None:
        if depth >= _MAX_ROUNDS:
            return None
        tests = [self.rank_test(site, depth + 1) for site in call_sites(function, self.semantic)]
        return tests[0] if tests and all(tests) else None

    def _earlier_exit(self, block_owner: ast.AST, stmt: ast.stmt) -> ast.If | None:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(block_owner, field, None)
            if isinstance(block, list) and stmt in block:
                for earlier in block[: block.index(stmt)]:
                    if (
                        isinstance(earlier, ast.If)
                        and earlier.body
                        and isinstance(earlier.body[-1], _EXITS)
                        and self.differs(earlier.test)
                    ):
                        return earlier
        return None

    def _bind(self, target: ast.AST) -> bool:
        if isinstance(target, ast.Name):
            scope = next(enclosing_scopes(target))
            return _add(self._names, scope, target.id)
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            cls = enclosing(target, ast.ClassDef)
            return cls is not None and _add(self._names, cls, f"self.{target.attr}")
        if isinstance(target, (ast.Tuple, ast.List)):
            return False  # `rank, world = ...`: which element differs is not known
        return False

    def _bind_parameters(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A parameter that every call site fills with a value that differs."""
        sites = list(call_sites(function, self.semantic))
        if not sites:
            return False
        changed = False
        for name in parameter_names(function) - self._names.get(id(function), set()):
            values = [passed_argument(site, function, name) for site in sites]
            if all(v is not None and self.differs(v) for v in values):
                changed |= _add(self._names, function, name)
        return changed


def paired(a: ast.AST, b: ast.AST) -> bool:
    """Rank tests ``a`` and ``b`` (as ``rank_test`` returns them) are two different tests:
    around the same collective in one function they are taken as a pair that lets every
    process reach one of the two. HF's ``main_process_first``: ``if not main: barrier()``,
    the work, ``if main: barrier()``; ``torch_distributed_zero_first`` with
    ``local_rank not in [-1, 0]`` and ``local_rank == 0``."""
    return isinstance(a, ast.If) and isinstance(b, ast.If) and a is not b and ast.dump(a.test) != ast.dump(b.test)


def _add(names: dict[int, set[str]], scope: ast.AST, name: str) -> bool:
    bound = names.setdefault(id(scope), set())
    if name in bound:
        return False
    bound.add(name)
    return True


def _asks_whether_launched(compare: ast.Compare) -> bool:
    """``<rank> <op> <bound>`` with the same result for every rank (ranks are integers from
    0; no arithmetic on the rank side): ``== -1``, ``!= -1``, ``>= 0``, ``> -1``, ``< 0``, ``<= -1``, ``is None``,
    ``is not None``, either way round."""
    if len(compare.ops) != 1:
        return False
    op, left, right = compare.ops[0], compare.left, compare.comparators[0]
    if _bound(left) is not None and _bound(right) is None:
        op, left, right = _MIRRORED.get(type(op), type(op))(), right, left
    bound = _bound(right)
    if bound is None or any(isinstance(n, ast.BinOp) for n in ast.walk(left)):
        return False  # `rank - 1 == -1` is `rank == 0`
    if bound == "None":
        return isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq))
    uniform = {
        ast.Eq: bound < 0,
        ast.NotEq: bound < 0,
        ast.GtE: bound <= 0,
        ast.Gt: bound < 0,
        ast.Lt: bound <= 0,
        ast.LtE: bound < 0,
    }
    return uniform.get(type(op), False)


_MIRRORED = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}


def _bound(node: ast.AST) -> int | float | str | None:
    """The number a literal stands for (``-1``), ``"None"`` for ``None``, else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _bound(node.operand)
        return -inner if isinstance(inner, (int, float)) else None
    if isinstance(node, ast.Constant):
        if node.value is None:
            return "None"
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
    return None


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _reads_rank_environment(call: ast.Call) -> bool:
    """``os.environ.get("RANK")``, ``os.getenv("LOCAL_RANK")``."""
    func = call.func
    if not isinstance(func, ast.Attribute) or not call.args:
        return False
    is_get = (func.attr == "get" and _is_environ(func.value)) or func.attr == "getenv"
    return is_get and string_value(call.args[0]) in RANK_ENVIRONMENT
