"""The analyses: what the rules ask about the module being checked.

The semantic layer (``semantic``: imports, qualified names, scopes, node and call
indexes) and the facts built on it that more than one rule needs, each answered in one
place: what a name can hold (``values``, ``reaching``), the step loops and their sync
points (``steps``), the order of training events (``order``), devices, parallelism,
ranks, launch, loop state, training objects, tokenizers.

An analysis takes what it needs (the semantic layer, other analyses) and imports
nothing of the engine or the rules: only other analyses and ``xlalint.model``
(``tests/test_layout.py``). The engine's ``Context`` builds them; they never see it.
"""
