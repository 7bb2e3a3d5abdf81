"""What keeps a check linear in the file (issue 22): the per-file work is done once, not
once per function or per finding. Asserted on structure, never on timings
(``bench/linear_check.py`` measures them)."""

from __future__ import annotations

import ast
import textwrap
from collections import ChainMap

from xlalint.analysis.semantic import Semantic, attach_parents
from xlalint.analysis.values import call_sites
from xlalint.engine.config import Settings
from xlalint.engine.context import Context
from xlalint.engine.lint import lint_source

# `é` and `\r\n`: columns are UTF-8 byte offsets in `ast`, lines end three ways.
SOURCE = (
    "import torch\r\n"
    "def step(model, x):\r\n"
    "    loss = model(x, 'é')\r"
    "    print(loss.item(), {'é': [\n"
    "        1]})\n"
    "class Trainer:\n"
    "    def fit(self, loader):\n"
    "        for x in loader:\n"
    "            self.step(x)\n"
    "    def step(self, x):\n"
    "        return step(self.model, x)\n"
)


def context(source: str) -> Context:
    tree = ast.parse(source)
    return Context(source, "t.py", tree, Settings(), attach_parents(tree))


def test_source_of_gives_what_get_source_segment_gives_without_calling_it(monkeypatch):
    ctx = context(SOURCE)
    nodes = list(ast.walk(ctx.tree))
    expected = [ast.get_source_segment(SOURCE, node) or "" for node in nodes]

    def splits_the_file_again(*args, **kwargs):
        raise AssertionError("source_of must not split the file on every call")

    monkeypatch.setattr(ast, "get_source_segment", splits_the_file_again)
    assert [ctx.source_of(node) for node in nodes] == expected
    assert "{'é': [\n        1]}" in expected


def test_call_sites_read_an_index_built_once_per_module(monkeypatch):
    functions = 40
    source = "".join(f"def f{i}(x):\n    return f{i - 1}(x) if {i} else g(x)\n" for i in range(functions))
    source += "class C:\n    def m(self):\n        self.m()\n        other.m()\n"
    tree = ast.parse(source)
    attach_parents(tree)
    semantic = Semantic(tree)
    reads = []
    every_call = Semantic.calls.fget
    monkeypatch.setattr(Semantic, "calls", property(lambda self: reads.append(1) or every_call(self)))
    defs = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    sites = {d.name: [ast.unparse(c) for c in call_sites(d, semantic)] for d in defs}
    assert sites["f3"] == ["f3(x)"] and sites[f"f{functions - 1}"] == []
    assert sites["m"] == ["self.m()", "other.m()"]  # both calls are within class C
    # One pass over the module's calls for plain calls, one for method calls: not one
    # per function.
    assert len(reads) == 2


def test_scope_names_chain_the_module_names_instead_of_copying_them():
    ctx = context(SOURCE)
    semantic = ctx.semantic
    calls = [n for n in ast.walk(ctx.tree) if isinstance(n, ast.Call)]
    in_method = next(c for c in calls if isinstance(c.func, ast.Name) and c.func.id == "step")
    first, second = semantic.names_at(calls[0]), semantic.names_at(in_method)
    assert isinstance(first.visible, ChainMap) and isinstance(second.visible, ChainMap)
    assert first.visible.maps[-1] is second.visible.maps[-1]  # the module's, shared
    # Inner scopes still win and the class body is not seen from its methods: in
    # `C.step`, `x` is its parameter, `step` the module's function, `loader` unbound.
    assert not second.free("x") and not second.free("step") and second.free("loader")


def test_a_file_of_step_functions_is_checked_with_the_same_findings_per_function():
    block = textwrap.dedent(
        """
        def train_{i}(model, loader, opt):
            device = xm.xla_device()
            for step, (x, y) in enumerate(loader):
                loss = model(x.to(device), y.to(device))
                loss.backward()
                opt.step()
                xm.mark_step()
                print(step, loss.item())
        """
    )
    header = "import torch\nimport torch_xla.core.xla_model as xm\n"
    few = lint_source(header + "".join(block.format(i=i) for i in range(2)), "t.py", Settings())
    many = lint_source(header + "".join(block.format(i=i) for i in range(20)), "t.py", Settings())
    assert len(many) == 10 * len(few) and {f.code for f in few} >= {"XLA102"}


DEVICE_VARIABLES = """\
import torch
import torch_xla
import torch_xla.core.xla_model as xm

a = torch.ones(2).cuda()
device = torch_xla.device()
b = torch.ones(2).cuda()


def later():
    c = torch.ones(2).cuda()
    dev = xm.xla_device()
    d = torch.ones(2).cuda()


def rebound():
    other = torch_xla.device()
    for other in range(2):
        pass
    kept = torch.device("cuda")
    e = torch.ones(2).cuda()


def reassigned():
    mixed = torch_xla.device()
    mixed = "cpu"
    f = torch.ones(2).cuda()
"""


