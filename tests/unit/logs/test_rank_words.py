"""Rank sets in sentences read as words ("look at ranks 1-2 and 5-6 first"); the JSON keeps its compact
"1-2,5-6" form (issue 12, point 8)."""

from __future__ import annotations

import pytest

from nccl_doctor.logs.diagnosis.where import ranges, ranks_text


@pytest.mark.parametrize(("ranks", "text"), [
    ([3], "rank 3"),
    ([0, 1, 2], "ranks 0-2"),
    ([1, 3], "ranks 1 and 3"),
    ([1, 2, 5, 6], "ranks 1-2 and 5-6"),
    ([9, 1, 2, 5, 6], "ranks 1-2, 5-6 and 9"),
])
def test_rank_sets_read_as_words(ranks, text):
    assert ranks_text(ranks) == text


def test_the_json_form_stays_compact():
    assert ranges([1, 2, 5, 6, 9]) == "1-2,5-6,9"
