"""Values that differ between processes: ranks, ordinals, "am I the main process".

An expression *differs between processes* when it reads one of:

- a call of a rank API: ``xm.is_master_ordinal()``, ``xm.get_ordinal()``,
  ``xm.get_local_ordinal()``, ``xr.global_ordinal()``, ``xr.local_ordinal()``,
  ``xr.process_index()``, ``dist.get_rank()``;
- an attribute that names one (accelerate's ``accelerator.is_main_process``,
  ``is_local_main_process``, ``process_index``, ``local_process_index``; ``args.local_rank``),
  or ``os.environ["RANK"]``/``["LOCAL_RANK"]`` (also ``.get``/``os.getenv``);
- a variable the rank reaches through its data (``rank = xr.global_ordinal()``,
  ``is_master = rank == 0``, ``self.rank = ...``, ``x = loss if rank == 0 else 0``), or
  assigned under a test that differs (``if rank == 0: should_log = True``), followed
  transitively within the file (``RankTaint``). Not a text built from the rank (a log
  message, a checkpoint path ``f"ckpt_rank{rank}.pt"``), nor a checkpoint read from such
  a path (``global_step = torch.load(path)["step"]`` is the same on every process);
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
its block. Flow-insensitive within one file, like ``xlalint.analysis.values``.

Built once per module on first use (``Context.ranks``).
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator

from xlalint.analysis.reaching import reaching_values
from xlalint.analysis.semantic import Semantic, ancestors, enclosing_statement, string_value
from xlalint.analysis.values import FUNCTIONS, call_sites, enclosing, enclosing_scopes, parameter_names, passed_argument

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
_MAX_CALL_DEPTH = 4
# Reading a checkpoint gives what was saved (a step counter, weights), whichever
# process's file the path names.
CHECKPOINT_LOADS = frozenset(
    {
        "torch.load",
        "torch.serialization.load",
        "torch_xla.utils.serialization.load",
        "safetensors.torch.load_file",
        "safetensors.torch.load",
        "torch.distributed.checkpoint.load",
        "torch.distributed.checkpoint.load_state_dict",
    }
)
_GUARDS = (ast.If, ast.While)
_SCOPE_ENDS = (*FUNCTIONS, ast.ClassDef, ast.Lambda, ast.Module)


class RankTaint:
    """Which names hold a value that differs between processes: a data-flow over the
    module's assignments.

    The rank reaches a name through its data: ``rank = xr.global_ordinal()``,
    ``is_master = rank == 0``, ``x = loss if rank == 0 else 0``, an assignment under a
    test that differs (``if rank == 0: should_log = True``), a parameter that every call
    site fills with such a value. Not through text: an f-string, ``"...".format(...)``,
    ``"..." % ...`` or ``"..." + ...`` names a file or logs a message
    (``ckpt = f"ckpt_rank{rank}.pt"``), and a checkpoint read from that file
    (``torch.load(path)``) holds what every process saved (``global_step =
    ckpt["step"]``).

    Each definition (an assignment, or a parameter with the arguments of its call
    sites) is evaluated once, and again only when a name it reads, in a scope that name
    may resolve to, gains the taint; a name gains it at most once per scope. So each
    definition is evaluated at most once per name it reads, per scope around the read:
    linear in the module. Flow-insensitive, like ``xlalint.analysis.values``: a name that
    some assignment taints is tainted in its whole scope.
    """

    def __init__(self, semantic: Semantic):
        self.semantic = semantic
        #: Per scope (function or module; a class for ``self.<attr>``), the names that
        #: hold a per-process value.
        self.names: dict[int, set[str]] = {}
        self._readers: dict[tuple[int, str], list[_Definition]] = {}
        definitions = [*self._assignments(), *self._parameters()]
        for definition in definitions:
            for expr in definition.reads():
                self._register(expr, definition)
        pending: deque[_Definition] = deque(definitions)
        for scope, name in self._seeds():
            self._taint(scope, name, pending)
        while pending:
            pending.popleft().evaluate(self, pending)

    def holds(self, scope: ast.AST, name: str) -> bool:
        """``name`` (or ``self.<attr>`` in a class) holds a per-process value in ``scope``."""
        return name in self.names.get(id(scope), ())

    def differs(self, expr: ast.AST | None) -> bool:
        """``expr`` reads a value that differs between processes (see the module docstring).
        A name read where program order knows the assignments that reach it
        (``reaching_values``) differs only if one of those does, or runs under a test that
        differs: ``iter_num = checkpoint["iter_num"]`` after ``checkpoint =
        torch.load(...)`` is the same on every process, whatever the master assigns to
        ``checkpoint`` later. One step of order: the names those values read are judged
        for their whole scope."""
        return self._differs(expr, in_order=True)

    def _differs(self, expr: ast.AST | None, in_order: bool) -> bool:
        if expr is None:
            return False
        stack = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Compare) and _asks_whether_launched(node):
                continue  # the same on every process, whatever the rank reads
            if _is_text(node):
                continue  # a file name or a message, not a value tested
            if isinstance(node, ast.Call):
                name = self.semantic.call_name(node)
                if name in CHECKPOINT_LOADS:
                    continue
                if name in RANK_CALLS or _reads_rank_environment(node):
                    return True
            elif isinstance(node, ast.Attribute):
                if node.attr in RANK_ATTRIBUTES:
                    return True
                if isinstance(node.value, ast.Name) and node.value.id == "self":
                    cls = enclosing(node, ast.ClassDef)
                    if cls is not None and self.holds(cls, f"self.{node.attr}"):
                        return True
            elif isinstance(node, ast.Subscript):
                if _is_environ(node.value) and string_value(node.slice) in RANK_ENVIRONMENT:
                    return True
            elif (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and any(self.holds(scope, node.id) for scope in enclosing_scopes(node))
            ):
                reached = reaching_values(node) if in_order else None
                if reached is None or any(self._reaches_differing(value) for value in reached):
                    return True
            stack.extend(ast.iter_child_nodes(node))
        return False

    def _reaches_differing(self, value: ast.expr) -> bool:
        """A value that reaches a read differs, or is assigned under a test that differs."""
        statement = enclosing_statement(value)
        guards = _guards(statement) if statement is not None else ()
        return self._differs(value, in_order=False) or any(self._differs(g, in_order=False) for g in guards)

    def _bind(self, target: ast.AST, pending: deque[_Definition]) -> None:
        """Taint the name (or ``self.<attr>``) ``target`` stores to; a tuple's every element."""
        if isinstance(target, ast.Name):
            self._taint(next(enclosing_scopes(target)), target.id, pending)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            cls = enclosing(target, ast.ClassDef)
            if cls is not None:
                self._taint(cls, f"self.{target.attr}", pending)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._bind(element, pending)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, pending)

    # -- building -------------------------------------------------------------------------
    def _taint(self, scope: ast.AST, name: str, pending: deque[_Definition]) -> None:
        bound = self.names.setdefault(id(scope), set())
        if name not in bound:
            bound.add(name)
            pending.extend(self._readers.get((id(scope), name), ()))

    def _register(self, expr: ast.AST, definition: _Definition) -> None:
        """``definition`` reads the names in ``expr``: evaluate it again when one gains the taint."""
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                for scope in enclosing_scopes(node):
                    self._readers.setdefault((id(scope), node.id), []).append(definition)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                cls = enclosing(node, ast.ClassDef)
                if cls is not None:
                    self._readers.setdefault((id(cls), f"self.{node.attr}"), []).append(definition)

    def _seeds(self) -> Iterator[tuple[ast.AST, str]]:
        """Parameters named for the rank, and the index a launcher passes to its function."""
        for function in self.semantic.nodes_of(*FUNCTIONS):
            for name in parameter_names(function) & RANK_PARAMETERS:
                yield function, name
        for call in self.semantic.calls:
            if self.semantic.call_name(call) in LAUNCHERS and call.args and isinstance(call.args[0], ast.Name):
                target = self.semantic.module_functions.get(call.args[0].id)
                if target is not None and (target.args.posonlyargs or target.args.args):
                    yield target, (*target.args.posonlyargs, *target.args.args)[0].arg

    def _assignments(self) -> Iterator[_Assignment]:
        for node in self.semantic.nodes_of(ast.Assign, ast.AnnAssign, ast.AugAssign):
            if node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            pairs = [pair for target in targets for pair in _pairs(target, node.value)]
            yield _Assignment(targets, tuple(pairs), tuple(_guards(node)))

    def _parameters(self) -> Iterator[_Parameter]:
        """A parameter with the arguments every call site passes it (none if a site
        passes nothing that can be told)."""
        for function in self.semantic.nodes_of(*FUNCTIONS):
            sites = list(call_sites(function, self.semantic))
            if not sites:
                continue
            for name in parameter_names(function) - RANK_PARAMETERS:
                arguments = [passed_argument(site, function, name) for site in sites]
                if all(argument is not None for argument in arguments):
                    yield _Parameter(function, name, tuple(arguments))  # type: ignore[arg-type]