def test_the_device_variable_is_the_first_one_of_its_scope_assigned_before_the_call():
    ctx = context(DEVICE_VARIABLES)
    cuda = {
        node.targets[0].id: node.value
        for node in ast.walk(ctx.tree)
        if isinstance(node, ast.Assign) and ast.unparse(node.value).endswith(".cuda()")
    }
    found = {name: ctx.devices.xla_device_variable(call) for name, call in cuda.items()}
    # `other` may hold a loop's value, `mixed` a string: neither names the device for good.
    # A function defined after the module's `device` reads it (`c`, `f`): the module's.
    assert found == {"a": None, "b": "device", "c": "device", "d": "dev", "e": "kept", "f": "device"}


def test_the_device_variable_of_a_scope_is_looked_for_once_not_once_per_call(monkeypatch):
    """Issue 29, item 2: each `.cuda()` re-scanned every earlier statement of its scope."""
    from xlalint.analysis.devices import DeviceAnalysis

    asked = []
    original = DeviceAnalysis._is_xla_device_after_port
    monkeypatch.setattr(
        DeviceAnalysis, "_is_xla_device_after_port", lambda self, node: asked.append(1) or original(self, node)
    )
    lines = 200
    source = "import torch\n" + "x = torch.zeros(3).cuda()\n" * lines
    source += "def f():\n" + "    y = torch.zeros(3).cuda()\n" * lines
    findings = lint_source(source, "t.py", Settings())
    assert sum(f.code == "XLA104" for f in findings) == 2 * lines
    assert len(asked) <= 3 * lines  # one look at each statement of each scope, not one per call


def test_the_full_format_splits_a_file_once_and_diffs_only_around_each_fix(monkeypatch):
    """A large file's `--output-format full --show-fixes`: split once, not once per
    finding, and each fix's preview a diff of the lines around its edits (its import at
    the top, its change below), not of the whole file."""
    import difflib
    import io

    from xlalint.engine import full_format

    lines = 160
    source = "import torch\n" + "x = torch.ones(2).cuda()\n" * lines
    findings = lint_source(source, "t.py", Settings())
    compared, split = [], []  # the previews' diffs (the JSON edits' are keyword calls)
    matcher, split_lines = difflib.SequenceMatcher, full_format.split_lines
    out = io.StringIO()
    with monkeypatch.context() as patched:
        patched.setattr(
            full_format.difflib, "SequenceMatcher", lambda *a, **k: (a and compared.append(a[1])) or matcher(*a, **k)
        )
        patched.setattr(
            full_format, "split_lines", lambda text, *a, **k: split.append(text) or split_lines(text, *a, **k)
        )
        full_format.render_full(findings, {"t.py": source}, unsafe=False, show_fixes=True, out=out, color=False)
    assert out.getvalue().count("XLA104") == lines and out.getvalue().count("+ import torch_xla") == lines
    assert split.count(source) == 1
    assert compared and max(len(diffed) for diffed in compared) < lines // 2  # a few lines, whatever the file


def test_the_linear_bench_times_fix_and_every_output_format():
    """`bench/linear_check.py` (issue 33): each fix shape has fixes to apply, and every
    format `check --output-format` takes is timed."""
    import sys
    from pathlib import Path

    from xlalint.engine.fixing import fix_source
    from xlalint.engine.reporters import FORMATS

    bench = Path(__file__).resolve().parent.parent / "bench"
    sys.path.insert(0, str(bench))
    try:
        import linear_check
    finally:
        sys.path.remove(str(bench))
    assert set(linear_check.FIX_SHAPES) >= {
        "fixable blocks",
        "fixable lines",
        "identical comment lines",
        "blank lines",
        "large file",
    }
    assert ".cuda() lines" in linear_check.SHAPES and linear_check.FORMATS is FORMATS
    for shape in linear_check.FIX_SHAPES:
        source = linear_check.generated(shape, 2, linear_check.FIX_SHAPES)
        result = fix_source(source, "generated.py", Settings(), unsafe=True)
        assert result.error is None and result.applied, shape


