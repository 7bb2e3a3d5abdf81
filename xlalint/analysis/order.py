"""The order of training events along each path through one step.

Order rules (XLA106, XLA203) ask questions like "is there an ``unscale_`` before this
clip?" docs/rules.md ("Scope") says they are judged *along each path through the step*:
statements in mutually exclusive branches (``if use_amp: ... else: ...``) are never
ordered against each other. This module turns a step into the sequences of events
(backward, all-reduce, unscale, clip, optimizer step, scaler step, update, sync) that
can happen in one iteration, one sequence per path.

How paths are built:

- ``if``/``else``: each branch separately (an ``if`` without ``else``: its body or
  nothing). A condition seen again on the same path takes the same branch, so
  ``if use_amp: ... if use_amp: ...`` gives two paths, not four (``not x``,
  ``x is None`` and ``x is not None`` are read as tests of ``x``).
- ``match``: each case, plus falling through none of them.
- ``for``/``while`` inside the step: the body once, then ``else``.
- ``try``: the body, ``else``, ``finally`` (handlers are not followed).
- ``with``: the body.
- ``continue``/``break``/``return``/``raise`` end the path (a ``return`` inside a helper
  only ends the helper).
- A call of a same-module function (or a ``self.method``) is expanded inline, in the
  order of the statement's calls, up to ``MAX_DEPTH`` levels and never recursively.
- At most ``MAX_PATHS`` paths; identical event sequences are merged.

The analysis takes "the step" as plain input (a list of statements, plus how to find
the function a call calls), so it does not depend on how step loops are found;
:func:`loop_paths` takes them from the step analysis (``xlalint.analysis.steps``).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

from xlalint.analysis.reaching import condition_key
from xlalint.analysis.semantic import (
    Semantic,
    ancestors,
    child_nodes,
    dotted_name,
    enclosing_statement,
    keyword_value,
    method_name,
)
from xlalint.analysis.step_apis import LOSS_SCALERS, is_loss_scaler_call, names_an_optimizer
from xlalint.analysis.steps import StepAnalysis, optimizer_closure

MAX_PATHS = 256
MAX_DEPTH = 4

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
LOOPS = (ast.For, ast.AsyncFor, ast.While)


class Kind(Enum):
    BACKWARD = "backward"
    ALL_REDUCE = "all-reduce"
    UNSCALE = "unscale"
    CLIP = "clip"
    OPTIMIZER_STEP = "optimizer-step"
    SCALER_STEP = "scaler-step"
    UPDATE = "update"
    SYNC = "sync"


STEPS = frozenset({Kind.OPTIMIZER_STEP, Kind.SCALER_STEP})

XM = "torch_xla.core.xla_model"
GRAD_SCALERS = frozenset(
    {
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch_xla.amp.GradScaler",
        "torch_xla.amp.grad_scaler.GradScaler",
    }
)
CLIPS = frozenset(
    f"torch.nn.utils.{module}{name}"
    for module in ("", "clip_grad.")
    for name in ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")
)
AUTOGRAD_BACKWARD = frozenset({"torch.autograd.backward"})
REDUCE_GRADIENTS = frozenset({f"{XM}.reduce_gradients"})
ALL_REDUCE = frozenset({f"{XM}.all_reduce"})
FETCH_GRADIENTS = frozenset({f"{XM}._fetch_gradients"})
OPTIMIZER_STEP = frozenset({f"{XM}.optimizer_step"})
SYNCS = frozenset({"torch_xla.sync", f"{XM}.mark_step"})
STEP_CLOSURE = frozenset({f"{XM}.add_step_closure"})


@dataclass(frozen=True, eq=False)
class Event:
    """One thing that happens to the gradients, with the call that does it.

    ``scaler``/``optimizer`` are the receiver and the optimizer argument where the
    call has them (``scaler.step(opt)``: both). ``scaled`` marks a
    ``scaler.scale(loss).backward()``; ``reduces`` an ``xm.optimizer_step``, which
    all-reduces the gradients before it steps (not those a closure it is given makes).
    """

    kind: Kind
    call: ast.Call
    stmt: ast.stmt
    scaler: ast.expr | None = None
    optimizer: ast.expr | None = None
    scaled: bool = False
    reduces: bool = False
    # A step that also runs the backward (timm's `NativeScaler` call): nothing the step
    # uses can be moved before it, and the gradients it steps are made inside it.
    runs_backward: bool = False

    # One event per call: events of the same call on different paths are equal.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and self.kind is other.kind and self.call is other.call

    def __hash__(self) -> int:
        return hash((self.kind, id(self.call)))

    @property
    def uses_scaler(self) -> bool:
        return self.scaled or self.kind in (Kind.UNSCALE, Kind.SCALER_STEP, Kind.UPDATE)


@dataclass(frozen=True)
class Path:
    """The events of one path through the step, in order."""

    events: tuple[Event, ...]

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    @property
    def uses_scaler(self) -> bool:
        return any(e.uses_scaler for e in self.events)

    def index(self, event: Event) -> int:
        return next(i for i, e in enumerate(self.events) if e is event)

    def window_start(self, i: int) -> int:
        """Where the iteration's gradients begin for event ``i``: just after the last
        backward before it (0 when none precedes it on the path)."""
        for j in range(i - 1, -1, -1):
            if self.events[j].kind is Kind.BACKWARD:
                return j + 1
        return 0

    def before(self, i: int, *kinds: Kind) -> list[Event]:
        """Events of ``kinds`` between the last backward before ``i`` and ``i``."""
        return [e for e in self.events[self.window_start(i) : i] if e.kind in kinds]

    def after(self, i: int, *kinds: Kind) -> list[Event]:
        return [e for e in self.events[i + 1 :] if e.kind in kinds]

    def last_backward_before(self, i: int) -> Event | None:
        start = self.window_start(i)
        return self.events[start - 1] if start else None


# --- recognising events ------------------------------------------------------------------


class EventFinder:
    """Which calls are events; knows the module's scalers and optimizers by name."""

    def __init__(self, semantic: Semantic):
        self.semantic = semantic
        self.scalers: set[str] = set()
        self.optimizers: set[str] = set()
        self.gradient_lists: set[str] = set()
        self._events: dict[int, Event | None] = {}
        # What a name is assigned from: a call anywhere in the assigned value (found from
        # the calls up, since few calls build scalers or optimizers).
        for call in semantic.calls:
            qualified = semantic.call_name(call) or ""
            if qualified in GRAD_SCALERS or qualified in LOSS_SCALERS:
                self.scalers |= assigned_names(call)
            elif qualified in FETCH_GRADIENTS:
                self.gradient_lists |= assigned_names(call)
            elif is_optimizer_class(qualified):
                self.optimizers |= assigned_names(call)
            # `x.scale(loss).backward()` is GradScaler's API: `x` is a scaler wherever it came from.
            if method_name(call) == "backward":
                inner = call.func.value  # type: ignore[attr-defined]
                if method_name(inner) == "scale" and (name := dotted_name(inner.func.value)):
                    self.scalers.add(name)

    @property
    def has_scaler(self) -> bool:
        """The module builds a GradScaler, or scales a loss with something called a scaler."""
        return bool(self.scalers)

    def is_scaler(self, node: ast.AST) -> bool:
        name = dotted_name(node)
        return name is not None and (name in self.scalers or "scaler" in name.rsplit(".", 1)[-1].lower())

    def is_optimizer(self, node: ast.AST) -> bool:
        name = dotted_name(node)
        if name is None:
            return isinstance(node, ast.Subscript) and self.is_optimizer(node.value)
        return name in self.optimizers or names_an_optimizer(name)

    def event(self, call: ast.Call, stmt: ast.stmt) -> Event | None:
        """The event ``call`` is, if any (the same object each time it is asked)."""
        key = id(call)
        if key not in self._events:
            self._events[key] = self._event(call, stmt)
        return self._events[key]

    def _event(self, call: ast.Call, stmt: ast.stmt) -> Event | None:
        qualified = self.semantic.call_name(call)
        method = method_name(call)
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        first = call.args[0] if call.args else None
        if qualified in CLIPS:
            return Event(Kind.CLIP, call, stmt)
        if qualified in AUTOGRAD_BACKWARD:
            return Event(Kind.BACKWARD, call, stmt)
        if qualified in REDUCE_GRADIENTS:
            return Event(Kind.ALL_REDUCE, call, stmt, optimizer=first)
        if qualified in ALL_REDUCE:
            return Event(Kind.ALL_REDUCE, call, stmt) if self._reduces_gradients(call) else None
        if qualified in OPTIMIZER_STEP:
            # It all-reduces before it steps: given a closure, before the closure's
            # backward makes the gradients the step uses.
            reduces = optimizer_closure(call, self.semantic) is None
            optimizer = first or keyword_value(call, "optimizer")
            return Event(Kind.OPTIMIZER_STEP, call, stmt, optimizer=optimizer, reduces=reduces)
        if qualified in SYNCS:
            return Event(Kind.SYNC, call, stmt)
        if is_loss_scaler_call(call, self.semantic):
            # timm's `NativeScaler`: scaled backward, unscale, clip, step and update in one
            # call, in the right order; what matters around it is that it steps.
            optimizer = call.args[1] if len(call.args) > 1 else keyword_value(call, "optimizer")
            return Event(Kind.SCALER_STEP, call, stmt, call.func, optimizer, scaled=True, runs_backward=True)
        if qualified is not None or receiver is None:
            return None
        if method == "backward":
            scaled = method_name(receiver) == "scale" and self.is_scaler(receiver.func.value)  # type: ignore[attr-defined]
            scaler = receiver.func.value if scaled else None  # type: ignore[attr-defined]
            return Event(Kind.BACKWARD, call, stmt, scaler=scaler, scaled=scaled)
        if method == "unscale_":
            return Event(Kind.UNSCALE, call, stmt, scaler=receiver, optimizer=first)
        if method == "step" and self.is_scaler(receiver) and first is not None:
            return Event(Kind.SCALER_STEP, call, stmt, scaler=receiver, optimizer=first)
        if method == "update" and self.is_scaler(receiver):
            return Event(Kind.UPDATE, call, stmt, scaler=receiver)
        if method == "step" and not self.is_scaler(receiver) and self.is_optimizer(receiver):
            return Event(Kind.OPTIMIZER_STEP, call, stmt, optimizer=receiver)
        return None

    def _reduces_gradients(self, call: ast.Call) -> bool:
        """``xm.all_reduce(op, xm._fetch_gradients(opt))``, of a name bound to that, or of ``.grad``s."""
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            for node in ast.walk(arg):
                if isinstance(node, ast.Call) and self.semantic.call_name(node) in FETCH_GRADIENTS:
                    return True
                if isinstance(node, ast.Attribute) and node.attr == "grad":
                    return True
                if isinstance(node, ast.Name) and node.id in self.gradient_lists:
                    return True
        return False


