"""What a code says about itself: the code table (``docs/codes.md``), ``explain`` and a finding's fallback fix
read it."""

from __future__ import annotations

from typing import NamedTuple


class CodeText(NamedTuple):
    """A code's name (``socket-fallback``), one-line summary, why it matters and the usual fix."""

    slug: str
    summary: str
    explanation: str
    fix: str
