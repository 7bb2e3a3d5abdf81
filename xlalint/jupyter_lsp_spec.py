"""The language server's spec for jupyter-lsp (JupyterLab's LSP integration).

xlalint registers it as a ``jupyter_lsp_spec_v1`` entry point (``pyproject.toml``), so
JupyterLab with jupyterlab-lsp, run from the environment xlalint is installed in, starts
``xlalint server`` for Python notebooks and files with no configuration. The same spec,
with ``xlalint`` found on the ``PATH``, is shipped as a jupyter_server config file in
``editors/jupyterlab/`` for a JupyterLab that runs in another environment.

jupyterlab-lsp sends a notebook as one text document, ``.virtual_documents/<notebook
path>``: its code cells joined into one module, the magics already turned into Python;
the server lints it as the notebook (``server_lint.document_path``) and jupyterlab-lsp
puts each diagnostic on its cell.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

KEY = "xlalint"
#: The spec's fields (jupyter-lsp's schema, version 2) but ``argv``.
SPEC: dict[str, Any] = {
    "version": 2,
    "display_name": "xlalint",
    "languages": ["python"],
    "mime_types": ["text/python", "text/x-ipython", "text/x-python"],
}


class XlalintSpec:
    """jupyter-lsp calls ``is_installed`` (with ``autodetect``), then the spec finder itself."""

    def is_installed(self, manager: Any = None) -> bool:
        # Without the `server` extra `xlalint server` only says how to install it.
        return importlib.util.find_spec("pygls") is not None and importlib.util.find_spec("lsprotocol") is not None

    def __call__(self, manager: Any = None) -> dict[str, dict[str, Any]]:
        from xlalint.install_hint import install_command

        # This interpreter: the one xlalint is installed in, whatever the PATH holds.
        argv = [sys.executable, "-m", "xlalint", "server"]
        return {KEY: {**SPEC, "argv": argv, "install": {"pip": install_command("jupyter")}}}


spec = XlalintSpec()
