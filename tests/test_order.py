"""The order-of-events analysis (xlalint.analysis.order): paths through a step."""

from __future__ import annotations

import ast
import textwrap

from xlalint.analysis.order import (
    EventFinder,
    Kind,
    OrderAnalysis,
    condition_key,
    find_step_loops,
    loop_paths,
    same_module_resolver,
)
from xlalint.analysis.semantic import Semantic, attach_parents
from xlalint.engine.config import Settings
from xlalint.engine.context import Context

HEADER = "import torch\nimport torch_xla.core.xla_model as xm\nscaler = torch.cuda.amp.GradScaler()\n"


def parse(body: str) -> ast.Module:
    tree = ast.parse(HEADER + textwrap.dedent(body))
    attach_parents(tree)
    return tree


def kinds(body: str, *, max_paths: int = 256) -> set[tuple[str, ...]]:
    """The event kinds of each path through the first loop's body."""
    tree = parse(body)
    semantic = Semantic(tree)
    loop = next(n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While)))
    analysis = OrderAnalysis(EventFinder(semantic), same_module_resolver(semantic), max_paths=max_paths)
    return {tuple(e.kind.value for e in path) for path in analysis.paths(loop.body)}


def test_straight_line_order():
    assert kinds(
        """
        for x in loader:
            scaler.scale(model(x)).backward()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            xm.mark_step()
        """
    ) == {("backward", "unscale", "clip", "scaler-step", "update", "sync")}


def test_if_else_branches_are_separate_paths():
    tree = parse(
        """
        for x in loader:
            if use_amp:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            opt.step()
        """
    )
    semantic = Semantic(tree)
    analysis = OrderAnalysis(EventFinder(semantic))
    paths = analysis.paths(next(n for n in ast.walk(tree) if isinstance(n, ast.For)).body)
    assert sorted(p.events[0].scaled for p in paths) == [False, True]
    assert all(p.events[1].kind is Kind.OPTIMIZER_STEP for p in paths)
    assert [p.uses_scaler for p in paths].count(True) == 1


def test_exclusive_branches_are_not_ordered():
    paths = kinds(
        """
        for x in loader:
            if use_amp:
                scaler.unscale_(opt)
            else:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        """
    )
    assert paths == {("unscale",), ("clip",)}


def test_if_without_else_is_body_or_nothing():
    assert kinds(
        """
        for x in loader:
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        """
    ) == {("backward", "clip", "optimizer-step"), ("backward", "optimizer-step")}


def test_same_condition_takes_the_same_branch():
    paths = kinds(
        """
        for x in loader:
            if use_amp:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if use_amp:
                scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if not use_amp:
                opt.step()
            else:
                scaler.step(opt)
        """
    )
    assert paths == {
        ("backward", "unscale", "clip", "scaler-step"),
        ("backward", "clip", "optimizer-step"),
    }


def test_is_none_conditions_are_tests_of_the_name():
    assert condition_key(ast.parse("scaler is not None", mode="eval").body) == condition_key(
        ast.parse("scaler", mode="eval").body
    )
    key, positive = condition_key(ast.parse("scaler is None", mode="eval").body)
    assert not positive
    key2, positive2 = condition_key(ast.parse("not scaler", mode="eval").body)
    assert (key, positive) == (key2, positive2)


def test_continue_ends_the_path():
    assert kinds(
        """
        for i, x in enumerate(loader):
            loss.backward()
            if (i + 1) % accum != 0:
                continue
            opt.step()
        """
    ) == {("backward",), ("backward", "optimizer-step")}


def test_same_module_helpers_expand_inline():
    assert kinds(
        """
        def backward(loss):
            scaler.scale(loss).backward()
            return None
            opt.step()  # unreachable after the return
        def update():
            scaler.step(opt)
            scaler.update()
        for x in loader:
            backward(model(x))
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            update()
        """
    ) == {("backward", "clip", "scaler-step", "update")}


