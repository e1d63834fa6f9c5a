"""Every finding code: stable, never reused, documented in ``docs/codes.md``.

Ranges: ND0xx general, ND1xx ``parse`` (NCCL logs), ND2xx ``probe`` (interfaces and env),
ND3xx ``bench`` (bandwidth), ND4xx ``preflight`` (cross-node), ND5xx ``plan`` (the FSDP/HSDP mesh). The
members live here; their texts (name, summary, why it matters, the usual fix) live in one module per range,
so that a range grows without this table outgrowing a screen. ``tests/unit/test_codes.py`` pins the set and
checks that every member has its text.
"""

from __future__ import annotations

import re
from pathlib import Path

from nccl_doctor.codes import bench, general, parse, plan, preflight, probe
from nccl_doctor.codes.text import CodeText
from nccl_doctor.enums import StrEnum

_TEXTS: dict[str, CodeText] = {**general.TEXTS, **parse.TEXTS, **probe.TEXTS, **bench.TEXTS, **preflight.TEXTS,
                              **plan.TEXTS}


class Code(StrEnum):
    """A finding code: ``Code.SOCKET_FALLBACK == "ND102"``; JSON shows the value."""

    @property
    def text(self) -> CodeText:
        """Everything the code says about itself, its message templates included."""
        return _TEXTS[self.value]

    @property
    def slug(self) -> str:
        return _TEXTS[self.value].slug

    @property
    def summary(self) -> str:
        return _TEXTS[self.value].summary

    @property
    def explanation(self) -> str:
        return _TEXTS[self.value].explanation

    @property
    def fix(self) -> str:
        return _TEXTS[self.value].fix

    # --- ND0xx (general) ---
    CHECK_SKIPPED = "ND001"
    SLURM_DRAIN = "ND002"
    # --- ND1xx (parse) ---
    INTER_NODE_TRANSPORT_OK = "ND101"
    SOCKET_FALLBACK = "ND102"
    SOCKET_TRANSPORT = "ND103"
    GDR_NOT_USED = "ND104"
    INTRA_NODE_DEGRADED = "ND105"
    TRANSPORT_NOT_VISIBLE = "ND106"
    NCCL_VERSION_MISMATCH = "ND107"
    NCCL_WARNING = "ND108"
    IB_COMPLETION_ERROR = "ND109"
    CONNECT_FAILED = "ND110"
    RDMA_VERBS_ERROR = "ND111"
    CUDA_ERROR = "ND112"
    NO_SOCKET_INTERFACE = "ND113"
    WATCHDOG_TIMEOUT = "ND114"
    NCCL_ERROR = "ND115"
    OFI_PROVIDER_NOT_EFA = "ND116"
    LOG_INPUT_DAMAGED = "ND117"
    RANKS_BEHIND = "ND118"
    LOG_LIMITS_REACHED = "ND119"
    # --- ND2xx (probe) ---
    PROBE_SUMMARY = "ND200"
    NCCL_ON_MANAGEMENT = "ND201"
    SOCKET_IFNAME_MATCHES_NOTHING = "ND202"
    SOCKET_IFNAME_DOWN = "ND203"
    SOCKET_IFNAME_IGNORED = "ND204"
    IFNAME_PREFIX_OVERMATCH = "ND205"
    NCCL_ON_VIRTUAL = "ND206"
    RDMA_DISABLED_BY_ENV = "ND207"
    IB_HCA_SELECTS_NOTHING = "ND208"
    RDMA_PORT_NOT_ACTIVE = "ND209"
    RDMA_PORT_SLOW = "ND210"
    ROCE_GID_UNUSABLE = "ND211"
    BOND_SLAVE_DOWN = "ND212"
    GPU_NIC_NUMA_MISMATCH = "ND213"
    GDR_PREREQUISITES_MISSING = "ND214"
    GLOO_BINDS_LOOPBACK = "ND215"
    GLOO_IFNAME_INVALID = "ND216"
    ENV_NOT_INTEGER = "ND217"
    ENV_VALUE_IGNORED = "ND218"
    ENV_UNKNOWN_NAME = "ND219"
    NCCL_CONF_FILE = "ND220"
    P2P_OR_SHM_DISABLED = "ND221"
    NCCL_NET_UNAVAILABLE = "ND222"
    NAMED_LIKE_IB = "ND223"
    NCCL_FINDS_NO_INTERFACE = "ND224"
    EFA_NEEDS_PLUGIN = "ND225"
    NO_RDMA = "ND226"
    FILE_SKIPPED = "ND227"
    # --- ND3xx (bench) ---
    BANDWIDTH_OK = "ND300"
    WRONG_RESULTS = "ND301"
    SLOW_NODE_BANDWIDTH = "ND302"
    SLOW_LINK_UNPINNED = "ND303"
    ABOVE_LINK_RATE = "ND305"
    SIZES_TOO_SMALL = "ND306"
    TOO_FEW_ITERATIONS = "ND307"
    WORLD_SIZE_MISMATCH = "ND308"
    DEADLINE_EXPIRED = "ND309"
    COLLECTIVE_FAILED = "ND310"
    LAUNCH_FAILED = "ND311"
    BELOW_EXPECTED = "ND312"
    CUDA_UNUSABLE = "ND313"
    CPU_STARVED = "ND314"
    GPU_PAIR_SLOW = "ND315"
    # --- ND4xx (preflight) ---
    VERSION_MISMATCH = "ND401"
    SETTING_MISMATCH = "ND402"
    NIC_MISMATCH = "ND403"
    NET_PLUGIN_MISMATCH = "ND404"
    NODE_MISSING = "ND405"
    STAGE_FAILED = "ND406"
    NODE_LOST = "ND407"
    RANK_COUNT_MISMATCH = "ND408"
    FSDP_SMOKE = "ND410"
    STORE_VALUE_REJECTED = "ND411"
    STORE_UNAUTHENTICATED = "ND412"
    OPEN_FILES_LIMIT = "ND413"
    # --- ND5xx (plan) ---
    PLAN_RECOMMENDATION = "ND500"
    FABRIC_TOO_SLOW_FOR_A_MESH = "ND501"
    NOTHING_FITS = "ND502"
    COMM_EXCEEDS_COMPUTE = "ND503"
    CPU_FIGURES = "ND504"


CODES: dict[str, Code] = {c.value: c for c in Code}
TABLE_PATH = "docs/codes.md"  # relative to the repository root, where ``python -m nccl_doctor.codes`` runs
TABLE_BEGIN, TABLE_END = "<!-- CODES -->", "<!-- /CODES -->"


def missing_texts() -> list[str]:
    """Members without a text and texts without a member: both are mistakes ``test_codes`` reports."""
    return sorted(set(CODES) ^ set(_TEXTS))


def markdown_table() -> str:
    """The table of codes in ``docs/codes.md``, generated so the two cannot drift."""
    lines = ["| code | name | meaning |", "|---|---|---|"]
    lines += [f"| `{c.value}` | `{c.slug}` | {c.summary} |" for c in Code]
    return "\n".join(lines)


def update_table(path: str = TABLE_PATH) -> None:
    """Rewrite the table between the page's ``<!-- CODES -->`` markers; the rest of the page is kept."""
    page = Path(path)
    block = f"{TABLE_BEGIN}\n{markdown_table()}\n{TABLE_END}"
    pattern = re.escape(TABLE_BEGIN) + r".*?(" + re.escape(TABLE_END) + r"|\Z)"
    text = re.sub(pattern, lambda _: block, page.read_text(), count=1, flags=re.S)
    page.write_text(text)