class _Assignment:
    """``targets = value``: each (target, value) pair, and the tests it runs under."""

    def __init__(
        self, targets: list[ast.expr], pairs: tuple[tuple[ast.expr, ast.expr], ...], guards: tuple[ast.expr, ...]
    ):
        self.targets, self.pairs, self.guards = targets, pairs, guards

    def reads(self) -> Iterator[ast.expr]:
        yield from (value for _target, value in self.pairs)
        yield from self.guards

    def evaluate(self, taint: RankTaint, pending: deque[_Definition]) -> None:
        if any(taint.differs(guard) for guard in self.guards):
            for target in self.targets:
                taint._bind(target, pending)
            return
        for target, value in self.pairs:
            if taint.differs(value):
                taint._bind(target, pending)


class _Parameter:
    """A parameter, tainted when every call site fills it with a value that differs."""

    def __init__(self, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str, arguments: tuple[ast.expr, ...]):
        self.function, self.name, self.arguments = function, name, arguments

    def reads(self) -> Iterator[ast.expr]:
        yield from self.arguments

    def evaluate(self, taint: RankTaint, pending: deque[_Definition]) -> None:
        if all(taint.differs(argument) for argument in self.arguments):
            taint._taint(self.function, self.name, pending)


_Definition = _Assignment | _Parameter