def test_recursive_helpers_stop():
    assert kinds(
        """
        def f(n):
            loss.backward()
            f(n - 1)
        for x in loader:
            f(3)
        """
    ) == {("backward",)}


def test_inner_loop_body_once_and_try_body():
    assert kinds(
        """
        for x in loader:
            for mb in x.chunk(4):
                scaler.scale(model(mb)).backward()
            try:
                xm.reduce_gradients(opt)
            except RuntimeError:
                pass
            finally:
                opt.step()
        """
    ) == {("backward", "all-reduce", "optimizer-step")}


def test_events_in_one_statement_in_evaluation_order():
    assert kinds(
        """
        for x in loader:
            loss.backward(); norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step()
        """
    ) == {("backward", "clip", "optimizer-step")}


def test_all_reduce_only_of_gradients():
    assert kinds(
        """
        for x in loader:
            loss.backward()
            xm.all_reduce("sum", [loss])
            xm.all_reduce("sum", xm._fetch_gradients(opt))
            grads = [p.grad for p in model.parameters()]
            xm.all_reduce("sum", [p.grad for p in model.parameters()])
            xm.optimizer_step(opt)
        """
    ) == {("backward", "all-reduce", "all-reduce", "optimizer-step")}


def test_scheduler_step_is_not_an_optimizer_step():
    assert kinds(
        """
        for x in loader:
            loss.backward()
            optimizer.step()
            scheduler.step()
            lr_sched.step()
        """
    ) == {("backward", "optimizer-step")}


def test_step_closures_and_lambdas_are_not_in_the_path():
    assert kinds(
        """
        for x in loader:
            loss.backward()
            xm.add_step_closure(lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
            opt.step()
        """
    ) == {("backward", "optimizer-step")}


def test_paths_are_capped():
    body = "for x in loader:\n    loss.backward()\n" + "".join(
        f"    if c{i}:\n        xm.mark_step()\n" for i in range(12)
    )
    tree = parse(body)
    semantic = Semantic(tree)
    loop = next(n for n in ast.walk(tree) if isinstance(n, ast.For))
    analysis = OrderAnalysis(EventFinder(semantic), same_module_resolver(semantic), max_paths=16)
    paths = analysis.paths(loop.body)
    assert analysis.truncated and len(paths) <= 16


def test_branches_without_events_do_not_multiply_paths():
    body = "for x in loader:\n    loss.backward()\n" + "".join(f"    if c{i}:\n        print({i})\n" for i in range(40))
    assert kinds(body, max_paths=4) == {("backward",)}


def test_events_keep_their_nodes():
    tree = parse(
        """
        for x in loader:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
        """
    )
    semantic = Semantic(tree)
    analysis = OrderAnalysis(EventFinder(semantic))
    (path,) = analysis.paths(next(n for n in ast.walk(tree) if isinstance(n, ast.For)).body)
    backward, step = path.events
    assert backward.scaled and backward.kind is Kind.BACKWARD and isinstance(backward.stmt, ast.Expr)
    assert ast.unparse(step.scaler) == "scaler" and ast.unparse(step.optimizer) == "optimizer"
    assert step.call.lineno == backward.call.lineno + 1


def test_scalers_found_through_aliases_and_self():
    tree = parse(
        """
        import torch as T
        from torch import amp
        class A:
            def __init__(self):
                self.grad_scaler = T.cuda.amp.GradScaler()
                self.s2 = amp.GradScaler("cuda") if use_amp else None
        """
    )
    finder = EventFinder(Semantic(tree))
    assert {"scaler", "self.grad_scaler", "self.s2"} <= finder.scalers
    assert finder.has_scaler


def test_step_loop_is_innermost_backward_loop():
    tree = parse(
        """
        def train_epoch(loader):
            for x in loader:
                model(x).backward()
        for epoch in range(3):
            train_epoch(loader)
        for x in eval_loader:
            model(x)
        """
    )
    loops = find_step_loops(Semantic(tree))
    assert [loop.lineno for loop in loops] == [6]


