"""Where code in a step runs less than once per step, or not in the step at all: guards
that run it every N steps (``if step % N == 0:``), functions passed to
``xm.add_step_closure`` (run after the sync), branches that exclude each other, and
the nodes a statement runs (not nested definitions, not step closures).

A guard is rare only when its period is: ``if step % args.log_every == 0:`` with
``--log_every`` defaulting to 1 (or ``log_every = 1``) runs its body on every step, so
it is no every-N guard (:func:`guard_period` gives every rule the same answer)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from xlalint.analysis.options import CommandLineOptions
from xlalint.analysis.semantic import Semantic, child_nodes, dotted_name, keyword, parent
from xlalint.analysis.step_apis import ADD_STEP_CLOSURE
from xlalint.analysis.values import FUNCTIONS, assigned_values, enclosing_scopes, self_and_ancestors


def every_n_steps_guard(test: ast.expr, options: CommandLineOptions | None = None) -> bool:
    """A test that holds once every N steps: ``step % N == 0``, ``(i + 1) % k == 0``,
    ``not step % N``, also combined with ``and`` (``... and xm.is_master_ordinal()``)
    or with ``or`` and tests that hold on single steps (``... or last_step``).

    An ``or`` is a guard when one operand is an every-N test and each other operand is
    one too or a *single-step test*: an equality (``step == len(loader) - 1``), or a
    name assigned in its scope only such tests and ``False`` (``last_step = step ==
    max_steps - 1``; ``done = False`` ... ``done = i == n``). Any other operand may hold
    on every step (``or verbose``, ``or args.debug``: a setting, true on all steps or
    none), and the ``or`` then runs its body every step.

    A period known to be 1 (a literal, an option's default: see :func:`guard_period`,
    ``options`` being the module's command-line options) makes no guard."""
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And):
            return any(every_n_steps_guard(v, options) for v in test.values)
        return any(every_n_steps_guard(v, options) for v in test.values) and all(
            every_n_steps_guard(v, options) or _single_step_test(v) for v in test.values
        )
    modulo = _modulo_of(test)
    return modulo is not None and _is_modulo(modulo) and guard_period(modulo, options) not in (0, 1)


def guard_period(modulo: ast.BinOp, options: CommandLineOptions | None = None) -> int | None:
    """The period ``N`` of ``x % N`` when it is known: a literal, a name assigned only
    that literal in its scope (or an option's value: ``log_every = args.log_every``), or
    the literal default of the command-line option it reads (``args.log_every`` with
    ``default=1``); None otherwise (the user's choice at run time). Asked for every node
    under the guard: the answer is kept on the node (one per kind of ``options``)."""
    periods = getattr(modulo, "_xlalint_periods", None)
    if periods is None:
        periods = modulo._xlalint_periods = {}  # type: ignore[attr-defined]
    key = options is not None
    if key not in periods:
        periods[key] = _known_int(modulo.right, options, depth=0)
    return periods[key]


def _known_int(node: ast.expr, options: CommandLineOptions | None, depth: int) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if depth > 2:
        return None
    if isinstance(node, ast.Attribute) and options is not None:
        option = options.read_by(node)
        if option is not None and option.default is not None:
            return _known_int(option.default, options, depth + 1)
        return None
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        scope = next(enclosing_scopes(node), None)
        if scope is None:
            return None
        values = list(assigned_values(scope, lambda t: isinstance(t, ast.Name) and t.id == node.id, shallow=True))
        known = {_known_int(value, options, depth + 1) for value in values}
        return known.pop() if len(known) == 1 else None
    return None


def step_guard_test(test: ast.expr) -> ast.BinOp | None:
    """The ``x % N`` of a test written as an every-N test (``x % N == 0``, ``not x % N``),
    whatever its period: a rule that asks whether such a guard runs every step reads
    :func:`guard_period` of it."""
    if isinstance(test, ast.BoolOp):
        return next((m for m in map(step_guard_test, test.values) if m is not None), None)
    modulo = _modulo_of(test)
    return modulo if modulo is not None and _is_arithmetic_modulo(modulo) else None


def _modulo_of(test: ast.expr) -> ast.BinOp | None:
    """``x % N`` of ``not x % N`` or ``x % N == k`` (either side)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        operand = test.operand
        return operand if isinstance(operand, ast.BinOp) and isinstance(operand.op, ast.Mod) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        for side in (test.left, test.comparators[0]):
            if isinstance(side, ast.BinOp) and isinstance(side.op, ast.Mod):
                return side
    return None


def _single_step_test(node: ast.expr) -> bool:
    """``node`` holds on single steps, not on all: see ``every_n_steps_guard``."""
    if _is_equality(node):
        return True
    if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
        return False
    scope = next(enclosing_scopes(node), None)
    if scope is None:
        return False
    values = list(assigned_values(scope, lambda t: isinstance(t, ast.Name) and t.id == node.id, shallow=True))
    return any(_is_equality(v) for v in values) and all(_is_equality(v) or _is_false(v) for v in values)


def _is_false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _is_modulo(node: ast.expr) -> bool:
    """``x % N`` as arithmetic (not string formatting), N not the literal 1."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)) or not _is_arithmetic_modulo(node):
        return False
    return not (isinstance(node.right, ast.Constant) and node.right.value in (0, 1))


