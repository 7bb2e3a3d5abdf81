"""The working copies `xlalint run --compare` runs each version in (issue 28 §4)."""

from __future__ import annotations

from xlalint.harness.working_copy import describe, make_working_copy


def test_folders_are_made_and_files_linked_so_new_files_stay_in_the_copy(tmp_path):
    source = tmp_path / "work"
    (source / "data" / "deep").mkdir(parents=True)
    (source / "data" / "deep" / "x.bin").write_bytes(b"123")
    (source / "config.json").write_text("{}")
    (source / "latest").symlink_to("data/deep/x.bin")  # a relative link of the user's
    copy = make_working_copy(source, tmp_path / "copy")
    root = copy.path
    assert (root / "data" / "deep").is_dir() and not (root / "data").is_symlink()
    assert (root / "data" / "deep" / "x.bin").read_bytes() == b"123"
    assert (root / "latest").read_bytes() == b"123"
    (root / "data" / "new.pt").write_text("made by a run")
    (root / "config.json").unlink()  # replaced by a run: only its link goes
    assert sorted(p.name for p in (source / "data").iterdir()) == ["deep"]
    assert (source / "config.json").exists() and copy.linked_folders == 0


def test_past_the_entry_budget_folders_are_linked_whole_and_the_report_says_so(tmp_path):
    source = tmp_path / "work"
    for name in "abcde":
        (source / name / "inner").mkdir(parents=True)
    copy = make_working_copy(source, tmp_path / "copy", max_entries=3)
    linked = sorted(p.name for p in copy.path.iterdir() if p.is_symlink())
    assert len(linked) == 2 and copy.linked_folders == 5  # and the three inner ones under the made folders
    assert all((copy.path / name / "inner").is_dir() for name in "abcde")
    assert describe([copy], source).endswith("5 folders were linked whole (files made in them are shared)")


# Issue 40 §1: the copy's files were links to the user's, so a run appending to a file
# (or writing a checkpoint in place) wrote into the user's file.
def test_writing_into_a_copied_file_in_place_leaves_the_users_file_as_it_was(tmp_path):
    source = tmp_path / "work"
    (source / "logs").mkdir(parents=True)
    (source / "data.txt").write_text("input\n")
    (source / "logs" / "train.log").write_text("old\n")
    (source / "ckpt").symlink_to(source / "logs" / "train.log")  # absolute, into the working directory
    root = make_working_copy(source, tmp_path / "copy").path
    with open(root / "data.txt", "a") as file:
        file.write("appended\n")
    with open(root / "logs" / "train.log", "r+") as file:
        file.write("new")
    with open(root / "ckpt", "a") as file:
        file.write("more\n")
    assert (source / "data.txt").read_text() == "input\n"
    assert (source / "logs" / "train.log").read_text() == "old\n"
    assert (root / "logs" / "train.log").read_text() == "new\nmore\n"  # the link points into the copy
    assert not (root / "data.txt").is_symlink()


def test_past_the_copy_budget_files_are_linked_and_the_report_says_so(tmp_path):
    source = tmp_path / "work"
    source.mkdir()
    (source / "a.txt").write_bytes(b"a" * 10)
    (source / "big.bin").write_bytes(b"b" * 100)
    copy = make_working_copy(source, tmp_path / "copy", max_copy_bytes=50)
    assert not (copy.path / "a.txt").is_symlink() and (copy.path / "big.bin").is_symlink()
    assert (copy.linked_files, copy.linked_bytes) == (1, 100)
    assert describe([copy], source).endswith(
        "; past 1024 MiB of copies, 1 files (0.0 GiB) were linked, not copied (a run writing into them changes your files)"
    )


def test_a_copy_made_inside_the_working_directory_does_not_copy_itself(tmp_path):
    (tmp_path / "data.txt").write_text("input\n")
    copy = make_working_copy(tmp_path, tmp_path / "run" / "original-cwd")
    assert sorted(p.name for p in copy.path.iterdir()) == ["data.txt", "run"]
    assert list((copy.path / "run").iterdir()) == []


# A project's own .venv (7 GB, 37,000 entries here) was copied up to the budgets for
# every run: seconds per run, and the copy budget spent on packages, not data.
def test_environments_and_git_are_linked_whole_and_the_report_names_them(tmp_path):
    source = tmp_path / "work"
    (source / ".venv" / "lib").mkdir(parents=True)
    (source / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (source / "envs" / "conda" / "conda-meta").mkdir(parents=True)
    (source / ".git" / "objects").mkdir(parents=True)
    (source / "data").mkdir()
    (source / "data" / "pyvenv.cfg.txt").write_text("not an environment")
    copy = make_working_copy(source, tmp_path / "copy")
    root = copy.path
    assert copy.linked_tools == (".git", ".venv", "envs/conda")
    assert all((root / name).is_symlink() for name in copy.linked_tools)
    assert (root / ".venv" / "pyvenv.cfg").read_text() == "home = /usr/bin\n"
    assert not (root / "data").is_symlink() and not (root / "envs").is_symlink()
    assert copy.linked_folders == 0 and copy.linked_files == 0
    assert describe([copy], source).endswith(
        "; environments and git stores were linked, not copied (.git, .venv, envs/conda)"
    )