def _pairs(target: ast.expr, value: ast.expr) -> Iterator[tuple[ast.expr, ast.expr]]:
    """(target, the part of the value it gets): ``rank, world = xr.global_ordinal(),
    xr.world_size()`` pairs element by element; a tuple unpacked from anything else
    pairs nothing (which element differs is not known)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        if (
            isinstance(value, (ast.Tuple, ast.List))
            and len(value.elts) == len(target.elts)
            and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts))
        ):
            for element, part in zip(target.elts, value.elts, strict=True):
                yield from _pairs(element, part)
        return
    yield target, value


def _guards(node: ast.stmt) -> Iterator[ast.expr]:
    """The tests of the ``if``/``while`` statements ``node`` runs under, in its scope."""
    child: ast.AST = node
    for anc in ancestors(node):
        if isinstance(anc, _SCOPE_ENDS):
            return
        if isinstance(anc, _GUARDS) and child is not anc.test:
            yield anc.test
        child = anc


def _is_text(node: ast.AST) -> bool:
    """An f-string, ``"...".format(...)``, ``"..." % x`` or ``"..." + x``: a text built
    from values, a file name or a message."""
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return string_value(node.func.value) is not None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return string_value(node.left) is not None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return any(
            string_value(side) is not None or isinstance(side, ast.JoinedStr) for side in (node.left, node.right)
        )
    return False


class RankAnalysis:
    """Which names hold a per-process value, and which tests differ between processes."""

    def __init__(self, semantic: Semantic):
        self.semantic = semantic
        self._taint: RankTaint | None = None

    @property
    def taint(self) -> RankTaint:
        """The data-flow of per-process values, built on first use."""
        if self._taint is None:
            self._taint = RankTaint(self.semantic)
        return self._taint

    def differs(self, expr: ast.AST | None) -> bool:
        """``expr`` reads a value that differs between processes (see ``RankTaint``)."""
        return self.taint.differs(expr)

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
        if depth >= _MAX_CALL_DEPTH:
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


def paired(a: ast.AST, b: ast.AST) -> bool:
    """Rank tests ``a`` and ``b`` (as ``rank_test`` returns them) are two different tests:
    around the same collective in one function they are taken as a pair that lets every
    process reach one of the two. HF's ``main_process_first``: ``if not main: barrier()``,
    the work, ``if main: barrier()``; ``torch_distributed_zero_first`` with
    ``local_rank not in [-1, 0]`` and ``local_rank == 0``."""
    return isinstance(a, ast.If) and isinstance(b, ast.If) and a is not b and ast.dump(a.test) != ast.dump(b.test)


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