def test_the_training_loaders_follow_each_value_once_for_all_loops(monkeypatch):
    """Issue 28: many step loops over `self.train_data`, whose `__init__` parameter is
    filled at many constructions of the class: the values are followed once for all the
    loops (the constructions are not walked again for each loop)."""
    from xlalint.analysis.distributed import DistributedAnalysis

    followed = []
    original = DistributedAnalysis._loaders_of
    monkeypatch.setattr(
        DistributedAnalysis,
        "_loaders_of",
        lambda self, expr, depth, seen: followed.append(1) or original(self, expr, depth, seen),
    )
    count = 60
    source = "import torch_xla\nfrom torch.utils.data import DataLoader\n"
    source += "def make(ds):\n    return DataLoader(ds, batch_size=8)\n"
    source += "class Trainer:\n    def __init__(self, model, train_data):\n        self.train_data = train_data\n"
    source += "".join(
        f"    def epoch_{i}(self):\n        for x in self.train_data:\n            self.model(x).backward()\n"
        for i in range(count)
    )
    source += "".join(f"trainer_{i} = Trainer(model, make(ds_{i}))\n" for i in range(count))
    findings = lint_source(source, "t.py", Settings(), select=["XLA301"])
    assert [(f.code, f.span.line) for f in findings] == [("XLA301", 4)]
    assert len(followed) <= 10 * count


def test_the_arguments_of_a_function_are_bound_in_one_pass_over_its_calls(monkeypatch):
    # Issue 38: a parameter called in a loop runs what the calls pass for it. Each of the
    # many calls, and each rule asking about the loop, reads one index per function.
    from xlalint.analysis import values

    copies = 30
    source = textwrap.dedent(
        """\
        import torch
        import torch_xla

        class Stepper:
            def __call__(self, loss):
                loss.backward()
                opt.step()

        def train(loader, step, log=print):
            for x in loader:
                step(model(x).sum())
                log(x.sum().item())
        """
    )
    source += "".join(f"train(loader_{i}, Stepper())\n" for i in range(copies))
    passes = []
    every_site = values.call_sites
    monkeypatch.setattr(
        values, "call_sites", lambda func, *a, **k: passes.append(func.name) or every_site(func, *a, **k)
    )
    found = [f.code for f in lint_source(source, "t.py", Settings(), select=["XLA102", "XLA103"])]
    assert found == ["XLA103", "XLA102"]
    assert passes.count("train") == 1


def test_the_values_of_one_name_in_each_scope_are_grouped_once_not_walked_per_scope(monkeypatch):
    """Issue 39: a file of many functions, each with its own `device`, walked every
    function for what it assigns to find the values of that one name."""
    from xlalint.analysis import values
    from xlalint.analysis.values import ScopeValues, assigned_values_by_name

    source = "import torch\n" + "".join(
        f"def f{i}(m):\n    device = torch.device('cuda')\n    a, (b, device) = 1, (2, 3)\n"
        f"    with open(p) as device:\n        g = lambda: (device := 4)\n    return m.cuda()\n"
        for i in range(30)
    )
    tree = ast.parse(source)
    nodes = attach_parents(tree)
    semantic = Semantic(tree, nodes)
    scopes = [tree, *(n for n in nodes if isinstance(n, (ast.FunctionDef, ast.Lambda)))]
    expected = {
        id(s): [ast.unparse(v) for v in assigned_values_by_name(s, shallow=True).get("device", [])] for s in scopes
    }
    walks = []
    original = values.walk_scope
    monkeypatch.setattr(values, "walk_scope", lambda *a, **k: walks.append(1) or original(*a, **k))
    found = ScopeValues(semantic)
    for scope in scopes:
        assert sorted(ast.unparse(v) for v in found.of(scope, "device")) == sorted(expected[id(scope)])
    assert sorted(expected[id(scopes[1])]) == ["3", "open(p)", "torch.device('cuda')"] and expected[id(scopes[2])] == [
        "4"
    ]
    assert walks == []
    findings = lint_source(source, "t.py", Settings())
    # Each function's `device` is assigned other things too: no fix writes it.
    assert sum(f.code == "XLA104" for f in findings) >= 30


def test_the_xla_device_of_a_cuda_call_is_found_once_for_its_message_and_its_fix(monkeypatch):
    from xlalint.analysis.devices import DeviceAnalysis

    asked = []
    original = DeviceAnalysis.xla_device_variable
    monkeypatch.setattr(
        DeviceAnalysis, "xla_device_variable", lambda self, node: asked.append(node) or original(self, node)
    )
    source = "import torch\ndef f(x):\n    device = torch.device('cuda')\n" + "    y = x.cuda()\n" * 5
    findings = lint_source(source, "t.py", Settings(), select=["XLA104"])
    assert [f.fix.operations[0].template for f in findings if ".cuda()" in f.message] == ["{receiver}.to(device)"] * 5
    assert len(asked) == len({id(node) for node in asked})
