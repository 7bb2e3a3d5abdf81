"""The engine: files, parsing, the semantic layer, rules, suppressions, config,
reporters and the fix loop."""
