"""Write the table of TorchTPU's public ``torch.tpu`` API that XLA104 and XLA601 may write.

    pip download torch-tpu==0.2.0 --no-deps -d /tmp/tpu
    python tools/torch_tpu_api.py /tmp/tpu/torch_tpu-0.2.0-*.whl [--out xlalint/rules/data/torch_tpu_api.json]

The wheel's ``torch_tpu/_internal/public_api.py`` is TorchTPU's own single source of truth
for the ``torch.tpu`` modules: a dict ``_PUBLIC_MODULES`` from each public module's name to
a ``ModuleSpec(exports={name: target, ...})``. It is read as text with ``ast`` (never
imported: importing torch_tpu needs a TPU, and aborts the process without libtpu), and the
table keeps the version of the wheel it came from. The distributed backend names that
``torch_tpu/_internal/distributed/torchcomm_tpu.py`` registers are recorded beside it.

Some ``torch.tpu`` names are public in that table but internal in use: the device module
(``torch_tpu/_internal/device/_device_module.py``) decorates them with
``@annotations.internal_or_experimental(internal_when=get_torch_version() >= (2, 11),
prefer="torch.accelerator.is_available")``, and from torch 2.11 on a call from user code
raises ``RuntimeError: is_available is internal to TorchTPU ... Use
torch.accelerator.is_available instead`` (seen on a CPU host with torch 2.13.0, torch-tpu
0.2.0 and libtpu). ``internal`` records each such name, the torch release from which it is
internal, and the name to use instead.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import zipfile
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "xlalint" / "rules" / "data" / "torch_tpu_api.json"
PUBLIC_API = "torch_tpu/_internal/public_api.py"
COMMS = "torch_tpu/_internal/distributed/torchcomm_tpu.py"
DEVICE_MODULE = "torch_tpu/_internal/device/_device_module.py"


def public_modules(source: str) -> dict[str, list[str]]:
    """``{"torch.tpu": ["EagerMode", ...], ...}`` from the text of ``public_api.py``."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "_PUBLIC_MODULES" and isinstance(node.value, ast.Dict):
            modules: dict[str, list[str]] = {}
            for key, spec in zip(node.value.keys, node.value.values, strict=True):
                exports = next((k.value for k in getattr(spec, "keywords", ()) if k.arg == "exports"), None)
                if not isinstance(key, ast.Constant) or not isinstance(exports, ast.Dict):
                    raise ValueError('_PUBLIC_MODULES: an entry that is not `"module": ModuleSpec(exports={...})`')
                modules[key.value] = sorted(k.value for k in exports.keys if isinstance(k, ast.Constant))
            return dict(sorted(modules.items()))
    raise ValueError(f"{PUBLIC_API}: no `_PUBLIC_MODULES` table")


def internal_names(source: str) -> dict[str, dict[str, str]]:
    """``{"is_available": {"from_torch": "2.11", "prefer": "torch.accelerator.is_available"}}``:
    the device module's names marked ``internal_or_experimental`` from a torch release
    on, and the aliases bound to them in the module's class (``device = _DeviceContext``)."""
    marked: dict[str, dict[str, str]] = {}
    aliases: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        for statement in node.body if isinstance(node, ast.ClassDef) else ():
            if (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(statement.value, ast.Name)
            ):
                aliases[statement.targets[0].id] = statement.value.id
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            continue
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and ast.unparse(decorator.func).endswith("internal_or_experimental"):
                keywords = {k.arg: k.value for k in decorator.keywords}
                version = re.search(
                    r">=\s*\((\d+),\s*(\d+)\)", ast.unparse(keywords.get("internal_when", ast.Constant("")))
                )
                prefer = keywords.get("prefer")
                if version and isinstance(prefer, ast.Constant):
                    marked[node.name] = {"from_torch": f"{version[1]}.{version[2]}", "prefer": prefer.value}
    for alias, target in aliases.items():
        if target in marked:
            marked[alias] = marked[target]
    return dict(sorted((name, entry) for name, entry in marked.items() if not name.startswith("_")))


def backends(source: str) -> list[str]:
    """The names ``register_backend("name", ...)`` registers."""
    return sorted(set(re.findall(r'register_backend\(\s*"([a-z_]+)"', source)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path, help="the torch-tpu wheel")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    version = args.wheel.name.split("-")[1]
    with zipfile.ZipFile(args.wheel) as wheel:
        api = wheel.read(PUBLIC_API).decode()
        comms = wheel.read(COMMS).decode()
        device = wheel.read(DEVICE_MODULE).decode()
    table = {
        "about": "TorchTPU's public torch.tpu API (public_api.py's _PUBLIC_MODULES), written by tools/torch_tpu_api.py",
        "torch_tpu": version,
        "modules": public_modules(api),
        "internal": internal_names(device),
        "distributed_backends": backends(comms),
    }
    args.out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"{args.out}: {sum(len(v) for v in table['modules'].values())} names in {len(table['modules'])} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
