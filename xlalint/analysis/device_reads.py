"""How a script reads a device value: as a device (``.to(device)``), as a string
(``device.startswith("cuda")``, ``"cuda" in device``), as autocast's ``device_type``, the
device types it derives (``device_type = "cuda" if "cuda" in device else "cpu"``), and the
tests of the value against a CUDA string (``if device_type == "cuda":``).

A port that makes the value ``"xla"`` makes each such test ``"xla"`` too, so that a branch
taken on CUDA is taken on XLA; but a branch that holds code only CUDA runs
(``x.pin_memory()``) keeps its test, so that the other branch runs instead.

A ``torch.device`` is no string, so a port that writes ``torch_xla.device()`` where the
script reads a string breaks it; ``"xla"`` is both. The reads of a variable and of a
command-line option (``args.device``, see :mod:`xlalint.analysis.options`) are answered
alike. Built on :class:`xlalint.analysis.devices.DeviceAnalysis`, which knows scopes.
"""

from __future__ import annotations

import ast

from xlalint.analysis.devices import (
    CUDA_ONLY_KEYWORDS,
    CUDA_ONLY_METHODS,
    DEVICE_KEYWORDS,
    FUNCTION_SCOPES,
    TORCH_DEVICE,
    DeviceAnalysis,
    condition_holding,
    inspects_device_string,
    is_cuda_string,
)
from xlalint.analysis.options import CommandLineOption, CommandLineOptions
from xlalint.analysis.semantic import Semantic, ancestors, method_name, parent, string_value

# The autocast calls whose first argument is a `device_type`.
DEVICE_TYPE_CALLS = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
# The comparisons a string test is made of, and those of them true when the strings differ.
STRING_TESTS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
NEGATED_TESTS = (ast.NotEq, ast.NotIn)
# The string methods whose arguments a device string is tested against.
PREFIX_TESTS = frozenset({"startswith"})


