"""Every finding code, in one table: stable, never reused, documented in the README.

Ranges: ND0xx general, ND1xx ``parse`` (NCCL logs), ND2xx ``probe`` (interfaces and env),
ND3xx ``bench`` (bandwidth), ND4xx ``preflight`` (cross-node). Each member carries what the README's
table and any ``explain`` show: its name, a one-line summary, why it matters and the usual fix (a
finding's own fix is specific to what was found). ``tests/unit/test_codes.py`` pins the set.
"""

from __future__ import annotations

import re
from pathlib import Path

from nccl_doctor.enums import StrEnum


class Code(StrEnum):
    """A finding code: ``Code.SOCKET_FALLBACK == "ND102"``; JSON shows the value."""

    slug: str
    summary: str
    explanation: str
    fix: str

    def __new__(cls, code: str, slug: str, summary: str, explanation: str, fix: str) -> Code:
        member = str.__new__(cls, code)
        member._value_ = code
        member.slug = slug
        member.summary = summary
        member.explanation = explanation
        member.fix = fix
        return member

    # --- ND0xx: general -------------------------------------------------------------------------------------
    CHECK_SKIPPED = (
        "ND001", "check-skipped",
        "A check could not run here; the finding says why.",
        "",
        "",
    )
    # --- ND1xx: parse (NCCL_DEBUG=INFO logs) ----------------------------------------------------------------
    INTER_NODE_TRANSPORT_OK = (
        "ND101", "inter-node-transport-ok",
        "Inter-node traffic runs over RDMA (IB, RoCE, EFA) or the job is on one node.",
        "",
        "",
    )
    SOCKET_FALLBACK = (
        "ND102", "socket-fallback",
        "Inter-node traffic fell back to NET/Socket (TCP) on hardware that has IB/RoCE/EFA.",
        "",
        "",
    )
    SOCKET_TRANSPORT = (
        "ND103", "socket-transport",
        "Inter-node traffic runs over NET/Socket (TCP) on plain Ethernet.",
        "",
        "",
    )
    GDR_NOT_USED = (
        "ND104", "gdr-not-used",
        "RDMA is used but GPUDirect RDMA is not: inter-node data is staged in host memory.",
        "",
        "",
    )
    INTRA_NODE_DEGRADED = (
        "ND105", "intra-node-degraded",
        "GPUs of one node talk through SHM or the NIC instead of P2P/NVLink.",
        "",
        "",
    )
    TRANSPORT_NOT_VISIBLE = (
        "ND106", "transport-not-visible",
        "The log does not show which transport the job used; it cannot be verified.",
        "",
        "",
    )
    NCCL_VERSION_MISMATCH = (
        "ND107", "nccl-version-mismatch",
        "Processes of one job run different NCCL versions.",
        "",
        "",
    )
    NCCL_WARNING = (
        "ND108", "nccl-warning",
        "NCCL printed a WARN that is not fatal by itself.",
        "",
        "",
    )
    IB_COMPLETION_ERROR = (
        "ND109", "ib-completion-error",
        "An IB/RoCE work request completed with an error (e.g. status 12, retry exceeded).",
        "",
        "",
    )
    CONNECT_FAILED = (
        "ND110", "connect-failed",
        "A socket connection between ranks failed, timed out or was closed.",
        "",
        "",
    )
    RDMA_VERBS_ERROR = (
        "ND111", "rdma-verbs-error",
        "An RDMA verbs call (ibv_*) or device open failed.",
        "",
        "",
    )
    CUDA_ERROR = (
        "ND112", "cuda-error",
        "A CUDA call inside NCCL failed (out of memory, driver error...).",
        "",
        "",
    )
    NO_SOCKET_INTERFACE = (
        "ND113", "no-socket-interface",
        "NCCL found no usable network interface for bootstrap or sockets.",
        "",
        "",
    )
    WATCHDOG_TIMEOUT = (
        "ND114", "watchdog-timeout",
        "PyTorch's watchdog timed out a collective: some rank stopped making progress.",
        "",
        "",
    )
    NCCL_ERROR = (
        "ND115", "nccl-error",
        "NCCL reported a fatal error (internal, system, remote, invalid usage...).",
        "",
        "",
    )
    OFI_PROVIDER_NOT_EFA = (
        "ND116", "ofi-provider-not-efa",
        "aws-ofi-nccl selected a TCP libfabric provider instead of EFA.",
        "",
        "",
    )
    LOG_INPUT_DAMAGED = (
        "ND117", "log-input-damaged",
        "Part of the input could not be read (truncated gzip, over-long lines).",
        "",
        "",
    )
    RANKS_BEHIND = (
        "ND118", "ranks-behind",
        "Some ranks' watchdog fired at an older collective than the others': they are behind.",
        "",
        "",
    )
    # --- ND2xx: probe (interfaces, NCCL/Gloo environment) ---------------------------------------------------
    PROBE_SUMMARY = (
        "ND200", "probe-summary",
        "What NCCL (bootstrap, transport) and Gloo will use on this node.",
        "",
        "",
    )
    NCCL_ON_MANAGEMENT = (
        "ND201", "nccl-on-management",
        "NCCL will bootstrap (or send all traffic) over the management interface.",
        "",
        "",
    )
    SOCKET_IFNAME_MATCHES_NOTHING = (
        "ND202", "socket-ifname-matches-nothing",
        "NCCL_SOCKET_IFNAME matches no interface with an address: the job cannot start.",
        "",
        "",
    )
    SOCKET_IFNAME_DOWN = (
        "ND203", "socket-ifname-down",
        "NCCL_SOCKET_IFNAME matches only (or also) interfaces that are down.",
        "",
        "",
    )
    SOCKET_IFNAME_IGNORED = (
        "ND204", "socket-ifname-ignored",
        "NCCL_SOCKET_IFNAME is ignored or misread (one character, '=^' order, quotes).",
        "",
        "",
    )
    IFNAME_PREFIX_OVERMATCH = (
        "ND205", "ifname-prefix-overmatch",
        "A prefix in NCCL_SOCKET_IFNAME/NCCL_IB_HCA also matches longer names (eth1 -> eth10).",
        "",
        "",
    )
    NCCL_ON_VIRTUAL = (
        "ND206", "nccl-on-virtual",
        "NCCL will bootstrap over a virtual or loopback interface other nodes cannot reach.",
        "",
        "",
    )
    RDMA_DISABLED_BY_ENV = (
        "ND207", "rdma-disabled-by-env",
        "Active RDMA ports exist but NCCL_IB_DISABLE/NCCL_NET turns NCCL's IB transport off.",
        "",
        "",
    )
    IB_HCA_SELECTS_NOTHING = (
        "ND208", "ib-hca-selects-nothing",
        "NCCL_IB_HCA selects none of the active ports: NCCL silently falls back to sockets.",
        "",
        "",
    )
    RDMA_PORT_NOT_ACTIVE = (
        "ND209", "rdma-port-not-active",
        "An RDMA port is not ACTIVE; NCCL skips it.",
        "",
        "",
    )
    RDMA_PORT_SLOW = (
        "ND210", "rdma-port-slow",
        "An active RDMA port runs below the rate of its peers on the node.",
        "",
        "",
    )
    ROCE_GID_UNUSABLE = (
        "ND211", "roce-gid-unusable",
        "A RoCE port has no usable GID (or NCCL_IB_GID_INDEX points at a wrong one).",
        "",
        "",
    )
    BOND_SLAVE_DOWN = (
        "ND212", "bond-slave-down",
        "A bond has a down member and runs degraded.",
        "",
        "",
    )
    GPU_NIC_NUMA_MISMATCH = (
        "ND213", "gpu-nic-numa-mismatch",
        "A GPU's nearest NIC is on another NUMA node.",
        "",
        "",
    )
    GDR_PREREQUISITES_MISSING = (
        "ND214", "gdr-prerequisites-missing",
        "GPUs and RDMA exist but neither a peer-memory module nor DMA-BUF is available.",
        "",
        "",
    )
    GLOO_BINDS_LOOPBACK = (
        "ND215", "gloo-binds-loopback",
        "With GLOO_SOCKET_IFNAME unset, Gloo will bind loopback (hostname resolves to 127.x).",
        "",
        "",
    )
    GLOO_IFNAME_INVALID = (
        "ND216", "gloo-ifname-invalid",
        "GLOO_SOCKET_IFNAME names an interface that is missing, has no address, is down, or is loopback/virtual.",
        "",
        "",
    )
    ENV_NOT_INTEGER = (
        "ND217", "env-not-integer",
        "An integer NCCL variable has a non-integer value that NCCL silently reads as a number.",
        "",
        "",
    )
    ENV_VALUE_IGNORED = (
        "ND218", "env-value-ignored",
        "An NCCL variable has a value NCCL ignores (unknown level name, out of range).",
        "",
        "",
    )
    ENV_UNKNOWN_NAME = (
        "ND219", "env-unknown-name",
        "An NCCL_* name NCCL does not read (typo, deprecated PyTorch name).",
        "",
        "",
    )
    NCCL_CONF_FILE = (
        "ND220", "nccl-conf-file",
        "Settings injected by nccl.conf files (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf), or an NCCL_CONF_FILE that does not exist.",
        "",
        "",
    )
    P2P_OR_SHM_DISABLED = (
        "ND221", "p2p-or-shm-disabled",
        "NCCL_P2P_DISABLE=1 or NCCL_SHM_DISABLE=1 slows intra-node collectives.",
        "",
        "",
    )
    NCCL_NET_UNAVAILABLE = (
        "ND222", "nccl-net-unavailable",
        "NCCL_NET names a network that is not usable here: NCCL init fails.",
        "",
        "",
    )
    NAMED_LIKE_IB = (
        "ND223", "named-like-ib",
        "An interface named like InfiniBand (ib*) is not IPoIB.",
        "",
        "",
    )
    NCCL_FINDS_NO_INTERFACE = (
        "ND224", "nccl-finds-no-interface",
        "NCCL's default choice finds no running interface with an address.",
        "",
        "",
    )
    EFA_NEEDS_PLUGIN = (
        "ND225", "efa-needs-plugin",
        "EFA devices present: NCCL needs the aws-ofi-nccl plugin to use them.",
        "",
        "",
    )
    NO_RDMA = (
        "ND226", "no-rdma",
        "No RDMA device: inter-node NCCL traffic will use TCP sockets.",
        "",
        "",
    )
    # --- ND3xx: bench (bandwidth) ---------------------------------------------------------------------------
    BANDWIDTH_OK = (
        "ND300", "bandwidth-ok",
        "Every collective returned correct data and no node or link stands out.",
        "",
        "",
    )
    WRONG_RESULTS = (
        "ND301", "wrong-results",
        "A collective returned wrong elements (like nccl-tests' #wrong).",
        "",
        "",
    )
    SLOW_NODE_BANDWIDTH = (
        "ND302", "slow-node-bandwidth",
        "A node is slow with every partner, one of them proven good elsewhere (pair pass).",
        "",
        "",
    )
    SLOW_LINK_UNPINNED = (
        "ND303", "slow-link-unpinned",
        "A node pair is slow but neither end can be blamed (two nodes, or no known-good peer).",
        "",
        "",
    )
    ABOVE_LINK_RATE = (
        "ND305", "above-link-rate",
        "A figure exceeds the link's line rate, so it is not that link's figure.",
        "",
        "",
    )
    SIZES_TOO_SMALL = (
        "ND306", "sizes-too-small",
        "The largest size tested is too small to reach the bandwidth.",
        "",
        "",
    )
    TOO_FEW_ITERATIONS = (
        "ND307", "too-few-iterations",
        "Too few timed iterations per size for a stable figure.",
        "",
        "",
    )
    WORLD_SIZE_MISMATCH = (
        "ND308", "world-size-mismatch",
        "The bench ran on fewer nodes or ranks than Slurm allocated.",
        "",
        "",
    )
    DEADLINE_EXPIRED = (
        "ND309", "deadline-expired",
        "The run passed its deadline; the finding names the stage that hung.",
        "",
        "",
    )
    COLLECTIVE_FAILED = (
        "ND310", "collective-failed",
        "A collective failed or timed out; the finding names the ranks missing.",
        "",
        "",
    )
    LAUNCH_FAILED = (
        "ND311", "launch-failed",
        "The launcher or its workers exited before reporting a verdict.",
        "",
        "",
    )
    # --- ND4xx: preflight (cross-node) ----------------------------------------------------------------------
    VERSION_MISMATCH = (
        "ND401", "version-mismatch",
        "torch, NCCL, CUDA or driver versions differ between nodes (pass: all agree).",
        "",
        "",
    )
    SETTING_MISMATCH = (
        "ND402", "setting-mismatch",
        "An NCCL_*/GLOO_* setting differs between nodes, or is unset on some.",
        "",
        "",
    )
    NIC_MISMATCH = (
        "ND403", "nic-mismatch",
        "The NIC inventory, link state or link rate differs between nodes.",
        "",
        "",
    )
    NET_PLUGIN_MISMATCH = (
        "ND404", "net-plugin-mismatch",
        "Nodes would load different NCCL net plugins.",
        "",
        "",
    )
    NODE_MISSING = (
        "ND405", "node-missing",
        "Nodes of the allocation never arrived at the rendezvous; they are named.",
        "",
        "",
    )
    STAGE_FAILED = (
        "ND406", "stage-failed",
        "A stage failed or passed its deadline; names the stage and the ranks behind.",
        "",
        "",
    )
    NODE_LOST = (
        "ND407", "node-lost",
        "A node stopped responding mid-run (no heartbeat); the others stopped fast.",
        "",
        "",
    )
    RANK_COUNT_MISMATCH = (
        "ND408", "rank-count-mismatch",
        "Nodes would start different numbers of ranks (GPUs, --nproc-per-node): none starts.",
        "",
        "",
    )
    FSDP_SMOKE = (
        "ND410", "fsdp-smoke",
        "The FSDP2 + DCP training smoke test failed on some rank (pass: it ran).",
        "",
        "",
    )


CODES: dict[str, Code] = {c.value: c for c in Code}
README_BEGIN, README_END = "<!-- CODES -->", "<!-- /CODES -->"


def markdown_table() -> str:
    """The README's table of codes, generated so the two cannot drift."""
    lines = ["| code | name | meaning |", "|---|---|---|"]
    lines += [f"| `{c.value}` | `{c.slug}` | {c.summary} |" for c in Code]
    return "\n".join(lines)


def update_readme(path: str = "README.md") -> None:
    """Rewrite the table between the README's ``<!-- CODES -->`` markers."""
    readme = Path(path)
    block = f"{README_BEGIN}\n{markdown_table()}\n{README_END}"
    pattern = re.escape(README_BEGIN) + r".*?(" + re.escape(README_END) + r"|\Z)"
    text = re.sub(pattern, lambda _: block, readme.read_text(), count=1, flags=re.S)
    readme.write_text(text)


if __name__ == "__main__":
    update_readme()
