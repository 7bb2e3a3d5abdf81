"""What every rule's message keeps to: one short sentence, as ruff's are. The why and
the how go to the fix's title (the ``help:`` line) and the rule's explanation
(``xlalint rule XLAnnn``); tests/test_message_length.py checks the rules keep to it."""

MESSAGE_LIMIT = 120  # characters, as rendered
