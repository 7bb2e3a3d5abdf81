"""XLA306 sliding-window-offset on whole scripts."""

from __future__ import annotations

from pathlib import Path

from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA306"
CODE = "XLA306"


def test_the_word_language_model_is_reported_after_the_port_in_its_batch_helper():
    # pytorch/examples' word LM as published (an accelerator script): once ported, the
    # step calls get_batch(train_data, i) with i from range(0, n, bptt), and the helper
    # slices the device tensor at i; evaluate()'s calls of the same helper are not the step.
    path = FIXTURES / "word_language_model.py"
    findings = [f for f in lint_source(path.read_text(), str(path), Settings(), select=["ALL"]) if f.code == CODE]
    assert [(f.span.line, f.span.col + 1, f.after_port) for f in findings] == [(139, 12, True), (140, 14, True)]
    assert all("`source` sliced at `i`" in f.message and f.fix is None for f in findings)


def test_a_tensor_cut_on_the_host_before_the_move_is_not_reported():
    source = (
        "import torch\nimport torch_xla\n"
        "def get_batch(source, i):\n    return source[i:i + 8]\n"
        "tokens = torch.load('t.pt')\n"
        "for i in range(0, 64, 8):\n"
        "    x = get_batch(tokens, i).to(torch_xla.device())\n"
        "    model(x).sum().backward()\n"
        "    torch_xla.sync()\n"
    )
    assert not [f for f in lint_source(source, "t.py", Settings(), select=[CODE])]
