"""The step analysis (xlalint.analysis.steps): step loops, helpers, device loaders,
guards, step closures, sync points, tensors."""

from __future__ import annotations

import ast
import textwrap

import pytest

from xlalint.analysis.semantic import attach_parents
from xlalint.analysis.steps import (
    StepAnalysis,
    every_n_steps_guard,
    is_device_loader,
    is_step_closure,
    mutually_exclusive,
)
from xlalint.engine.config import Settings
from xlalint.engine.context import Context


def context(source: str) -> Context:
    source = textwrap.dedent(source)
    tree = ast.parse(source)
    attach_parents(tree)
    return Context(source, "train.py", tree, Settings())


# The context each analysis of these tests was built from (it holds the analysis, so the
# id stays that analysis's).
CONTEXTS: dict[int, Context] = {}


def analysis(source: str) -> StepAnalysis:
    ctx = context(source)
    CONTEXTS[id(ctx.steps)] = ctx
    return ctx.steps


def find(ctx_or_steps, text: str, kind: type = ast.AST) -> ast.AST:
    """The first (outermost) node of ``kind`` whose source is ``text``."""
    ctx = CONTEXTS[id(ctx_or_steps)] if isinstance(ctx_or_steps, StepAnalysis) else ctx_or_steps
    for node in ast.walk(ctx.tree):
        if isinstance(node, kind) and ctx.source_of(node) == text:
            return node
    raise AssertionError(f"no {kind.__name__} {text!r}")


def expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


# --- step loops --------------------------------------------------------------------


def test_the_step_loop_is_the_innermost_training_loop():
    steps = analysis("""
        import torch
        for epoch in range(3):
            for x, y in loader:
                model(x, y).backward()
            for x, y in val_loader:
                model(x)
    """)
    assert [loop.node.lineno for loop in steps.loops] == [4]


def test_a_loop_without_backward_is_not_a_training_loop():
    steps = analysis("""
        import torch
        for x, y in loader:
            loss = model(x, y)
            print(loss)
    """)
    assert steps.loops == []


def test_backward_forms():
    for call in ("scaler.scale(loss).backward()", "torch.autograd.backward(loss)", "backward([loss])"):
        steps = analysis(f"""
            import torch
            from torch.autograd import backward
            for x in loader:
                loss = model(x)
                {call}
        """)
        assert len(steps.loops) == 1, call


def test_helpers_transitively_and_the_epoch_loop_calling_a_function_with_the_batch_loop():
    steps = analysis("""
        import torch
        def compute(model, x):
            return model(x).sum()
        def backward_step(model, x, opt):
            loss = compute(model, x)
            loss.backward()
            opt.step()
        def train_epoch(loader):
            for x in loader:
                backward_step(model, x, opt)
        def unused():
            pass
        for epoch in range(10):
            train_epoch(loader)
    """)
    (loop,) = steps.loops
    assert loop.node.lineno == 10
    assert [h.name for h in loop.helpers] == ["compute", "backward_step"]
    assert steps.loop_of(find(steps, "opt.step()", ast.Call)) is loop
    assert steps.loop_of(find(steps, "pass", ast.Pass)) is None


def test_methods_called_through_self_and_nested_functions():
    steps = analysis("""
        import torch
        class Base:
            def _backward(self, loss):
                loss.backward()
        class Trainer(Base):
            def _step(self, batch):
                self._backward(self.model(batch))
            def fit(self):
                def log(loss):
                    print(loss)
                for batch in self.loader:
                    self._step(batch)
                    log(batch)
    """)
    (loop,) = steps.loops
    assert sorted(h.name for h in loop.helpers) == ["_backward", "_step", "log"]
    assert len(loop.step_statements()) == len(loop.node.body) + 3


def test_code_after_the_loop_and_in_else_is_not_in_the_step():
    steps = analysis("""
        import torch
        for x in loader:
            loss = model(x)
            loss.backward()
        else:
            a = loss.item()
        b = loss.item()
    """)
    assert steps.in_step(find(steps, "loss = model(x)", ast.Assign))
    assert not steps.in_step(find(steps, "a = loss.item()", ast.Assign))
    assert not steps.in_step(find(steps, "b = loss.item()", ast.Assign))
    assert not steps.in_step(find(steps, "loader", ast.Name))


