"""The parts of XLA102 (host-sync-in-step); the rule itself, its documentation and its
examples are in ``xlalint/rules/xla102_host_sync_in_step.py``.

- ``host_reads``: what reads a step tensor on the host (``.item()``, conversions, log
  calls and text that render a tensor, conditions on one), and the loop whose step runs
  a node on every optimizer step;
- ``fixes``: the step-closure fix of a statement that only logs, and the ``.detach()``
  fix of a sum of ``.item()``s.

Which loops are step loops, what the step is and which names hold its tensors are facts
other rules need too: they are the ``ctx.steps`` analysis (``xlalint/analysis/steps.py``).
"""
