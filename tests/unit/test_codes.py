"""Finding codes are stable, unique, documented, and every code used in the package is in the table."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_doctor.codes import (
    CODES,
    TABLE_BEGIN,
    TABLE_END,
    TABLE_PATH,
    Code,
    markdown_table,
    missing_texts,
    update_table,
)

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "nccl_doctor"
TABLE_PAGE = ROOT / TABLE_PATH

# The whole set, pinned: a code is never renamed, renumbered, reused or dropped (dashboards and runbooks key
# on them). Adding one means adding it here, to the members in codes/__init__.py, its text to
# its range's module (codes/parse.py for ND1xx, ...) and, by `python -m nccl_doctor.codes`,
# to docs/codes.md.
PINNED = {
    "ND001": "check-skipped", "ND002": "slurm-drain",
    "ND101": "inter-node-transport-ok", "ND102": "socket-fallback", "ND103": "socket-transport",
    "ND104": "gdr-not-used", "ND105": "intra-node-degraded", "ND106": "transport-not-visible",
    "ND107": "nccl-version-mismatch", "ND108": "nccl-warning", "ND109": "ib-completion-error",
    "ND110": "connect-failed", "ND111": "rdma-verbs-error", "ND112": "cuda-error",
    "ND113": "no-socket-interface", "ND114": "watchdog-timeout", "ND115": "nccl-error",
    "ND116": "ofi-provider-not-efa", "ND117": "log-input-damaged", "ND118": "ranks-behind",
    "ND119": "log-limits-reached",
    "ND200": "probe-summary", "ND201": "nccl-on-management", "ND202": "socket-ifname-matches-nothing",
    "ND203": "socket-ifname-down", "ND204": "socket-ifname-ignored", "ND205": "ifname-prefix-overmatch",
    "ND206": "nccl-on-virtual", "ND207": "rdma-disabled-by-env", "ND208": "ib-hca-selects-nothing",
    "ND209": "rdma-port-not-active", "ND210": "rdma-port-slow", "ND211": "roce-gid-unusable",
    "ND212": "bond-slave-down", "ND213": "gpu-nic-numa-mismatch", "ND214": "gdr-prerequisites-missing",
    "ND215": "gloo-binds-loopback", "ND216": "gloo-ifname-invalid", "ND217": "env-not-integer",
    "ND218": "env-value-ignored", "ND219": "env-unknown-name", "ND220": "nccl-conf-file",
    "ND221": "p2p-or-shm-disabled", "ND222": "nccl-net-unavailable", "ND223": "named-like-ib",
    "ND224": "nccl-finds-no-interface", "ND225": "efa-needs-plugin", "ND226": "no-rdma",
    "ND227": "file-skipped",
    "ND300": "bandwidth-ok", "ND301": "wrong-results", "ND302": "slow-node-bandwidth",
    "ND303": "slow-link-unpinned", "ND305": "above-link-rate", "ND306": "sizes-too-small",
    "ND307": "too-few-iterations", "ND308": "world-size-mismatch", "ND309": "deadline-expired",
    "ND310": "collective-failed", "ND311": "launch-failed", "ND312": "below-expected",
    "ND313": "cuda-unusable", "ND314": "cpu-starved",
    "ND315": "gpu-pair-slow",
    "ND401": "version-mismatch", "ND402": "setting-mismatch", "ND403": "nic-mismatch",
    "ND404": "net-plugin-mismatch", "ND405": "node-missing", "ND406": "stage-failed", "ND407": "node-lost",
    "ND408": "rank-count-mismatch", "ND410": "fsdp-smoke", "ND411": "store-value-rejected",
    "ND412": "store-unauthenticated", "ND413": "open-files-limit",
    "ND500": "plan-recommendation", "ND501": "fabric-too-slow-for-a-mesh", "ND502": "nothing-fits",
    "ND503": "comm-exceeds-compute", "ND504": "cpu-figures",
}


def test_the_set_of_codes_is_pinned():
    assert {c.value: c.slug for c in Code} == PINNED
    assert {c.value: c for c in Code} == CODES


def test_every_member_has_a_text_and_every_text_a_member():
    assert missing_texts() == []


def test_codes_well_formed():
    for code, entry in CODES.items():
        assert re.fullmatch(r"ND\d{3}", code), code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", entry.slug), entry.slug
        assert entry.summary.endswith("."), code
    slugs = [c.slug for c in CODES.values()]
    assert len(slugs) == len(set(slugs)), "two codes share a slug"


def test_values_are_unique_and_numbered_by_range():
    """A StrEnum with a repeated value would make the second member an alias of the first: the table
    would silently lose a code. Ranges: ND0xx general, ND1xx parse, ND2xx probe, ND3xx bench, ND4xx preflight."""
    values = [member.value for member in Code.__members__.values()]
    assert len(values) == len(set(values)) == len(Code), "two members share a code"
    for member in Code:
        assert re.fullmatch(r"ND\d{3}", member.value), member
        assert member == member.value and f"{member}" == member.value  # JSON and f-strings show the code
    assert [c.value for c in Code] == sorted(c.value for c in Code), "members are listed in code order"


@pytest.mark.parametrize("member", list(Code), ids=lambda c: f"{c.value}-{c.slug}")
def test_every_code_explains_itself_and_its_fix(member):
    """What the code table (docs/codes.md) and any `explain` show: a summary, why it matters, and the usual fix."""
    for kind in ("slug", "summary", "explanation", "fix"):
        text = getattr(member, kind)
        assert isinstance(text, str) and text.strip() == text and text, f"{member.value}: empty {kind}"
    assert member.explanation.endswith("."), member.value
    assert member.fix.endswith("."), member.value
    assert member.explanation not in (member.summary, member.fix)


def test_every_code_used_in_source_is_defined():
    literals, members = set(), set()
    for path in PKG.rglob("*.py"):
        if path.parent.name != "codes":
            text = path.read_text()
            literals |= set(re.findall(r"[\"'](ND\d{3})[\"']", text))
            members |= set(re.findall(r"\bCode\.([A-Z][A-Z0-9_]*)\b", text))
    assert literals <= set(CODES), f"undefined codes: {sorted(literals - set(CODES))}"
    assert members <= set(Code.__members__), f"undefined members: {sorted(members - set(Code.__members__))}"


def test_docs_table_matches_codes():
    assert markdown_table() in TABLE_PAGE.read_text(), \
        f"{TABLE_PATH}'s code table is stale: run python -m nccl_doctor.codes"


def test_update_table_rewrites_only_the_table(tmp_path):
    page = tmp_path / "codes.md"
    page.write_text(f"# title\n\n{TABLE_BEGIN}\n| stale |\n{TABLE_END}\n\nafter\n")
    update_table(str(page))
    assert page.read_text() == f"# title\n\n{TABLE_BEGIN}\n{markdown_table()}\n{TABLE_END}\n\nafter\n"


def test_the_module_regenerates_the_docs_page(tmp_path):
    """`python -m nccl_doctor.codes`, run where the guide says (the repository root), rewrites docs/codes.md."""
    (tmp_path / "docs").mkdir()
    page = tmp_path / TABLE_PATH
    page.write_text(f"intro\n{TABLE_BEGIN}\n| stale |\n{TABLE_END}\n")
    subprocess.run([sys.executable, "-m", "nccl_doctor.codes"], cwd=tmp_path, check=True, timeout=60)
    assert page.read_text() == f"intro\n{TABLE_BEGIN}\n{markdown_table()}\n{TABLE_END}\n"
