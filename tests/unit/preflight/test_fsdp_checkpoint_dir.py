"""The FSDP smoke's checkpoint directory (issue 21 point 14): per job, and when a node cannot see it the
problem names the directory that must be shared, how it was chosen, the ranks that do not see it, and the fix
(it used to say only "DCP needs a shared file system", about a temp directory under the current one)."""

from nccl_doctor.preflight.fsdp_smoke import DCP_PREFIX, RUN_ID_ENV, job_prefix, not_shared_problem
from nccl_doctor.preflight.protocol import RUN_ENV


def test_the_directory_is_named_for_the_job():
    assert RUN_ID_ENV == RUN_ENV  # the run id preflight's launcher gives its ranks
    assert job_prefix("slurm-4242") == ".nccl-doctor-dcp-slurm-4242-"
    assert job_prefix("a/../b c") == ".nccl-doctor-dcp-a-..-b-c-"  # never a path separator
    assert job_prefix(None) == job_prefix("") == DCP_PREFIX
    assert len(job_prefix("x" * 500)) == len(DCP_PREFIX) + 41


def test_not_shared_names_the_directory_that_must_be_shared():
    msg = not_shared_problem("/workspace/.nccl-doctor-dcp-slurm-4242-k2j1", "/workspace", [8, 9, 10])
    assert "/workspace/.nccl-doctor-dcp-slurm-4242-k2j1 is not visible on every node (not to rank(s) 8, 9, 10)" in msg
    assert "made under /workspace (--fsdp-smoke-dir, or by default the current directory" in msg
    assert "which must be shared: pass --fsdp-smoke-dir DIR on a shared file system" in msg


def test_many_blind_ranks_are_counted_not_listed():
    msg = not_shared_problem("/w/d", "/w", list(range(8, 1032)))
    assert "rank(s) 8, 9, 10, 11, 12, 13, 14, 15 and 1016 more" in msg