class DeviceReads:
    def __init__(self, semantic: Semantic, devices: DeviceAnalysis, options: CommandLineOptions):
        self.semantic = semantic
        self.devices = devices
        self.options = options

    def reads_of(self, name: ast.Name) -> list[ast.Name]:
        """The reads of the variable ``name`` binds, in its scope."""
        return [node for node in self.devices.variable_uses(name) if isinstance(node.ctx, ast.Load)]

    def option_reads(self, option: CommandLineOption) -> list[ast.expr]:
        """Where the script reads the value of a command-line option: ``args.device``, and
        the reads of a variable that only copies it (``device = args.device``)."""
        reads: list[ast.expr] = []
        for read in self.options.reads(option):
            reads.append(read)
            holder = parent(read)
            if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name):
                copy = holder.targets[0]
                if all(self.options.read_by(value) is option for value in self.devices.values_of(copy)):
                    reads.extend(self.reads_of(copy))
        return reads

    def read_as_device(self, reads: list[ast.expr]) -> bool:
        """A read is given as a device: ``.to(device)``, ``device=device``, ``torch.device(device)``."""
        for node in reads:
            holder = parent(node)
            if isinstance(holder, ast.keyword) and holder.arg in DEVICE_KEYWORDS:
                return True
            first = isinstance(holder, ast.Call) and holder.args and holder.args[0] is node
            if first and (method_name(holder) == "to" or self.semantic.call_name(holder) in TORCH_DEVICE):
                return True
        return False

    def read_as_string(self, reads: list[ast.expr]) -> ast.expr | None:
        """The first read only a string allows, as written: ``device.startswith("cuda")``,
        ``device[:4]``, ``device + ":0"``, ``"cuda" in device`` (a ``torch.device`` has none)."""
        for node in reads:
            holder = parent(node)
            if isinstance(holder, (ast.Attribute, ast.Subscript, ast.BinOp)):
                call = parent(holder)
                return call if isinstance(call, ast.Call) and call.func is holder else holder
            if isinstance(holder, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in holder.ops):
                return holder
            # `device == "cuda"`: a torch.device equals no string, the test would be False.
            if isinstance(holder, ast.Compare) and any(
                string_value(side) is not None for side in (holder.left, *holder.comparators) if side is not node
            ):
                return holder
        return None

    def device_object_variable(self, node: ast.AST) -> str | None:
        """A variable that holds the XLA device as a device object wherever ``node`` runs
        once the file is ported (:meth:`DeviceAnalysis.xla_device_variable`), never as the
        string ``"xla"``: the port writes a string where the script reads the value as one
        (or as autocast's ``device_type``), and a string has no device index. A fix may
        write it where a device with an index is needed (``DDP(device_ids=[device])``)."""
        name = self.devices.xla_device_variable(node)
        if name is None:
            return None
        scope = next((a for a in ancestors(node) if isinstance(a, FUNCTION_SCOPES)), None)
        reads = [
            read
            for read in self.semantic.names_with_id(name)
            if isinstance(read.ctx, ast.Load)
            and next((a for a in ancestors(read) if isinstance(a, FUNCTION_SCOPES)), None) is scope
        ]
        if self.read_as_string(reads) is not None or self.read_as_device_type(reads):
            return None
        return name

    def read_as_device_type(self, reads: list[ast.expr]) -> bool:
        """A read is autocast's ``device_type``, which must be a string."""
        for node in reads:
            holder = parent(node)
            if isinstance(holder, ast.keyword) and holder.arg == "device_type":
                return True
            if (
                isinstance(holder, ast.Call)
                and holder.args
                and holder.args[0] is node
                and self.semantic.call_name(holder) in DEVICE_TYPE_CALLS
            ):
                return True
        return False

    def derived_device_types(self, reads: list[ast.expr]) -> list[ast.IfExp]:
        """``device_type = "cuda" if "cuda" in device else "cpu"``: a device type derived
        from the device string (it feeds ``torch.autocast(device_type=...)``)."""
        found = []
        for read in reads:
            derivation = condition_holding(read)
            if not isinstance(derivation, ast.IfExp) or not inspects_device_string(derivation.test):
                continue
            if any(is_cuda_string(b) for b in (derivation.body, derivation.orelse)):
                found.append(derivation)
        return found

    def ported_tests(self, reads: list[ast.expr]) -> list[ast.expr]:
        """The CUDA strings that become ``"xla"`` with the value, so that what was true on
        CUDA is true on XLA: those a read is tested against, and for each device type
        derived from the value, its own CUDA strings and those it is tested against. A
        test guarding code only CUDA runs (:meth:`guards_cuda_only_code`) is left."""
        found = {id(node): node for node in self.tested_cuda_strings(reads)}
        for derivation in self.derived_device_types(reads):
            found.update((id(n), n) for n in ast.walk(derivation) if isinstance(n, ast.Constant) and is_cuda_string(n))
            holder = parent(derivation)
            if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name):
                derived_reads = self.reads_of(holder.targets[0])
                found.update((id(n), n) for n in self.tested_cuda_strings(derived_reads))
        return [node for node in found.values() if self.guards_cuda_only_code(node) is None]

    def ported_type_tests(self, reads: list[ast.expr]) -> list[ast.expr]:
        """The CUDA strings the type of a device the port makes the XLA device is tested
        against, as :meth:`ported_tests`: ``device.type == "cuda"``, and through a copy,
        ``device_type = device.type`` ... ``device_type == "cuda"``. Its type is "xla"."""
        types = [holder for read in reads if _is_type_of(holder := parent(read), read)]
        found = list(self.tested_cuda_strings(types))
        for kind in types:
            holder = parent(kind)
            if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name):
                found.extend(self.tested_cuda_strings(self.reads_of(holder.targets[0])))
        return [node for node in found if self.guards_cuda_only_code(node) is None]

    def kept_tests(self, reads: list[ast.expr]) -> list[ast.expr]:
        """The tests of the value (or of a device type derived from it) against a CUDA
        string that guard code only CUDA runs: they stay, and are false on XLA."""
        strings = list(self.tested_cuda_strings(reads))
        for derivation in self.derived_device_types(reads):
            holder = parent(derivation)
            if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name):
                strings.extend(self.tested_cuda_strings(self.reads_of(holder.targets[0])))
        kept = {id(test): test for s in strings if (test := self.guards_cuda_only_code(s)) is not None}
        return list(kept.values())

    def tested_cuda_strings(self, reads: list[ast.expr]) -> list[ast.expr]:
        """The CUDA strings a read is tested against: ``"cuda" in device``, ``device ==
        "cuda"``, ``device != "cuda:0"``, ``device in ("cuda", "mps")``,
        ``device.startswith("cuda")``, ``match device: case "cuda":``."""
        found: list[ast.expr] = []
        for read in reads:
            holder = parent(read)
            if isinstance(holder, ast.Compare) and all(isinstance(op, STRING_TESTS) for op in holder.ops):
                for side in (holder.left, *holder.comparators):
                    if side is not read:
                        found.extend(_cuda_strings(side))
            elif isinstance(holder, ast.Attribute) and holder.attr in PREFIX_TESTS:
                call = parent(holder)
                if isinstance(call, ast.Call) and call.func is holder:
                    for arg in call.args:
                        found.extend(_cuda_strings(arg))
            elif isinstance(holder, ast.Match) and holder.subject is read:
                for case in holder.cases:
                    for pattern in ast.walk(case.pattern):
                        if isinstance(pattern, ast.MatchValue):
                            found.extend(_cuda_strings(pattern.value))
        return found

    def guards_cuda_only_code(self, string: ast.expr) -> ast.AST | None:
        """The test holding ``string`` when what it decides on CUDA is code only CUDA runs:
        the branch it takes (``if device_type == "cuda": x = x.pin_memory()``), or, for a
        test that is a value, where the value goes (``AdamW(..., fused=device_type ==
        "cuda")``, ``use_fused = device_type == "cuda"`` ... ``fused=use_fused``)."""
        branch = _branch_taken_when_true(string)
        if branch is not None:
            test, taken = branch
            return test if _runs_cuda_only_code(taken) else None
        value = _test_holding(string)
        holder = parent(value)
        if isinstance(holder, ast.keyword) and holder.arg in CUDA_ONLY_KEYWORDS:
            return value
        if isinstance(holder, ast.Assign) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name):
            for read in self.reads_of(holder.targets[0]):
                place = parent(read)
                if isinstance(place, ast.keyword) and place.arg in CUDA_ONLY_KEYWORDS:
                    return value
                if (branch := _branch_taken_when_true(read)) is not None and _runs_cuda_only_code(branch[1]):
                    return value
        return None