def test_recursion_does_not_hang():
    steps = analysis("""
        import torch
        def a(x):
            b(x)
        def b(x):
            a(x)
            x.backward()
        for x in loader:
            a(x)
    """)
    assert len(steps.loops) == 1


# --- guards and step closures --------------------------------------------------------


@pytest.mark.parametrize(
    "test, expected",
    [
        ("step % 10 == 0", True),
        ("i % args.log_every == 0", True),
        ("(i + 1) % k == 0", True),
        ("0 == step % 10", True),
        ("not step % 10", True),
        ("step % 10 == 0 and xm.is_master_ordinal()", True),
        ("(step + 1) % k == 0 or step == len(loader) - 1", True),
        ("step % 10 != 0", False),
        ("step % 10 == 0 or verbose", False),
        ("step % 10 == 0 or True", False),
        ("(step % 250 == 0 or step == n - 1) and not use_compile", True),
        ("(step > 0 and step % 250 == 0) or step == n - 1", True),
        ("step % 1 == 0", False),
        ("'%d' % step == '1'", False),
        ("loss > 1", False),
        ("step > 0", False),
    ],
)
def test_every_n_steps_guard(test, expected):
    assert every_n_steps_guard(expr(test)) is expected


@pytest.mark.parametrize(
    "flag, expected",
    [
        ("last_step = step == max_steps - 1", True),  # build-nanogpt
        ("last_step = False\n            last_step = i == len(loader) - 1", True),
        ("last_step = step >= 0", False),  # true on every step
        ("last_step = args.last_step", False),  # a setting: every step or none
        ("last_step = False", False),  # never set by a test: not known to be rare
        ("", False),  # assigned nowhere in the scope
    ],
)
def test_an_or_with_a_flag_set_on_single_steps_is_a_guard(flag, expected):
    """``if step % N == 0 or last_step:`` runs every N steps and on the last: the flag
    counts as a single-step test when every assignment in its scope is one (or False)."""
    ctx = context(f"""
        def train(max_steps, loader):
            {flag}
            if step % 250 == 0 or last_step:
                pass
    """)
    test = next(node.test for node in ast.walk(ctx.tree) if isinstance(node, ast.If))
    assert every_n_steps_guard(test) is expected


def test_guard_of_in_the_body_in_a_helper_and_through_a_guarded_call():
    steps = analysis("""
        import torch
        def log(loss):
            print(loss)
        def evaluate():
            acc = model(val).mean()
        for step, x in enumerate(loader):
            loss = model(x)
            loss.backward()
            if step % 10 == 0:
                a = loss.item()
            else:
                b = loss.item()
            log(loss)
            if step % 100 == 0:
                evaluate()
    """)
    (loop,) = steps.loops
    guarded = find(steps, "a = loss.item()", ast.Assign)
    assert loop.guard_of(guarded) is find(steps, "step % 10 == 0", ast.Compare).parent
    assert not steps.in_step(guarded)
    assert loop.contains(guarded, include_guarded=True) and not loop.contains(guarded)
    assert steps.in_step(find(steps, "b = loss.item()", ast.Assign))
    assert steps.in_step(find(steps, "print(loss)", ast.Call))
    # evaluate() is reached only through the guard: its body is guarded too.
    acc = find(steps, "acc = model(val).mean()", ast.Assign)
    assert steps.loop_of(acc) is loop and not steps.in_step(acc)


def test_step_closures():
    ctx = context("""
        import torch_xla.core.xla_model as xm
        def report(loss):
            print(loss.item())
        for x in loader:
            loss = model(x)
            loss.backward()
            xm.add_step_closure(lambda: print(loss.item()))
            xm.add_step_closure(report, args=(loss,))
            sorted(xs, key=lambda t: t.item())
    """)
    steps = ctx.steps
    closure_print = find(ctx, "print(loss.item())", ast.Call)  # the one in report() comes first
    assert is_step_closure(closure_print, ctx.semantic)
    lambda_item = next(n for n in ast.walk(ctx.tree) if isinstance(n, ast.Lambda)).body
    assert is_step_closure(lambda_item, ctx.semantic) and not steps.in_step(lambda_item)
    assert steps.in_step(find(ctx, "t.item()", ast.Call))
    assert [h.name for h in steps.loops[0].helpers] == []


