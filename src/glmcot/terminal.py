"""Text for a terminal: what a snippet, a model or a graph wrote is shown, never obeyed.

Control characters (ESC starts colour, cursor, title and clipboard sequences; CR and BS overwrite
what was printed) and the bidirectional overrides that reorder a line are replaced by visible
escapes (`\\x1b`, `\\u202e`), so the text stays readable and cannot drive the terminal. Newlines
and tabs stay as they are. `--json` output is JSON and needs none of this."""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode bidi embeddings, overrides
# and isolates
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """`text` with every character that could drive a terminal written as a visible escape."""
    return _UNSAFE.sub(_visible, text)
