"""XLA502 tied-weights-before-move on whole scripts: findings and the unsafe fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import run_cli

from rules.fixture_checks import assert_fixture_fixes, expected_fixed, findings_of, fixture_positions

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA502"
CODE = "XLA502"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A model that is GPT-2 or a tied module of the file (reported, no fix: no one way
    # to tie both), a pretrained GPT-2 (`tie_weights()`), a tied module moved twice
    # (the tying assignment, once: the second move changes nothing).
    "lm_pretrain": [(27, 5, CODE), (33, 10, CODE), (36, 12, CODE)],
    # A module of the file that ties by assignment, built on either of two paths and
    # compiled after the move (issue 33): the assignment is repeated after the move.
    "class_tie": [(29, 5, CODE)],
    # Issue 31: moved by hand, then handed to a Trainer subclass of the file or through a
    # PEFT wrapper (the Trainer ties again); only the sampling model is reported.
    "trainer_reties": [(32, 5, CODE)],
}


def findings(source: str, path: str):
    return findings_of(CODE, source, path)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_after_the_fix_only_the_ambiguous_model_is_left():
    fixed = expected_fixed(FIXTURES, "lm_pretrain", unsafe=True)
    assert [(f.span.line, f.fix) for f in findings(fixed, "f.py")] == [(27, None)]


def test_a_value_assigned_after_the_move_does_not_block_the_fix():
    """`model = torch.compile(model)` after the move is not what was moved: the tying
    assignment is repeated, in the file's own names, and the fixed file is clean."""
    fixed = expected_fixed(FIXTURES, "class_tie", unsafe=True)
    assert "    model.to(device)\n    model.lm_head.weight = model.tok_emb.weight\n" in fixed
    assert findings(fixed, "f.py") == []


def test_a_model_of_either_kind_is_named_the_same_whatever_the_hash_seed():
    # The kinds a name may hold were a set: which one the message named changed with
    # PYTHONHASHSEED (seeds 0 to 5 gave both wordings before).
    lines = set()
    for seed in range(4):
        result = run_cli(
            "check",
            "--no-cache",
            "--output-format",
            "concise",
            "--select",
            CODE,
            str(FIXTURES / "lm_pretrain.py"),
            env={"PYTHONHASHSEED": str(seed)},
        )
        [line] = [line for line in result.stdout.decode().splitlines() if ":27:5:" in line]
        lines.add(line)
    [line] = lines
    assert "its tied weights are not tied again" in line


# Across local modules: the class is imported from the project (issue 28 §1). Folder ->
# the findings in its train.py.
PROJECTS = {
    # llama2.c: `from model import Transformer`, tied in model.py, moved in train.py.
    "project_tied": [(21, 5, CODE)],
    # `from pkg.model import GPT`, tied under `if tie_weights:`: tied when given
    # `args.tied` (unknown), not when given a literal False.
    "project_package": [(16, 9, CODE)],
    # model.py ties nothing; train.py ties again after the move.
    "project_untied": [],
    "project_retied": [],
    # Issue 38, after the port: llama2.c's `device = "cuda"` config string, the model built
    # in both arms of `if init_from == ...`; the word language model's `RNNModel(...,
    # args.tied).to(device)` in an `else:` arm, the device from `torch.accelerator`.
    "project_config_device": [(21, 1, CODE)],
    "project_accelerator": [(25, 13, CODE)],
}


@pytest.mark.parametrize("project", sorted(PROJECTS))
def test_findings_across_local_modules(project):
    assert fixture_positions(CODE, FIXTURES / project, "train") == PROJECTS[project]


@pytest.mark.parametrize("project", sorted(PROJECTS))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix_across_local_modules(project, unsafe):
    assert_fixture_fixes(CODE, FIXTURES / project, "train", unsafe)


def test_the_conditional_tie_is_repeated_under_the_same_test():
    fixed = expected_fixed(FIXTURES / "project_package", "train", unsafe=True)
    assert "if args.tied:\n    model.decoder.weight = model.encoder.weight\n" in fixed


def test_a_local_module_edited_between_checks_is_read_again(tmp_path):
    (tmp_path / "model.py").write_text((FIXTURES / "project_untied" / "model.py").read_text())
    script = (FIXTURES / "project_tied" / "train.py").read_text()
    (tmp_path / "train.py").write_text(script)
    assert findings(script, str(tmp_path / "train.py")) == []
    (tmp_path / "model.py").write_text((FIXTURES / "project_tied" / "model.py").read_text())
    assert [f.span.line for f in findings(script, str(tmp_path / "train.py"))] == [21]


def test_the_result_cache_does_not_keep_a_check_that_read_a_local_module(tmp_path):
    # The entry would describe train.py alone; model.py changes under it.
    (tmp_path / "pyproject.toml").write_text("[tool.xlalint]\n")
    (tmp_path / "model.py").write_text((FIXTURES / "project_untied" / "model.py").read_text())
    (tmp_path / "train.py").write_text((FIXTURES / "project_tied" / "train.py").read_text())
    args = ("check", "--output-format", "concise", "--select", CODE, "train.py")
    assert run_cli(*args, cwd=tmp_path).returncode == 0
    (tmp_path / "model.py").write_text((FIXTURES / "project_tied" / "model.py").read_text())
    result = run_cli(*args, cwd=tmp_path)
    assert "train.py:21:5: XLA502" in result.stdout.decode()


def test_stdin_imports_nothing_local(tmp_path):
    # A module read from stdin has no folder: the same text, under a path, is reported.
    script = (FIXTURES / "project_tied" / "train.py").read_text()
    assert findings(script, "<stdin>") == findings(script, "-") == []
    result = run_cli("check", "--no-cache", "--select", CODE, "-", cwd=FIXTURES / "project_tied", stdin=script)
    assert result.returncode == 0
    named = ("check", "--no-cache", "--select", CODE, "--stdin-filename", "train.py", "-")
    assert "XLA502" in run_cli(*named, cwd=FIXTURES / "project_tied", stdin=script).stdout.decode()


@pytest.mark.parametrize("project", ["project_config_device", "project_accelerator"])
def test_a_cuda_device_the_port_makes_xla_is_reported_after_the_port(project):
    path = FIXTURES / project / "train.py"
    (finding,) = findings(path.read_text(), str(path))
    assert finding.after_port


def test_the_port_and_the_tie_fix_together(tmp_path):
    """`fix --unsafe-fixes` ports the device and ties again after the chained move, under
    the test that decides the tie."""
    for name in ("model.py", "train.py"):
        (tmp_path / name).write_text((FIXTURES / "project_accelerator" / name).read_text())
    run_cli("fix", "--no-cache", "--unsafe-fixes", "train.py", cwd=tmp_path)
    fixed = (tmp_path / "train.py").read_text()
    assert "    device = torch_xla.device()\n" in fixed
    assert (
        "    model = RNNModel(args.model, ntokens, 16, 16, 2, 0.2, args.tied).to(device)\n"
        "    if args.tied:\n        model.decoder.weight = model.encoder.weight\n"
    ) in fixed