# --- device loaders -------------------------------------------------------------------


def test_device_loader_forms():
    ctx = context("""
        import torch_xla.distributed.parallel_loader as pl
        from torch_xla.distributed.parallel_loader import MpDeviceLoader, ParallelLoader
        a = pl.MpDeviceLoader(loader, device)
        b = MpDeviceLoader(loader, device)
        c = ParallelLoader(loader, [device]).per_device_loader(device)
        d = iter(a)
        e = loader
        class T:
            def __init__(self):
                self.dl = pl.MpDeviceLoader(loader, device)
                self.plain = loader
            def use(self):
                return self.dl, self.plain
        def train(dl, other):
            return dl, other
        train(a, loader)
        train(dl=c, other=a)
    """)
    for text, expected in [("a", True), ("b", True), ("c", True), ("d", True), ("e", False)]:
        # A reference to the name at module level.
        probe = ast.Name(text, ast.Load())
        probe.parent = ctx.tree  # type: ignore[attr-defined]
        assert is_device_loader(probe, ctx.semantic) is expected, text
    assert is_device_loader(find(ctx, "self.dl", ast.Attribute), ctx.semantic)
    assert not is_device_loader(find(ctx, "self.plain", ast.Attribute), ctx.semantic)
    ret = find(ctx, "dl, other", ast.Tuple)
    dl, other = ret.elts
    assert is_device_loader(dl, ctx.semantic)  # every call fills `dl` with one
    assert not is_device_loader(other, ctx.semantic)  # one call passes a plain loader


def test_loop_over_device_loader_is_a_sync_point():
    steps = analysis("""
        import torch_xla.distributed.parallel_loader as pl
        def train(loader):
            for step, (x, y) in enumerate(loader):
                model(x).backward()
        train(pl.MpDeviceLoader(data, dev))
    """)
    (loop,) = steps.loops
    assert loop.iterates_device_loader()
    assert loop.sync_points() == [loop.node] and loop.syncs_every_iteration()
    assert loop.is_tensor(expr("x")) and not loop.is_tensor(expr("step"))


# --- sync points ------------------------------------------------------------------


def test_sync_points_and_gradient_accumulation():
    steps = analysis("""
        import torch_xla
        import torch_xla.core.xla_model as xm
        for i, x in enumerate(loader):
            model(x).backward()
            if (i + 1) % k == 0:
                xm.optimizer_step(opt, barrier=True)
                xm.mark_step()
            xm.optimizer_step(opt)
    """)
    (loop,) = steps.loops
    assert [type(p).__name__ for p in loop.sync_points()] == ["Call", "Call"]
    assert not loop.syncs_every_iteration()


def test_sync_in_helper_step_context_and_compiled_calls():
    steps = analysis("""
        import torch_xla
        def done():
            torch_xla.sync()
        @torch_xla.compile
        def train_step(x):
            model(x).backward()
        step_fn = torch_xla.compile(other)
        for x in a:
            model(x).backward()
            done()
        for x in b:
            with torch_xla.step():
                model(x).backward()
        for x in c:
            train_step(x)
        for x in d:
            model(x).backward()
            step_fn(x)
        for x in e:
            model(x).backward()
            xm_optimizer_step(opt, barrier=True)
    """)
    assert [bool(loop.sync_points()) for loop in steps.loops] == [True, True, True, True, False]
    assert steps.is_compiled_function(steps.semantic.module_functions["train_step"])


# --- tensors ------------------------------------------------------------------------


