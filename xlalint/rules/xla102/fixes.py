"""XLA102's fixes: a statement that only logs runs in a step closure, after the sync
(safe), binding the values the step changes; ``total += loss.item()`` accumulates on the
device, ``total += loss.detach()`` (unsafe)."""

from __future__ import annotations

import ast

from xlalint.analysis.semantic import ancestors, dotted_name, enclosing_statement, method_name, parent
from xlalint.analysis.step_guards import guard_period, step_guard_test
from xlalint.analysis.steps import HOST_FETCH_METHODS, StepLoop
from xlalint.engine.context import Context
from xlalint.engine.rule import Rule
from xlalint.model import Fix, InsertStatement, RemoveStatement, ReplaceExpr
from xlalint.rules.xla102.host_reads import HostReads

# Python-level names that cannot be bound by a lambda default.
_UNBINDABLE = frozenset({"super", "__class__"})
# A closure longer than this goes in a `def` (the line length of ruff and black).
_LINE_LENGTH = 88
# Calls that end the process.
_EXITS = frozenset({"sys.exit", "exit", "quit", "os._exit", "os.abort"})
# Calls a logged value may make and still be read in a step closure, after the sync:
# they read, convert or format values, and run no model, no user code, no clock.
_READING_METHODS = frozenset(
    {
        *HOST_FETCH_METHODS,
        *("item", "detach", "float", "double", "half", "to", "clone", "view", "reshape", "squeeze", "flatten"),
        *("mean", "sum", "max", "min", "std", "var", "norm", "abs", "exp", "sqrt", "argmax", "argmin"),
        *("size", "dim", "numel", "format", "join", "get", "keys", "values", "items", "get_last_lr", "get_lr"),
    }
)
_READING_BUILTINS = frozenset(
    {"len", "round", "str", "repr", "float", "int", "bool", "abs", "min", "max", "sum", "format", "list", "tuple"}
)
_READING_MODULES = ("torch.", "math.", "numpy.")


