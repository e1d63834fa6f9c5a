"""The table of fatal error categories (``logs/errorrules.py``) pinned: every row's code is a real finding code,
every error category has exactly one row, every fix class can be reached, and each fix class that a fixture shows
today keeps its fixture (a new row comes with one, or says here why not)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_doctor.codes import Code
from nccl_doctor.logs import diagnose, parse_paths
from nccl_doctor.logs.diagnosis.errorfindings import _fix_text
from nccl_doctor.logs.errorrules import DEFAULT_FIX, ERROR_RULES, RULE_OF, WARN_PATTERNS, ErrorRule, FixBy
from nccl_doctor.logs.parse.model import Category, Group

ROOT = Path(__file__).resolve().parents[3]
NOT_ERRORS = {Category.WARN, Category.WATCHDOG}  # the categories of groups that are no fatal error

# (category, fix class) -> a fixture whose parse shows it, checked below
FIXTURES: dict[tuple[Category, str], str] = {
    (Category.CONNECT, DEFAULT_FIX): "fixtures/logs/connect-retries-exhausted-no-route-to-host.log",
    (Category.CUDA, DEFAULT_FIX): "fixtures/nccl-logs/062-cuda-oom-in-p2p-setup-socket-closed.log",
    (Category.CUDA, "illegal"): "fixtures/logs/pytorch-watchdog-cuda-illegal-memory-access.log",
    (Category.CUDA, "oom"): "fixtures/nccl-logs/062-cuda-oom-in-p2p-setup-socket-closed.log",
    (Category.CUDA, "invalid"): "fixtures/logs/nccl-tests-cuda-invalid-argument-no-info-lines.log",
    (Category.IB_COMPLETION, "12"): "fixtures/nccl-logs/057-ibext-completion-status-12-vendor-129.log",
    (Category.IB_COMPLETION, "4"): "fixtures/nccl-logs/058-ib-completion-error-4-service-thread-closed.log",
    (Category.NCCL_ERROR, DEFAULT_FIX): "fixtures/logs/catalog-fatal-warn-local-ranks-init-fails.log",
    (Category.NCCL_ERROR, "ifname"): "fixtures/nccl-logs/061-socket-ifname-missing-interface-internal-error.log",
    (Category.VERBS, DEFAULT_FIX): "fixtures/logs/ib-async-fatal-qp-event-no-channel-lines.log",
    (Category.VERBS, "gid"): "fixtures/nccl-logs/059-dgx-h100-ibv-modify-qp-network-unreachable.log",
    (Category.VERBS, "memlock"): "fixtures/nccl-logs/045-roce-1gpu-nodes-ibv-create-cq-failed.log",
}
# fix classes no fixture shows yet (the unit tests render their lines instead): a new row's class is in one of the two
NO_FIXTURE_YET = {
    (Category.IB_COMPLETION, "13"), (Category.IB_COMPLETION, "5"), (Category.IB_COMPLETION, DEFAULT_FIX),
    (Category.VERBS, "mixed"), (Category.NO_INTERFACE, DEFAULT_FIX), (Category.VERSION_MISMATCH, DEFAULT_FIX),
}


def _classes(rule: ErrorRule) -> set[tuple[Category, str]]:
    return {(rule.category, f.cls) for f in rule.fixes}


def test_every_error_category_has_exactly_one_row():
    categories = [r.category for r in ERROR_RULES]
    assert len(categories) == len(set(categories))
    assert set(categories) == set(Category) - NOT_ERRORS
    assert set(RULE_OF) == set(categories)
    assert [c for c, _ in WARN_PATTERNS] == categories  # the parser tries the rows in the table's order


@pytest.mark.parametrize("rule", ERROR_RULES, ids=lambda r: r.category)
def test_every_row_names_a_real_code_and_ends_with_its_default_fix(rule: ErrorRule):
    assert isinstance(rule.code, Code) and rule.code in set(Code)
    assert rule.fixes[-1].cls == DEFAULT_FIX and not rule.fixes[-1].words
    assert len({f.cls for f in rule.fixes}) == len(rule.fixes)
    assert all(f.text for f in rule.fixes)


@pytest.mark.parametrize("rule", ERROR_RULES, ids=lambda r: r.category)
def test_every_fix_class_is_reachable(rule: ErrorRule):
    """A group whose kind is one of a fix's words (or, by status, whose status is its class) gets that fix: no
    fix hides behind an earlier one."""
    for fix in rule.fixes:
        if rule.by == FixBy.STATUS:
            g = Group(rule.category, "Got completion", detail={"status": fix.cls} if fix.cls else {})
            assert rule.fix_class(g) == fix.cls
        elif fix.words:
            assert any(rule.fix_class(Group(rule.category, word)) == fix.cls for word in fix.words), fix.cls
        else:
            assert rule.fix_class(Group(rule.category, "nothing that selects a fix")) == fix.cls
        assert rule.fix(fix.cls) is fix


def test_every_fix_class_has_a_fixture_or_says_why_not():
    table = set().union(*(_classes(r) for r in ERROR_RULES))
    assert table == set(FIXTURES) | NO_FIXTURE_YET
    assert not set(FIXTURES) & NO_FIXTURE_YET


@pytest.mark.parametrize(("key", "path"), sorted(FIXTURES.items()), ids=str)
def test_each_fixture_shows_its_fix_class_and_code(key: tuple[Category, str], path: str):
    category, cls = key
    result = parse_paths([ROOT / path])
    rule = RULE_OF[category]
    assert any(g.category == category and rule.fix_class(g) == cls for g in result.errors.values())
    report = diagnose(result)
    fix = _fix_text(rule, cls, result)  # the row's own, or the one naming the interfaces the log shows
    assert fix and any(f.code == rule.code and f.fix == fix for f in report.findings)
