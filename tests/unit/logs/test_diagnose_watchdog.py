"""Watchdog timeouts at different SeqNums of one process group: the ranks at the oldest are behind (ND118)."""

from __future__ import annotations

from pathlib import Path

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines, parse_paths

ROOT = Path(__file__).resolve().parents[3]


def _codes(report) -> list[str]:
    return [f.code for f in report.findings]


def test_the_rank_at_the_older_seqnum_is_named_behind():
    report = diagnose(parse_paths([str(ROOT / "fixtures" / "logs" / "watchdog-rank-behind.log")]))
    f = next(f for f in report.findings if f.code == "ND118")
    assert f.severity.value == "fail" and f.where.rank == 3 and f.where.line == 3
    assert f.message.startswith("rank 3 is behind: its watchdog fired at SeqNum 4810 (_ALLGATHER_BASE)")
    assert "ranks 0-2 had reached SeqNum 4811 (ALLREDUCE)" in f.message
    assert "look at rank 3 first" in f.fix and "SeqNum=4810" in f.evidence[0]
    assert _codes(report).count("ND114") == 2  # each timed-out collective is still reported


def _line(pg: str, rank: int, seq: int, op: str) -> str:
    return (f"[rank{rank}]:[E1130 10:02:11.1 ProcessGroupNCCL.cpp:632] [{pg}Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            f"ran for 600033 milliseconds before timing out.")


def test_seqnums_of_different_process_groups_are_not_compared():
    report = diagnose(parse_lines([_line("PG 0 ", 0, 4811, "ALLREDUCE"), _line("PG 1 ", 1, 12, "ALLGATHER")]))
    assert "ND118" not in _codes(report) and _codes(report).count("ND114") == 2


def test_without_pg_tags_older_torch_lines_compare_and_one_seqnum_names_no_one():
    old = diagnose(parse_lines([_line("", 0, 9, "BROADCAST"), _line("", 1, 9, "BROADCAST"),
                                _line("", 2, 8, "ALLREDUCE"), _line("", 3, 8, "ALLREDUCE")]))
    f = next(f for f in old.findings if f.code == "ND118")
    assert f.message.startswith("ranks 2-3 are behind: their watchdog fired at SeqNum 8 (ALLREDUCE)")
    assert f.severity.value == "warn" and "assuming one process group" in f.message  # sub-groups may be mixed in
    same = diagnose(parse_paths([str(ROOT / "fixtures" / "nccl-logs" / "063-watchdog-reduce-scatter-timeout.log")]))
    assert "ND118" not in _codes(same)