class Fixes:
    """The fixes of one module's XLA102 findings (the ``def`` names they take are
    remembered per first statement and per scope)."""

    def __init__(self, ctx: Context, reads: HostReads):
        self.ctx = ctx
        self.reads = reads
        self._def_names: dict[int, str] = {}
        self._taken_in_scope: dict[int, set[str]] = {}

    def fix(self, node: ast.Call, loop: StepLoop) -> Fix | None:
        """The fix of a host read: a step closure for a statement that only logs, a
        ``.detach()`` for a sum of ``.item()``s, else None."""
        stmt = enclosing_statement(node)
        if self._closure_fixable(stmt) and _sync_follows(stmt, loop):  # type: ignore[arg-type]
            return self._closure_fix(stmt, loop)  # type: ignore[arg-type]
        if method_name(node) == "item" and isinstance(stmt, ast.AugAssign) and self._accumulates(node, stmt, loop):
            receiver = node.func.value  # type: ignore[union-attr]
            operation = ReplaceExpr(self.ctx.span(node), "{recv}.detach()", (("recv", self.ctx.span(receiver)),))
            return Rule.fix("unsafe", "Accumulate the tensor on the device (`.detach()`)", operation)
        return None

    def _closure_fixable(self, stmt: ast.AST | None) -> bool:
        """``stmt`` only logs, and may run later, in a step closure."""
        return (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and self.reads.is_log_call(stmt.value)
            and not self._leaves_before_sync(stmt)
            and _closure_names(stmt.value) is not None
            and self._only_reads(stmt.value)
            # `state["step"] += 1` after it: a closure run at the sync would read the new
            # value (binding `state` binds the same dict), so the log would be off by one.
            and not (_free_names(stmt.value) & _mutated_in_step(stmt))
        )

    def _only_reads(self, log: ast.Call) -> bool:
        """The values ``log`` logs are read, not computed: no call in its arguments runs
        the model or other code of the user's (``print(criterion(model(x), y).item())``).
        Run later in a closure, that code would see the parameters after the optimizer
        step, outside the ``no_grad``/autocast block around it, and as a graph of its own."""
        semantic = self.ctx.semantic
        for node in ast.walk(log):
            if node is log or not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in _READING_METHODS:
                continue
            if isinstance(func, ast.Name) and func.id in _READING_BUILTINS and not self.reads.shadowed(func.id):
                continue
            if (semantic.call_name(node) or "").startswith(_READING_MODULES):
                continue
            return False
        return True

    def _accumulates(self, item: ast.Call, stmt: ast.AugAssign, loop: StepLoop) -> bool:
        """``total += loss.item()`` may become ``total += loss.detach()``: the target is a
        plain variable (an attribute or item may be saved or serialized as a number:
        ``self.state.num_input_tokens_seen``), and nothing in the step reads it except
        under an every-N guard or in a statement that only logs (which gets a step
        closure): otherwise each read would copy the tensor to the host every step, as
        often as the ``.item()`` did, and more when several sums are read. A guard whose
        period is 1 (``if step % args.log_every == 0:`` with ``default=1``) runs every
        step: a read under it, even in a log statement, reads the sum every step."""
        if not (isinstance(stmt.target, ast.Name) and _summed(item, stmt)):
            return False
        name = stmt.target.id
        reads = [n for n in loop.nodes() if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
        if any(self._under_a_guard_of_every_step(n, loop) for n in reads):
            return False
        test = loop.node.test if isinstance(loop.node, ast.While) else None
        return not any(
            (loop.contains(n) or (test is not None and n in ast.walk(test)))
            and not self._closure_fixable(enclosing_statement(n))
            for n in reads
        )

    @staticmethod
    def _under_a_guard_of_every_step(node: ast.AST, loop: StepLoop) -> bool:
        """``node`` is under ``if step % N == 0:`` whose period ``N`` is known to be 1."""
        options = loop.analysis.options
        child = node
        for ancestor in ancestors(node):
            if ancestor is loop.node:
                return False
            if isinstance(ancestor, ast.If) and child is not ancestor.test:
                modulo = step_guard_test(ancestor.test)
                if modulo is not None and guard_period(modulo, options) == 1:
                    return True
            child = ancestor
        return False

    def _leaves_before_sync(self, stmt: ast.stmt) -> bool:
        """A later statement of the same block leaves the step (``raise``, ``return``,
        ``break``, ``sys.exit()``): a closure would run after a sync that may never
        come, and the message (often the reason for stopping) would be lost."""
        block = _block(stmt)
        if block is None:
            return False
        for later in block[block.index(stmt) + 1 :]:
            if isinstance(later, (ast.Raise, ast.Return, ast.Break)):
                return True
            if isinstance(later, ast.Expr) and isinstance(later.value, ast.Call):
                name = self.ctx.semantic.call_name(later.value) or dotted_name(later.value.func) or ""
                if name in _EXITS:
                    return True
        return False

    def _closure_fix(self, stmt: ast.Expr, loop: StepLoop) -> Fix | None:
        """Run a log call in a step closure, binding the values the step changes:
        ``xm.add_step_closure(lambda loss=loss: print(loss.item()))``, or, when that
        would not fit on a line, a small ``def`` passed with ``args=(...)``. Log
        statements on the lines around it that need a ``def`` too share it (they run
        in their order, and one name is bound, not one per statement)."""
        indent = self._indent(stmt)
        run = self._closure_run(stmt, loop)
        if len(run) > 1 and not all(self._fits_lambda(s.value, indent) for s in run):  # type: ignore[attr-defined]
            bodies = [self._def_body(s.value, indent) for s in run]  # type: ignore[attr-defined]
            if all(body is not None for body in bodies):
                return self._def_fix(run, bodies)  # type: ignore[arg-type]
        call = stmt.value
        if self._fits_lambda(call, indent):  # type: ignore[arg-type]
            xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm", at=call)
            bound = _bound_names([call])  # type: ignore[list-item]
            head = f"lambda {', '.join(f'{n}={n}' for n in bound)}:" if bound else "lambda:"
            call_span = self.ctx.span(call)
            operation = ReplaceExpr(call_span, f"{xm}.add_step_closure({head} {{call}})", (("call", call_span),))
            return Rule.fix("safe", "Run it in a step closure (after the sync)", operation, imports=imports)
        body = self._def_body(call, indent)  # type: ignore[arg-type]
        return self._def_fix([stmt], [body]) if body is not None else None

    def _def_fix(self, run: list[ast.Expr], bodies: list[str]) -> Fix:
        """``def log_step(<names>): <the statements>`` before the first statement of
        ``run``, which becomes ``xm.add_step_closure(log_step, args=(<names>))``; the
        others are removed."""
        first = run[0].value
        xm, imports = self.ctx.reference("torch_xla.core.xla_model", "xm", at=first)
        bound = _bound_names([s.value for s in run])  # type: ignore[misc]
        function = self._function_name(run[0])
        define = f"def {function}({', '.join(bound)}):\n" + "".join(f"    {body}\n" for body in bodies)
        args = f", args=({bound[0]},)" if len(bound) == 1 else f", args=({', '.join(bound)})" if bound else ""
        register = f"{xm}.add_step_closure({function}{args})"
        first_span = self.ctx.span(first)
        return Rule.fix(
            "safe",
            "Run it in a step closure (after the sync)",
            InsertStatement(first_span, _escape(define), "before"),
            ReplaceExpr(first_span, _escape(register)),
            *(RemoveStatement(self.ctx.span(other)) for other in run[1:]),
            imports=imports,
        )

    def _indent(self, stmt: ast.stmt) -> int:
        line = self.ctx.lines[stmt.lineno - 1]
        return len(line) - len(line.lstrip())

    def _def_body(self, call: ast.Call, indent: int) -> str | None:
        return _indented_continuation(call, self.ctx.source_of(call), indent)

    def _fits_lambda(self, call: ast.Call, indent: int) -> bool:
        """``xm.add_step_closure(lambda <names>: <call>)`` fits on one line."""
        text = self.ctx.source_of(call)
        names = _bound_names([call])
        head = f"lambda {', '.join(f'{n}={n}' for n in names)}:" if names else "lambda:"
        return "\n" not in text and indent + len(f"xm.add_step_closure({head} {text})") <= _LINE_LENGTH

    def _closure_run(self, stmt: ast.Expr, loop: StepLoop) -> list[ast.stmt]:
        """The log statements around ``stmt`` that go into one closure with it: the
        statements of its block on the lines right before and after it that also log a
        step tensor. A comment or blank line ends the run (a comment stays where it is)."""
        block = _block(stmt)
        if block is None or self._commented(stmt):
            return [stmt]
        first = last = block.index(stmt)
        while first > 0 and self._joins(block[first - 1], block[first], loop):
            first -= 1
        while last + 1 < len(block) and self._joins(block[last], block[last + 1], loop):
            last += 1
        return block[first : last + 1]

    def _joins(self, before: ast.stmt, after: ast.stmt, loop: StepLoop) -> bool:
        """Two statements on consecutive lines that both need a step closure."""
        return (
            before.end_lineno is not None
            and before.end_lineno + 1 == after.lineno
            and all(self._needs_closure(s, loop) and not self._commented(s) for s in (before, after))
        )

    def _needs_closure(self, stmt: ast.stmt, loop: StepLoop) -> bool:
        """``stmt`` only logs, and is reported for reading a step tensor on the host."""
        return self._closure_fixable(stmt) and any(
            isinstance(n, ast.Call)
            and self.reads.host_read(n, loop) is not None
            and self.reads.step_loop(n) is not None
            for n in ast.walk(stmt)
        )

    def _commented(self, stmt: ast.stmt) -> bool:
        """A ``#`` on the statement's lines (a comment, or a ``noqa`` for one of its
        findings, which must not be moved with the others)."""
        return any("#" in line for line in self.ctx.lines[stmt.lineno - 1 : stmt.end_lineno])

    def _function_name(self, first: ast.stmt) -> str:
        """``log_step``, or ``log_step_1``, ...: a name nothing binds where the ``def``
        goes and no other closure of this function took."""
        key = id(first)
        if key not in self._def_names:
            names_here = self.ctx.semantic.names_at(first)
            scope = next(
                (a for a in _ancestors(first) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module))),
                None,
            )
            taken = self._taken_in_scope.setdefault(id(scope), set())
            function, n = "log_step", 0
            while not names_here.free(function) or function in taken:
                n += 1
                function = f"log_step_{n}"
            taken.add(function)
            self._def_names[key] = function
        return self._def_names[key]