def test_is_tensor():
    steps = analysis("""
        import torch
        import torch.nn.functional as F
        import numpy as np
        class Net(torch.nn.Module):
            pass
        net = Net().to(device)
        for step, (x, y) in enumerate(loader):
            outputs = net(x)
            logits = outputs.logits
            loss = F.cross_entropy(logits, y)
            (loss / 2).backward()
            preds = logits.argmax(-1)
            value = loss.item()
            host = logits.cpu()
            mean = np.mean(value)
            total += loss.detach()
            n = x.size(0)
    """)
    (loop,) = steps.loops
    for text in (
        "loss",
        "outputs",
        "outputs.logits",
        "logits[0]",
        "preds",
        "loss * 2",
        "-loss",
        "loss > 1",
        "total",
        "torch.ones(3)",
        "logits.softmax(-1)",
    ):
        assert loop.is_tensor(expr(text)), text
    for text in (
        "value",
        "host",
        "mean",
        "step",
        "x",
        "n",
        "logits.shape",
        "logits.shape[0]",
        "loss.item()",
        "net",
        "loss is None",
        "len(x)",
        "torch.device('cpu')",
        "not loss",
    ):
        assert not loop.is_tensor(expr(text)), text


def test_tensor_arguments_and_returns_of_helpers():
    steps = analysis("""
        import torch
        def compute(model, batch):
            out = model(**batch)
            return out.loss
        def log(value, step):
            print(value, step)
        for step, batch in enumerate(loader):
            l = compute(model, batch)
            l.backward()
            log(l * 2, step)
    """)
    (loop,) = steps.loops
    assert loop.is_tensor(expr("l")) and loop.is_tensor(expr("value"))
    assert loop.is_tensor(find(steps, "compute(model, batch)", ast.Call))
    assert not loop.is_tensor(expr("step"))


def test_mutually_exclusive():
    ctx = context("""
        if use_amp:
            a = 1
        else:
            b = 2
        c = 3
    """)
    a, b, c = (find(ctx, t, ast.Assign) for t in ("a = 1", "b = 2", "c = 3"))
    assert mutually_exclusive(a, b)
    assert not mutually_exclusive(a, c)
    assert not mutually_exclusive(a, a)


def test_no_loops_is_cheap_and_empty():
    steps = analysis("import torch\nx = torch.ones(3)\n")
    assert steps.loops == []
    assert not steps.in_step(steps.tree.body[-1])


ACCUMULATION = """
    import torch
    def apply(opt):
        opt.step()
        opt.zero_grad()
    for it in range(max_iters):
        loss_accum = 0.0
        for micro in range(accum_steps):
            loss = model(x) / accum_steps
            loss_accum += loss.detach()
            loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        apply(opt)
        print(loss_accum, norm, it)
        if it % 10 == 0:
            print(loss.item())
    print("done", loss_accum)
"""


def test_the_optimizer_step_loop_around_micro_steps():
    steps = analysis(ACCUMULATION)
    [micro] = steps.loops
    assert micro.node.lineno == 8 and micro.optimizer_loop is not None
    outer = micro.optimizer_loop
    assert outer.node.lineno == 6 and outer.micro_step_loops == [micro]
    # in_step/loop_of keep to the micro-steps (XLA103's sync goes there)...
    body_print = find(steps, "print(loss_accum, norm, it)")
    assert not steps.in_step(body_print) and steps.loop_of(body_print) is None
    # ...and the optimizer step covers the outer body, not the gated or the later print.
    assert steps.loop_running_every_step(body_print) is outer
    assert steps.loop_running_every_step(find(steps, "loss.item()")) is None
    assert steps.loop_running_every_step(find(steps, 'print("done", loss_accum)')) is None
    assert steps.loop_running_every_step(find(steps, "loss.detach()")) is micro
    # Carried out of the micro-steps, and made after them: step tensors.
    for name in ("loss_accum", "norm", "loss"):
        assert outer.is_tensor(expr(name)), name
    assert not outer.is_tensor(expr("it"))


def test_no_optimizer_step_loop_when_the_micro_steps_step_or_the_outer_loop_does_not():
    epoch_loop = analysis("""
        import torch
        for epoch in range(3):
            for x in loader:
                model(x).backward()
                optimizer.step()
            scheduler.step()
            print(epoch)
    """)
    no_step = analysis("""
        import torch
        for epoch in range(3):
            for x in loader:
                model(x).backward()
            scheduler.step()
    """)
    for steps in (epoch_loop, no_step):
        [loop] = steps.loops
        assert loop.optimizer_loop is None


