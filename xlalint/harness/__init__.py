"""The compile-and-run harness behind ``xlalint run``.

The parent side (``session``, ``runner``, ``prepare``, ``environment``, ``report``)
never imports torch; ``bootstrap`` is the part that runs inside the script's
processes. Importing this package imports nothing else.
"""