def _sync_follows(stmt: ast.stmt, loop: StepLoop) -> bool:
    """A step closure registered at ``stmt`` runs at a later sync. In a step loop that is
    the sync XLA103 keeps at the end of its body. In the optimizer-step loop around
    gradient-accumulation micro-steps, a statement after the micro-step loops is followed
    by no sync until the next iteration: the closure of the last iteration would never run
    (its line lost) without a sync later in the outer loop's body, or right after the
    loop, with no jump in between that skips it."""
    if not loop.micro_step_loops:
        return True
    if any(_within(stmt, micro.node) for micro in loop.micro_step_loops):
        return True
    if not _within(stmt, loop.node):
        return False  # in a helper: where its sync comes is not known
    end = (stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
    jumps = [node for node in ast.walk(loop.node) if isinstance(node, (ast.Break, ast.Return, ast.Raise))]
    later = [
        (point.lineno, point.col_offset)
        for point in loop.sync_points()
        if point is not loop.node and _within(point, loop.node) and (point.lineno, point.col_offset) >= end
    ]
    if later and not any(end <= (jump.lineno, jump.col_offset) < min(later) for jump in jumps):
        return True
    # A sync right after the loop: a `break` reaches it, a `return` or `raise` does not.
    block = _block(loop.node)
    if block is None or any(isinstance(jump, (ast.Return, ast.Raise)) for jump in jumps):
        return False
    for after in block[block.index(loop.node) + 1 :]:
        if isinstance(after, (ast.Return, ast.Raise)):
            return False
        if (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Call)
            and loop.analysis.is_sync_call(after.value)
        ):
            return True
    return False