def test_optimizer_steps_recognised():
    for call in ("scaler.step(opt)", "xm.optimizer_step(opt)", "self.optimizer.step()", "sgd.step()"):
        steps = analysis(f"""
            import torch
            import torch_xla.core.xla_model as xm
            sgd = torch.optim.SGD(model.parameters(), lr=0.1)
            for it in range(10):
                for micro in range(4):
                    model(x).backward()
                {call}
        """)
        assert steps.loops[0].optimizer_loop is not None, call


# -- values a sync already computed ---------------------------------------------------------

SYNC_HEAD = "import torch_xla\nimport torch_xla.core.xla_model as xm\nfor x in loader:\n    loss = model(x)\n    loss.backward()\n"


def synced_read(body: str) -> ast.stmt | None:
    """The sync ``sync_before_read`` finds for the read ``loss.item()`` marked ``# read``
    in a step loop that starts with ``SYNC_HEAD``."""
    source = SYNC_HEAD + textwrap.indent(textwrap.dedent(body), "    ")
    steps = analysis(source)
    line = next(i for i, text in enumerate(source.splitlines(), 1) if text.endswith("# read"))
    read = next(
        n
        for n in ast.walk(steps.tree)
        if isinstance(n, ast.Call) and n.lineno == line and isinstance(n.func, ast.Attribute) and n.func.attr == "item"
    )
    return steps.sync_before_read(read, read.func.value)


@pytest.mark.parametrize(
    "body",
    [
        "torch_xla.sync()\nprint(loss.item())  # read\n",
        "xm.mark_step()\nif rank == 0:\n    for_log = 1\n    print(loss.item())  # read\n",
        "xm.optimizer_step(opt, barrier=True)\nwith lock:\n    if rank == 0:\n        print(loss.item())  # read\n",
        "with torch_xla.step():\n    opt.step()\nprint(loss.item())  # read\n",
        "torch_xla.sync()\ntotal = loss.detach()\nwriter.add_scalar('l', float(loss), 1)\nprint(loss.item())  # read\n",
    ],
    ids=["sync", "under-a-test", "barrier", "step-context", "only-read-between"],
)
def test_a_read_after_the_sync_finds_it(body):
    assert isinstance(synced_read(body), ast.stmt)


@pytest.mark.parametrize(
    "body",
    [
        "print(loss.item())  # read\ntorch_xla.sync()\n",
        "if log:\n    torch_xla.sync()\nprint(loss.item())  # read\n",
        "torch_xla.sync()\nloss = loss * 2\nprint(loss.item())  # read\n",
        "torch_xla.sync()\nloss.div_(2)\nprint(loss.item())  # read\n",
        "torch_xla.sync()\nxm.all_reduce('sum', [loss])\nprint(loss.item())  # read\n",
        "torch_xla.sync()\nif rank == 0:\n    loss += 1\n    print(loss.item())  # read\n",
        "torch_xla.sync()\nfor i in range(3):\n    print(loss.item())  # read\n    loss = model(x)\n",
        "with torch_xla.step():\n    print(loss.item())  # read\n",
        "torch_xla.sync()\ntry:\n    pass\nexcept Exception:\n    print(loss.item())  # read\n",
    ],
    ids=[
        "before",
        "sync-in-a-branch",
        "recomputed",
        "in-place",
        "handed-to-a-collective",
        "recomputed-in-the-block",
        "nested-loop",
        "inside-the-step-context",
        "handler",
    ],
)
def test_no_sync_computed_the_value_read(body):
    assert synced_read(body) is None