def assigned_names(call: ast.Call) -> set[str]:
    """The dotted names ``call``'s value is assigned to, when it is part of the value of
    an assignment (``opt = Wrapper(torch.optim.SGD(...))``)."""
    statement = enclosing_statement(call)
    if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is None:
        return set()
    if call is not statement.value and all(a is not statement.value for a in ancestors(call)):
        return set()  # in a target: `d[make()] = x`
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    return {name for target in targets if (name := dotted_name(target))}


def is_optimizer_class(qualified: str) -> bool:
    if not qualified:
        return False
    if ".lr_scheduler" in qualified or "scheduler" in qualified.lower():
        return False
    return qualified.startswith(("torch.optim.", "torch_xla.amp.syncfree.")) or qualified in (
        "transformers.AdamW",
        "transformers.optimization.AdamW",
        "transformers.Adafactor",
        "transformers.optimization.Adafactor",
    )


# --- enumerating paths ---------------------------------------------------------------------

Resolver = Callable[[ast.Call], FunctionNode | None]


@dataclass(frozen=True)
class _Partial:
    """A path being built: its events, the branch decisions taken (condition key,
    branch), and how it ended (None: still going)."""

    events: tuple[Event, ...] = ()
    decisions: frozenset[tuple[str, bool]] = frozenset()
    exit: str | None = None

    def add(self, *events: Event) -> _Partial:
        return _Partial(self.events + events, self.decisions, self.exit)

    def decide(self, key: str, branch: bool) -> _Partial:
        return _Partial(self.events, self.decisions | {(key, branch)}, self.exit)

    def decided(self, key: str) -> bool | None:
        if (key, True) in self.decisions:
            return True
        if (key, False) in self.decisions:
            return False
        return None

    def agrees(self, decisions: frozenset[tuple[str, bool]]) -> bool:
        return not any((key, not branch) in self.decisions for key, branch in decisions)

    def ended(self, how: str | None) -> _Partial:
        return _Partial(self.events, self.decisions, how)


