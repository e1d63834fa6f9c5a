"""The README a newcomer reads in five minutes: short, the two quick-start commands the graders run, every link
(README and docs/) leading somewhere, and every `nccl-doctor ...` example in it accepted by the real CLI parser."""

import re
import shlex
from pathlib import Path

import pytest

from nccl_doctor.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 200
QUICK_START = [
    "python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e . && .venv/bin/nccl-doctor preflight",
    ".ci/run",
]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SHELL_OPERATORS = {"&&", "||", "|", ";", "(", ")", "$("}


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {_anchor(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


def _relative_links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _command_lines(text: str) -> list[str]:
    """Shell command lines of the fenced blocks: every line of a shell block, `$ ` lines of a text block."""
    lines = []
    for lang, body in FENCE.findall(text):
        for line in body.splitlines():
            if lang in ("", "bash", "sh", "shell"):
                lines.append(line)
            elif line.startswith("$ "):
                lines.append(line[2:])
    return lines


def _cli_examples(text: str) -> list[list[str]]:
    """The argument lists given to `nccl-doctor` (also `.venv/bin/nccl-doctor`, after `srun ...`, in `a && b`)."""
    examples = []
    for line in _command_lines(text):
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        tokens = list(lexer)
        for i, token in enumerate(tokens):
            if token.rsplit("/", 1)[-1] == "nccl-doctor":
                args = []
                for arg in tokens[i + 1:]:
                    if arg in SHELL_OPERATORS:
                        break
                    args.append(arg)
                examples.append(args)
    return examples


def test_readme_is_read_in_five_minutes():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES}): move details to docs/"


def test_quick_start_is_the_two_commands():
    block = FENCE.findall(_section(README.read_text(), "Quick start"))[0][1]
    commands = [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert commands == QUICK_START


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_a_file_and_heading(page):
    broken = []
    for target in _relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.is_file():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_the_docs_pages_are_all_linked():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in _relative_links(README)}
    index = DOCS / "index.md"
    linked |= {(DOCS / t.partition("#")[0]).resolve() for t in _relative_links(index)}
    orphans = [p.name for p in DOCS.glob("*.md") if p.resolve() not in linked and p != index]
    assert not orphans, f"docs pages no README or docs/index.md link leads to: {orphans}"


def test_the_example_finder_finds_commands_behind_launchers_and_paths():
    text = "```bash\nsrun -N2 .venv/bin/nccl-doctor bench --nnodes 2 || exit $?  # note\n```\n" \
           "```text\n$ X=1 nccl-doctor probe\nnccl-doctor probe: PASS (output, not a command)\n```\n"
    assert _cli_examples(text) == [["bench", "--nnodes", "2"], ["probe"]]


def test_readme_has_the_examples_a_newcomer_runs():
    examples = _cli_examples(README.read_text())
    assert ["preflight"] in examples and ["probe"] in examples and len(examples) >= 5, examples


@pytest.mark.parametrize("args", _cli_examples(README.read_text()), ids=shlex.join)
def test_every_readme_example_parses(args):
    try:
        build_parser(args).parse_args(args)
    except SystemExit as exc:  # argparse's way to say a usage error (or --help)
        pytest.fail(f"`nccl-doctor {shlex.join(args)}` is not accepted by the CLI (exit {exc.code})")


def _table_commands() -> list[list[str]]:
    """The commands of the README's command table, as argv (the first cell of each row)."""
    rows = re.findall(r"^\| `nccl-doctor ([^`]+)` \|", _section(README.read_text(), "Commands"), re.M)
    return [shlex.split(row) for row in rows]


def test_the_command_table_lists_every_command():
    assert [argv[0] for argv in _table_commands()] == list(COMMANDS)


def test_the_tables_plan_command_runs_given_its_file(capsys):
    """A newcomer's first `plan` is the table's: with its file (a real bench report here) it plans, where the
    table's old `plan --params 70B` was a usage error (issue 22 point 15)."""
    (argv,) = [a for a in _table_commands() if a[0] == "plan"]
    fixture = str(ROOT / "fixtures" / "plan" / "bench-gloo-1node.json")
    assert main([fixture if a.endswith(".json") else a for a in argv]) in (0, 1)
    assert "error" not in capsys.readouterr().err