def _within(node: ast.AST, outer: ast.AST) -> bool:
    return any(anc is outer for anc in _ancestors(node))


def _summed(item: ast.Call, stmt: ast.AugAssign) -> bool:
    """``total += loss.item()`` (or ``total -= 2 * loss.item()``): only arithmetic between
    the ``.item()`` and the ``+=``, so the sum can stay a tensor."""
    if not isinstance(stmt.op, (ast.Add, ast.Sub)):
        return False
    node: ast.AST | None = parent(item)
    child: ast.AST = item
    while node is not stmt:
        if not isinstance(node, (ast.BinOp, ast.UnaryOp)):
            return False
        child, node = node, parent(node)
    return child is stmt.value


def _free_names(expr: ast.AST) -> set[str]:
    """Names ``expr`` reads that it does not bind itself (comprehension variables, lambda
    parameters)."""
    loaded = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(expr):
        if isinstance(node, ast.Lambda):
            a = node.args
            bound.update(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if p)
    return loaded - bound


def _ancestors(node: ast.AST):
    current = parent(node)
    while current is not None:
        yield current
        current = parent(current)


def _shallow(scope: ast.AST):
    """The nodes of a scope, not those of nested functions, classes and comprehensions."""
    stack = list(ast.iter_child_nodes(scope)) if not isinstance(scope, ast.Lambda) else [scope.body]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(
            node,
            (
                ast.FunctionDef,
                ast.AsyncFunctionDef,
                ast.ClassDef,
                ast.Lambda,
                ast.ListComp,
                ast.SetComp,
                ast.DictComp,
                ast.GeneratorExp,
            ),
        ):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _closure_names(call: ast.Call) -> set[str] | None:
    """The names a log call reads that a closure must find, or None when it cannot be
    moved into one (it binds names itself, yields, awaits, calls ``super()``)."""
    if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(call)):
        return None
    names = _free_names(call)
    return None if names & _UNBINDABLE else names


