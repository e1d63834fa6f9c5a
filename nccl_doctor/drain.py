"""``--drain-on-fail``: take the nodes a FAIL names out of Slurm's scheduling, and say so in the report.

Run by the CLI on a finished ``probe`` or ``preflight`` report. Only under Slurm (a Prolog, a health check
or a job step: ``SLURMD_NODENAME`` or ``SLURM_JOB_ID`` set), only on a FAIL verdict of a check that ran,
and only for nodes the FAIL findings name, one name or a hostlist (``n[1-3]``: a problem that several nodes
share is one finding) expanded into its names: this node (by its Slurm name, ``SLURMD_NODENAME``) or another
node of this job (``SLURM_JOB_NODELIST``); a name from anywhere else is never passed to ``scontrol``. Never
every node of a multi-node job: a fault on all of them is the job's settings or the network, not the nodes.
Each node gets one ``scontrol update NodeName=<node> State=DRAIN Reason="nccl-doctor NDxxx: <why>"``, the
reason bounded and printable ASCII without quotes. What was done, or why not, becomes an ND002 finding
(PASS drained, WARN not) and the JSON's ``drain`` list; the exit code stays the verdict's.

An integration beside ``prom``: both turn a finished report into what the cluster's own tools read, and
need only the report, not the launchers.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import hostlist

from nccl_doctor.codes import Code
from nccl_doctor.payload import NodeSubject
from nccl_doctor.report import Finding, Report, Severity, finding, host_names, hosts_text

SCONTROL_TIMEOUT_S = 20.0  # per node; a HealthCheckProgram is killed after 60 s
MAX_REASON_CHARS = 120  # what `sinfo -R` shows in full; Slurm keeps a reason as one line
MAX_ERROR_CHARS = 200  # scontrol's own complaint, quoted in the finding
MORE_MARK = " (+{n} more)"
SEARCH_PATH = "/usr/bin:/usr/sbin:/usr/local/bin:/usr/local/sbin:/bin:/sbin"  # a Prolog runs with no PATH
LIVE_ROOT = "/"
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # one node: no hostlist brackets, commas, '='
_UNSAFE = re.compile(r"[^\x20-\x7e]|[\"'`\\]")  # control, non-ASCII and quoting characters
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, kw_only=True)
class DrainAction:
    """One node's drain: ``drained`` with the reason Slurm now shows, or why not."""

    node: str
    reason: str
    drained: bool
    why_not: str = ""


