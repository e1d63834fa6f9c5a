"""A stage a rank's watchdog ended (issue 21, points 1 and 6): the rank records the stage and who held it up in
its stage file and exits; bench's launcher reads it back and reports ND310 naming the stage, the ranks that
never reached it and those that entered it and never left, with their hosts."""

from __future__ import annotations

import json

from nccl_doctor.bench.view import overdue_report
from nccl_doctor.cluster import torchrun
from nccl_doctor.cluster.stages import STAGE_DIR_ENV, StageFile, StageOverdue, read_stages

CFG = torchrun.LaunchConfig(nproc_per_node=2, rdzv_endpoint="127.0.0.1:29500", rdzv_id="x", deadline_s=600)
STAGE = "node-pairs round 1: a<->b"
MISSING = StageOverdue(waited_s=15.2, timeout_s=15.0, missing=(1,), missing_hosts=("b",))
INSIDE = StageOverdue(waited_s=15.2, timeout_s=15.0, never_left=(3,), never_left_hosts=("b",))


def outcome(tmp_path, returncode=1):
    return torchrun.LaunchOutcome(returncode=returncode, timed_out=False, elapsed_s=16.0,
                                  stages=tuple(read_stages(tmp_path)), host="a", cfg=CFG, log_path="/tmp/ncd.log")


def test_the_watchdogs_record_survives_the_stage_file(tmp_path):
    env = {STAGE_DIR_ENV: str(tmp_path)}
    StageFile(0, "a", env).record(STAGE, code=1, error="stage outlived", overdue=MISSING)
    (rec,) = read_stages(tmp_path)
    assert (rec.stage, rec.code, rec.overdue) == (STAGE, 1, MISSING)
    assert json.loads((tmp_path / "rank0.json").read_text())["overdue"]["missing_hosts"] == ["b"]


def test_a_malformed_overdue_record_is_skipped_like_any_unreadable_stage_file(tmp_path):
    (tmp_path / "rank0.json").write_text(json.dumps({"rank": 0, "host": "a", "stage": "init", "since": 1.0,
                                                     "overdue": {"missing": ["x"]}}))
    assert read_stages(tmp_path) == []


def test_the_launcher_reports_the_lowest_rank_whose_watchdog_fired(tmp_path):
    env = {STAGE_DIR_ENV: str(tmp_path)}
    StageFile(2, "a", env).record(STAGE, code=1, error="e2", overdue=INSIDE)
    StageFile(0, "a", env).record(STAGE, code=1, error="e0", overdue=MISSING)
    StageFile(1, "a", env).record("all_reduce world 1 MiB")  # killed by torchrun before its own watchdog fired
    got = outcome(tmp_path).overdue()
    assert got is not None and got.rank == 0


def test_no_overdue_report_when_a_rank_recorded_a_verdict_of_its_own(tmp_path):
    """Rank 0 reported a failure itself (its guard caught the error): the launcher does not report again."""
    env = {STAGE_DIR_ENV: str(tmp_path)}
    StageFile(0, "a", env).record("failed", code=1)
    StageFile(1, "a", env).record(STAGE, code=1, error="e1", overdue=MISSING)
    assert outcome(tmp_path).overdue() is None
    assert outcome(tmp_path).final_code() == 1


def test_the_report_names_the_stage_the_timeout_and_the_missing_rank(tmp_path):
    env = {STAGE_DIR_ENV: str(tmp_path)}
    StageFile(0, "a", env).record(STAGE, code=1, error="stage outlived --collective-timeout", overdue=MISSING)
    StageFile(1, "a", env).record("all_reduce world 1 MiB")
    out = outcome(tmp_path)
    report = overdue_report(out.overdue(), out, ["a note"])
    (f,) = report.findings
    assert f.code == "ND310" and f.severity == "fail"
    assert f.message == ("stage node-pairs round 1: a<->b outlived --collective-timeout (15 s) on rank 0 (a); ranks "
                         "that never reached it: rank 1 (b)")
    assert "rank 1 on a: all_reduce world 1 MiB" in f.evidence
    doc = report.payload.to_json()
    assert (doc["stage"], doc["missing_ranks"], doc["missing_hosts"]) == (STAGE, [1], ["b"])
    assert doc["worker_log"] == "/tmp/ncd.log" and "a note" in report.notes
    assert report.summary == f"stage {STAGE} outlived --collective-timeout (15 s)"


def test_the_report_names_a_rank_that_entered_and_never_left(tmp_path):
    StageFile(0, "a", {STAGE_DIR_ENV: str(tmp_path)}).record(STAGE, code=1, error="e", overdue=INSIDE)
    out = outcome(tmp_path)
    report = overdue_report(out.overdue(), out, [])
    assert report.findings[0].message.endswith("; every rank reached it; ranks that entered it and never left: "
                                               "rank 3 (b)")
    doc = report.payload.to_json()
    assert (doc["missing_ranks"], doc["never_left_ranks"], doc["never_left_hosts"]) == ([], [3], ["b"])
