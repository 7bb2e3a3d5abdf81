"""The flow facts every rule asks (xlalint.analysis.reaching): program order, correlated
branches and call order (issue 31)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from xlalint.analysis.reaching import branch_facts, decided_branch, reaching_values, runs_before
from xlalint.analysis.semantic import Semantic, attach_parents


def parse(source: str) -> ast.Module:
    tree = ast.parse(textwrap.dedent(source))
    attach_parents(tree)
    return tree


def probes(tree: ast.Module) -> list[ast.Call]:
    return [c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "probe"]


def values_seen(source: str) -> list[list[str] | None]:
    """For each ``probe(x)`` in source order, the values of ``x`` that reach it."""
    found = []
    for call in sorted(probes(parse(source)), key=lambda c: c.lineno):
        values = reaching_values(call.args[0])
        found.append(None if values is None else sorted(ast.unparse(v) for v in values))
    return found


# --- program order ---------------------------------------------------------------------------


def test_a_name_reassigned_to_the_evaluation_loader_is_the_evaluation_loader_from_there_on():
    source = """
    def main():
        loader = DataLoader(train_ds)
        for x in probe(loader):
            train(x)
        loader = DataLoader(test_ds)
        for x in probe(loader):
            evaluate(x)
    """
    assert values_seen(source) == [["DataLoader(train_ds)"], ["DataLoader(test_ds)"]]


# --- correlated branches ---------------------------------------------------------------------

FSDP_FLAG = """
def main(args):
    model = Net()
    if args.use_fsdp:
        model = FSDP(model)
    {between}
    if args.use_fsdp:
        probe(model)
    else:
        probe(model)
    probe(model)
"""


def test_a_second_test_of_the_same_condition_sees_only_its_branch_of_the_first():
    assert values_seen(FSDP_FLAG.format(between="pass")) == [["FSDP(model)"], ["Net()"], ["FSDP(model)", "Net()"]]


@pytest.mark.parametrize(
    "between",
    [
        "args = parse()",  # the tested name rebound
        "args.use_fsdp = False",  # the tested attribute set
        "args, rest = parse()",
    ],
)
def test_a_test_whose_names_change_between_is_not_correlated(between):
    both = ["FSDP(model)", "Net()"]
    assert values_seen(FSDP_FLAG.format(between=between)) == [both, both, both]


def test_negations_and_none_tests_are_the_same_condition():
    source = """
    def main(ckpt):
        state = fresh()
        if ckpt is not None:
            state = load(ckpt)
        if not ckpt is not None:
            probe(state)
        if ckpt is None:
            probe(state)
        else:
            probe(state)
    """
    assert values_seen(source) == [["fresh()"], ["fresh()"], ["load(ckpt)"]]


def test_a_test_that_calls_something_is_not_correlated():
    source = """
    def main():
        model = Net()
        if use_fsdp():
            model = FSDP(model)
        if use_fsdp():
            probe(model)
    """
    assert values_seen(source) == [["FSDP(model)", "Net()"]]


def test_elif_branches_and_conditional_expressions_carry_their_facts():
    tree = parse(
        """
        def main(a, b):
            if a:
                pass
            elif b:
                probe(x)
            y = probe(z) if not a else 0
        """
    )
    first, second = sorted(probes(tree), key=lambda c: c.lineno)
    key_a = ast.dump(ast.Name("a", ast.Load()))
    key_b = ast.dump(ast.Name("b", ast.Load()))
    assert {key: value for key, (value, _) in branch_facts(first).items()} == {key_a: False, key_b: True}
    assert {key: value for key, (value, _) in branch_facts(second).items()} == {key_a: False}


def test_decided_branch_names_the_branch_an_earlier_test_took():
    tree = parse(
        """
        def main(args):
            if args.spmd:
                a = 1
            if not args.spmd:
                probe(a)
        """
    )
    first_if = next(n for n in ast.walk(tree) if isinstance(n, ast.If))
    (probe,) = probes(tree)
    assert decided_branch(first_if, branch_facts(probe)) is False
    assert decided_branch(first_if, {}) is None


# --- call order ------------------------------------------------------------------------------


def order(source: str, first: str, second: str) -> bool | None:
    """Whether the call named ``first`` runs before the call named ``second``."""
    tree = parse(source)
    calls = {c.func.id: c for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    return runs_before(calls[first], calls[second], Semantic(tree))


TRAINER = """
class Trainer:
    def __init__(self):
        self.model = build()
        self.{first}()
        self.optimizer = make_optimizer(self.model)
        self.{second}()

    def later(self):
        logs()

    def setup(self):
        self.model = wrap(self.model)
"""


def test_before_follows_the_calls_of_the_module_not_the_line_numbers():
    source = TRAINER.format(first="setup", second="later")
    assert order(source, "wrap", "make_optimizer") is True
    assert order(source, "make_optimizer", "wrap") is False
    assert order(source, "make_optimizer", "logs") is True
    source = TRAINER.format(first="later", second="setup")
    assert order(source, "wrap", "make_optimizer") is False


def test_within_one_function_it_is_the_position():
    assert order("def f():\n    a()\n    b()\n", "a", "b") is True
    assert order("def f():\n    a()\n    b()\n", "b", "a") is False


def test_a_call_that_leads_to_a_node_does_not_run_before_it():
    source = """
    def main():
        model = build()
        seed()
    main()
    """
    assert order(source, "seed", "build") is False
    assert order(source, "main", "build") is False


def test_functions_no_function_of_the_module_runs_together_have_no_order():
    source = """
    def worker():
        build()
    def helper():
        seed()
    spawn(worker)
    """
    assert order(source, "seed", "build") is None


def test_recursion_and_long_call_chains_end():
    source = """
    def a():
        a()
        b()
    def b():
        c()
    def c():
        d()
    def d():
        e()
    def e():
        f()
    def f():
        deep()
        last()
    first()
    a()
    """
    # Six calls from the module to `deep`: beyond the depth followed, no order is known.
    assert order(source, "first", "deep") is None
    assert order(source, "c", "deep") is False  # it leads there
    assert order(source, "deep", "last") is True


def test_a_name_changed_later_in_a_loop_around_the_second_test_breaks_the_correlation():
    source = """
    def main(flag):
        model = Net()
        if flag:
            model = FSDP(model)
        for step in range(3):
            if flag:
                probe(model)
            flag = not flag
    """
    assert values_seen(source) == [["FSDP(model)", "Net()"]]
