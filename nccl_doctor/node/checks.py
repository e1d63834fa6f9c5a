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


def check_unread(node: NodeProbe) -> list[Finding]:
    """ND001: the address files a tree or snapshot lacks. Missing evidence is not absence: the checks that
    need addresses say nothing where only their absence would speak (no 'no interface with an address')."""
    unread = node.facts.unread_address_files
    if not unread:
        return []
    return [finding(Code.CHECK_SKIPPED, Severity.WARN, f"{', '.join(unread)} missing from {node.root}: the "
                    "interfaces' IP addresses are unknown, so NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME were checked "
                    "by name only, and whether NCCL finds an interface with an address (ND224) was not judged",
                    "take the snapshot with `nccl-doctor probe --snapshot` on the node itself (host network "
                    "namespace), or add those files to the tree", host=node.host, file=unread[0])]


CHECKS = (*SETUP_CHECKS, check_env, check_skipped, check_unread)


def check(node: NodeProbe) -> list[Finding]:
    """All probe findings for one node."""
    return [f for chk in CHECKS for f in chk(node)]
