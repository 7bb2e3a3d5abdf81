"""The parts of XLA103 (missing-sync); the rule itself, its documentation and its
examples are in ``xlalint/rules/xla103_missing_sync.py``.

- ``sync_fix``: the fix both checks share: a sync at the end of the loop body and before
  every jump that leaves it after its work began;
- ``carried_state``: evaluation and sampling loops that carry device-tensor state and
  read it on the host every iteration.

Which loops carry which device state is a fact of the ``ctx.loop_state`` analysis
(``xlalint/analysis/loop_state.py``); sync points and training loops are ``ctx.steps``.
"""