def clean_reason(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """``text`` as a Slurm reason: printable ASCII, no quotes or backslashes, one line, at most ``limit``."""
    flat = _SPACES.sub(" ", _UNSAFE.sub(" ", text)).strip()
    return flat if len(flat) <= limit else flat[:limit - 3].rstrip() + "..."


def drain_reason(fails: list[Finding]) -> str:
    """``nccl-doctor ND216: <the first FAIL's message> (+N more)``, within ``MAX_REASON_CHARS``."""
    first = fails[0]
    more = MORE_MARK.format(n=len(fails) - 1) if len(fails) > 1 else ""
    head = clean_reason(f"nccl-doctor {first.code}: {first.message}", MAX_REASON_CHARS - len(more))
    return head + more


def job_nodes(env: Mapping[str, str]) -> list[str]:
    """This job's nodes, expanded (none outside a job, or when the list does not parse)."""
    text = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    try:
        return [str(h) for h in hostlist.expand_hostlist(text)] if text else []
    except hostlist.BadHostlist:
        return []


def _own_names() -> set[str]:
    full = socket.gethostname()
    return {full, full.split(".")[0]}


def not_drained(why: str, host: str | None = None) -> Finding:
    return finding(Code.SLURM_DRAIN, Severity.WARN, f"not drained: {why}", host=host)


def why_not_slurm(report: Report, env: Mapping[str, str]) -> str | None:
    """Why this report must drain nothing at all; None when it may."""
    if report.could_not_run:
        return "the check could not run, so it blames no node"
    node = report.payload if isinstance(report.payload, NodeSubject) else None
    if node is not None and node.root != LIVE_ROOT:
        return f"the report is of {node.root}, not of this live node"
    if not (env.get("SLURMD_NODENAME") or env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")):
        return "not run by Slurm (no SLURMD_NODENAME or SLURM_JOB_ID: a Prolog, health check or job step sets them)"
    return None


def failing_nodes(report: Report, env: Mapping[str, str]) -> tuple[dict[str, list[Finding]], list[Finding]]:
    """The Slurm nodes to drain, each with its FAIL findings, and a finding for each finding's names refused."""
    me = env.get("SLURMD_NODENAME") or ""
    own = _own_names()
    members = set(job_nodes(env))
    nodes: dict[str, list[Finding]] = {}
    refused: dict[str, list[str]] = {}  # why -> names refused for it
    # probe's one node: its findings are all about it
    reported = report.payload.host if isinstance(report.payload, NodeSubject) else None
    for f in report.sorted_findings():
        host = f.where.host or reported
        if f.severity is not Severity.FAIL or not host:
            continue
        for name in host_names(host):  # a name that does not expand is refused as no node of this job
            node = me if me and name in own | {me} else name if name in members else ""
            why = ("it is not this node nor a node of this job" if not node else
                   "" if _NODE_NAME.fullmatch(node) else "not a plain Slurm node name")
            if why:
                refused.setdefault(why, []).append(name)
            elif f not in nodes.setdefault(node, []):
                nodes[node].append(f)
    return nodes, [not_drained(f"{names_text(names)}: {why}", host=names_text(names)) for why, names in refused.items()]


def names_text(names: list[str]) -> str:
    """Refused names as one hostlist where they make one (plain names), else as they came; bounded (a forged
    hostlist may expand to ``hostlist.MAX_SIZE`` names)."""
    text = hosts_text(names) if all(_NODE_NAME.fullmatch(n) for n in names) else ", ".join(dict.fromkeys(names))
    return clean_reason(text, MAX_ERROR_CHARS)


def scontrol_path(env: Mapping[str, str]) -> str | None:
    return shutil.which("scontrol", path=env.get("PATH") or SEARCH_PATH)


def drain(node: str, reason: str, scontrol: str, env: Mapping[str, str]) -> DrainAction:
    """One ``scontrol update``; its refusal (no permission, unknown node, no controller) as ``why_not``."""
    argv = [scontrol, "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]
    try:
        proc = subprocess.run(argv, env=dict(env), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              errors="replace", timeout=SCONTROL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return DrainAction(node=node, reason=reason, drained=False,
                           why_not=f"scontrol did not answer within {SCONTROL_TIMEOUT_S:.0f} s")
    except OSError as exc:
        return DrainAction(node=node, reason=reason, drained=False, why_not=f"cannot run scontrol: {exc.strerror}")
    if proc.returncode == 0:
        return DrainAction(node=node, reason=reason, drained=True)
    why = clean_reason(_complaint(proc.stderr + proc.stdout) or f"scontrol exited {proc.returncode}", MAX_ERROR_CHARS)
    if os.geteuid() != 0:
        why += " (draining needs root, SlurmUser or a Slurm operator)"
    return DrainAction(node=node, reason=reason, drained=False, why_not=why)


def _complaint(output: str) -> str:
    """The line of scontrol's output that says why: its fatal one, else its last (earlier lines are retries
    and lookups: ``resolve_ctls_from_dns_srv``...)."""
    lines = [line for line in output.splitlines() if line.strip()]
    return next((line for line in lines if "fatal" in line), lines[-1] if lines else "")


def drain_on_fail(report: Report, env: Mapping[str, str]) -> None:
    """Drain the nodes a FAIL verdict names and add what happened to ``report`` (ND002, ``report.drain``).
    Nothing at all for a verdict that is not FAIL."""
    if report.verdict is not Severity.FAIL:
        return
    actions: list[DrainAction] = []
    report.drain = actions_data(actions)
    why = why_not_slurm(report, env)
    if why:
        report.add(not_drained(why))
        return
    nodes, refused = failing_nodes(report, env)
    report.extend(refused)
    members = job_nodes(env)
    if not nodes:
        if not refused:
            report.add(not_drained("the failures name no node"))
        return
    if len(members) > 1 and set(members) <= set(nodes):
        report.add(not_drained(f"every node of the job failed ({hosts_text(members)}): a job-wide cause (its "
                               "settings, the network) rather than the nodes"))
        return
    scontrol = scontrol_path(env)
    if scontrol is None:
        report.add(not_drained("scontrol not found on the PATH"))
        return
    for node, fails in nodes.items():
        action = drain(node, drain_reason(fails), scontrol, env)
        actions.append(action)
        report.add(_action_finding(action))
    report.drain = actions_data(actions)


def _action_finding(action: DrainAction) -> Finding:
    if action.drained:
        return finding(Code.SLURM_DRAIN, Severity.PASS, f"drained {action.node} in Slurm: Reason={action.reason}",
                       f"once fixed: scontrol update NodeName={action.node} State=RESUME", host=action.node)
    return not_drained(f"{action.node}: {action.why_not}", host=action.node)


def actions_data(actions: list[DrainAction]) -> list[dict[str, object]]:
    return [asdict(a) for a in actions]
