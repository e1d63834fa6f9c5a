"""A job that died of a CUDA error is a FAIL with that error's own fix, even when the log holds no INFO
line and not even NCCL's prefix. The lines are written from their programs' format strings: NCCL's
``Cuda failure '%s'`` (src/include/checks.h CUDACHECK, WARN), nccl-tests' ``%s: Test CUDA failure %s:%d '%s'``
(src/common.h CUDACHECK, printf; ``Cuda failure %s:%d '%s'`` in old releases) and c10's ``CUDA error: %s`` (c10/cuda/CUDAException.cpp) at the end of a
Python traceback; the error strings are cudaGetErrorString's."""

from __future__ import annotations

import pytest

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines

ERRORS = {  # cudaGetErrorString -> words of the fix that must be given
    "an illegal memory access was encountered": "CUDA_LAUNCH_BLOCKING=1",
    "out of memory": "ran out of memory",
    "invalid argument": "torch.cuda.set_device(LOCAL_RANK)",
}
TRACEBACK = ["Traceback (most recent call last):", '  File "/workspace/train.py", line 88, in <module>',
             "    loss.backward()"]


def _forms(error: str) -> dict[str, list[str]]:
    return {
        "nccl-warn": [f"gpu1:2101:2101 [0] NCCL WARN Cuda failure '{error}'"],
        "nccl-tests": [f"gpu1: Test CUDA failure common.cu:892 '{error}'"],
        "old-nccl-tests": [f"Cuda failure common.cu:892 '{error}'"],
        "torch-traceback": [*TRACEBACK, f"RuntimeError: CUDA error: {error}",
                            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"],
        "nccl-warn-and-traceback": [f"gpu1:2101:2101 [0] NCCL WARN Cuda failure '{error}'", *TRACEBACK,
                                    f"RuntimeError: CUDA error: {error}"],
    }


@pytest.mark.parametrize("form", ["nccl-warn", "nccl-tests", "old-nccl-tests", "torch-traceback",
                                  "nccl-warn-and-traceback"])
@pytest.mark.parametrize("error", sorted(ERRORS))
def test_a_cuda_failure_alone_fails_with_its_own_fix(form: str, error: str) -> None:
    result = parse_lines(_forms(error)[form], name="job.log")
    assert result.nccl_lines > 0  # never "no NCCL log lines": the CUDA error is what the log is about
    report = diagnose(result)
    assert report.verdict.value == "fail", report.summary
    [f] = [f for f in report.findings if f.code == "ND112"]
    assert f.severity.value == "fail" and ERRORS[error] in (f.fix or ""), f.fix
    assert error in f.message


def test_a_line_that_only_mentions_cuda_is_no_failure() -> None:
    """Words alone are not an error: a training script printing its device is not a crash."""
    result = parse_lines(["using CUDA device 0", "Cuda failure handling enabled"], name="job.log")
    assert result.nccl_lines == 0
