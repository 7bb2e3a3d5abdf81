"""The step analysis (docs/rules.md, "Scope"): training loops, the step, sync points.

A *training loop* is a ``for``/``while`` loop whose body calls ``.backward()``,
directly or through same-module functions it calls (transitively). The *step loop*
is the innermost such loop, and *the step* is its body plus the bodies of the
same-module functions it calls (its *helpers*), minus functions passed to
``xm.add_step_closure`` and minus code under a guard that runs every N steps
(``if step % N == 0:``). Code after the loop is not in the step. A call resolves to a
same-module function (``resolve``): a ``def``, an object's ``__call__``, and for a
parameter called in the loop (``loss_scaler(loss, opt)``, ``step_fn(loss)``) what the
calls of its function pass for it (``bound_callee``, on ``values.bound_arguments``),
for ``self.<attr>(...)`` what the class assigns to the attribute.

With gradient accumulation the step loop is a micro-step loop, and the optimizer steps
in the loop around it (``for it in ...: for micro in ...: loss.backward()`` then
``opt.step()``): that *optimizer-step loop* (the nearest loop around a step loop that
steps no optimizer, whose own body steps one, directly or through helpers; for micro-steps
written in a function, the innermost training loop that calls it and steps one, as
improved-diffusion's ``run_loop`` -> ``run_step`` -> ``forward_backward``/``optimize``)
runs once per optimizer step; XLA103 puts its sync there. Its body is part of the step for the rules that ask
``loop_running_every_step`` (XLA102's host reads); ``in_step``/``loop_of`` keep to the
micro-step loop.

Everything is computed once per module, on first use (``Context.steps``), and shared
by the rules: XLA102 (host syncs in the step), XLA103 (a step without a sync point),
XLA106 (the AMP/clip order in the step), and others.

This module is the analysis and its public names; its parts: ``step_apis`` (the APIs
it knows by name), ``step_guards`` (every-N guards, step closures, exclusive branches,
what a statement runs), ``device_loaders``, ``step_tensors`` (the tensors of a step,
the names holding modules), ``step_syncs`` (values a sync of the step already computed).

The analysis is flow-insensitive and stays within one file, like the rest of the
semantic layer: a name is "a tensor" if the step assigns it a tensor anywhere, a
name is "a device loader" if it is assigned one anywhere in its scope.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from functools import cached_property

from xlalint.analysis import told
from xlalint.analysis.device_loaders import DeviceLoaders, is_device_loader
from xlalint.analysis.options import CommandLineOptions
from xlalint.analysis.semantic import Semantic, ancestors, child_nodes, dotted_name, keyword, parent
from xlalint.analysis.step_apis import (
    ADD_STEP_CLOSURE,
    AUTOGRAD_BACKWARD,
    COMPILE,
    CUDA_WAITS,
    ITERATOR_WRAPPERS,
    LOSS_SCALERS,
    MP_DEVICE_LOADER,
    OPTIMIZER_MODULES,
    OPTIMIZER_STEP,
    PARALLEL_LOADER,
    PL,
    STEP_CONTEXT,
    SYNC_CALLS,
    XM,
    importer_bound_parameters,
    is_backward_call,
    is_optimizer_step,
    loss_scaler_names,
    loss_scaler_parameters,
    optimizer_closure,
)
from xlalint.analysis.step_guards import (
    every_n_steps_guard,
    guard_between,
    is_closure_function,
    is_step_closure,
    mutually_exclusive,
    walk_region,
)
from xlalint.analysis.step_syncs import SyncedValues
from xlalint.analysis.step_tensors import HOST_FETCH_METHODS, StepTensors, is_module_name, module_names
from xlalint.analysis.syntax import whole_statement
from xlalint.analysis.values import (
    FUNCTIONS,
    Function,
    assigned_values_by_name,
    bound_arguments,
    enclosing,
    enclosing_scopes,
    parameter_names,
    self_and_ancestors,
    shallow_scope,
)

# The names other modules import from here (the analysis's public interface).
__all__ = [
    "ADD_STEP_CLOSURE",
    "AUTOGRAD_BACKWARD",
    "COMPILE",
    "HOST_FETCH_METHODS",
    "ITERATOR_WRAPPERS",
    "MP_DEVICE_LOADER",
    "OPTIMIZER_STEP",
    "PARALLEL_LOADER",
    "PL",
    "STEP_CONTEXT",
    "SYNC_CALLS",
    "XM",
    "Loop",
    "StepAnalysis",
    "StepLoop",
    "every_n_steps_guard",
    "is_device_loader",
    "is_optimizer_step",
    "is_step_closure",
    "mutually_exclusive",
    "optimizer_closure",
]

Loop = ast.For | ast.AsyncFor | ast.While
# How many parameters a callable passed on from caller to callee is followed through.
PASSED_ON_DEPTH = 8
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
# How deep ``_marks`` reuses the lists of nested statements (deeper, it walks them inline).
_MARKS_DEPTH = 50

# --- the analysis ----------------------------------------------------------------------


class StepAnalysis:
    """The step loops of a module and the facts rules ask about them."""

    def __init__(self, semantic: Semantic):
        self.semantic = semantic
        self.tree = semantic.tree
        self._reaches_backward: dict[int, bool] = {}
        self._training: dict[int, bool] = {}
        self._resolved: dict[int, Function | None] = {}
        self._values: dict[int, dict[str, list[ast.expr]]] = {}
        self._reached: dict[int, dict[int, Function]] = {}
        self._bound: dict[tuple[int, str], Function | None] = {}
        self._callable_kinds: dict[int, str | None] = {}
        self._binding_depth = 0
        self._region_marks: dict[int, list[ast.AST]] = {}
        self._loaders = DeviceLoaders(self.semantic)
        self._synced = SyncedValues(self.is_sync_call, self.is_step_context)
        # Most modules call no backward at all: then no loop trains, and no loop or
        # function needs walking to find out.
        self._any_backward = any(is_backward_call(call, self.semantic) for call in self.semantic.calls)
        all_loops = sorted(self.semantic.nodes_of(*_LOOPS), key=lambda n: (n.lineno, n.col_offset))
        training = [loop for loop in all_loops if self.is_training_loop(loop)]
        step_loops = [loop for loop in training if not self._contains_training_loop(loop)]
        step_loops.sort(key=lambda n: (n.lineno, n.col_offset))
        self.loops: list[StepLoop] = [StepLoop(self, loop) for loop in step_loops]
        self._by_node = {id(loop.node): loop for loop in self.loops}
        self._by_helper: dict[int, list[StepLoop]] = {}
        for loop in self.loops:
            for helper in loop.helpers:
                self._by_helper.setdefault(id(helper), []).append(loop)
        # The optimizer-step loops around micro-step loops (gradient accumulation).
        self._optimizer_loops: dict[int, StepLoop] = {}
        self._by_optimizer_helper: dict[int, list[StepLoop]] = {}
        for loop in self.loops:
            outer = self._optimizer_loop_node(loop)
            if outer is None:
                continue
            if id(outer) not in self._optimizer_loops:
                self._optimizer_loops[id(outer)] = StepLoop(self, outer)
                for helper in self._optimizer_loops[id(outer)].helpers:
                    self._by_optimizer_helper.setdefault(id(helper), []).append(self._optimizer_loops[id(outer)])
            loop.optimizer_loop = self._optimizer_loops[id(outer)]
            loop.optimizer_loop.micro_step_loops.append(loop)

    def release(self) -> None:
        """Let go of the loops once the module is checked (``Context.release``): they
        refer back to the analysis and to each other, cycles that would keep the tree
        until the cyclic collector traversed all of it."""
        for loop in (*self.loops, *self._optimizer_loops.values()):
            loop.__dict__.clear()
        self.__dict__.clear()

    # -- queries ------------------------------------------------------------------
    def loop_of(self, node: ast.AST) -> StepLoop | None:
        """The step loop whose step holds ``node`` (its body, a helper it calls, also
        under an every-N-steps guard, not in a step closure), else None."""
        found = self._locate(node)
        return found[0] if found else None

    def in_step(self, node: ast.AST) -> bool:
        """``node`` runs on every step of some step loop: in its step, not in a step
        closure, not under an every-N-steps guard, not after the loop."""
        found = self._locate(node)
        return found is not None and found[1] is None

    def loop_running_every_step(self, node: ast.AST) -> StepLoop | None:
        """The loop whose step runs ``node`` on every optimizer step, not under an
        every-N-steps guard: its step loop (``in_step``), else the optimizer-step loop
        around a micro-step loop whose own body (or a helper it calls) holds ``node``
        (``print(loss_accum.item())`` after the micro-steps)."""
        found = self._locate(node) or self._locate(node, self._optimizer_loops, self._by_optimizer_helper)
        return found[0] if found is not None and found[1] is None else None

    def _locate(
        self,
        node: ast.AST,
        by_node: dict[int, StepLoop] | None = None,
        by_helper: dict[int, list[StepLoop]] | None = None,
    ) -> tuple[StepLoop, ast.If | None] | None:
        """(the step loop, the every-N guard the node is under or None); among the
        optimizer-step loops when given ``by_node``/``by_helper``."""
        by_node = self._by_node if by_node is None else by_node
        by_helper = self._by_helper if by_helper is None else by_helper
        guard: ast.If | None = None
        child: ast.AST = node
        for anc in self_and_ancestors(parent(node)):
            if isinstance(anc, ast.Lambda) and is_closure_function(anc, self.semantic):
                return None
            if isinstance(anc, ast.ClassDef):
                return None
            if (
                isinstance(anc, ast.If)
                and child in anc.body
                and guard is None
                and every_n_steps_guard(anc.test, self.options)
            ):
                guard = anc
            if isinstance(anc, _LOOPS) and id(anc) in by_node:
                loop = by_node[id(anc)]
                if child in anc.body or (isinstance(anc, ast.While) and child is anc.test):
                    return loop, guard
                return None
            if isinstance(anc, FUNCTIONS):
                if is_closure_function(anc, self.semantic):
                    return None
                loops = by_helper.get(id(anc))
                if not loops:
                    return None
                loop = loops[0]
                return loop, guard or loop._reach_guard.get(id(anc))
            child = anc
        return None

    # -- building -----------------------------------------------------------------
    def _optimizer_loop_node(self, loop: StepLoop) -> Loop | None:
        """The optimizer-step loop around a micro-step loop: the nearest loop around it
        in its function, when the micro-steps step no optimizer and that loop's own body
        (outside its step loops) does."""
        if self._steps_optimizer(loop.node.body, set(), within=loop.node):
            return None
        outer = next((a for a in ancestors(loop.node) if isinstance(a, (*_LOOPS, *FUNCTIONS, ast.ClassDef))), None)
        if isinstance(outer, FUNCTIONS):
            return self._calling_optimizer_loop(outer)
        if not isinstance(outer, _LOOPS) or id(outer) in self._by_node:
            return None
        return outer if self._steps_optimizer(outer.body, set()) else None

    def _calling_optimizer_loop(self, function: Function) -> Loop | None:
        """The optimizer-step loop around micro-steps written in ``function``: the
        innermost training loop that calls it (through helpers, improved-diffusion's
        ``run_loop`` -> ``run_step`` -> ``forward_backward``) and whose own body steps an
        optimizer (``run_step`` -> ``optimize``)."""
        callers = [
            loop
            for loop in self._outer_training_loops
            if id(function) in self._reached_functions(loop) and self._steps_optimizer(loop.body, set())
        ]
        # The innermost: the one no other caller's body or helpers hold.
        innermost = [
            loop
            for loop in callers
            if not any(other is not loop and self._holds_loop(loop, other) for other in callers)
        ]
        return innermost[0] if len(innermost) == 1 else None

    @cached_property
    def _outer_training_loops(self) -> list[Loop]:
        """The training loops that hold a step loop (in their body or a helper)."""
        loops = sorted(self.semantic.nodes_of(*_LOOPS), key=lambda n: (n.lineno, n.col_offset))
        return [loop for loop in loops if id(loop) not in self._by_node and self.is_training_loop(loop)]

    def _reached_functions(self, loop: Loop) -> dict[int, Function]:
        """The same-module functions ``loop``'s body calls, transitively (computed once)."""
        key = id(loop)
        found = self._reached.get(key)
        if found is None:
            found = {}
            pending: list[list[ast.stmt]] = [loop.body]
            while pending:
                for call in self.region_calls(pending.pop()):
                    func = self.resolve(call)
                    if func is not None and id(func) not in found and not _contains(func, loop):
                        found[id(func)] = func
                        pending.append(func.body)
            self._reached[key] = found
        return found

    def _holds_loop(self, outer: Loop, inner: Loop) -> bool:
        """``inner`` runs within ``outer``'s iterations: in its body or a function it reaches."""
        reached = self._reached_functions(outer)
        return any(anc is outer or id(anc) in reached for anc in ancestors(inner))

    def _steps_optimizer(self, statements: list[ast.stmt], visiting: set[int], within: ast.AST | None = None) -> bool:
        """These statements step an optimizer, directly or through same-module functions
        they call; not in step loops other than ``within``."""
        for call in self.region_calls(statements):
            if any(id(anc) in self._by_node and anc is not within for anc in ancestors(call)):
                continue
            if is_optimizer_step(call, self.semantic, self._optimizer_names):
                return True
            func = self.resolve(call)
            if func is not None and id(func) not in visiting:
                visiting.add(id(func))
                if self._steps_optimizer(func.body, visiting):
                    return True
        return False

    @cached_property
    def _optimizer_names(self) -> frozenset[str]:
        """Dotted names assigned an optimizer built from ``torch.optim``/syncfree classes."""
        names: set[str] = set()
        for node in self.semantic.nodes_of(ast.Assign):
            qualified = self.semantic.call_name(node.value) if isinstance(node.value, ast.Call) else None
            if qualified and qualified.startswith(OPTIMIZER_MODULES) and "lr_scheduler" not in qualified:
                names.update(n for t in node.targets if (n := dotted_name(t)))
        return frozenset(names)

    def is_training_loop(self, loop: Loop) -> bool:
        """The loop body calls ``.backward()``, directly or through functions it calls."""
        if not self._any_backward:
            return False
        key = id(loop)
        if key not in self._training:
            self._training[key] = False
            self._training[key] = self._region_reaches_backward(loop.body, set())
        return self._training[key]

    def reaches_backward(self, statements: list[ast.stmt]) -> bool:
        """These statements call ``.backward()``, directly or through functions they call."""
        return self._any_backward and self._region_reaches_backward(statements, set())

    def _region_reaches_backward(self, statements: list[ast.stmt], visiting: set[int]) -> bool:
        calls = list(self.region_calls(statements))
        for call in calls:
            if is_backward_call(call, self.semantic):
                return True
        for call in calls:
            func = self.resolve(call)
            if func is not None and self._function_reaches_backward(func, visiting):
                return True
        return False

    def _function_reaches_backward(self, func: Function, visiting: set[int]) -> bool:
        key = id(func)
        if key in self._reaches_backward:
            return self._reaches_backward[key]
        if key in visiting:
            return False
        visiting.add(key)
        result = self._region_reaches_backward(func.body, visiting)
        visiting.discard(key)
        self._reaches_backward[key] = result
        return result

    def _contains_training_loop(self, loop: Loop) -> bool:
        """A training loop nested in ``loop``'s body or in a function it calls."""
        seen: set[int] = set()
        pending: list[list[ast.stmt]] = [loop.body]
        while pending:
            statements = pending.pop()
            for stmt in statements:
                for node in self._marks(stmt):
                    if isinstance(node, _LOOPS) and node is not loop and self.is_training_loop(node):
                        return True
            for call in self.region_calls(statements):
                func = self.resolve(call)
                if func is not None and id(func) not in seen and not _contains(func, loop):
                    seen.add(id(func))
                    pending.append(func.body)
        return False

    def region_calls(self, statements: Iterable[ast.stmt]) -> Iterator[ast.Call]:
        """The calls that run when ``statements`` run (not in nested definitions or step closures)."""
        for stmt in statements:
            for node in self._marks(stmt):
                if isinstance(node, ast.Call):
                    yield node

    def _marks(self, stmt: ast.stmt, depth: int = 0) -> list[ast.AST]:
        """The calls and loops of ``walk_region(stmt, include_self=True)``, in its order,
        found once per statement: each loop around a statement (and each function that
        runs it) asks again, and a nested statement's list is reused in its parent's."""
        found = self._region_marks.get(id(stmt))
        if found is not None:
            return found
        found = []
        stack: list[ast.AST] = [stmt]
        while stack:
            node = stack.pop()
            if node is not stmt and isinstance(node, ast.stmt) and depth < _MARKS_DEPTH:
                found.extend(self._marks(node, depth + 1))
                continue
            if isinstance(node, (ast.Call, *_LOOPS)):
                found.append(node)
            if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
                # Decorators run where the definition stands; the body does not.
                stack.extend(reversed(node.decorator_list))
                continue
            if isinstance(node, ast.Lambda) and is_closure_function(node, self.semantic):
                continue
            stack.extend(reversed(child_nodes(node)))
        self._region_marks[id(stmt)] = found
        return found

    def resolve(self, call: ast.Call) -> Function | None:
        """The same-module function a call calls: ``f(...)`` (a module-level function,
        or one defined in an enclosing function), ``self.m(...)`` (a method of the
        enclosing class or of a same-module base class)."""
        key = id(call)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(call)
        return self._resolved[key]

    def _resolve(self, call: ast.Call) -> Function | None:
        func = call.func
        if isinstance(func, ast.Name):
            return self._callee_named(func.id, call)
        closure = self.closure_passed(call)
        if closure is not None:
            return closure
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
            cls = home = enclosing(call, ast.ClassDef)
            seen: set[int] = set()
            while cls is not None and id(cls) not in seen:
                seen.add(id(cls))
                for stmt in cls.body:
                    if isinstance(stmt, FUNCTIONS) and stmt.name == func.attr:
                        return stmt
                cls = next((self._module_class(b) for b in cls.bases if self._module_class(b)), None)
            if func.value.id == "self" and home is not None:
                return self._attribute_callee(home, func.attr)  # type: ignore[arg-type]
        return None

    def _attribute_callee(self, cls: ast.ClassDef, attr: str) -> Function | None:
        """``self.loss_scaler(loss, opt)`` where the class assigns ``self.loss_scaler`` an
        object of a same-module class with a ``__call__`` (``= NativeScaler()``), or a name
        that holds one or a function: a parameter of the method (``= loss_scaler`` in
        ``__init__``: what the constructions of the class pass, ``bound_callee``)."""
        for value in self._self_attributes(cls).get(attr, ()):
            if isinstance(value, ast.Call):
                found = self._instance_call([value])
            else:
                found = self._callee_named(value.id, value) if isinstance(value, ast.Name) else None
            if found is not None:
                return found
        return None

    def _self_attributes(self, cls: ast.ClassDef) -> dict[str, list[ast.expr]]:
        """The values the class's methods assign to each ``self.<attr>``."""
        return self._self_attributes_by_class.get(id(cls), {})

    @cached_property
    def _self_attributes_by_class(self) -> dict[int, dict[str, list[ast.expr]]]:
        """``_self_attributes`` of every class, from one pass over the module's
        assignments (not a walk of each class), each given to every class around it; in
        the order a walk of the class (from the end) met them: the last first."""
        found: dict[int, dict[str, list[ast.expr]]] = {}
        assignments = sorted(
            self.semantic.nodes_of(ast.Assign, ast.AnnAssign), key=lambda n: (n.lineno, n.col_offset), reverse=True
        )
        for node in assignments:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            attrs = [
                target.attr
                for target in targets
                if isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ]
            if attrs:
                for cls in ancestors(node):
                    if isinstance(cls, ast.ClassDef):
                        by_attr = found.setdefault(id(cls), {})
                        for attr in attrs:
                            by_attr.setdefault(attr, []).append(value)
        return found

    def _function_named(self, name: str, at: ast.AST) -> Function | None:
        """The same-module function ``name`` means at ``at``: one defined in an
        enclosing function, else a module-level one."""
        for scope in enclosing_scopes(at):
            if isinstance(scope, ast.Module):
                # A def under a module-level `for`/`if`/`with` binds a module name too.
                return self.semantic.module_functions.get(name) or self._local_functions(scope).get(name)
            found = self._local_functions(scope).get(name)
            if found is not None:
                return found
        return None

    def _callee_named(self, name: str, at: ast.AST) -> Function | None:
        """What calling ``name`` at ``at`` runs, of the module; the innermost scope that
        binds the name decides: a ``def`` there; an object of a same-module class with a
        ``__call__`` assigned there (``stepper = Stepper(...)``: that ``__call__``); a
        parameter: what the calls of the function bind to it (``bound_callee``)."""
        for scope in enclosing_scopes(at):
            if isinstance(scope, ast.Module):
                # A def under a module-level `for`/`if`/`with` binds a module name too.
                found = self.semantic.module_functions.get(name) or self._local_functions(scope).get(name)
                return found or self._instance_call(self._scope_values(scope).get(name, ()))
            found = self._local_functions(scope).get(name)
            if found is not None:
                return found
            values = self._scope_values(scope).get(name)
            if values is not None:
                return self._instance_call(values)
            if name in parameter_names(scope):  # type: ignore[arg-type]
                return self.bound_callee(scope, name)  # type: ignore[arg-type]
        return None

    def _instance_call(self, values: Iterable[ast.expr]) -> Function | None:
        """The ``__call__`` of the same-module class one of ``values`` builds an object of."""
        for value in values:
            if isinstance(value, ast.Call):
                cls = self._module_class(value.func)
                method = _method(cls, "__call__") if cls is not None else None
                if method is not None:
                    return method
        return None

    def bound_callee(self, function: Function, parameter: str) -> Function | None:
        """The same-module function a call of ``parameter`` runs, from what the calls of
        ``function`` bind to it (``values.bound_arguments``): a function passed by name
        (``train(model, loader, step_fn=update)``), an object of a same-module class with a
        ``__call__`` (``train_one_epoch(..., loss_scaler)`` where ``loss_scaler =
        NativeScaler()``, or ``NativeScaler()`` itself), or a parameter of the caller bound
        in turn. Where the calls pass different ones, the first that runs a backward:
        the loop trains on those calls, and its step needs its sync and keeps its
        per-step reads there (a sync in the same loop run for evaluation costs little).
        None when no call binds one (a library entry point: the caller is not known), and
        past ``PASSED_ON_DEPTH`` parameters passed on."""
        key = (id(function), parameter)
        if key in self._bound:
            return self._bound[key]
        if self._binding_depth >= PASSED_ON_DEPTH:
            return None
        self._bound[key] = None  # a parameter bound to itself through a cycle: no answer there
        self._binding_depth += 1
        try:
            found = self._bind(function, parameter)
        finally:
            self._binding_depth -= 1
        self._bound[key] = found
        return found

    def _bind(self, function: Function, parameter: str) -> Function | None:
        candidates: dict[int, Function] = {}  # by id, in the order of the calls
        for value in bound_arguments(function, self.semantic).get(parameter, ()):
            callee = self._callee_of_value(value, function) if value is not None else None
            if callee is not None:
                candidates.setdefault(id(callee), callee)
        found = next(iter(candidates.values()), None)
        if len(candidates) > 1:
            found = next((c for c in candidates.values() if self._function_reaches_backward(c, set())), found)
        return found

    def _callee_of_value(self, value: ast.expr, function: Function) -> Function | None:
        """The same-module function calling ``value`` runs (a value bound to a parameter
        of ``function``): a function's name, an object of a class with ``__call__`` (by
        name or built there), a parameter of the caller bound in turn."""
        if isinstance(value, ast.Call):
            return self._instance_call([value])
        if not isinstance(value, ast.Name):
            return None
        # A default is evaluated where the function is defined; an argument at the call.
        return self._callee_named(value.id, function if isinstance(parent(value), ast.arguments) else value)

    def step_callables_passed(self, call: ast.Call) -> list[tuple[int | str, str]]:
        """What ``call`` passes that is a step callable (``step_callable_kind``): each
        as (position from 0, or keyword; ``told.BACKWARD``/``told.UPDATE``). An importer
        tells the module of the function it calls (``analysis/told.py``): there the
        parameter is bound, as by a call of the same module (``bound_callee``)."""
        passed: list[tuple[int | str, str]] = []
        for position, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break  # the positions after it are not known
            kind = self.step_callable_kind(arg)
            if kind is not None:
                passed.append((position, kind))
        for named in call.keywords:
            kind = self.step_callable_kind(named.value) if named.arg is not None else None
            if kind is not None:
                passed.append((named.arg, kind))  # type: ignore[arg-type]
        return passed

    def step_callable_kind(self, value: ast.expr) -> str | None:
        """What calling ``value`` runs, when it is a step callable: the backward and the
        optimizer step (``told.UPDATE``: a library loss scaler, timm's ``NativeScaler()``
        or a name assigned one; a same-module function or ``__call__`` that does both),
        the backward only (``told.BACKWARD``); also a parameter bound to one (by the
        module's calls, or by its importers). None for anything else."""
        if isinstance(value, ast.Call) and self.semantic.call_name(value) in LOSS_SCALERS:
            return told.UPDATE
        if isinstance(value, (ast.Name, ast.Attribute)) and dotted_name(value) in loss_scaler_names(self.semantic):
            return told.UPDATE
        if isinstance(value, ast.Call):
            callee = self._instance_call([value])
        elif isinstance(value, ast.Name):
            function = enclosing(value, FUNCTIONS)
            key = (id(function), value.id)
            if function is not None and key in loss_scaler_parameters(self.semantic):
                return told.UPDATE
            if function is not None and key in importer_bound_parameters(self.semantic):
                return importer_bound_parameters(self.semantic)[key]
            callee = self._callee_named(value.id, value)
        else:
            return None
        if callee is None or not self._any_backward:
            return None
        if id(callee) not in self._callable_kinds:  # once per callable, however often passed
            kind = None
            if self._function_reaches_backward(callee, set()):
                kind = told.UPDATE if self._steps_optimizer(callee.body, {id(callee)}) else told.BACKWARD
            self._callable_kinds[id(callee)] = kind
        return self._callable_kinds[id(callee)]

    def _scope_values(self, scope: ast.AST) -> dict[str, list[ast.expr]]:
        key = id(scope)
        if key not in self._values:
            self._values[key] = assigned_values_by_name(scope, shallow=True)
        return self._values[key]

    def closure_passed(self, call: ast.Call) -> Function | None:
        """The same-module ``def`` an optimizer step runs as its closure (see
        ``optimizer_closure``), when the closure is passed by name."""
        passed = optimizer_closure(call, self.semantic)
        return self._function_named(passed.id, call) if isinstance(passed, ast.Name) else None

    def _local_functions(self, scope: ast.AST) -> dict[str, Function]:
        """The functions defined in ``scope``'s own body (not in nested functions)."""
        return self._functions_by_scope.get(id(scope), {})

    @cached_property
    def _functions_by_scope(self) -> dict[int, dict[str, Function]]:
        """``_local_functions`` of every scope, from one pass over the module's functions
        (not a walk of each scope): of a name defined twice in a scope, the last, as the
        walk (from the end) found it first."""
        found: dict[int, dict[str, Function]] = {}
        functions = sorted(self.semantic.nodes_of(*FUNCTIONS), key=lambda n: (n.lineno, n.col_offset))
        for node in functions:
            found.setdefault(id(shallow_scope(node)), {})[node.name] = node
        return found

    def _module_class(self, base: ast.expr) -> ast.ClassDef | None:
        return self._module_classes.get(base.id) if isinstance(base, ast.Name) else None

    @cached_property
    def _module_classes(self) -> dict[str, ast.ClassDef]:
        """The module-level classes by name (the first of a name, as the scan it replaces)."""
        found: dict[str, ast.ClassDef] = {}
        for stmt in self.tree.body:
            if isinstance(stmt, ast.ClassDef):
                found.setdefault(stmt.name, stmt)
        return found

    def is_device_loader(self, expr: ast.AST | None) -> bool:
        return self._loaders.check(expr)

    # -- module-wide facts ----------------------------------------------------------
    @cached_property
    def _compiled(self) -> tuple[frozenset[str], frozenset[str]]:
        """(names and ``self.<attr>`` names bound to ``torch_xla.compile`` results,
        names of the functions that ``torch_xla.compile`` traces)."""
        callables: set[str] = set()
        traced: set[str] = set()
        for node in self.semantic.nodes_of(*FUNCTIONS, ast.Assign):
            if isinstance(node, FUNCTIONS):
                for dec in node.decorator_list:
                    target = dec.func if isinstance(dec, ast.Call) else dec
                    if self.semantic.qualified_name(target) in COMPILE:
                        callables.add(node.name)
                        traced.add(node.name)
            elif isinstance(node, ast.Assign) and self.semantic.call_name(node.value) in COMPILE:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        callables.add(target.id)
                    elif isinstance(target, ast.Attribute):
                        callables.add(target.attr)
                wrapped = node.value.args[0] if node.value.args else None  # type: ignore[attr-defined]
                if isinstance(wrapped, (ast.Name, ast.Attribute)):
                    traced.add(wrapped.id if isinstance(wrapped, ast.Name) else wrapped.attr)
        return frozenset(callables), frozenset(traced)

    def is_compiled_function(self, func: Function) -> bool:
        """``func`` is traced by ``torch_xla.compile`` (decorated, or wrapped by name)."""
        return func.name in self._compiled[1]

    def is_sync_call(self, call: ast.Call) -> bool:
        """``torch_xla.sync()``, ``xm.mark_step()``, ``xm.optimizer_step(..., barrier=True)``,
        ``next()`` on a device loader, a call of a ``torch_xla.compile``d function; a
        ``torch.cuda.synchronize()`` statement, which the port makes a sync (``CUDA_WAITS``)."""
        name = self.semantic.call_name(call)
        if name in SYNC_CALLS:
            return True
        if name in CUDA_WAITS:
            return not call.args and not call.keywords and whole_statement(call) is not None
        if name in OPTIMIZER_STEP:
            barrier = keyword(call, "barrier")
            value = barrier.value if barrier else (call.args[2] if len(call.args) > 2 else None)
            return value is not None and not (isinstance(value, ast.Constant) and not value.value)
        if isinstance(call.func, ast.Name) and call.func.id == "next" and call.args and not _shadowed("next", self):
            return self.is_device_loader(call.args[0])
        if isinstance(call.func, ast.Call) and self.semantic.call_name(call.func) in COMPILE:
            return True
        callee = call.func.id if isinstance(call.func, ast.Name) else None
        if (
            isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "self"
        ):
            callee = call.func.attr
        return callee is not None and callee in self._compiled[0]

    def is_step_context(self, with_item: ast.withitem) -> bool:
        return self.semantic.call_name(with_item.context_expr) in STEP_CONTEXT

    def sync_before_read(self, read: ast.AST, value: ast.expr) -> ast.stmt | None:
        """The statement of the step that synced ``value`` (a name or ``a.b``) before the
        host read ``read`` of it, on every path through the iteration, with nothing in
        between computing it again: the read then runs no graph (``step_syncs``). None
        when there is none, or ``read`` is not in a step."""
        if self.loop_of(read) is None:
            return None
        return self._synced.sync_before(read, value)

    @cached_property
    def module_names(self) -> frozenset[str]:
        """Dotted names that hold a ``nn.Module`` (see ``step_tensors.module_names``)."""
        return module_names(self.semantic)

    @cached_property
    def options(self) -> CommandLineOptions:
        """The module's command-line options (the period of ``step % args.log_every``)."""
        return CommandLineOptions(self.semantic)

    def is_module(self, expr: ast.AST) -> bool:
        return is_module_name(expr, self.module_names)


