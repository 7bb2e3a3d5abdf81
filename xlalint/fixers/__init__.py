"""Lossless rewrites with libcst, imported only when a file is being fixed.

Rules describe fixes as operations (``xlalint.model``); ``apply`` carries
them out. Nothing on the check path imports this package's modules.
"""
