"""The device-tensor analysis: which expressions hold a tensor on the accelerator."""

from __future__ import annotations

import ast

import pytest

from xlalint.analysis.device_tensors import DeviceTensors
from xlalint.analysis.semantic import attach_parents
from xlalint.engine.config import Settings
from xlalint.engine.context import Context


def analysis(source: str) -> tuple[DeviceTensors, dict[str, ast.Name]]:
    """The analysis, and the last read of each name (``use(x)`` calls mark them)."""
    tree = ast.parse(source)
    nodes = attach_parents(tree)
    ctx = Context(source, "t.py", tree, Settings(), nodes)
    reads = {
        node.args[0].id: node.args[0]
        for node in nodes
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "use" and isinstance(node.args[0], ast.Name)
    }
    return DeviceTensors(ctx.semantic, ctx.devices), reads


@pytest.mark.parametrize(
    ("assignment", "on_device"),
    [
        ("x = torch.randn(3).to(device)", True),
        ("x = torch.randn(3).cuda()", True),
        ('x = torch.zeros(3, device="xla")', True),
        ("x = torch.zeros(3, device=torch_xla.device())", True),
        ("x = torch.randn(3).to(device).view(3, 1).contiguous()", True),
        ('x = torch.randn(3).to("cpu")', False),
        ("x = torch.randn(3).to(torch.float32)", False),
        ("x = torch.randn(3)", False),
        ("x = load()", False),
    ],
)
def test_moves_and_factories(assignment, on_device):
    tensors, reads = analysis(f"import torch\nimport torch_xla\n{assignment}\nuse(x)\n")
    assert tensors.is_device_tensor(reads["x"]) is on_device


def test_a_returned_tensor_and_a_parameter_every_call_fills_with_one():
    source = (
        "import torch\n"
        "def move(t):\n    return t.to(device)\n"
        "def consume(a):\n    use(a)\n"
        "y = move(torch.ones(2))\n"
        "consume(y)\n"
        "consume(move(z))\n"
    )
    tensors, reads = analysis(source)
    assert tensors.is_device_tensor(reads["a"])


def test_a_parameter_one_call_fills_with_a_host_tensor_is_not_known():
    source = "import torch\ndef consume(a):\n    use(a)\nconsume(torch.ones(2).to(device))\nconsume(torch.ones(2))\n"
    tensors, reads = analysis(source)
    assert not tensors.is_device_tensor(reads["a"])


def test_a_name_assigned_a_host_value_on_some_path_or_unpacked_is_not_known():
    source = (
        "import torch\nx = torch.ones(2).to(device)\nif flag:\n    x = torch.ones(2)\na, b = pair()\nuse(x)\nuse(a)\n"
    )
    tensors, reads = analysis(source)
    assert not tensors.is_device_tensor(reads["x"])
    assert not tensors.is_device_tensor(reads["a"])
