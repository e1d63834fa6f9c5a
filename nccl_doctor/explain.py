"""``nccl-doctor explain [CODE]``: what a finding code means, why it matters and the usual fix.

The text is the code table's own (``nccl_doctor.codes``), the same ``docs/codes.md``'s table shows, so the
terminal and the docs cannot disagree. A code is accepted as ``ND102``, ``nd102``, ``102`` or its name
``socket-fallback``; an unknown one is one line (exit 2) naming the closest code, if any.
"""

from __future__ import annotations

import argparse
import difflib
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nccl_doctor.codes import CODES, Code
from nccl_doctor.errors import InputError
from nccl_doctor.outcome import Listing, Outcome
from nccl_doctor.outputs import OutputOptions, refuse_report_files

WIDTH = 100  # the wrapped paragraphs of one code (terminal width does not change the text)
INDENT = "  "
CLOSE_CUTOFF = 0.6  # difflib's similarity a guess needs before it is offered
_NUMBER = re.compile(r"(?:nd)?(\d{1,3})", re.I)
RANGES = {  # a code's hundreds digit: the command that raises it (codes/__init__'s ranges)
    "0": "general",
    "1": "parse: what an NCCL_DEBUG=INFO log shows",
    "2": "probe: this node's interfaces, RDMA ports and NCCL/Gloo settings",
    "3": "bench: bandwidth within and across nodes",
    "4": "preflight: every node together",
    "5": "plan: the FSDP/HSDP mesh measured bandwidth recommends",
}
SLUGS: dict[str, Code] = {c.slug: c for c in Code}


@dataclass(frozen=True, kw_only=True)
class ExplainOptions:
    """What ``nccl-doctor explain`` looks up."""

    code: str | None = None
    """``CODE``: a finding code as ND102, nd102, 102 or its name (socket-fallback); None lists every code."""
    output: OutputOptions = field(default_factory=OutputOptions)
    """``--format`` and ``--json-out`` (a listing has no findings for the other files)."""

    LAUNCH_ONLY = frozenset[str]()  # explain launches nothing: argv() gives every option

    def argv(self) -> list[str]:
        """The command line that gives these options back."""
        return ["explain", *([self.code] if self.code is not None else []), *self.output.argv()]


OPTIONS = ExplainOptions


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("code", nargs="?", metavar="CODE",
                   help="a finding code, as ND102, nd102, 102 or its name (socket-fallback) (default: list every "
                        "code with its summary)")


def inputs(options: ExplainOptions) -> tuple[Path, ...]:
    return ()


def run(options: ExplainOptions) -> Outcome:
    refuse_report_files(options.output, "explain has no findings to write to {flag}: drop it")
    if options.code is None:
        return Outcome.of_listing(code_list())
    return Outcome.of_listing(code_entry(find_code(options.code)))


def find_code(text: str) -> Code:
    """``ND102``, ``nd102``, ``102`` or ``socket-fallback``; else an InputError naming the closest code."""
    key = text.strip()
    number = _NUMBER.fullmatch(key)
    if number and (code := CODES.get(f"ND{int(number.group(1)):03d}")):
        return code
    if code := SLUGS.get(key.lower()):
        return code
    guess = nearest_number(int(number.group(1))) if number else closest_name(key)
    hint = f" (did you mean {guess.value}, {guess.slug}?)" if guess else ""
    raise InputError(f"unknown code {text!r}{hint}; `nccl-doctor explain` lists every code")


def nearest_number(number: int) -> Code | None:
    """The code of the same range (the same command) nearest in number: 304 -> ND303; none in another range."""
    same = [c for c in Code if int(c.value[2:]) // 100 == number // 100]
    return min(same, key=lambda c: abs(int(c.value[2:]) - number), default=None)


def closest_name(key: str) -> Code | None:
    """The code whose name is closest in spelling (difflib): ``socket-fallbak`` -> ND102."""
    close = difflib.get_close_matches(key.lower(), list(SLUGS), n=1, cutoff=CLOSE_CUTOFF)
    return SLUGS[close[0]] if close else None


def code_document(code: Code) -> dict[str, Any]:
    return {"code": code.value, "name": code.slug, "summary": code.summary, "explanation": code.explanation,
            "fix": code.fix}


def code_entry(code: Code) -> Listing:
    """One code: its number and name, the summary, then why it matters and the usual fix, wrapped."""
    lines = [f"{code.value} {code.slug}", _wrap(code.summary), "", "Why it matters:", _wrap(code.explanation),
             "", "Usual fix:", _wrap(code.fix)]
    return Listing(text="\n".join(lines) + "\n", document=code_document(code))


def code_list() -> Listing:
    """Every code with its summary, grouped by the command that raises it."""
    width = max(len(c.slug) for c in Code)
    lines: list[str] = []
    group = ""
    for code in Code:
        if code.value[2] != group:
            group = code.value[2]
            lines += ([""] if lines else []) + [f"ND{group}xx {RANGES[group]}"]
        lines.append(f"{INDENT}{code.value}  {code.slug:<{width}}  {code.summary}")
    lines += ["", "`nccl-doctor explain CODE` says why a code matters and how to fix it."]
    return Listing(text="\n".join(lines) + "\n", document={"codes": [code_document(c) for c in Code]})


def _wrap(text: str) -> str:
    return textwrap.fill(text, WIDTH, initial_indent=INDENT, subsequent_indent=INDENT, break_on_hyphens=False,
                         break_long_words=False)
