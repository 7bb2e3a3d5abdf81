""".gitignore matching (issue 29 item 3): linear in the path whatever the pattern (a
backtracking glob hung `check .` on `*a*a*a*a*a*a*a*a*a*ab`), with the meaning pathspec's
GitIgnoreSpec gives, which it is compared with."""

from __future__ import annotations

import random
import time
import warnings

import pathspec
import pytest

from xlalint.engine import gitignore
from xlalint.engine.config import ConfigFinder
from xlalint.engine.files import discover
from xlalint.engine.gitignore import IgnoreSpec
from xlalint.rules import rules_by_code

HOSTILE = "*a*a*a*a*a*a*a*a*a*ab"
# Classes that exclude a character are left out: pathspec lets `[!a]` match a `/`, git does not.
ATOMS = [
    "a",
    "b",
    "*",
    "**",
    "***",
    "?",
    "[ab]",
    "[a-c]",
    "[]a]",
    "\\*",
    "x",
    ".py",
    "a*",
    "*a",
    "a?b",
    "#",
    " ",
    "\\ ",
]
NAMES = ["a", "b", "ab", "ba", "aab", "x.py", "a.py", "*", "axb", "aa", "abb", "x", "]"]


def _pattern(rng: random.Random) -> str:
    text = "/".join("".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(1, 4)))
    text = ("/" if rng.random() < 0.3 else "") + text + ("/" if rng.random() < 0.3 else "")
    return ("!" if rng.random() < 0.2 else "") + text


def _path(rng: random.Random) -> str:
    return "/".join(rng.choice(NAMES) for _ in range(rng.randint(1, 4))) + ("/" if rng.random() < 0.4 else "")


def test_the_verdicts_are_pathspecs():
    rng = random.Random(29)
    compared = 0
    for _ in range(4000):
        lines = [_pattern(rng) for _ in range(rng.randint(1, 3))]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                reference = pathspec.GitIgnoreSpec.from_lines(lines)
            except ValueError:  # pathspec refuses a trailing backslash; we discard the line
                continue
        ours = IgnoreSpec.from_lines(lines)
        for _ in range(5):
            path = _path(rng)
            assert ours.check(path) == reference.check_file(path).include, (lines, path)
            compared += 1
    assert compared > 15_000


@pytest.mark.parametrize(
    ("lines", "path", "verdict"),
    [
        (["build/"], "src/build/", True),
        (["build/"], "src/build", None),  # a file named build: the pattern asks for a folder
        (["/build"], "src/build/", None),  # anchored at the .gitignore's folder
        (["*.py", "!keep.py"], "a/keep.py", False),
        (["doc/**/*.py"], "doc/a/b/c.py", True),
        (["doc/**/*.py"], "src/doc/c.py", None),
        (["**/gen"], "a/b/gen/", True),
        (["a\\*b"], "a*b", True),
        (["a\\*b"], "axb", None),
        (["[a-c]x"], "bx", True),
        (["# comment", "", "x.py   "], "x.py", True),
        (["x.py\\ "], "x.py ", True),
        (["foo\\"], "foo", None),  # a trailing backslash: git discards the line
        (["[z-a]"], "z", None),  # an invalid range: discarded as well
        (["*"], "anything/at/all.py", True),
    ],
)
def test_gitignore_meanings(lines, path, verdict):
    assert IgnoreSpec.from_lines(lines).check(path) is verdict


def test_a_hostile_pattern_costs_each_segment_once(monkeypatch):
    """Item 3: 40 `a` against `*a*a*a*a*a*a*a*a*a*ab` under 40 folders: each segment is
    tried once per pattern element, and each try is one pass over the name."""
    calls = []
    real = gitignore._Glob.matches
    monkeypatch.setattr(gitignore._Glob, "matches", lambda self, name: calls.append(name) or real(self, name))
    spec = IgnoreSpec.from_lines([HOSTILE])
    path = "/".join(["a" * 40] * 40) + ".py"
    started = time.perf_counter()
    assert spec.check(path) is None
    assert len(calls) <= 2 * 40
    assert time.perf_counter() - started < 1.0  # was 73 s (a regex that backtracks)


def test_check_of_a_tree_with_a_hostile_gitignore_is_quick(tmp_path):
    (tmp_path / ".gitignore").write_text(HOSTILE + "\n" + "*b*b*b*b*b*b*b*b*b*b*b*bc/\n")
    deep = tmp_path.joinpath(*["a" * 40] * 20)
    deep.mkdir(parents=True)
    (deep / ("a" * 40 + ".py")).write_text("x = 1\n")
    (tmp_path / ("a" * 40 + "b")).write_text("")
    started = time.perf_counter()
    found = list(discover([tmp_path], ConfigFinder(None, rules_by_code())))
    assert [p.name for p in found] == ["a" * 40 + ".py"]
    assert time.perf_counter() - started < 5.0  # was minutes


def test_discover_still_honours_gitignore(tmp_path):
    (tmp_path / ".gitignore").write_text("gen/\n*_pb2.py\n!keep_pb2.py\n")
    for name in ("gen/a.py", "src/x_pb2.py", "src/keep_pb2.py", "src/main.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    found = sorted(
        p.relative_to(tmp_path).as_posix() for p in discover([tmp_path], ConfigFinder(None, rules_by_code()))
    )
    assert found == ["src/keep_pb2.py", "src/main.py"]
