"""``nccl-doctor explain``: a code's number, name, summary, why it matters and its fix, from the code table
(the text docs/codes.md shows); every spelling of a code; an unknown code is one line, exit 2, with the closest code."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_doctor.cli import main
from nccl_doctor.codes import Code

ROOT = Path(__file__).resolve().parents[2]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["explain", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("spelling", ["ND102", "nd102", "102", "socket-fallback", "Socket-Fallback", " ND102 "])
def test_every_spelling_names_the_same_code(capsys, spelling):
    code, out, err = _run(capsys, spelling)
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "ND102 socket-fallback"


@pytest.mark.parametrize("member", list(Code), ids=lambda c: c.value)
def test_each_code_prints_its_summary_why_and_fix(capsys, member):
    code, out, _ = _run(capsys, member.value)
    assert code == 0
    flat = _flat(out)
    assert flat.startswith(f"{member.value} {member.slug} {_flat(member.summary)}")
    assert f"Why it matters: {_flat(member.explanation)}" in flat
    assert f"Usual fix: {_flat(member.fix)}" in flat


def test_the_text_is_the_code_tables_text(capsys):
    table = (ROOT / "docs" / "codes.md").read_text()
    _, out, _ = _run(capsys, "ND215")
    row = next(line for line in table.splitlines() if line.startswith("| `ND215` |"))
    summary = out.splitlines()[1].strip()
    assert row == f"| `ND215` | `{Code.GLOO_BINDS_LOOPBACK.slug}` | {summary} |"


def test_json_holds_the_five_fields(capsys):
    code, out, _ = _run(capsys, "nd216", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    m = Code.GLOO_IFNAME_INVALID
    assert doc == {"code": "ND216", "name": m.slug, "summary": m.summary, "explanation": m.explanation,
                   "fix": m.fix}


def test_json_out_writes_the_document(capsys, tmp_path):
    target = tmp_path / "nd102.json"
    code, out, _ = _run(capsys, "102", "--json-out", str(target))
    assert code == 0 and out.startswith("ND102 socket-fallback")
    assert json.loads(target.read_text())["name"] == "socket-fallback"


def test_alone_it_lists_every_code_once_with_its_summary(capsys):
    code, out, _ = _run(capsys)
    assert code == 0
    listed = re.findall(r"^  (ND\d{3})  (\S+) +(.+)$", out, re.M)
    assert [c for c, _, _ in listed] == [m.value for m in Code]
    assert all((slug, summary) == (Code(c).slug, Code(c).summary) for c, slug, summary in listed)
    assert "ND4xx preflight" in out


def test_alone_as_json_lists_every_code(capsys):
    _, out, _ = _run(capsys, "--format", "json")
    assert [c["code"] for c in json.loads(out)["codes"]] == [m.value for m in Code]


@pytest.mark.parametrize(("given", "hint"), [
    ("socket-fallbak", "(did you mean ND102, socket-fallback?)"),
    ("304", "(did you mean ND303, slow-link-unpinned?)"),
    ("ND409", "(did you mean ND408, rank-count-mismatch?)"),
    ("nd999", None),   # no ND9xx range: nothing is close
    ("zzz", None),
    ("ND0102", None),  # four digits is no code
])
def test_an_unknown_code_is_one_line_exit_2_with_the_closest(capsys, given, hint):
    code, out, err = _run(capsys, given)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith(f"nccl-doctor explain: error: unknown code {given!r}")
    assert "`nccl-doctor explain` lists every code" in err
    if hint:
        assert hint in err
    else:
        assert "did you mean" not in err


@pytest.mark.parametrize("option", ["--junit-out", "--prom-out"])
def test_a_reports_outputs_are_refused_not_ignored(capsys, tmp_path, option):
    code, out, err = _run(capsys, "ND102", option, str(tmp_path / "out"))
    assert (code, out) == (2, "")
    assert f"explain has no findings to write to {option}: drop it" in err
    assert not (tmp_path / "out").exists()


def test_top_level_help_points_to_explain(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "nccl-doctor explain" in _flat(capsys.readouterr().out)


def test_explain_never_imports_torch():
    code = ("import sys; from nccl_doctor.cli import main; rc = main(['explain', 'ND102']); "
            "sys.exit(rc or (3 if 'torch' in sys.modules else 0))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
