"""This node's probe, as preflight posts it for node 0: the probe's findings (a multi-node run makes some
of them worse), the facts ``compare`` checks across nodes, and this process's torch/CUDA/NCCL versions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nccl_doctor.codes import Code
from nccl_doctor.node import check, node_facts, probe_node
from nccl_doctor.preflight.plan import NodePlan
from nccl_doctor.preflight.protocol import NodePost
from nccl_doctor.report import Finding, Severity

LOOPBACK_KIND = "loopback"


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


def _gloo_loopback(node: Any) -> set[str]:
    """The interfaces GLOO_SOCKET_IFNAME names that are loopback (none when Gloo picks its own)."""
    if node.gloo.rule != "GLOO_SOCKET_IFNAME":
        return set()
    return {n for n in node.gloo.ifaces if (i := node.facts.iface(n)) is not None
            and (i.kind == LOOPBACK_KIND or n == node.facts.loopback)}


def probe_this_node(plan: NodePlan, env: Mapping[str, str]) -> NodePost:
    """Probe, findings and facts of this node, ready to post (``fatal``: a FAIL among its findings)."""
    node = probe_node("/", env)
    findings = check(node)
    if plan.nnodes > 1:
        findings = multi_node_findings(findings, node, plan.nnodes)
    facts = node_facts(node, env, versions=torch_versions(), host=plan.host)
    facts.update(rank_facts(plan.nproc, plan.nproc_source))
    fatal = any(f.severity is Severity.FAIL for f in findings)
    return NodePost(host=plan.host, node=plan.node_rank, facts=facts, findings=findings, fatal=fatal)
