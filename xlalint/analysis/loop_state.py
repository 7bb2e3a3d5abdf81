"""Loops that are not training loops but carry device-tensor state from one iteration to
the next: evaluation and sampling loops (``total += loss``, ``x = model(x)``).

Measured on torch_xla 2.9.0 CPU (10 iterations of a 1-layer GPT-2, see XLA103's
explanation): such a loop with no sync point keeps extending the graph of its state; a
host read of that state on every iteration (``print(total.item())``) then compiles a new,
larger graph each time (12 compiles; 5 with a sync per iteration). What it does not
cover, because a sync there does not help: a read of a per-iteration value only
(``losses[k] = loss.item()``: 4 compiles either way, the sync adds executions), state read
only after the loop (3 either way), an in-place write at a Python index
(``losses[k] = loss``: 3 compiles, 11 with a sync, the index is baked into each graph) and
state that grows in shape (``idx = torch.cat((idx, nxt), 1)``: a sync compiles one graph
per length, 10 instead of 1, or 20 instead of 11 with a read per iteration).

The analysis is given the semantic layer and the step analysis (sync points, device
loaders, step closures, training loops), never the rule context.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

from xlalint.analysis.semantic import Semantic, child_nodes, dotted_name, method_name, parent, string_value, subtree
from xlalint.analysis.steps import HOST_FETCH_METHODS, StepAnalysis, is_step_closure
from xlalint.analysis.values import FUNCTIONS, self_and_ancestors, target_names

Loop = ast.For | ast.AsyncFor | ast.While
LOOPS = (ast.For, ast.AsyncFor, ast.While)

# Calls whose result grows with the state they are given: carried through them, the
# state changes shape every iteration and a sync compiles one graph per shape.
GROWING_CALLS = frozenset(
    {"torch.cat", "torch.concat", "torch.concatenate", "torch.stack", "torch.hstack", "torch.vstack", "torch.dstack"}
)
# Attributes and methods of a tensor that are metadata, not a tensor on the device.
METADATA = frozenset({"shape", "dtype", "device", "ndim", "size", "dim", "numel", "requires_grad", "is_leaf"})
# Built-ins that read a tensor's value on the host.
HOST_CONVERSIONS = frozenset({"float", "int", "bool", "str", "repr", "format"})
# Calls that print their arguments (a tensor argument is read on the host).
PRINT_METHODS = frozenset({"print", "debug", "info", "warning", "warn", "error", "log", "write", "set_postfix"})


@dataclass(frozen=True)
class CarriedState:
    """A loop that carries device tensors across iterations."""

    node: Loop
    names: frozenset[str]  # dotted names updated from their own value on each iteration
    reads: tuple[ast.AST, ...]  # host reads of that state in the loop (not in step closures)
    first: int  # index of the first statement of the body that touches the state
    syncs: bool  # the loop has a sync point (a sync call, a device loader, a step context)


class LoopStateAnalysis:
    """The non-training loops of a module that carry device-tensor state."""

    def __init__(self, semantic: Semantic, steps: StepAnalysis):
        self.semantic = semantic
        self.steps = steps
        self._read_names: dict[int, frozenset[str]] = {}

    def _reads_names(self, expr: ast.AST) -> frozenset[str]:
        """``_dotted_names(expr)``, found once per expression: a loop's analysis asks it
        of the same values again and again (its updates, its fresh names, its derived
        names, each round of a fixed point)."""
        found = self._read_names.get(id(expr))
        if found is None:
            found = self._read_names[id(expr)] = frozenset(_dotted_names(expr))
        return found

    @cached_property
    def loops(self) -> list[CarriedState]:
        """The innermost loops that carry device state and are not training loops, nor run
        within a training step, a ``torch_xla.compile``d function or a step context."""
        found: list[CarriedState] = []
        for node in sorted(self.semantic.nodes_of(*LOOPS), key=lambda n: (n.lineno, n.col_offset)):
            if not self._may_carry(node) or self._delimited(node) or self.steps.is_training_loop(node):
                continue
            state = self._state(node)
            if state is not None:
                found.append(state)
        inner = {id(a) for s in found for a in self_and_ancestors(parent(s.node)) if isinstance(a, LOOPS)}
        return [s for s in found if id(s.node) not in inner]

    # -- which loops -----------------------------------------------------------------
    def _delimited(self, node: Loop) -> bool:
        """Inside a training step, a compiled function or a ``with torch_xla.step():``:
        the graph is cut around the loop, not in it (and XLA103 judges training loops)."""
        if self.steps.loop_of(node) is not None:
            return True
        for anc in self_and_ancestors(parent(node)):
            if isinstance(anc, FUNCTIONS) and self.steps.is_compiled_function(anc):
                return True
            if isinstance(anc, (ast.With, ast.AsyncWith)) and any(self.steps.is_step_context(i) for i in anc.items):
                return True
            if isinstance(anc, LOOPS) and self.steps.is_training_loop(anc):
                return False  # an evaluation loop run from a training loop, outside its step
        return False

    def _may_carry(self, node: Loop) -> bool:
        """Most loops update nothing from its own value, or only what the loop target
        binds anew (`p.data = p.data.cuda()`): their statements say so, and they need
        no other analysis."""
        targets = target_names(node.target) if isinstance(node, (ast.For, ast.AsyncFor)) else set()
        return any(_carried_from(name, targets) for name in self._updated(_statements(node.body)))

    def _state(self, node: Loop) -> CarriedState | None:
        nodes = list(self._region(node.body))
        fresh = _fresh_names(node, nodes, self._reads_names)
        if not any(_carried_from(name, fresh) for name in self._updated(nodes)):
            return None
        devices = self._device_names(nodes)
        carried = {name for name in self._carried(nodes, devices) if _carried_from(name, fresh)}
        if not carried:
            return None
        derived = self._derived(nodes, carried)
        # A `while` test runs on every iteration too.
        checked = [node, *nodes] if isinstance(node, ast.While) else nodes
        reads = tuple(n for n in checked if self._reads(n, derived, devices))
        first = next(i for i, stmt in enumerate(node.body) if _mentions(stmt, derived))
        return CarriedState(node, frozenset(carried), reads, first, self._syncs(node, nodes))

    def _region(self, statements: list[ast.stmt]) -> Iterator[ast.AST]:
        """The nodes that run in the loop body: not nested definitions, not step closures."""
        stack: list[ast.AST] = list(reversed(statements))
        while stack:
            node = stack.pop()
            if isinstance(node, (*FUNCTIONS, ast.ClassDef)) or (
                isinstance(node, ast.Lambda) and is_step_closure(node, self.semantic)
            ):
                continue
            yield node
            stack.extend(reversed(child_nodes(node)))

    def _syncs(self, loop: Loop, nodes: list[ast.AST]) -> bool:
        """A sync point runs in the loop: a sync call (also in a same-module function it
        calls), iterating a device loader, a ``torch_xla.step()`` context."""
        if isinstance(loop, (ast.For, ast.AsyncFor)) and self.steps.is_device_loader(loop.iter):
            return True
        pending, seen = [nodes], set()
        while pending:
            for node in pending.pop():
                if isinstance(node, ast.Call):
                    if self.steps.is_sync_call(node):
                        return True
                    func = self.steps.resolve(node)
                    if func is not None and id(func) not in seen:
                        seen.add(id(func))
                        pending.append(list(self._region(func.body)))
                elif isinstance(node, (ast.With, ast.AsyncWith)) and any(
                    self.steps.is_step_context(i) for i in node.items
                ):
                    return True
        return False

    # -- device tensors --------------------------------------------------------------
    def _device_names(self, nodes: list[ast.AST]) -> set[str]:
        """Dotted names the loop body binds to device tensors (to a fixed point)."""
        names: set[str] = set()
        for _ in range(8):
            before = len(names)
            for node in nodes:
                if isinstance(node, ast.Assign) and self.is_device(node.value, names):
                    for target in node.targets:
                        names.update(target_names(target))
                elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and self.is_device(node.value, names):
                    names.update(target_names(node.target))
            if len(names) == before:
                break
        return names

    def is_device(self, expr: ast.AST | None, names: set[str]) -> bool:
        """``expr`` is a tensor on the device (in an XLA script): a model's output, a
        ``.to(device)``, a ``torch.*`` result computed from a device tensor or made with a
        ``device=``, arithmetic, attributes and slices of one. Host values are not."""
        if expr is None:
            return False
        if isinstance(expr, ast.Name):
            return expr.id in names
        if isinstance(expr, ast.Attribute):
            if expr.attr in METADATA:
                return False
            dotted = dotted_name(expr)
            return (dotted is not None and dotted in names) or (
                not self.steps.is_module(expr.value) and self.is_device(expr.value, names)
            )
        if isinstance(expr, (ast.Subscript, ast.Starred, ast.NamedExpr)):
            return self.is_device(expr.value, names)
        if isinstance(expr, ast.BinOp):
            return self.is_device(expr.left, names) or self.is_device(expr.right, names)
        if isinstance(expr, ast.UnaryOp):
            return not isinstance(expr.op, ast.Not) and self.is_device(expr.operand, names)
        if isinstance(expr, ast.Compare):
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in expr.ops):
                return False
            return any(self.is_device(e, names) for e in (expr.left, *expr.comparators))
        if isinstance(expr, ast.IfExp):
            return self.is_device(expr.body, names) or self.is_device(expr.orelse, names)
        if isinstance(expr, (ast.Tuple, ast.List)):
            return any(self.is_device(e, names) for e in expr.elts)
        if isinstance(expr, ast.Call):
            return self._call_is_device(expr, names)
        return False

    def _call_is_device(self, call: ast.Call, names: set[str]) -> bool:
        attr = method_name(call)
        arguments = [*call.args, *(k.value for k in call.keywords)]
        if attr is not None:
            receiver = call.func.value  # type: ignore[union-attr]
            if attr in HOST_FETCH_METHODS or attr in METADATA:
                return False
            if self.steps.is_module(receiver):
                return attr not in ("to", "cuda", "train", "eval", "parameters", "named_parameters", "state_dict")
            if attr in ("to", "cuda"):
                return not any(string_value(a) == "cpu" for a in arguments)
            if self.is_device(receiver, names):
                return True
        if self.steps.is_module(call.func):
            return True
        qualified = self.semantic.call_name(call) or ""
        if qualified.startswith("torch.") and not qualified.startswith(("torch.nn.", "torch.utils.", "torch.optim.")):
            device = next((k.value for k in call.keywords if k.arg == "device"), None)
            if device is not None:
                return string_value(device) != "cpu"
            return any(self.is_device(a, names) for a in arguments)
        if qualified.startswith("torch.nn.functional."):
            return any(self.is_device(a, names) for a in arguments)
        return False

    # -- the state ---------------------------------------------------------------------
    def _carried(self, nodes: list[ast.AST], devices: set[str]) -> set[str]:
        """Names updated from their own value with a device tensor, in a fixed shape:
        ``total += loss``, ``total = total + loss``, ``x = model(x)`` (not
        ``idx = torch.cat((idx, nxt), 1)``, nor a write at an index ``losses[k] = loss``)."""
        carried: set[str] = set()
        for node in nodes:
            if isinstance(node, ast.AugAssign) and not isinstance(node.target, ast.Subscript):
                target = dotted_name(node.target)
                device = target is not None and (target in devices or self.is_device(node.value, devices))
                if device and not self._grows(node.value):
                    carried.add(target)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = dotted_name(node.targets[0])
                if (
                    target is not None
                    and target in self._reads_names(node.value)
                    and self.is_device(node.value, devices)
                    and not self._grows(node.value)
                ):
                    carried.add(target)
        return carried

    def _updated(self, nodes: Iterable[ast.AST]) -> Iterator[str]:
        """The names ``_carried`` may find, whatever is on the device: those updated from
        their own value (``total += x``, ``total = total + x``)."""
        for node in nodes:
            if isinstance(node, ast.AugAssign) and not isinstance(node.target, ast.Subscript):
                target = dotted_name(node.target)
                if target is not None:
                    yield target
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = dotted_name(node.targets[0])
                if target is not None and target in self._reads_names(node.value):
                    yield target

    def _grows(self, value: ast.AST) -> bool:
        return any(isinstance(n, ast.Call) and self.semantic.call_name(n) in GROWING_CALLS for n in subtree(value))

    def _derived(self, nodes: list[ast.AST], carried: set[str]) -> set[str]:
        """The carried names and the names the loop computes from them (``avg = total / n``)."""
        derived = set(carried)
        for _ in range(8):
            before = len(derived)
            for node in nodes:
                if isinstance(node, ast.Assign) and self._reads_names(node.value) & derived:
                    for target in node.targets:
                        derived.update(target_names(target))
            if len(derived) == before:
                break
        return derived

    def _reads(self, node: ast.AST, state: set[str], devices: set[str]) -> bool:
        """``node`` reads the state's value on the host: ``.item()``/``.tolist()``/
        ``.cpu()``/``.numpy()``, ``float()``/``int()``/``str()``, printing or logging it,
        formatting it in an f-string, testing it in an ``if``/``while``/``assert``."""
        known = state | devices
        if isinstance(node, ast.Call):
            attr = method_name(node)
            if attr in HOST_FETCH_METHODS:
                return bool(_dotted_names(node.func.value) & state)  # type: ignore[union-attr]
            name = node.func.id if isinstance(node.func, ast.Name) else attr
            if name in HOST_CONVERSIONS or name in PRINT_METHODS:
                return any(_dotted_names(a) & state and self.is_device(a, known) for a in _arguments(node))
            return False
        if isinstance(node, ast.FormattedValue):
            return bool(_dotted_names(node.value) & state) and self.is_device(node.value, known)
        if isinstance(node, (ast.If, ast.While, ast.Assert)):
            return bool(_dotted_names(node.test) & state) and self.is_device(node.test, known)
        return False


def _fresh_names(loop: Loop, nodes: list[ast.AST], reads_names: Callable[[ast.AST], frozenset[str]]) -> set[str]:
    """Names each iteration binds anew before it updates them: the ``for`` target, and a
    name assigned a value that does not read it (``h = init(); h = model(h)``) before
    the first update that does. Their values do not come from the previous iteration."""
    fresh = target_names(loop.target) if isinstance(loop, (ast.For, ast.AsyncFor)) else set()
    updated: set[str] = set()
    for node in sorted(
        (n for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))),
        key=lambda n: (n.lineno, n.col_offset),
    ):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        reads = reads_names(node.value) if node.value is not None else frozenset()
        for name in set().union(*(target_names(t) for t in targets)):
            if isinstance(node, ast.AugAssign) or name in reads:
                updated.add(name)
            elif name not in updated:
                fresh.add(name)
    return fresh


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``_region(body)``: those of the blocks within, not of nested
    definitions."""
    stack: list[ast.stmt] = list(reversed(body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (*FUNCTIONS, ast.ClassDef)):
            continue
        yield stmt
        inner: list[ast.stmt] = []
        for field in _BLOCKS:
            for item in getattr(stmt, field, ()):
                # An `except` handler and a `match` case hold a block of their own.
                inner.extend(item.body if isinstance(item, (ast.ExceptHandler, ast.match_case)) else (item,))
        stack.extend(reversed(inner))


_BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")


def _carried_from(name: str, fresh: set[str]) -> bool:
    """``name`` keeps its value from the previous iteration: neither it nor the object it
    is an attribute of is bound anew (``for p in params: p.data = p.data.cuda()`` carries
    nothing: each iteration has its own ``p``)."""
    return name not in fresh and name.split(".", 1)[0] not in fresh


def _arguments(call: ast.Call) -> list[ast.expr]:
    return [*call.args, *(k.value for k in call.keywords)]


def _dotted_names(expr: ast.AST) -> set[str]:
    """The dotted names whose values ``expr`` reads (``total``, ``self.total``)."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), ast.Load):
            dotted = dotted_name(node)
            if dotted is not None:
                found.add(dotted)
                if isinstance(node, ast.Name):
                    continue
        stack.extend(child_nodes(node))  # the contexts and operators it leaves out are no names
    return found


def _mentions(stmt: ast.stmt, names: set[str]) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute)) and dotted_name(n) in names for n in ast.walk(stmt))
