"""Every command's ``--help`` ends with examples, and every example parses with that command's own parser:
an example cannot name an option (or an option value) that does not exist."""

import argparse
import shlex

import pytest

from nccl_doctor.cli import COMMANDS, build_parser, main
from nccl_doctor.usage import EXAMPLES, PROGRAM, epilog

SHELL_OPERATORS = {"&&", "||", "|", ";"}


def _invocations(line: str) -> list[list[str]]:
    """Each ``nccl-doctor ...`` of a shell line, as argv (what comes before it is a launcher or env)."""
    words = shlex.split(line)
    found = []
    for i, word in enumerate(words):
        if word == PROGRAM:
            rest = words[i + 1:]
            end = next((j for j, w in enumerate(rest) if w in SHELL_OPERATORS), len(rest))
            found.append(rest[:end])
    return found


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_ends_with_two_or_three_examples(capsys, command):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith(epilog(command))
    assert "\nexamples:\n" in out
    assert 2 <= len(EXAMPLES[command]) <= 3


@pytest.mark.parametrize(("command", "line"), [(c, e.line) for c, exs in EXAMPLES.items() for e in exs])
def test_every_example_parses_with_its_commands_parser(command, line):
    invocations = _invocations(line)
    assert invocations, f"no `{PROGRAM}` in {line!r}"
    for argv in invocations:
        assert argv[0] in COMMANDS, f"{line!r}: {argv[0]!r} is no command"
        try:
            args = build_parser(argv).parse_args(argv)
        except SystemExit:
            pytest.fail(f"{line!r} does not parse: {argv}")
        assert isinstance(args, argparse.Namespace)
    assert any(argv[0] == command for argv in invocations), f"{line!r} is not a `{command}` example"


def test_the_check_fails_on_an_option_that_does_not_exist():
    with pytest.raises(SystemExit):
        build_parser(["bench", "--no-such-option"]).parse_args(["bench", "--no-such-option"])


def test_every_command_has_examples():
    assert set(EXAMPLES) == set(COMMANDS)