def _shadowed(name: str, analysis: StepAnalysis) -> bool:
    return name in analysis.semantic.imports.bindings or name in analysis.semantic.module_functions


def _method(cls: ast.ClassDef, name: str) -> Function | None:
    return next((stmt for stmt in cls.body if isinstance(stmt, FUNCTIONS) and stmt.name == name), None)


def _contains(outer: ast.AST, node: ast.AST) -> bool:
    return any(anc is outer for anc in self_and_ancestors(node))


class StepLoop:
    """One step loop: the innermost training loop, its helpers, its sync points."""

    def __init__(self, analysis: StepAnalysis, node: Loop):
        self.analysis = analysis
        self.node = node
        # helper id -> the every-N guard through which it is reached (None: on every step).
        self._reach_guard: dict[int, ast.If | None] = {}
        self.helpers: list[Function] = self._find_helpers()
        # A micro-step loop: the optimizer-step loop around it. That loop: its micro-step loops.
        self.optimizer_loop: StepLoop | None = None
        self.micro_step_loops: list[StepLoop] = []
        self._tensors = StepTensors(self)

    def __repr__(self) -> str:
        return f"StepLoop(line {self.node.lineno})"

    # -- the step ---------------------------------------------------------------------
    def _find_helpers(self) -> list[Function]:
        analysis = self.analysis
        helpers: list[Function] = []
        pending: list[tuple[list[ast.stmt], ast.If | None, ast.AST]] = [(self.node.body, None, self.node)]
        while pending:
            statements, reach_guard, owner = pending.pop(0)
            for call in analysis.region_calls(statements):
                func = analysis.resolve(call)
                if func is None or _contains(func, self.node) or is_closure_function(func, analysis.semantic):
                    continue
                guard = reach_guard or guard_between(call, owner, analysis.options)
                key = id(func)
                if key in self._reach_guard:
                    if self._reach_guard[key] is not None and guard is None:
                        # Reached on every step after all: revisit with no guard.
                        self._reach_guard[key] = None
                        pending.append((func.body, None, func))
                    continue
                self._reach_guard[key] = guard
                helpers.append(func)
                pending.append((func.body, guard, func))
        helpers.sort(key=lambda f: (f.lineno, f.col_offset))
        return helpers

    def step_statements(self) -> list[ast.stmt]:
        """The top-level statements of the step: the loop body, then the helpers' bodies."""
        statements = list(self.node.body)
        for helper in self.helpers:
            statements.extend(helper.body)
        return statements

    def contains(self, node: ast.AST, include_guarded: bool = False) -> bool:
        """``node`` is in this loop's step: not in a step closure, not after the loop,
        and (unless ``include_guarded``) not under an every-N-steps guard."""
        found = self._locate(node)
        if found is None:
            return False
        loop, guard = found
        if loop is not self and not (isinstance(node, ast.AST) and self._holds(node)):
            return False
        return include_guarded or guard is None

    def _holds(self, node: ast.AST) -> bool:
        """``node`` is in a helper this loop shares with another step loop."""
        return any(isinstance(anc, FUNCTIONS) and id(anc) in self._reach_guard for anc in self_and_ancestors(node))

    def guard_of(self, node: ast.AST) -> ast.If | None:
        """The every-N-steps guard ``node`` is under (in the loop body, in a helper, or at
        the call that reaches the helper), if any."""
        found = self._locate(node)
        return found[1] if found else None

    def _locate(self, node: ast.AST) -> tuple[StepLoop, ast.If | None] | None:
        analysis = self.analysis
        if self.micro_step_loops:
            return analysis._locate(node, analysis._optimizer_loops, analysis._by_optimizer_helper)
        return analysis._locate(node)

    def _regions(self) -> Iterator[tuple[ast.AST, list[ast.stmt]]]:
        yield self.node, self.node.body
        for helper in self.helpers:
            yield helper, helper.body

    def nodes(self) -> Iterator[ast.AST]:
        """Every node that runs in the step (also under guards; not in step closures)."""
        if isinstance(self.node, ast.While):
            yield from walk_region(self.node.test, self.analysis.semantic, include_self=True)
        for _, statements in self._regions():
            for stmt in statements:
                yield from walk_region(stmt, self.analysis.semantic, include_self=True)

    # -- sync points ------------------------------------------------------------------
    def iterates_device_loader(self) -> bool:
        return isinstance(self.node, (ast.For, ast.AsyncFor)) and self.analysis.is_device_loader(self.node.iter)

    def sync_points(self) -> list[ast.AST]:
        """The sync points of the step (also those under a guard): the loop itself when
        it iterates a device loader, sync calls, ``torch_xla.step()`` contexts."""
        points: list[ast.AST] = []
        if self.iterates_device_loader():
            points.append(self.node)
        for node in self.nodes():
            if isinstance(node, ast.Call) and self.analysis.is_sync_call(node):
                points.append(node)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                points.extend(item.context_expr for item in node.items if self.analysis.is_step_context(item))
        return points

    def syncs_every_iteration(self) -> bool:
        """Some sync point runs on every iteration (not only under an every-N guard
        such as gradient accumulation's ``if (i + 1) % k == 0:``)."""
        return any(point is self.node or self.guard_of(point) is None for point in self.sync_points())

    # -- tensors ------------------------------------------------------------------------
    def is_tensor(self, expr: ast.AST | None) -> bool:
        """``expr`` is a tensor produced in the step (see ``StepTensors.is_tensor``)."""
        return self._tensors.is_tensor(expr)
