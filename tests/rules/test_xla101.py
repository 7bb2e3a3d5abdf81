"""XLA101 dynamic-padding on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA101"
CODE = "XLA101"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # run_glue-like: tokenizes without padding, Trainer with the default collator;
    # a `padding=True` sample call.
    "run_glue_trainer": [(46, 54, CODE), (49, 15, CODE)],
    # accelerate nlp_example-like: the XLA branch with an early return, a collator on
    # the non-XLA path, a conditional "max_length" value are fine; `padding=True`
    # after `if not on_tpu: return ...` is on the XLA path.
    "accelerate_nlp": [(65, 36, CODE)],
}


def findings(source: str, path: str, settings: Settings | None = None):
    return [f for f in lint_source(source, path, settings or Settings(), select=[CODE]) if f.code == CODE]


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    path = FIXTURES / f"{case}.py"
    found = findings(path.read_text(), str(path))
    assert [(f.span.line, f.span.col + 1, f.code) for f in found] == EXPECTED[case]
    assert all(f.fix is not None and f.fix.applicability == "unsafe" for f in found)


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_unsafe_fixed_files_are_clean():
    for case in EXPECTED:
        fixed = (FIXTURES / f"{case}.unsafe.py").read_text()
        assert findings(fixed, "f.py") == []


def test_max_length_option():
    source = "import torch\nenc = tokenizer(texts, padding=True)\n"
    settings = Settings(rule_settings=((CODE, (("max-length", 128),)),))
    result = fix_source(source, "f.py", settings, unsafe=True, select=[CODE])
    assert result.source == (
        'import torch\nenc = tokenizer(texts, padding="max_length", max_length=128, truncation=True)\n'
    )


@pytest.mark.parametrize(
    "source",
    [
        # The else branch of an XLA test; the body of a negated one.
        "import torch_xla\nif use_xla:\n    pass\nelse:\n    t = tokenizer(x, padding=True)\n",
        "import torch\nif device.type != 'xla':\n    t = tokenizer(x, padding=True)\n",
        "import torch\nif args.tpu_num_cores is None:\n    t = tokenizer(x, padding='longest')\n",
        # After an early return in the XLA branch.
        "import torch\ndef f(x):\n    if is_torch_xla_available():\n        return 1\n    return tokenizer(x, padding=True)\n",
        # A padding variable with a max_length branch; PaddingStrategy.MAX_LENGTH.
        "import torch\np = 'longest'\nif tpu:\n    p = 'max_length'\nt = tokenizer(x, padding=p)\n",
        "from transformers.utils import PaddingStrategy\nt = tok(x, padding=PaddingStrategy.MAX_LENGTH)\n",
        # Not tokenizers: a class, an unrelated name with "tok" in it, a padding=None collator
        "from transformers import BertTokenizer\nBertTokenizer(vocab, padding=True)\ntoken_ids(x, padding=True)\n",
        # pad_sequence outside collate functions
        "import torch\ny = torch.nn.utils.rnn.pad_sequence(xs)\n",
        # **kwargs may carry padding
        "from transformers import DataCollatorWithPadding\nc = DataCollatorWithPadding(tok, **cfg)\n",
    ],
)
def test_not_flagged(source):
    assert findings(source, "f.py") == []


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nif on_tpu:\n    t = tokenizer(x, padding=True)\n",
        "import torch\nt = self.src_tokenizer.encode_plus(x, padding='longest')\n",
        "import torch\nfrom functools import partial\ndef pad_batch(b, v):\n"
        "    return torch.nn.utils.rnn.pad_sequence(b, padding_value=v)\n"
        "loader = torch.utils.data.DataLoader(ds, collate_fn=partial(pad_batch, v=0))\n",
        "import transformers\nc = transformers.data.data_collator.DataCollatorWithPadding(tokenizer)\n",
    ],
)
def test_flagged(source):
    assert len(findings(source, "f.py")) == 1