def test_a_read_outside_a_step_is_not_asked():
    steps = analysis("import torch_xla\ntorch_xla.sync()\nprint(loss.item())\n")
    read = next(n for n in ast.walk(steps.tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "item")
    assert steps.sync_before_read(read, read.func.value) is None


def test_the_functions_of_each_scope_come_from_one_pass_not_a_walk_per_scope(monkeypatch):
    """Issue 39: each function asked about walked its body for the functions defined there."""
    from xlalint.analysis import steps as steps_module
    from xlalint.analysis.semantic import Semantic, attach_parents

    source = (
        "def f():\n    def g(): pass\n    if x:\n        def g(): return 1\n    async def h(): pass\n"
        "    class C:\n        def m(self): pass\n    lam = lambda: 0\n"
        "if y:\n    def top(): pass\ndef top(): return 2\n"
    )
    tree = ast.parse(source)
    semantic = Semantic(tree, attach_parents(tree))
    analysis = steps_module.StepAnalysis(semantic)
    walks = []
    monkeypatch.setattr(steps_module, "walk_scope", lambda *a, **k: walks.append(1) or iter(()), raising=False)
    f = tree.body[0]
    cls = next(n for n in ast.walk(f) if isinstance(n, ast.ClassDef))
    lam = next(n for n in ast.walk(f) if isinstance(n, ast.Lambda))

    def names(scope):
        return {name: ast.unparse(node).splitlines()[0] for name, node in analysis._local_functions(scope).items()}

    # Of a name defined twice in a scope, the last (the walk from the end found it first).
    assert names(f) == {"g": "def g():", "h": "async def h():"}
    assert analysis._local_functions(f)["g"].body[0].__class__ is ast.Return
    assert (
        names(tree) == {"f": "def f():", "top": "def top():"}
        and tree.body[-1] is analysis._local_functions(tree)["top"]
    )
    assert names(cls) == {"m": "def m(self):"} and names(lam) == {}
    assert walks == []


def test_the_self_attributes_of_every_class_come_from_one_pass_last_assignment_first():
    from xlalint.analysis.semantic import Semantic
    from xlalint.analysis.steps import StepAnalysis

    source = (
        "class Outer:\n    def __init__(self, s):\n        self.scaler = A()\n        self.opt: T = B()\n"
        "        self.n: int\n    class Inner:\n        def m(self):\n            self.scaler = C()\n"
        "    def later(self):\n        self.scaler, other = D(), 1\n        self.scaler = self.x = E()\n"
    )
    tree = ast.parse(source)
    analysis = StepAnalysis(Semantic(tree, attach_parents(tree)))
    outer, inner = (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))

    def attributes(cls):
        return {attr: [ast.unparse(v) for v in values] for attr, values in analysis._self_attributes(cls).items()}

    # As a walk of the class from its end met them (the first one found is the one used).
    assert attributes(outer) == {"scaler": ["E()", "C()", "A()"], "x": ["E()"], "opt": ["B()"]}
    assert attributes(inner) == {"scaler": ["C()"]}
    assert "_self_attributes_by_class" in analysis.__dict__  # one index for every class


def test_nested_loops_walk_each_node_of_their_regions_once(monkeypatch):
    """Issue 39: each loop walked its whole body for its calls (twice), and each enclosing
    loop walked the inner loops' bodies again."""
    from xlalint.analysis import steps as steps_module

    walked = []
    original = steps_module.child_nodes
    monkeypatch.setattr(
        steps_module, "child_nodes", lambda node: walked.append(id(node)) or original(node), raising=False
    )
    steps = analysis(
        """
        for epoch in range(3):
            log(epoch)
            for batch in loader:
                for micro in split(batch):
                    loss = model(micro)
                    loss.backward()
                opt.step()
        """
    )
    assert [ast.unparse(loop.node.target) for loop in steps.loops] == ["micro"]
    assert walked and len(walked) == len(set(walked))


def test_the_step_tensors_ask_each_binding_until_its_names_are_tensors(monkeypatch):
    """Issue 39: every round of the fixed point asked every assignment again."""
    from xlalint.analysis.step_tensors import StepTensors

    steps = analysis(
        """
        for x, y in loader:
            out = model(x)
            d = c
            c = b
            b = a
            a = out + 1
            d.backward()
        """
    )
    asked = []
    original = StepTensors._is_tensor
    monkeypatch.setattr(
        StepTensors,
        "_is_tensor",
        lambda self, e, state, depth=0: asked.append((id(e), depth)) or original(self, e, state, depth),
    )
    loop = steps.loops[0]
    assert all(loop.is_tensor(expr(name)) for name in ("a", "b", "c", "d", "out"))
    value = find(steps, "out + 1")
    # Five rounds (`out`, then `a`, `b`, `c`, then nothing new): `a = out + 1` is asked
    # until `a` is a tensor (twice: `out` is one from the second round), not in each.
    assert asked.count((id(value), 0)) == 2
