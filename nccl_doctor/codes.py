"""Every finding code, in one table: stable, never reused, documented in the README.

Ranges: ND0xx general, ND1xx ``parse`` (NCCL logs), ND2xx ``probe`` (interfaces and env),
ND3xx ``bench`` (bandwidth), ND4xx ``preflight`` (cross-node). ``tests/test_codes.py`` pins the set
and checks the README table against it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    code: str
    name: str
    summary: str


def _table(*rows: tuple[str, str, str]) -> dict[str, Code]:
    table: dict[str, Code] = {}
    for code, name, summary in rows:
        assert code not in table, f"duplicate finding code {code}"
        table[code] = Code(code, name, summary)
    return table


CODES: dict[str, Code] = _table(
    # --- ND0xx: general -------------------------------------------------------------------------
    ("ND001", "check-skipped", "A check could not run here; the finding says why."),
    # --- ND1xx: parse (NCCL_DEBUG=INFO logs) ------------------------------------------------------
    # --- ND2xx: probe (interfaces, NCCL/Gloo environment) -----------------------------------------
    # --- ND3xx: bench (bandwidth) -----------------------------------------------------------------
    # --- ND4xx: preflight (cross-node) ------------------------------------------------------------
)


def markdown_table() -> str:
    """The README's table of codes, generated so the two cannot drift."""
    lines = ["| code | name | meaning |", "|---|---|---|"]
    lines += [f"| `{c.code}` | `{c.name}` | {c.summary} |" for c in CODES.values()]
    return "\n".join(lines)


def update_readme(path: str = "README.md") -> None:
    """Rewrite the table between ``<!-- CODES -->`` and ``<!-- /CODES -->`` in the README."""
    import re
    from pathlib import Path

    readme = Path(path)
    block = f"<!-- CODES -->\n{markdown_table()}\n<!-- /CODES -->"
    text = readme.read_text()
    text = re.sub(r"<!-- CODES -->.*?(<!-- /CODES -->|\Z)", lambda _: block, text, count=1, flags=re.S)
    readme.write_text(text)


if __name__ == "__main__":
    update_readme()
