"""Renderers: pure functions of a ``Report`` into rich text, versioned JSON and JUnit XML.

Findings and tables are made printable as they are built (``report.py``); the report's own fields a
command fills freely (summary, notes, ``could_not_run``, the payload's JSON) are made printable here, by each
renderer alike, so no text from an input reaches an output with a control character (``text.py``).
"""

from __future__ import annotations

import json
import os
from typing import IO, Any
from xml.etree import ElementTree as ET

from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from nccl_doctor import __version__
from nccl_doctor.payload import envelope_clash
from nccl_doctor.report import SCHEMA_VERSION, Finding, Report, Severity
from nccl_doctor.text import printable, printable_data

_STYLE = {Severity.PASS: "bold green", Severity.WARN: "bold yellow", Severity.FAIL: "bold red"}
LOG_WIDTH = 140  # columns off a terminal (a job log) when COLUMNS is unset: tables stay unwrapped
EVIDENCE_SHOWN = 3  # evidence lines under a finding in the text view; the JSON has them all
ALL_HOSTS = "all"  # JUnit testsuite of findings about no one host (a log, the whole job)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """rich exits 1 when the reader leaves (``| head``); the exit code belongs to the verdict."""
        self.quiet = True
        raise BrokenPipeError


def make_console(file: IO[str], *, width: int | None = None) -> Console:
    """A console for job logs as well as terminals: no colour off a TTY, ``NO_COLOR`` honoured
    (by rich), and a wide fixed width when not a terminal so tables don't wrap in a log file."""
    if width is None and not (hasattr(file, "isatty") and file.isatty()):
        width = int(os.environ.get("COLUMNS", "0") or 0) or LOG_WIDTH
    return _Console(file=file, width=width, highlight=False, soft_wrap=False)


def verdict_line(report: Report) -> str:
    counts = dict.fromkeys(Severity, 0)
    for f in report.findings:
        counts[f.severity] += 1
    tally = f"{counts[Severity.FAIL]} fail, {counts[Severity.WARN]} warn, {counts[Severity.PASS]} pass"
    line = f"nccl-doctor {printable(report.command)}: {report.verdict.value.upper()} ({tally})"
    return f"{line}: {printable(report.summary)}" if report.summary else line


def render_text(report: Report, console: Console) -> None:
    """Off a terminal (a job log), lines lose the trailing spaces rich pads tables and titles with."""
    if console.is_terminal:
        _render_text(report, console)
        return
    with console.capture() as captured:
        _render_text(report, console)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def _render_text(report: Report, console: Console) -> None:
    console.print(Text(verdict_line(report), style=_STYLE[report.verdict]), soft_wrap=True)
    for table in report.tables:
        rt = RichTable(title=escape(table.title), caption=table.caption and escape(table.caption),
                       title_justify="left", show_lines=False)
        for col in table.columns:
            rt.add_column(escape(col), overflow="fold")
        for row in table.rows:
            rt.add_row(*(escape(str(cell)) for cell in row))
        console.print(rt)
    if report.findings:
        console.print(Text("Findings", style="bold"))
    for f in report.sorted_findings():
        head = Text()
        head.append(f"[{f.severity.value.upper()}] ", style=_STYLE[f.severity])
        head.append(f"{f.code} ", style="bold")
        where = str(f.where)
        if where:
            head.append(f"({where}) ", style="cyan")
        head.append(f.message)
        console.print(head, soft_wrap=True)  # never hard-wrapped: `grep ND110 job.log` gets the whole line
        for ev in f.evidence[:EVIDENCE_SHOWN]:
            console.print(Text(f"    | {ev}", style="dim"), soft_wrap=True)
        if len(f.evidence) > EVIDENCE_SHOWN:
            console.print(Text(f"    | ... {len(f.evidence) - EVIDENCE_SHOWN} more in the JSON report", style="dim"),
                          soft_wrap=True)
        if f.fix:
            console.print(Text(f"    fix: {f.fix}", style="green"), soft_wrap=True)
    for note in report.notes:
        console.print(Text(printable(note), style="dim"), soft_wrap=True)


