"""What the benches share about running xlalint as a command."""

import os

# Commands run as an installed xlalint runs: with its bytecode cached (an environment
# that sets PYTHONDONTWRITEBYTECODE would time compiling xlalint's source on every run).
COMMAND_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
