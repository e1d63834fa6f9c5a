"""Usage errors, argparse's own included, are one line naming the command, the option and what it accepts, exit 2;
a negative-looking value reaches its option's own check (issue 22 point 15)."""

import argparse

import pytest

from nccl_doctor.arguments import Parser, close_match
from nccl_doctor.cli import COMMANDS, main


def _usage_error(capsys, argv: list[str]) -> str:
    """The stderr of ``nccl-doctor ARGV``, checked to be one line and exit 2 with nothing on stdout (argparse's
    error exits; an option's own check returns 2)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "usage:" not in err, err
    return err


@pytest.mark.parametrize(("argv", "line"), [
    (["plan", "--params", "7B", "--intra-gbps", "0"],
     "nccl-doctor plan: error: --intra-gbps: expected a number > 0, got '0'"),
    (["bench", "--iters", "x"], "nccl-doctor bench: error: --iters: expected an integer, got 'x'"),
    (["preflight", "--timeout", "soon"], "nccl-doctor preflight: error: --timeout: expected a number, got 'soon'"),
    (["plan", "--params", "7B", "--param-dtype", "bf61"],
     "nccl-doctor plan: error: --param-dtype: expected one of bf16, fp16, fp32, got 'bf61' (did you mean bf16?)"),
    (["parse", "--format", "xml", "x.log"], "nccl-doctor parse: error: --format: expected one of text, json, got 'xml'"),
    (["plan"], "nccl-doctor plan: error: the following arguments are required: --params"),
])
def test_argparse_errors_are_one_line_naming_the_option(capsys, argv, line):
    assert _usage_error(capsys, argv) == line + "\n"


@pytest.mark.parametrize(("argv", "line"), [
    (["plan", "--params", "-5B"],
     "nccl-doctor plan: error: --params: expected a parameter count such as 7e9, 7B, 1.3T or 350M, got '-5B'"),
    (["plan", "--params", "7B", "--nodes", "-1e3"], "nccl-doctor plan: error: --nodes: expected a number > 0, got '-1e3'"),
    (["plan", "--params", "7B", "--headroom", "-.5"], "nccl-doctor plan: error: --headroom: expected a number > 0, got '-.5'"),
])
def test_a_negative_looking_value_reaches_its_options_check(capsys, argv, line):
    """argparse alone reads ``-5B`` as an option and says "expected one argument"."""
    assert _usage_error(capsys, argv) == line + "\n"


def test_a_negative_size_reaches_benchs_size_check(capsys):
    assert _usage_error(capsys, ["bench", "--sizes", "-1M"]).startswith("nccl-doctor bench: error: --sizes '-1M': ")


@pytest.mark.parametrize(("argv", "line"), [
    (["parse", "--formt", "json", "x.log"],
     "nccl-doctor parse: error: unrecognized arguments: --formt (did you mean --format?)"),
    (["preflight", "--nodes", "2"],
     "nccl-doctor preflight: error: unrecognized arguments: --nodes 2 (did you mean --nnodes?)"),
    (["probe", "--frmat=json"], "nccl-doctor probe: error: unrecognized arguments: --frmat=json (did you mean --format?)"),
    (["plan", "--params", "7B", "--zzz"],
     "nccl-doctor plan: error: unrecognized arguments: --zzz (`nccl-doctor plan --help` lists the options)"),
])
def test_a_typod_option_is_the_commands_error_with_the_close_match(capsys, argv, line):
    """Not the top level's usage and "nccl-doctor: error": the command it was given to."""
    assert _usage_error(capsys, argv) == line + "\n"


def test_a_typod_command_names_the_commands_and_the_close_one(capsys):
    err = _usage_error(capsys, ["pars", "x.log"])
    assert err == (f"nccl-doctor: error: COMMAND: expected one of {', '.join(COMMANDS)}, got 'pars' "
                   f"(did you mean parse?)\n")


def test_a_hidden_option_is_never_offered():
    parser = Parser(prog="p")
    parser.add_argument("--deadline", help=argparse.SUPPRESS)
    parser.add_argument("--debug")
    assert parser.unrecognized(["--deadlin"]) == "unrecognized arguments: --deadlin (`p --help` lists the options)"
    assert close_match("--debgu", parser.option_strings()) == "--debug"


def test_control_characters_in_a_bad_value_never_reach_the_terminal(capsys):
    err = _usage_error(capsys, ["bench", "--iters", "\x1b[2Jx"])
    assert "\x1b" not in err


def test_explain_help_shows_only_the_outputs_it_writes(capsys):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    out = capsys.readouterr().out
    assert "--json-out" in out
    assert "--junit-out" not in out and "--prom-out" not in out and "--strict" not in out


def test_explain_still_refuses_a_report_file_with_why(capsys, tmp_path):
    assert main(["explain", "--prom-out", str(tmp_path / "x.prom")]) == 2
    assert "explain has no findings to write to --prom-out" in capsys.readouterr().err
