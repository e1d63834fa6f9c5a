"""``--params`` in the words people write: 7e9, 7B, 70B, 1.3T, 350M; anything else one line, exit 2."""

import pytest

from nccl_doctor.errors import InputError
from nccl_doctor.plan.inputs import parse_params


@pytest.mark.parametrize(("text", "value"), [
    ("7e9", 7e9), ("7B", 7e9), ("70B", 70e9), ("70b", 70e9), ("1.3T", 1.3e12), ("350M", 350e6), ("7G", 7e9),
    ("125000000", 125e6), ("1.5e3K", 1.5e6), (" 8B ", 8e9),
])
def test_params_parse(text, value):
    assert parse_params(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["seven", "7X", "-7B", "0", "0.5", "nan", "inf", "1e400", "7 B B", "", "B",
                                  "1e16"])
def test_bad_params_are_refused(text):
    with pytest.raises(InputError, match="--params"):
        parse_params(text)
