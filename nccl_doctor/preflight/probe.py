"""This node's probe, as preflight posts it for node 0: the probe's findings (a multi-node run makes some
of them worse), the facts ``compare`` checks across nodes, and this process's torch/CUDA/NCCL versions."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from nccl_doctor.bench import Backend
from nccl_doctor.codes import Code
from nccl_doctor.node import check, node_facts, probe_node
from nccl_doctor.preflight.plan import NodePlan
from nccl_doctor.preflight.protocol import NodePost
from nccl_doctor.report import Finding, Severity

LOOPBACK_KIND = "loopback"
# probe findings about what NCCL will do: a run on Gloo (CPU) never meets them, the GPU job would
NCCL_CODES = frozenset((Code.NCCL_ON_MANAGEMENT, Code.SOCKET_IFNAME_MATCHES_NOTHING, Code.SOCKET_IFNAME_DOWN,
                        Code.SOCKET_IFNAME_IGNORED, Code.IFNAME_PREFIX_OVERMATCH, Code.NCCL_ON_VIRTUAL,
                        Code.RDMA_DISABLED_BY_ENV, Code.IB_HCA_SELECTS_NOTHING, Code.RDMA_PORT_NOT_ACTIVE,
                        Code.RDMA_PORT_SLOW, Code.ROCE_GID_UNUSABLE, Code.GPU_NIC_NUMA_MISMATCH,
                        Code.GDR_PREREQUISITES_MISSING, Code.NCCL_NET_UNAVAILABLE, Code.NAMED_LIKE_IB,
                        Code.NCCL_FINDS_NO_INTERFACE, Code.NCCL_CONF_FILE))
ENV_CODES = frozenset((Code.ENV_NOT_INTEGER, Code.ENV_VALUE_IGNORED, Code.ENV_UNKNOWN_NAME,
                       Code.P2P_OR_SHM_DISABLED))  # about NCCL when the variable is NCCL's
NOT_NCCL_NOTE = (" (this run uses Gloo on the CPU, not NCCL, so it does not meet this; a GPU job started with this "
                 "environment would)")


def torch_versions() -> dict[str, str]:
    """torch's, CUDA's and NCCL's versions in this process, as ``compare`` compares them across nodes."""
    import torch

    out = {"version.torch": torch.__version__, "version.cuda": torch.version.cuda or "none (CPU build)"}
    try:
        nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
    except Exception:
        nccl = None
    out["version.nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl or "none")
    return out


def rank_facts(nproc: int, source: str) -> dict[str, str]:
    """Compared across nodes by ``compare``: the count, and why (for the message and the fix)."""
    return {"ranks.per_node": str(nproc), "ranks.source": source}


def multi_node_findings(findings: list[Finding], node: Any, nnodes: int) -> list[Finding]:
    """On 2+ nodes a Gloo interface that is loopback cannot reach the other nodes: the probe's WARN
    (ND216) becomes a FAIL here, on the node that has it, before any rank starts (NCCL's loopback
    bootstrap, ND206, is a FAIL already). ``node``: the probe's ``NodeProbe``."""
    loop = _gloo_loopback(node)
    out = []
    for f in findings:
        if f.code == Code.GLOO_IFNAME_INVALID and f.severity is Severity.WARN and f.where.iface in loop:
            f = Finding(code=f.code, severity=Severity.FAIL, where=f.where, evidence=f.evidence, fix=f.fix,
                        message=f"{f.message} (this job spans {nnodes} nodes: Gloo's connections between nodes "
                                "fail)")
        out.append(f)
    return out


def run_findings(findings: list[Finding], node: Any, nnodes: int, backend: Backend, *,
                 one_host: bool = False) -> list[Finding]:
    """The probe's findings as they apply to this run. Gloo on loopback (ND215, a WARN in ``probe``, which
    cannot know the job) is fine on one node, or when every node meets on this host's loopback
    (``one_host``: "nodes" that are processes of one machine), PASS saying so, and fails across
    machines (FAIL, like ND216); a run on Gloo says, on each NCCL finding, that it does not use NCCL (the
    severity stays: the training job would). ``node``: the probe's ``NodeProbe``."""
    out = multi_node_findings(findings, node, nnodes) if nnodes > 1 else list(findings)
    return [_for_run(f, nnodes, backend, one_host) for f in out]


def meets_on_loopback(head: str) -> bool:
    """The run's head is this machine's loopback (``localhost``, 127.x, ::1): every "node" is a process of
    this one machine. A literal check, never a DNS query (a name that resolves elsewhere is another host)."""
    if head.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(head.strip("[]")).is_loopback
    except ValueError:
        return False


def _for_run(f: Finding, nnodes: int, backend: Backend, one_host: bool) -> Finding:
    if f.code == Code.GLOO_BINDS_LOOPBACK and f.severity is Severity.WARN:
        if nnodes == 1:
            return _restate(f, Severity.PASS, " (this run is on one node, where Gloo on loopback works)")
        if one_host:
            return _restate(f, Severity.PASS, f" (the {nnodes} nodes of this run meet on this machine's loopback, "
                                              "where Gloo on loopback works)")
        return _restate(f, Severity.FAIL, f" (this job spans {nnodes} nodes: Gloo's connections between nodes fail)")
    nccl = f.code in NCCL_CODES or (f.code in ENV_CODES and f.message.startswith("NCCL_"))
    if backend == Backend.GLOO and nccl and f.severity is not Severity.PASS:
        return _restate(f, f.severity, NOT_NCCL_NOTE)
    return f


def _restate(f: Finding, severity: Severity, why: str) -> Finding:
    """``f`` with ``why`` said after its message: its template's ``why`` where it has one (it stays a
    template, so that nodes merge by its parameters), else appended to its text."""
    if "why" in f.template_names():
        return f.rerendered(severity=severity, why=why)
    return Finding(code=f.code, severity=severity, where=f.where, evidence=f.evidence, fix=f.fix,
                   message=f.message + why)


def _gloo_loopback(node: Any) -> set[str]:
    """The interfaces GLOO_SOCKET_IFNAME names that are loopback (none when Gloo picks its own)."""
    if node.gloo.rule != "GLOO_SOCKET_IFNAME":
        return set()
    return {n for n in node.gloo.ifaces if (i := node.facts.iface(n)) is not None
            and (i.kind == LOOPBACK_KIND or n == node.facts.loopback)}


def probe_this_node(plan: NodePlan, env: Mapping[str, str], backend: Backend) -> NodePost:
    """Probe, findings and facts of this node, ready to post (``fatal``: a FAIL among its findings);
    ``backend``: the one this node's ranks will run."""
    node = probe_node("/", env)
    findings = run_findings(check(node), node, plan.nnodes, backend, one_host=meets_on_loopback(plan.head))
    facts = node_facts(node, env, versions=torch_versions(), host=plan.host)
    facts.update(rank_facts(plan.nproc, plan.nproc_source))
    fatal = any(f.severity is Severity.FAIL for f in findings)
    return NodePost(host=plan.host, node=plan.node_rank, facts=facts, findings=findings, fatal=fatal)
