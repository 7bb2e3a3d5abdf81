"""XLA306 sliding-window-offset: slicing a device tensor in the step at a Python int
that changes every iteration.

The offset of a slice is part of the graph XLA compiles: ``data[i:i + n]`` with a new
``i`` each step is a new graph each step.
"""

from __future__ import annotations

import ast
from functools import cached_property

from xlalint.analysis.device_tensors import DeviceTensors
from xlalint.analysis.semantic import Semantic, ancestors, dotted_name, subtree
from xlalint.analysis.values import FUNCTIONS, call_sites, parameter_names, passed_argument, target_names
from xlalint.engine.rule import Invalid, Rule, Valid

_LOOPS = (ast.For, ast.AsyncFor)


class SlidingWindowOffset(Rule):
    code = "XLA306"
    name = "sliding-window-offset"
    summary = "a device tensor sliced in the step at an offset that changes every iteration: one graph per offset"
    explanation = """
## Why

torch_xla records a slice's bounds in the graph as constants. A training loop that
walks a long device tensor with a Python offset (`source[i:i + bptt]`, `i` from
`range(0, n, bptt)`) builds a different graph at every offset, and compiles each one:
measured on torch_xla 2.9.0 CPU, 10 offsets gave 10 compiles; pytorch/examples' word
language model compiled 38 graphs instead of 2.

## What is flagged

In the step (the step loop's body and the same-module functions it calls), a slice of a
tensor on the device whose bound is a Python int that changes every iteration: a
variable of a `for` loop over `range(...)` (or `enumerate(range(...))`) in the step, a
counter the step loop increments (`i += n`), or a parameter of a helper that the step
loop passes such a value. Not flagged: constant slices (`x[:, -1]`), an offset that is
a device tensor (`torch.narrow`/`index_select` with a tensor index), and slicing a tensor
still on the host before it is moved (`data[i:i + n].to(device)`).

## What to do instead

No automatic fix. Cut the fixed-size batches on the host and move each one
(`batch = source_cpu[i:i + n].to(device)`: the graph then sees the same shape every
step), or keep the data on the device and gather with a device index tensor
(`source.index_select(0, torch.arange(n, device=d) + offset)`, `offset` a 0-d device
tensor), so the graph has no Python constant in it.

## Example

```python
for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
    data = train_data[i:i + bptt]  # XLA306: one graph per i
```
"""
    fix_availability = "none"

    VALID = [
        # Sliced on the host, then moved: the device sees one shape.
        Valid(
            """
            import torch
            import torch_xla
            device = torch_xla.device()
            for i in range(0, len(tokens), 32):
                batch = tokens[i:i + 32].to(device)
                loss = model(batch).sum()
                loss.backward()
                torch_xla.sync()
            """
        ),
        # Constant slices of a device tensor.
        Valid(
            """
            import torch
            import torch_xla
            data = torch.randn(100, 8).to(torch_xla.device())
            for step in range(10):
                loss = model(data[:32, -4:]).sum()
                loss.backward()
                torch_xla.sync()
            """
        ),
        # Not in the step: an evaluation loop (no backward).
        Valid(
            """
            import torch
            import torch_xla
            data = torch.randn(100, 8).to(torch_xla.device())
            for i in range(0, 100, 10):
                print(model(data[i:i + 10]).sum())
            """
        ),
    ]

    INVALID = [
        # pytorch/examples' word language model: the offset passed into a helper.
        Invalid(
            """
            import torch
            import torch_xla
            device = torch_xla.device()

            def batchify(data, bsz):
                nbatch = data.size(0) // bsz
                data = data.narrow(0, 0, nbatch * bsz)
                return data.view(bsz, -1).t().contiguous().to(device)

            train_data = batchify(corpus.train, 20)

            def get_batch(source, i):
                seq_len = min(35, len(source) - 1 - i)
                data = source[i:i + seq_len]
                target = source[i + 1:i + 1 + seq_len].view(-1)
                return data, target

            def train():
                for batch, i in enumerate(range(0, train_data.size(0) - 1, 35)):
                    data, targets = get_batch(train_data, i)
                    loss = criterion(model(data), targets)
                    loss.backward()
                    torch_xla.sync()
            """,
            count=2,
        ),
        # A counter the step loop advances.
        Invalid(
            """
            import torch
            import torch_xla
            tokens = torch.load("tokens.pt").to(torch_xla.device())
            pos = 0
            while pos < 1000:
                x = tokens[pos:pos + 64]
                loss = model(x).mean()
                loss.backward()
                pos += 64
                torch_xla.sync()
            """,
            count=1,
        ),
    ]

    def finish(self) -> None:
        # Computed once per step loop and per helper: a step slices many tensors.
        self._ints_by_loop: dict[int, set[str]] = {}
        self._helper_ints: dict[tuple[int, int], set[str]] = {}
        if not self.ctx.distributed.uses_xla:
            return
        steps = self.ctx.steps
        for subscript in self.ctx.semantic.nodes_of(ast.Subscript):
            bounds = _slice_bounds(subscript.slice)
            if not bounds or not steps.in_step(subscript):
                continue
            loop = steps.loop_of(subscript)
            varying = self._varying_names(subscript, loop.node)
            offsets = sorted({n.id for bound in bounds for n in subtree(bound) if isinstance(n, ast.Name)} & varying)
            if offsets and self._device_tensors.is_device_tensor(subscript.value):
                self.report(
                    subscript,
                    f"`{dotted_name(subscript.value) or 'a device tensor'}` sliced at `{offsets[0]}`, which changes every "
                    "step: one graph per offset",
                )

    @cached_property
    def _device_tensors(self) -> DeviceTensors:
        return DeviceTensors(self.ctx.semantic, self.ctx.devices)

    def _varying_names(self, node: ast.AST, step_loop: ast.AST) -> set[str]:
        """The int names that change every iteration where ``node`` runs: the loop's own
        (and in-step inner loops') range variables and counters, and for a helper, its
        parameters that a call in the step loop fills with one of them."""
        function = next((a for a in ancestors(node) if isinstance(a, FUNCTIONS)), None)
        if function is None or _contains(function, step_loop):
            return self._loop_ints(step_loop)
        key = (id(function), id(step_loop))
        if key not in self._helper_ints:
            self._helper_ints[key] = self._varying_parameters(function, step_loop)
        return self._helper_ints[key]

    def _loop_ints(self, step_loop: ast.AST) -> set[str]:
        if id(step_loop) not in self._ints_by_loop:
            self._ints_by_loop[id(step_loop)] = _loop_ints(step_loop, self.ctx.semantic)
        return self._ints_by_loop[id(step_loop)]

    def _varying_parameters(self, function: ast.AST, step_loop: ast.AST) -> set[str]:
        varying = self._loop_ints(step_loop)
        found = set()
        for call in call_sites(function, self.ctx.semantic):
            if not _contains(step_loop, call):
                continue
            for name in parameter_names(function):
                passed = passed_argument(call, function, name)
                if passed is not None and any(isinstance(n, ast.Name) and n.id in varying for n in subtree(passed)):
                    found.add(name)
        return found