def test_micro_batch_loop_uses_the_enclosing_loop():
    source = HEADER + textwrap.dedent(
        """
        for x in loader:
            for mb in x.chunk(2):
                model(mb).backward()
            opt.step()
        """
    )
    tree = ast.parse(source)
    attach_parents(tree)
    ctx = Context(source, "t.py", tree, Settings())
    ((loop, paths),) = loop_paths(ctx.semantic, ctx.steps)
    assert loop.lineno == 5
    assert {tuple(e.kind for e in p) for p in paths} == {(Kind.BACKWARD, Kind.OPTIMIZER_STEP)}


def _loop_paths(body: str) -> list[tuple[ast.AST, list]]:
    source = HEADER + textwrap.dedent(body)
    tree = ast.parse(source)
    attach_parents(tree)
    ctx = Context(source, "t.py", tree, Settings())
    return loop_paths(ctx.semantic, ctx.steps)


def test_a_closure_the_step_is_given_runs_before_the_step():
    # LBFGS: the only backward is in the closure; the loop is a training loop, and the
    # closure's events come before the step that runs it.
    ((loop, paths),) = _loop_paths(
        """
        for x in loader:
            def closure():
                opt.zero_grad()
                loss = model(x)
                loss.backward()
                return loss
            opt.step(closure)
            xm.mark_step()
        """
    )
    assert loop.lineno == 5
    assert {tuple(e.kind for e in p) for p in paths} == {(Kind.BACKWARD, Kind.OPTIMIZER_STEP, Kind.SYNC)}


def test_xm_optimizer_step_reduces_before_its_closure_runs():
    ((_loop, with_closure),) = _loop_paths(
        """
        for x in loader:
            def closure():
                model(x).backward()
            xm.optimizer_step(opt, optimizer_args={"closure": closure})
        """
    )
    ((_loop, without),) = _loop_paths(
        """
        for x in loader:
            model(x).backward()
            xm.optimizer_step(opt, optimizer_args={"closure": None})
        """
    )
    assert [[(e.kind, e.reduces) for e in p] for p in with_closure] == [
        [(Kind.BACKWARD, False), (Kind.OPTIMIZER_STEP, False)]
    ]
    assert [[(e.kind, e.reduces) for e in p] for p in without] == [
        [(Kind.BACKWARD, False), (Kind.OPTIMIZER_STEP, True)]
    ]


def test_events_keep_their_innermost_statement():
    # An `if` around a clip is first scanned as a whole (is it inert?); the clip's
    # event must still name the clip's own statement, where fixes insert code.
    tree = parse(
        """
        for i, x in enumerate(loader):
            scaler.scale(model(x)).backward()
            if (i + 1) % 4 == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
        """
    )
    semantic = Semantic(tree)
    loop = next(n for n in ast.walk(tree) if isinstance(n, ast.For))
    analysis = OrderAnalysis(EventFinder(semantic), same_module_resolver(semantic))
    clips = [e for path in analysis.paths(loop.body) for e in path if e.kind is Kind.CLIP]
    assert clips
    assert all(isinstance(e.stmt, ast.Expr) and e.stmt.value is e.call for e in clips)


def test_a_conditions_key_is_dumped_once_per_test_however_many_paths_ask(monkeypatch):
    from xlalint.analysis import reaching

    test = ast.parse("if not (x is None): pass").body[0].test
    dumps = []
    original = ast.dump
    monkeypatch.setattr(reaching.ast, "dump", lambda node: dumps.append(node) or original(node))
    assert reaching.condition_key(test) == reaching.condition_key(test) == ("Name(id='x', ctx=Load())", True)
    assert len(dumps) == 1


def test_the_order_walk_is_ast_walks_order_without_the_shared_contexts_and_operators():
    from xlalint.analysis.order import _walk

    tree = ast.parse("for x in y:\n    if a and not b:\n        z = f(x) + g(-x)[0]\n    else:\n        break\n")
    shared = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
    expected = [n for n in ast.walk(tree) if not isinstance(n, shared)]
    assert list(_walk(tree)) == expected and len(expected) > 20
