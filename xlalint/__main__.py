"""``python -m xlalint``: the same command line as ``xlalint`` (for a Python whose
scripts folder is not on PATH)."""

from xlalint.cli import main

main()
