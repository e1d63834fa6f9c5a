"""What a code says about itself: the code table (``docs/codes.md``), ``explain`` and a finding's fallback fix
read it; and, for a finding made from parameters (``report.templated``), the templates of its message and fix.

A template is a ``str.format`` string over named parameters (``{host}``, ``{iface}``, ``{figure:.1f}``), as
ruff renders a violation's ``message()`` and ``fix_title()`` from its typed fields: the finding keeps its
parameters, so node 0 can merge the same problem on many nodes by its parameters and render it once more
with the nodes' hostlist, instead of editing English.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

DEFAULT_VARIANT = "default"  # the template a code's findings use unless they name another
NO_TEMPLATES: Mapping[str, str] = MappingProxyType({})


class CodeText(NamedTuple):
    """A code's name (``socket-fallback``), one-line summary, why it matters and the usual fix; then its
    message templates by variant name (most codes have one, ``DEFAULT_VARIANT``; a code that says different
    things in different cases has one per case) and the fix templates of the variants whose fix is one."""

    slug: str
    summary: str
    explanation: str
    fix: str
    messages: Mapping[str, str] = NO_TEMPLATES
    fixes: Mapping[str, str] = NO_TEMPLATES

    def render(self, variant: str, values: Mapping[str, object]) -> tuple[str, str | None]:
        """The message and fix (None without a fix template) of ``variant`` with ``values``; a KeyError
        names an unknown variant or a missing value."""
        message = self.messages[variant].format_map(values)
        fix = self.fixes.get(variant)
        return message, fix.format_map(values) if fix is not None else None

    def names(self, variant: str) -> frozenset[str]:
        """The value names ``variant``'s message and fix templates use (``{host}`` -> ``host``)."""
        texts = [self.messages.get(variant, ""), self.fixes.get(variant, "")]
        return frozenset(name for text in texts for _, name, _, _ in string.Formatter().parse(text) if name)
