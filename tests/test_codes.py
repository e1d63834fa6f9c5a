"""Finding codes are stable, unique, documented, and every code used in the package is in the table."""

import re
from pathlib import Path

from nccl_doctor.codes import CODES, markdown_table

PKG = Path(__file__).resolve().parent.parent / "nccl_doctor"
README = PKG.parent / "README.md"


def test_codes_well_formed():
    for code, entry in CODES.items():
        assert re.fullmatch(r"ND\d{3}", code), code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", entry.name), entry.name
        assert entry.summary.endswith("."), code
    names = [c.name for c in CODES.values()]
    assert len(names) == len(set(names)), "two codes share a name"


def test_every_code_used_in_source_is_defined():
    used = set()
    for path in PKG.glob("*.py"):
        if path.name != "codes.py":
            used |= set(re.findall(r"[\"'](ND\d{3})[\"']", path.read_text()))
    assert used <= set(CODES), f"undefined codes: {sorted(used - set(CODES))}"


def test_readme_table_matches_codes():
    assert markdown_table() in README.read_text(), "README code table is stale: run python -m nccl_doctor.codes"