def _slice_bounds(index: ast.AST) -> list[ast.expr]:
    """The lower and upper bounds of the slices in a subscript's index."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return [bound for part in parts if isinstance(part, ast.Slice) for bound in (part.lower, part.upper) if bound]


def _loop_ints(step_loop: ast.AST, semantic: Semantic) -> set[str]:
    """The ints that change every iteration of ``step_loop``: the targets of ``for``
    loops over ``range``/``enumerate(range)`` (the step loop and loops in its body), and
    names its body increments (``i += n``)."""
    found: set[str] = set()
    for node in subtree(step_loop):
        if (isinstance(node, _LOOPS) and _counts(node.iter, semantic)) or (
            isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub))
        ):
            found.update(target_names(node.target))
    return found


def _counts(iterable: ast.AST, semantic: Semantic) -> bool:
    """``range(...)`` or ``enumerate(range(...))``: the loop variable is an int."""
    if not isinstance(iterable, ast.Call) or not isinstance(iterable.func, ast.Name):
        return False
    if iterable.func.id == "enumerate" and iterable.args:
        return _counts(iterable.args[0], semantic)
    return iterable.func.id == "range" and semantic.qualified_name(iterable.func) is None


def _contains(outer: ast.AST, node: ast.AST) -> bool:
    return any(a is outer for a in ancestors(node))
