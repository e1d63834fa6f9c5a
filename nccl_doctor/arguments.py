"""The command line's parser: every usage error is one line naming the command, the option and what it accepts.

argparse's own answer to a bad option value is the full usage (8 lines for ``plan``) and then the message,
while a value our options reject (``--params 0``) is one line: two styles for the same kind of mistake. It
also reads ``--params -5B`` as two options ("expected one argument"), so a negative-looking value never
reaches the option's own check, and a typo'd option of a command (``parse --formt``) is blamed on the top
level, with its usage. ``Parser`` gives every one of them the house style, exit 2:

    nccl-doctor plan: error: --intra-gbps: expected a number > 0, got '0'
    nccl-doctor parse: error: unrecognized arguments: --formt (did you mean --format?)
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from nccl_doctor.text import printable

USAGE_ERROR = 2
CLOSE_CUTOFF = 0.6  # difflib's similarity a typo needs before its option is offered
# a word starting "-<digit>" or "-.<digit>" is a value (-5B, -1M, -.5), never an option: none of ours looks
# like that, and each option's own check then says what it accepts (Python 3.13's argparse reads them so too)
NEGATIVE_VALUE = re.compile(r"-\.?\d")
_ARGUMENT = re.compile(r"^argument (\S+?): ")  # argparse's "argument --nodes: ..." -> ours, "--nodes: ..."


def integer(text: str) -> int:
    """``type=int``, with the house message (argparse's says "invalid int value")."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def number(text: str) -> float:
    """``type=float``, with the house message (argparse's says "invalid float value")."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def close_match(word: str, known: Sequence[str]) -> str | None:
    """The known word closest in spelling to ``word`` (difflib), if close enough to be the one meant."""
    found = difflib.get_close_matches(word, known, n=1, cutoff=CLOSE_CUTOFF)
    return found[0] if found else None


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors are one line (``prog: error: message``), whose
    negative-looking values reach their option, and whose sub-commands own their unrecognized arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_VALUE  # argparse's: -5 and -.5 only, not -5B or -1e3
        self.register("type", int, integer)  # every command's type=int and type=float, without touching them
        self.register("type", float, number)
        self._commands: argparse._SubParsersAction[Parser] | None = None

    def add_subparsers(self, **kwargs: Any) -> Any:
        self._commands = super().add_subparsers(**kwargs)
        return self._commands

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """argparse's, but an argument no parser took is the chosen command's error, with the option it
        was likely meant to be: every argument after the command is that command's."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            owner = self._commands.choices[command] if self._commands and command else self
            owner.error(owner.unrecognized(extras))
        return parsed

    def option_strings(self) -> list[str]:
        """The options ``--help`` shows (a hidden one, like an old name, is never offered)."""
        return [s for action in self._actions if action.help is not argparse.SUPPRESS for s in action.option_strings]

    def unrecognized(self, extras: list[str]) -> str:
        """``unrecognized arguments: --formt (did you mean --format?)``; else where the options are listed."""
        known = self.option_strings()
        guesses = [guess for word in extras if word.startswith("--")
                   and (guess := close_match(word.split("=", 1)[0], known))]
        hint = (f"did you mean {', '.join(dict.fromkeys(guesses))}?" if guesses
                else f"`{self.prog} --help` lists the options")
        return f"unrecognized arguments: {' '.join(extras)} ({hint})"

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """A value outside ``choices``: the accepted ones, and the close one (``pars`` -> parse)."""
        choices = action.choices
        if choices is None or value in choices:
            return
        names = [str(c) for c in choices]
        guess = close_match(str(value), names)
        hint = f" (did you mean {guess}?)" if guess else ""
        raise argparse.ArgumentError(action, f"expected one of {', '.join(names)}, got {value!r}{hint}")

    def error(self, message: str) -> NoReturn:
        """One line on stderr, exit 2: the usage is ``--help``'s to show."""
        text = _ARGUMENT.sub(r"\1: ", message)
        sys.stderr.write(f"{self.prog}: error: {printable(text)}\n")
        self.exit(USAGE_ERROR)