@dataclass
class OrderAnalysis:
    """Paths of events through a list of statements (one step).

    ``resolve`` maps a call to the same-module function it calls (None: opaque).
    """

    finder: EventFinder
    resolve: Resolver = field(default=lambda call: None)
    max_paths: int = MAX_PATHS
    truncated: bool = False
    _inert_cache: dict[int, bool] = field(default_factory=dict, repr=False)
    _summaries: dict[int, list[_Partial] | None] = field(default_factory=dict, repr=False)

    def paths(self, statements: Sequence[ast.stmt]) -> list[Path]:
        """The distinct event sequences of the paths through ``statements``."""
        self.truncated = False
        partials = self._block(statements, [_Partial()], ())
        return list(dict.fromkeys(Path(p.events) for p in partials))

    # -- statements -------------------------------------------------------------------
    def _block(self, statements: Sequence[ast.stmt], partials: list[_Partial], stack: tuple) -> list[_Partial]:
        for stmt in statements:
            done = [p for p in partials if p.exit is not None]
            going = [p for p in partials if p.exit is None]
            if not going:
                break
            new: list[_Partial] = []
            for p in going:
                new.extend(self._statement(stmt, p, stack))
            partials = self._cap(done + new)
        return partials

    def _statement(self, stmt: ast.stmt, p: _Partial, stack: tuple) -> list[_Partial]:
        if self._inert(stmt):
            return [p]
        if isinstance(stmt, ast.If):
            ps = self._expressions([stmt.test], p, stack)
            key, positive = condition_key(stmt.test)
            # Only a condition tested again somewhere needs remembering.
            remember = key in self._repeated_conditions
            out: list[_Partial] = []
            for q in ps:
                if q.exit is not None:
                    out.append(q)
                    continue
                taken = q.decided(key)
                for branch in (True, False) if taken is None else (taken,):
                    body = stmt.body if branch == positive else stmt.orelse
                    out.extend(self._block(body, [q.decide(key, branch) if remember else q], stack))
            return out
        if isinstance(stmt, LOOPS):
            head = [stmt.iter] if isinstance(stmt, (ast.For, ast.AsyncFor)) else [stmt.test]
            ps = self._expressions(head, p, stack)
            going = [q for q in ps if q.exit is None]
            body = self._block(stmt.body, going, stack)
            # `break`/`continue` end an iteration of this loop, not the path.
            body = [q.ended(None) if q.exit in ("break", "continue") else q for q in body]
            return [q for q in ps if q.exit is not None] + self._block(stmt.orelse, body, stack)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            ps = self._expressions([i.context_expr for i in stmt.items], p, stack)
            return self._block(stmt.body, ps, stack)
        if isinstance(stmt, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            ps = self._block(stmt.body, [p], stack)
            ps = self._block(stmt.orelse, ps, stack)
            if stmt.finalbody:
                ps = [self._finally(stmt.finalbody, q, stack) for q in ps]
                ps = [q for group in ps for q in group]
            return ps
        if isinstance(stmt, ast.Match):
            ps = self._expressions([stmt.subject], p, stack)
            out = []
            for q in ps:
                if q.exit is not None:
                    out.append(q)
                    continue
                for case in stmt.cases:
                    out.extend(self._block(case.body, [q], stack))
                out.append(q)
            return out
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return [p]
        if isinstance(stmt, (ast.Return, ast.Raise)):
            ps = self._expressions(_expression_children(stmt), p, stack)
            how = "return" if isinstance(stmt, ast.Return) else "raise"
            return [q if q.exit else q.ended(how) for q in ps]
        if isinstance(stmt, ast.Break):
            return [p.ended("break")]
        if isinstance(stmt, ast.Continue):
            return [p.ended("continue")]
        return self._expressions(_expression_children(stmt), p, stack, stmt)

    @cached_property
    def _repeated_conditions(self) -> frozenset[str]:
        """The keys of conditions that more than one ``if`` of the module tests."""
        counts = Counter(condition_key(node.test)[0] for node in self.finder.semantic.nodes_of(ast.If))
        return frozenset(key for key, n in counts.items() if n > 1)

    def _inert(self, stmt: ast.stmt) -> bool:
        """No event, no helper call and no early exit anywhere in ``stmt``: it adds
        nothing to any path (and need not split paths at its branches). Events are
        cached per call, so each is asked with its own innermost statement (not
        ``stmt``, which may be an enclosing ``if``): fixes insert before that one."""
        cached = self._inert_cache.get(id(stmt))
        if cached is None:
            cached = not any(
                isinstance(node, (ast.Break, ast.Continue, ast.Return, ast.Raise))
                or (
                    isinstance(node, ast.Call)
                    and (
                        self.finder.event(node, _statement_of(node)) is not None or self._summary(node, ()) is not None
                    )
                )
                for node in _walk(stmt)
            )
            self._inert_cache[id(stmt)] = cached
        return cached

    def _finally(self, finalbody: list[ast.stmt], p: _Partial, stack: tuple) -> list[_Partial]:
        # `finally` runs whatever way the body ended, and the path then ends that way.
        ended = p.exit
        ps = self._block(finalbody, [p.ended(None)], stack)
        return [q if q.exit else q.ended(ended) for q in ps]

    # -- expressions: events and inline calls, in source order ----------------------------
    def _expressions(
        self, exprs: Iterable[ast.AST], p: _Partial, stack: tuple, stmt: ast.stmt | None = None
    ) -> list[_Partial]:
        partials = [p]
        for call in _calls_in_order(self.finder.semantic, exprs):
            owner = stmt or _statement_of(call)
            event = self.finder.event(call, owner)
            # A helper's paths; for `opt.step(closure)`, the closure's, which run before it steps.
            summary = self._summary(call, stack)
            if summary is not None:
                going = [q for q in partials if q.exit is None]
                partials = self._cap([q for q in partials if q.exit is not None] + self._compose(going, summary))
            if event is not None:
                partials = [q if q.exit else q.add(event) for q in partials]
        return partials

    def _summary(self, call: ast.Call, stack: tuple) -> list[_Partial] | None:
        """The paths through the same-module function ``call`` calls, from a fresh
        start (computed once per function), or None when there is nothing to add:
        opaque, recursive, too deep, or no event and no way out but the end."""
        function = self.resolve(call)
        if function is None or function in stack or len(stack) >= MAX_DEPTH:
            return None
        key = id(function)
        if key not in self._summaries:
            self._summaries[key] = None  # while computing: a recursive call adds nothing
            inner = self._block(function.body, [_Partial()], (*stack, function))
            # A `return` ends the helper, not the step.
            inner = [q.ended(None) if q.exit == "return" else q for q in inner]
            trivial = all(not q.events and q.exit is None for q in inner)
            self._summaries[key] = None if trivial else inner
        return self._summaries[key]

    def _compose(self, going: list[_Partial], summary: list[_Partial]) -> list[_Partial]:
        """Each incoming path followed by each path of a helper whose branch decisions
        agree with it."""
        out: dict[_Partial, None] = {}
        for q in going:
            for h in summary:
                if not q.agrees(h.decisions):
                    continue
                out[_Partial(q.events + h.events, q.decisions | h.decisions, h.exit)] = None
                if len(out) > self.max_paths:
                    self.truncated = True
                    return list(out)
        return list(out)

    def _cap(self, partials: list[_Partial]) -> list[_Partial]:
        unique = list(dict.fromkeys(partials))
        if len(unique) > self.max_paths:
            self.truncated = True
            unique = unique[: self.max_paths]
        return unique


def _expression_children(stmt: ast.stmt) -> list[ast.AST]:
    return [child for child in ast.iter_child_nodes(stmt) if not isinstance(child, ast.stmt)]


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` (breadth first, in the same order) without the shared contexts and
    operators: ``_inert`` asks it of each statement on a step's paths."""
    todo = [node]
    index = 0
    while index < len(todo):
        current = todo[index]
        index += 1
        todo.extend(child_nodes(current))
        yield current


def _statement_of(node: ast.AST) -> ast.stmt:
    return next(a for a in ancestors(node) if isinstance(a, ast.stmt))


def _calls_in_order(semantic: Semantic, exprs: Iterable[ast.AST]) -> list[ast.Call]:
    """The calls in ``exprs`` in source order, outer before inner at the same start;
    not inside lambdas, comprehensions' deferred code or step closures."""
    found: list[ast.Call] = []
    pending = list(exprs)[::-1]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Call):
            if semantic.call_name(node) in STEP_CLOSURE:
                continue
            found.append(node)
        pending.extend(reversed(child_nodes(node)))
    # An event's own inner calls (`scaler.scale(loss)` in `.backward()`) are not events;
    # arguments run before the call, so order by end position.
    return sorted(found, key=lambda c: (c.end_lineno or 0, c.end_col_offset or 0))


# --- the step loops ---------------------------------------------------------------------------


def same_module_resolver(semantic: Semantic) -> Resolver:
    """Calls of module-level functions by name, and ``self.m(...)`` of the enclosing class."""
    functions = semantic.module_functions

    def resolve(call: ast.Call) -> FunctionNode | None:
        if isinstance(call.func, ast.Name):
            return functions.get(call.func.id)
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
            cls = next((a for a in ancestors(call) if isinstance(a, ast.ClassDef)), None)
            methods = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))] if cls else []
            return next((m for m in methods if m.name == func.attr), None)
        return None

    return resolve


def _reached(node: ast.AST, resolve: Resolver) -> list[ast.AST]:
    """Every node in ``node`` and in the same-module functions it calls (transitively)."""
    seen: set[int] = set()
    out: list[ast.AST] = []
    todo = [node]
    while todo:
        current = todo.pop()
        for sub in ast.walk(current):
            out.append(sub)
            if isinstance(sub, ast.Call) and (function := resolve(sub)) is not None and id(function) not in seen:
                seen.add(id(function))
                todo.append(function)
    return out


def _calls_backward(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (
        method_name(node) == "backward" or dotted_name(node.func) in ("torch.autograd.backward", "autograd.backward")
    )


def find_step_loops(semantic: Semantic) -> list[ast.For | ast.AsyncFor | ast.While]:
    """The innermost loops whose body, directly or through same-module functions,
    calls ``.backward()`` (for when no step analysis is given)."""
    resolve = same_module_resolver(semantic)
    loops = sorted(semantic.nodes_of(*LOOPS), key=lambda n: (n.lineno, n.col_offset))
    reach = {id(loop): [n for stmt in loop.body for n in _reached(stmt, resolve)] for loop in loops}
    training = [loop for loop in loops if any(_calls_backward(n) for n in reach[id(loop)])]
    training_ids = {id(loop) for loop in training}
    return [loop for loop in training if not any(id(n) in training_ids for n in reach[id(loop)])]


def loop_paths(
    semantic: Semantic, steps: StepAnalysis | None = None, finder: EventFinder | None = None
) -> list[tuple[ast.AST, list[Path]]]:
    """For every step loop, the paths through one iteration of its body.

    When the step loop holds no optimizer step (a micro-batch loop that only calls
    ``backward()``), the enclosing loop is the one whose order matters.
    """
    loops = [loop.node for loop in steps.loops] if steps is not None else find_step_loops(semantic)
    if not loops:
        return []
    finder = finder or EventFinder(semantic)
    resolve = steps.resolve if steps is not None else same_module_resolver(semantic)
    analysis = OrderAnalysis(finder, resolve)
    out: list[tuple[ast.AST, list[Path]]] = []
    seen: set[int] = set()
    for loop in loops:
        paths = analysis.paths(loop.body)
        if not any(e.kind in STEPS for path in paths for e in path):
            outer = next((a for a in ancestors(loop) if isinstance(a, LOOPS)), None)
            if outer is not None:
                loop, paths = outer, analysis.paths(outer.body)
        if id(loop) not in seen:
            seen.add(id(loop))
            out.append((loop, paths))
    return out
