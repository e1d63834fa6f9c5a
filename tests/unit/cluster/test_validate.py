"""Deadlines and ports are checked before anything starts."""

import pytest

from nccl_doctor.cluster import validate
from nccl_doctor.errors import InputError


def test_deadline_options_must_be_finite_and_sane():
    assert validate.check_seconds(0.5, "--timeout") == 0.5 and validate.check_seconds(validate.MAX_SECONDS, "--timeout") == validate.MAX_SECONDS
    for bad in (0.0, -1.0, float("inf"), float("nan"), validate.MAX_SECONDS + 1.0):
        with pytest.raises(InputError, match=r"^--timeout .*: expected a finite number of seconds"):
            validate.check_seconds(bad, "--timeout")
