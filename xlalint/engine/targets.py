"""What ``xlalint version`` says: xlalint's version and the torch / torch_xla versions it
targets: the rules' default ``target-version`` (and the range accepted), and the
releases the harness (``xlalint run``) pins in the ``harness`` extra, with the ones
installed here, if any (read from the installed packages' metadata: torch is not
imported)."""

from __future__ import annotations

import json
from importlib import metadata

from xlalint import __version__
from xlalint.engine.config import DEFAULT_TARGET, OLDEST_TARGET

#: The ``harness`` extra's pins (pyproject.toml; tests/test_ruff_controls.py keeps them alike).
HARNESS_PINS = {"torch": "2.9.0", "torch_xla": "2.9.0"}
_DISTRIBUTIONS = {"torch": "torch", "torch_xla": "torch-xla"}


def installed(package: str) -> str | None:
    try:
        return metadata.version(_DISTRIBUTIONS[package])
    except metadata.PackageNotFoundError:
        return None


def version_info() -> dict:
    return {
        "version": __version__,
        "target_version": {
            "default": f"{DEFAULT_TARGET[0]}.{DEFAULT_TARGET[1]}",
            "oldest": f"{OLDEST_TARGET[0]}.{OLDEST_TARGET[1]}",
        },
        "harness": dict(HARNESS_PINS),
        "installed": {package: installed(package) for package in HARNESS_PINS},
    }


def describe_version(as_json: bool = False) -> str:
    info = version_info()
    if as_json:
        return json.dumps(info, indent=2)
    target, harness, found = info["target_version"], info["harness"], info["installed"]
    present = ", ".join(f"{name} {found[name]}" for name in HARNESS_PINS if found[name]) or "neither"
    return "\n".join(
        [
            f"xlalint {info['version']}",
            f"rules target torch_xla {target['default']} (target-version {target['oldest']} to {target['default']})",
            f"harness (xlalint run): torch {harness['torch']}, torch_xla {harness['torch_xla']} "
            f"(installed here: {present})",
        ]
    )
