"""What the XLA scripts that import a module tell it (``Settings.iterated_by_importers``,
``FileReport.told``, ``engine/follow.py``): facts about its module-level functions, each
a short string, so that the facts stay hashable and small (they are part of the cache key).

- ``"prepare_dataloader"``: a step loop of an importer iterates what the function
  returns (the loader it builds is a training loader: XLA301).
- ``"train_one_epoch(6=update)"``, ``"train_one_epoch(loss_scaler=backward)"``: a call of
  the function in an importer passes, for its 7th positional parameter (counted from 0)
  or for the keyword ``loss_scaler``, a *step callable*, one whose call runs the
  backward (``backward``), or the backward and the optimizer step (``update``: timm's
  ``NativeScaler``, a class of the importer whose ``__call__`` does both). The function
  calls its parameter in a loop (``loss_scaler(loss, optimizer)``): that loop trains,
  as when a call of the same module passes the object (``steps.bound_callee``).
"""

from __future__ import annotations

# What calling a step callable runs.
BACKWARD = "backward"
UPDATE = "update"
KINDS = frozenset({BACKWARD, UPDATE})


def bound_fact(function: str, parameter: int | str, kind: str) -> str:
    """The fact that a call of ``function`` passes a step callable of ``kind`` for
    ``parameter`` (a position, from 0, or a keyword)."""
    return f"{function}({parameter}={kind})"


def parse_bound(fact: str) -> tuple[str, int | str, str] | None:
    """``(function, parameter, kind)`` of a fact made by :func:`bound_fact` (the
    parameter a position or a keyword), None for any other fact (an iterated result)."""
    function, opening, rest = fact.partition("(")
    if not opening or not rest.endswith(")"):
        return None
    parameter, _, kind = rest[:-1].partition("=")
    if not function.isidentifier() or kind not in KINDS:
        return None
    if parameter.isdigit():
        return function, int(parameter), kind
    return (function, parameter, kind) if parameter.isidentifier() else None


def function_of(fact: str) -> str:
    """The function a fact is about: the name itself, or a bound fact's function."""
    return fact.partition("(")[0]


def suffix_of(fact: str) -> str:
    """What a fact says past its function's name (``"(6=update)"``; empty for an
    iterated result): told on with the function when a package re-exports it."""
    return fact[len(function_of(fact)) :]
