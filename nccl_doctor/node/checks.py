"""Every probe check, in report order: ``check(node)`` is the one entry (preflight and bench use it too)."""

from __future__ import annotations

from nccl_doctor.codes import Code
from nccl_doctor.node.checks_env import SETUP_CHECKS, check_env
from nccl_doctor.node.model import NodeProbe
from nccl_doctor.report import Finding, Severity, finding


def check_skipped(node: NodeProbe) -> list[Finding]:
    """ND227: each file the probe wanted but would not open (a FIFO, a device) or keep (too large)."""
    return [finding(Code.FILE_SKIPPED, Severity.WARN, f"{path} was not read: it is {why}; what it holds is "
                    "missing from this report", host=node.host, file=path)
            for path, why in sorted(node.facts.skipped_files.items())]


CHECKS = (*SETUP_CHECKS, check_env, check_skipped)


def check(node: NodeProbe) -> list[Finding]:
    """All probe findings for one node."""
    return [f for chk in CHECKS for f in chk(node)]