def _bound_names(calls: list[ast.Call]) -> list[str]:
    """The names a closure running ``calls`` must bind: those they read that the step
    changes."""
    read = set().union(*(_closure_names(c) or set() for c in calls))
    return sorted(read & set().union(*(_rebound_in_step(c) for c in calls)))


def _block(stmt: ast.stmt) -> list[ast.stmt] | None:
    """The statement list ``stmt`` is in (a body, an ``else``, a ``finally``)."""
    container = parent(stmt)
    for field in ("body", "orelse", "finalbody"):
        candidate = getattr(container, field, None)
        if isinstance(candidate, list) and stmt in candidate:
            return candidate
    return None


def _mutated_in_step(node: ast.AST) -> set[str]:
    """The names whose items or attributes the step region around ``node`` assigns
    (``state["step"] += 1``, ``meter.count = n``): a closure that reads them later reads
    what the step wrote after ``node``."""
    region = _step_region(node)
    if region is None:
        return set()
    names: set[str] = set()
    for n in _shallow(region):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
        for target in targets:
            while isinstance(target, (ast.Subscript, ast.Attribute)):
                target = target.value
                if isinstance(target, ast.Name):
                    names.add(target.id)
    return names


def _step_region(node: ast.AST) -> ast.AST | None:
    """The outermost loop around ``node`` in its function, else that function (None at
    module level outside a loop)."""
    scope: ast.AST | None = None
    region: ast.AST | None = None
    for anc in _ancestors(node):
        if isinstance(anc, (ast.For, ast.AsyncFor, ast.While)):
            region = anc
        elif isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.Module)):
            scope = anc
            break
    if region is None and (scope is None or isinstance(scope, ast.Module)):
        return None
    return region or scope


def _rebound_in_step(node: ast.AST) -> set[str]:
    """The names that may hold another value by the time a closure registered at
    ``node`` runs (at the sync, usually the end of the step): those assigned in the
    outermost loop around ``node`` in its function (loop variables, this step's
    tensors, counters), or, outside a loop, in its function (a helper the step calls).
    Parameters and variables set before the loop keep their value: the closure reads
    them as they are."""
    region = _step_region(node)
    if region is None:
        return set()
    # The loop's own nodes include its target (`for i, (x, y) in ...`). An `except ... as e`
    # name is deleted at the end of its block: a closure must have bound it.
    names: set[str] = set()
    for n in _shallow(region):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, (ast.ExceptHandler, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name:
            names.add(n.name)
    return names


def _indented_continuation(call: ast.Call, text: str, indent: int) -> str | None:
    """The call's source as the body of a ``def`` at column 0 (the fix is re-indented where
    it goes): continuation lines keep their place relative to the statement, one level
    deeper. None when a string spans lines (its text would change) or a continuation line
    is left of the statement."""
    if "\n" not in text:
        return text
    for node in ast.walk(call):
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and node.lineno != node.end_lineno:
            return None
    first, *rest = text.split("\n")
    lines = [first]
    for line in rest:
        if line.strip() and (len(line) - len(line.lstrip()) < indent or not line[:indent].isspace()):
            return None
        lines.append(f"    {line[indent:]}" if line.strip() else "")
    return "\n".join(lines)


def _escape(code: str) -> str:
    """Code as a fix template (no parts): braces doubled."""
    return code.replace("{", "{{").replace("}", "}}")
