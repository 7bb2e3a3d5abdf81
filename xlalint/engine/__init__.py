"""The engine: what runs a check or a fix.

It finds the files and their settings (``files``, ``config``), reads each one byte for
byte (``source``, notebooks in ``notebook``), checks it (``lint``: one ``ast`` walk that
calls every selected rule, on the ``Context`` of ``context``), drops suppressed findings
(``noqa``), reports them (``reporters``), caches them (``cache``), and runs the fix loop
(``fixing``). ``rule`` is the rule API the rules implement.

The engine drives the rules (``xlalint.rules``); the rules ask the analyses
(``xlalint.analysis``); findings and fixes are the plain data of ``xlalint.model``.
"""