def _runs_cuda_only_code(nodes: list[ast.AST]) -> bool:
    """``x.pin_memory()``, ``fused=True``: code that needs CUDA and has no XLA port."""
    for statement in nodes:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and method_name(node) in CUDA_ONLY_METHODS:
                return True
            if (
                isinstance(node, ast.keyword)
                and node.arg in CUDA_ONLY_KEYWORDS
                and not (isinstance(node.value, ast.Constant) and node.value.value in (False, None))
            ):
                return True
    return False


def _test_holding(node: ast.expr) -> ast.expr:
    """The whole boolean expression ``node`` is part of: ``fused_available and device_type
    == "cuda"`` for the ``"cuda"`` in it."""
    value = node
    for holder in ancestors(node):
        if _is_test_part(holder):
            value = holder
        elif not isinstance(holder, (ast.Attribute, ast.Tuple, ast.List, ast.Set)):
            break  # `.startswith`, `("cuda", "mps")`: parts of the test
    return value


def _cuda_strings(node: ast.AST) -> list[ast.expr]:
    """``node`` if it is a CUDA string literal, or the CUDA strings of a literal tuple,
    list or set of them (``device in ("cuda", "mps")``)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e for e in node.elts if string_value(e) is not None and is_cuda_string(e)]
    return [node] if isinstance(node, ast.expr) and string_value(node) is not None and is_cuda_string(node) else []


def _branch_taken_when_true(node: ast.expr) -> tuple[ast.AST, list[ast.AST]] | None:
    """The test holding ``node`` and the code it runs when ``node`` holds (a string: when
    the value is that string): the body of ``if device == "cuda":``, the ``else`` of ``if
    device != "cuda":`` or of ``if not device.startswith("cuda"):``, the body of ``case
    "cuda":``, of ``dict(fused=True) if use_fused else dict()``."""
    matches = True
    child: ast.AST = node
    for holder in ancestors(node):
        if isinstance(holder, ast.match_case):
            return holder.pattern, list(holder.body)
        if _negates(holder):
            matches = not matches
        elif isinstance(holder, (ast.If, ast.IfExp, ast.While)):
            if child is not holder.test:
                return None
            taken = holder.body if matches else holder.orelse
            return holder.test, taken if isinstance(taken, list) else [taken]
        elif isinstance(holder, ast.stmt):
            return None
        child = holder
    return None


def _negates(node: ast.AST) -> bool:
    """``device != "cuda"``, ``"cuda" not in device``, ``not ...``: true when the value differs."""
    if isinstance(node, ast.Compare):
        return any(isinstance(op, NEGATED_TESTS) for op in node.ops)
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)


def _is_test_part(node: ast.AST) -> bool:
    """A comparison, ``and``/``or``, ``not``, or a ``.startswith(...)`` call."""
    if isinstance(node, ast.Call):
        return method_name(node) in PREFIX_TESTS
    return isinstance(node, (ast.Compare, ast.BoolOp)) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    )


def _is_type_of(node: ast.AST | None, device: ast.expr) -> bool:
    """``node`` is ``<device>.type``."""
    return isinstance(node, ast.Attribute) and node.attr == "type" and node.value is device