def _is_arithmetic_modulo(node: ast.BinOp) -> bool:
    """``x % N`` on numbers, not ``"%d" % x`` string formatting."""
    left = node.left
    return not (isinstance(left, (ast.Constant, ast.JoinedStr)) and not isinstance(getattr(left, "value", 0), int))


def _is_equality(node: ast.expr) -> bool:
    return isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq) for op in node.ops)


def is_step_closure(node: ast.AST, semantic: Semantic) -> bool:
    """``node`` is inside a function or lambda passed to ``xm.add_step_closure``
    (which runs it after the next sync, when tensors have their values)."""
    return any(is_closure_function(anc, semantic) for anc in self_and_ancestors(node))


def is_closure_function(node: ast.AST, semantic: Semantic) -> bool:
    if isinstance(node, ast.Lambda):
        call = parent(node)
        if isinstance(call, ast.keyword):  # add_step_closure(closure=lambda: ...)
            call = parent(call)
        return isinstance(call, ast.Call) and _closure_argument(call, semantic) is node
    if isinstance(node, FUNCTIONS):
        return node.name in _closure_names(semantic)
    return False


def _closure_argument(call: ast.Call, semantic: Semantic) -> ast.expr | None:
    """The function argument of an ``xm.add_step_closure(fn, args=...)`` call."""
    if semantic.call_name(call) not in ADD_STEP_CLOSURE:
        return None
    if call.args:
        return call.args[0]
    kw = keyword(call, "closure")
    return kw.value if kw else None


def _closure_names(semantic: Semantic) -> frozenset[str]:
    cached = getattr(semantic, "_xlalint_closure_names", None)
    if cached is None:
        names = set()
        for call in semantic.calls:
            fn = _closure_argument(call, semantic)
            # `functools.partial(fn, ...)` passes fn too.
            if isinstance(fn, ast.Call) and fn.args and (dotted_name(fn.func) or "").endswith("partial"):
                fn = fn.args[0]
            if isinstance(fn, ast.Name):
                names.add(fn.id)
            elif isinstance(fn, ast.Attribute):
                names.add(fn.attr)
        cached = frozenset(names)
        semantic._xlalint_closure_names = cached  # type: ignore[attr-defined]
    return cached


def mutually_exclusive(a: ast.AST, b: ast.AST) -> bool:
    """``a`` and ``b`` are in different branches of one ``if`` (``if use_amp: ... else: ...``)
    or conditional expression: they never both run in one pass."""
    chain_a = list(self_and_ancestors(a))
    chain_b = set(map(id, self_and_ancestors(b)))
    for i, anc in enumerate(chain_a):
        if id(anc) not in chain_b:
            continue
        # `anc` is the lowest common ancestor; which fields lead down to a and b?
        child_a = chain_a[i - 1] if i else None
        child_b = next((n for n in self_and_ancestors(b) if parent(n) is anc), None)
        if child_a is None or child_b is None:
            return False
        if isinstance(anc, ast.If):
            return (
                (child_a in anc.body) != (child_b in anc.body) and child_a is not anc.test and child_b is not anc.test
            )
        if isinstance(anc, ast.IfExp):
            return {id(child_a), id(child_b)} == {id(anc.body), id(anc.orelse)}
        return False
    return False


def walk_region(stmt: ast.AST, semantic: Semantic, include_self: bool = False) -> Iterator[ast.AST]:
    """The nodes that run when ``stmt`` runs: not the bodies of nested functions and
    classes, and not lambdas passed to ``xm.add_step_closure`` (a lambda's body is
    otherwise assumed to run: ``sorted(..., key=lambda t: ...)``)."""
    stack: list[ast.AST] = [stmt] if include_self else child_nodes(stmt)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            # Decorators run where the definition stands; the body does not.
            stack.extend(reversed(node.decorator_list))
            continue
        if isinstance(node, ast.Lambda) and is_closure_function(node, semantic):
            continue
        stack.extend(reversed(child_nodes(node)))


def guard_between(node: ast.AST, owner: ast.AST, options: CommandLineOptions | None = None) -> ast.If | None:
    """The innermost every-N-steps guard between ``node`` and ``owner`` (a loop or function)."""
    child = node
    for anc in self_and_ancestors(parent(node)):
        if anc is owner:
            return None
        if isinstance(anc, ast.If) and child in anc.body and every_n_steps_guard(anc.test, options):
            return anc
        child = anc
    return None
