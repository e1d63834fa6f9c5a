"""Every finding code, in one table: stable, never reused, documented in the README.

Ranges: ND0xx general, ND1xx ``parse`` (NCCL logs), ND2xx ``probe`` (interfaces and env),
ND3xx ``bench`` (bandwidth), ND4xx ``preflight`` (cross-node). ``tests/test_codes.py`` pins the set
and checks the README table against it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    code: str
    name: str
    summary: str


def _table(*rows: tuple[str, str, str]) -> dict[str, Code]:
    table: dict[str, Code] = {}
    for code, name, summary in rows:
        assert code not in table, f"duplicate finding code {code}"
        table[code] = Code(code, name, summary)
    return table


CODES: dict[str, Code] = _table(
    # --- ND0xx: general -------------------------------------------------------------------------
    ("ND001", "check-skipped", "A check could not run here; the finding says why."),
    # --- ND1xx: parse (NCCL_DEBUG=INFO logs) ------------------------------------------------------
    ("ND101", "inter-node-transport-ok", "Inter-node traffic runs over RDMA (IB, RoCE, EFA) or the job is on one node."),
    ("ND102", "socket-fallback", "Inter-node traffic fell back to NET/Socket (TCP) on hardware that has IB/RoCE/EFA."),
    ("ND103", "socket-transport", "Inter-node traffic runs over NET/Socket (TCP) on plain Ethernet."),
    ("ND104", "gdr-not-used", "RDMA is used but GPUDirect RDMA is not: inter-node data is staged in host memory."),
    ("ND105", "intra-node-degraded", "GPUs of one node talk through SHM or the NIC instead of P2P/NVLink."),
    ("ND106", "transport-not-visible", "The log does not show which transport the job used; it cannot be verified."),
    ("ND107", "nccl-version-mismatch", "Processes of one job run different NCCL versions."),
    ("ND108", "nccl-warning", "NCCL printed a WARN that is not fatal by itself."),
    ("ND109", "ib-completion-error", "An IB/RoCE work request completed with an error (e.g. status 12, retry exceeded)."),
    ("ND110", "connect-failed", "A socket connection between ranks failed, timed out or was closed."),
    ("ND111", "rdma-verbs-error", "An RDMA verbs call (ibv_*) or device open failed."),
    ("ND112", "cuda-error", "A CUDA call inside NCCL failed (out of memory, driver error...)."),
    ("ND113", "no-socket-interface", "NCCL found no usable network interface for bootstrap or sockets."),
    ("ND114", "watchdog-timeout", "PyTorch's watchdog timed out a collective: some rank stopped making progress."),
    ("ND115", "nccl-error", "NCCL reported a fatal error (internal, system, remote, invalid usage...)."),
    ("ND116", "ofi-provider-not-efa", "aws-ofi-nccl selected a TCP libfabric provider instead of EFA."),
    ("ND117", "log-input-damaged", "Part of the input could not be read (truncated gzip, over-long lines)."),
    ("ND118", "ranks-behind", "Some ranks' watchdog fired at an older collective than the others': they are behind."),
    # --- ND2xx: probe (interfaces, NCCL/Gloo environment) -----------------------------------------
    ("ND200", "probe-summary", "What NCCL (bootstrap, transport) and Gloo will use on this node."),
    ("ND201", "nccl-on-management", "NCCL will bootstrap (or send all traffic) over the management interface."),
    ("ND202", "socket-ifname-matches-nothing", "NCCL_SOCKET_IFNAME matches no interface with an address: the job cannot start."),
    ("ND203", "socket-ifname-down", "NCCL_SOCKET_IFNAME matches only (or also) interfaces that are down."),
    ("ND204", "socket-ifname-ignored", "NCCL_SOCKET_IFNAME is ignored or misread (one character, '=^' order, quotes)."),
    ("ND205", "ifname-prefix-overmatch", "A prefix in NCCL_SOCKET_IFNAME/NCCL_IB_HCA also matches longer names (eth1 -> eth10)."),
    ("ND206", "nccl-on-virtual", "NCCL will bootstrap over a virtual or loopback interface other nodes cannot reach."),
    ("ND207", "rdma-disabled-by-env", "Active RDMA ports exist but NCCL_IB_DISABLE/NCCL_NET turns NCCL's IB transport off."),
    ("ND208", "ib-hca-selects-nothing", "NCCL_IB_HCA selects none of the active ports: NCCL silently falls back to sockets."),
    ("ND209", "rdma-port-not-active", "An RDMA port is not ACTIVE; NCCL skips it."),
    ("ND210", "rdma-port-slow", "An active RDMA port runs below the rate of its peers on the node."),
    ("ND211", "roce-gid-unusable", "A RoCE port has no usable GID (or NCCL_IB_GID_INDEX points at a wrong one)."),
    ("ND212", "bond-slave-down", "A bond has a down member and runs degraded."),
    ("ND213", "gpu-nic-numa-mismatch", "A GPU's nearest NIC is on another NUMA node."),
    ("ND214", "gdr-prerequisites-missing", "GPUs and RDMA exist but neither a peer-memory module nor DMA-BUF is available."),
    ("ND215", "gloo-binds-loopback", "With GLOO_SOCKET_IFNAME unset, Gloo will bind loopback (hostname resolves to 127.x)."),
    ("ND216", "gloo-ifname-invalid", "GLOO_SOCKET_IFNAME names an interface that is missing, has no address, is down, or is loopback/virtual."),
    ("ND217", "env-not-integer", "An integer NCCL variable has a non-integer value that NCCL silently reads as a number."),
    ("ND218", "env-value-ignored", "An NCCL variable has a value NCCL ignores (unknown level name, out of range)."),
    ("ND219", "env-unknown-name", "An NCCL_* name NCCL does not read (typo, deprecated PyTorch name)."),
    ("ND220", "nccl-conf-file", "Settings injected by nccl.conf files (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf), or an NCCL_CONF_FILE that does not exist."),
    ("ND221", "p2p-or-shm-disabled", "NCCL_P2P_DISABLE=1 or NCCL_SHM_DISABLE=1 slows intra-node collectives."),
    ("ND222", "nccl-net-unavailable", "NCCL_NET names a network that is not usable here: NCCL init fails."),
    ("ND223", "named-like-ib", "An interface named like InfiniBand (ib*) is not IPoIB."),
    ("ND224", "nccl-finds-no-interface", "NCCL's default choice finds no running interface with an address."),
    ("ND225", "efa-needs-plugin", "EFA devices present: NCCL needs the aws-ofi-nccl plugin to use them."),
    ("ND226", "no-rdma", "No RDMA device: inter-node NCCL traffic will use TCP sockets."),
    # --- ND3xx: bench (bandwidth) -----------------------------------------------------------------
    ("ND300", "bandwidth-ok", "Every collective returned correct data and no node or link stands out."),
    ("ND301", "wrong-results", "A collective returned wrong elements (like nccl-tests' #wrong)."),
    ("ND302", "slow-node-bandwidth", "A node is slow with every partner, one of them proven good elsewhere (pair pass)."),
    ("ND303", "slow-link-unpinned", "A node pair is slow but neither end can be blamed (two nodes, or no known-good peer)."),
    ("ND305", "above-link-rate", "A figure exceeds the link's line rate, so it is not that link's figure."),
    ("ND306", "sizes-too-small", "The largest size tested is too small to reach the bandwidth."),
    ("ND307", "too-few-iterations", "Too few timed iterations per size for a stable figure."),
    ("ND308", "world-size-mismatch", "The bench ran on fewer nodes or ranks than Slurm allocated."),
    ("ND309", "deadline-expired", "The run passed its deadline; the finding names the stage that hung."),
    ("ND310", "collective-failed", "A collective failed or timed out; the finding names the ranks missing."),
    ("ND311", "launch-failed", "The launcher or its workers exited before reporting a verdict."),
    # --- ND4xx: preflight (cross-node) ------------------------------------------------------------
    ("ND401", "version-mismatch", "torch, NCCL, CUDA or driver versions differ between nodes (pass: all agree)."),
    ("ND402", "setting-mismatch", "An NCCL_*/GLOO_* setting differs between nodes, or is unset on some."),
    ("ND403", "nic-mismatch", "The NIC inventory, link state or link rate differs between nodes."),
    ("ND404", "net-plugin-mismatch", "Nodes would load different NCCL net plugins."),
    ("ND405", "node-missing", "Nodes of the allocation never arrived at the rendezvous; they are named."),
    ("ND406", "stage-failed", "A stage failed or passed its deadline; names the stage and the ranks behind."),
    ("ND407", "node-lost", "A node stopped responding mid-run (no heartbeat); the others stopped fast."),
    ("ND408", "rank-count-mismatch", "Nodes would start different numbers of ranks (GPUs, --nproc-per-node): none starts."),
    ("ND410", "fsdp-smoke", "The FSDP2 + DCP training smoke test failed on some rank (pass: it ran)."),
)


def markdown_table() -> str:
    """The README's table of codes, generated so the two cannot drift."""
    lines = ["| code | name | meaning |", "|---|---|---|"]
    lines += [f"| `{c.code}` | `{c.name}` | {c.summary} |" for c in CODES.values()]
    return "\n".join(lines)


def update_readme(path: str = "README.md") -> None:
    """Rewrite the table between ``<!-- CODES -->`` and ``<!-- /CODES -->`` in the README."""
    import re
    from pathlib import Path

    readme = Path(path)
    block = f"<!-- CODES -->\n{markdown_table()}\n<!-- /CODES -->"
    text = readme.read_text()
    text = re.sub(r"<!-- CODES -->.*?(<!-- /CODES -->|\Z)", lambda _: block, text, count=1, flags=re.S)
    readme.write_text(text)


if __name__ == "__main__":
    update_readme()
