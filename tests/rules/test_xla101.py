"""XLA101 dynamic-padding on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixes_to, assert_fixture_fixes
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA101"
CODE = "XLA101"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # run_glue-like: tokenizes without padding, Trainer with the default collator; not
    # the `padding=True` sample call on one pair of strings (it pads nothing).
    "run_glue_trainer": [(49, 15, CODE)],
    # accelerate nlp_example-like: the XLA branch with an early return, a collator on
    # the non-XLA path, a conditional "max_length" value are fine; `padding=True`
    # after `if not on_tpu: return ...` is on the XLA path.
    "accelerate_nlp": [(65, 36, CODE)],
}
# The same for cases with no fix.
UNFIXED = {
    # An instruction fine-tune whose labels copy the padded input_ids: reported, the fix
    # withheld (padded to max_length the model would learn pad tokens).
    "instruction_labels": [(19, 28, CODE)],
    # Stanford Alpaca: one text per tokenizer call pads nothing; the collator's
    # pad_sequence is what pads the batch.
    "alpaca_one_text": [(37, 21, CODE), (40, 18, CODE)],
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
        # One text (or one pair) pads nothing: encode_plus, a string, a `str` parameter,
        # an element of a `Sequence[str]`, a name assigned only strings.
        "import torch\nt = self.src_tokenizer.encode_plus(x, padding='longest')\n",
        "import torch\nt = tokenizer(f'{prompt} {answer}', padding=True)\n",
        "import torch\ndef tok(text: str):\n    return tokenizer(text, padding='longest')\n",
        "import torch\nfrom typing import Sequence\ndef tok(strings: Sequence[str]):\n"
        "    return [tokenizer(text, padding='longest', return_tensors='pt') for text in strings]\n",
        "import torch\nprompt = TEMPLATE.format(q=q)\nt = tokenizer(prompt + answer, padding=True)\n",
    ],
)
def test_not_flagged(source):
    assert findings(source, "f.py") == []


@pytest.mark.parametrize(
    "source",
    [
        "import torch\nif on_tpu:\n    t = tokenizer(x, padding=True)\n",
        "import torch\nt = self.src_tokenizer.batch_encode_plus(x, padding='longest')\n",
        "import torch\nfrom functools import partial\ndef pad_batch(b, v):\n"
        "    return torch.nn.utils.rnn.pad_sequence(b, padding_value=v)\n"
        "loader = torch.utils.data.DataLoader(ds, collate_fn=partial(pad_batch, v=0))\n",
        "import transformers\nc = transformers.data.data_collator.DataCollatorWithPadding(tokenizer)\n",
    ],
)
def test_flagged(source):
    assert len(findings(source, "f.py")) == 1


@pytest.mark.parametrize(
    "source",
    [
        # A batch: names that are not known strings, a list of texts.
        "import torch\ndef tok(texts):\n    return tokenizer(texts, padding='longest')\n",
        "import torch\nt = tokenizer([q + a for q, a in pairs], padding=True)\n",
        "import torch\nt = tokenizer(batch['text'], padding=True)\n",
        "import torch\nfrom typing import Sequence\ndef tok(strings: Sequence[str]):\n"
        "    return tokenizer(strings, padding='longest')\n",
    ],
)
def test_a_batch_is_flagged(source):
    assert len(findings(source, "f.py")) == 1


@pytest.mark.parametrize("case", sorted(UNFIXED))
def test_findings_without_a_fix(case):
    path = FIXTURES / f"{case}.py"
    found = findings(path.read_text(), str(path))
    assert [(f.span.line, f.span.col + 1, f.code) for f in found] == UNFIXED[case]
    assert all(f.fix is None for f in found)
    assert_fixes_to(CODE, path.read_text(), str(path), path.read_text(), unsafe=True)


def test_labels_copied_from_the_padded_input_ids_withhold_the_fix_and_say_why():
    path = FIXTURES / "instruction_labels.py"
    (finding,) = findings(path.read_text(), str(path))
    assert finding.fix is None
    assert finding.fix_withheld.startswith(
        "not offered: the labels are a copy of the padded `input_ids` (line 20); padded to max_length, "
        "the model would learn to predict the pad tokens."
    )


@pytest.mark.parametrize(
    "labels",
    [
        "labels = copy.deepcopy(input_ids)",
        "labels = input_ids",
        "labels = input_ids.clone()",
        'labels = enc["input_ids"][:]',
        "input_ids = labels = enc.input_ids",
        'enc["labels"] = enc["input_ids"].copy()',
    ],
)
def test_every_copy_of_the_input_ids_withholds_the_fix(labels):
    source = (
        "import copy\nimport torch_xla\n"
        "enc = tokenizer(texts, padding=True, max_length=64, truncation=True)\n"
        'input_ids = enc["input_ids"]\n'
        f"{labels}\n"
    )
    (finding,) = findings(source, "f.py")
    assert finding.fix is None and "labels are a copy" in finding.fix_withheld


@pytest.mark.parametrize(
    "mask",
    [
        "labels[labels == tokenizer.pad_token_id] = -100",
        'labels[enc["attention_mask"] == 0] = IGNORE_INDEX',
        "labels = [[-100 if t == tokenizer.pad_token_id else t for t in row] for row in labels]",
    ],
)
def test_labels_whose_pad_positions_are_masked_keep_the_fix(mask):
    source = (
        "import torch_xla\n"
        "enc = tokenizer(texts, padding=True, max_length=64, truncation=True)\n"
        'labels = enc["input_ids"].clone()\n'
        f"{mask}\n"
    )
    (finding,) = findings(source, "f.py")
    assert finding.fix is not None and finding.fix_withheld is None


def test_labels_computed_otherwise_keep_the_fix():
    source = (
        "import torch_xla\n"
        "enc = tokenizer(texts, padding=True, max_length=64, truncation=True)\n"
        'labels = torch.tensor(batch["label"])\n'
    )
    (finding,) = findings(source, "f.py")
    assert finding.fix is not None and finding.fix_withheld is None
