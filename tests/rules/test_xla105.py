"""XLA105 missing-mp-fn on whole scripts: findings and the safe fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, findings_of, fixture_positions

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA105"
CODE = "XLA105"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A multi-process script (DistributedSampler, xr.world_size, xm.optimizer_step) run
    # through `main()` only: `_mp_fn` goes before the `__main__` block, whose comment stays.
    "mp_train": [(41, 1, CODE)],
    # Launches `train(lr)` with args=(0.1,) and spawns a parameterless `_mp_fn`.
    "launch_train": [(9, 1, CODE), (19, 1, CODE)],
    # An HF Trainer subclass, `sys.exit(main())`, no blank lines around the block: the
    # inserted def takes the (zero) blank lines that preceded the `if`.
    "hf_trainer": [(30, 1, CODE)],
    # The `__main__` block calls `train()`, not `main()`: `_mp_fn` calls `train()`.
    "train_entry": [(18, 1, CODE)],
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


def test_fixed_files_are_clean():
    for case in EXPECTED:
        assert findings((FIXTURES / f"{case}.fixed.py").read_text(), "f.py") == []


def test_main_with_arguments_has_no_fix():
    source = (
        "import torch_xla.runtime as xr\n\n\ndef main(args, rank):\n    print(xr.world_size())\n\n\n"
        'if __name__ == "__main__":\n    main(parse(), 0)\n'
    )
    (finding,) = findings(source, "f.py")
    assert finding.fix is None
    assert "(no fix: `main` needs `args`, `rank`)" in finding.message


def test_an_entry_function_with_arguments_is_named_and_has_no_fix():
    source = (
        "import torch_xla.runtime as xr\n\n\ndef run(args):\n    print(xr.world_size())\n\n\n"
        'if __name__ == "__main__":\n    args = parse_args()\n    run(args)\n'
    )
    (finding,) = findings(source, "f.py")
    assert finding.fix is None
    assert "(no fix: `run` needs `args`)" in finding.message


@pytest.mark.parametrize(
    "source",
    [
        # No torch_xla multi-process API and no Trainer.
        'import torch\n\n\ndef main():\n    pass\n\n\nif __name__ == "__main__":\n    main()\n',
        # main() is called through the launcher.
        "import torch_xla\nimport torch_xla.runtime as xr\n\n\ndef main(index):\n    xr.world_size()\n\n\n"
        'if __name__ == "__main__":\n    torch_xla.launch(main)\n',
        # A method of a class called `main` is not the module-level main.
        "import torch_xla.runtime as xr\n\n\nclass App:\n    def main(self):\n        xr.world_size()\n\n\n"
        'if __name__ == "__main__":\n    App().main()\n',
        # init_process_group with another backend, no other multi-process API.
        "import torch_xla\nimport torch.distributed as dist\n\n\ndef main():\n    dist.init_process_group('gloo')\n\n\n"
        'if __name__ == "__main__":\n    main()\n',
        # A spawned function with *args, or args the rule cannot count.
        "import torch_xla.distributed.xla_multiprocessing as xmp\n\n\ndef f(*a):\n    pass\n\n\nxmp.spawn(f)\n",
        "import torch_xla.distributed.xla_multiprocessing as xmp\n\n\ndef f(a):\n    pass\n\n\nxmp.spawn(f, args=ARGS)\n",
    ],
)
def test_not_flagged(source):
    assert findings(source, "f.py") == []


def test_init_process_group_xla_is_multiprocess():
    source = (
        "import torch_xla\nimport torch.distributed as dist\n\n\ndef main():\n    dist.init_process_group('xla')\n\n\n"
        'if __name__ == "__main__":\n    main()\n'
    )
    assert len(findings(source, "f.py")) == 1