def report_dict(report: Report) -> dict[str, Any]:
    """The JSON document; ``schema_version`` changes its major part on any breaking change. The envelope first,
    then the payload's keys (a payload writing an envelope key is a bug, refused: its ``"verdict": "pass"``
    would contradict the findings), then ``--drain-on-fail``'s actions, then the findings."""
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": "nccl-doctor",
        "tool_version": __version__,
        "command": printable(report.command),
        "verdict": report.verdict.value,
        "summary": printable(report.summary),
    }
    if report.could_not_run:
        doc["could_not_run"] = printable(report.could_not_run)
    body = report.payload.to_json() if report.payload is not None else {}
    clash = envelope_clash(body)
    if clash:
        raise ValueError(f"the {report.command} payload writes the report's own key {clash[0]!r}")
    doc.update(printable_data(body))
    if report.drain is not None:
        doc["drain"] = printable_data(report.drain)
    doc["findings"] = [f.as_dict() for f in report.sorted_findings()]
    return doc


def render_json(report: Report) -> str:
    return json.dumps(report_dict(report), indent=2, sort_keys=False, default=str) + "\n"


def render_junit(report: Report, *, strict: bool = False) -> str:
    """A testsuite per host, a testcase per finding (named by code); fail = failure, warn = passed
    with system-out (dashboards treat warnings as green, as the exit code does), or a failure under
    ``strict`` (as the exit code then is). A check that could not run is an error testcase in "all"."""
    root = ET.Element("testsuites", name=f"nccl-doctor {printable(report.command)}")
    total = fails = errors = 0
    for host, findings in sorted(_findings_by_host(report).items()):
        tests, failures, errs = _junit_suite(root, report, host, findings, strict=strict)
        total += tests
        fails += failures
        errors += errs
    root.set("tests", str(total))
    root.set("failures", str(fails))
    root.set("errors", str(errors))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _findings_by_host(report: Report) -> dict[str, list[Finding]]:
    """Worst first within a host; findings about no one host go to "all", which a check that could
    not run always has (its error testcase lives there)."""
    by_host: dict[str, list[Finding]] = {}
    for f in report.sorted_findings():
        by_host.setdefault(f.where.host or ALL_HOSTS, []).append(f)
    if report.could_not_run:
        by_host.setdefault(ALL_HOSTS, [])
    return by_host


def _is_failure(finding: Finding, *, strict: bool) -> bool:
    """A failure testcase: a FAIL, or under ``strict`` a WARN too (the exit code's rule)."""
    return finding.severity is Severity.FAIL or (strict and finding.severity is Severity.WARN)


def _junit_suite(root: ET.Element, report: Report, host: str, findings: list[Finding], *,
                 strict: bool) -> tuple[int, int, int]:
    """Add one host's testsuite; returns its (tests, failures, errors), which the root sums."""
    failing = [f for f in findings if _is_failure(f, strict=strict)]
    nerr = int(bool(report.could_not_run) and host == ALL_HOSTS)
    suite = ET.SubElement(root, "testsuite", name=f"{report.command}.{host}", tests=str(len(findings) + nerr),
                          failures=str(len(failing)), errors=str(nerr), skipped="0")
    if nerr:
        case = ET.SubElement(suite, "testcase", classname=f"{report.command}.{ALL_HOSTS}", name="could not run")
        ET.SubElement(case, "error", message=printable(report.could_not_run),
                      type="could-not-run").text = printable(report.summary)
    for f in findings:
        case = ET.SubElement(suite, "testcase", classname=f"{report.command}.{host}",
                             name=f"{f.code} {str(f.where) or host}")
        text = f.message + (f"\nfix: {f.fix}" if f.fix else "")
        if _is_failure(f, strict=strict):
            ET.SubElement(case, "failure", message=f.message, type=f.code).text = text
        else:
            ET.SubElement(case, "system-out").text = f"[{f.severity.value}] {text}"
    return len(findings) + nerr, len(failing), nerr
