"""``assert_never`` on every supported Python (``typing`` has it from 3.11; ``typing_extensions`` is no
dependency of ours): the fallthrough of an exhaustive match, which mypy proves unreachable."""

from __future__ import annotations

from typing import NoReturn


def assert_never(value: NoReturn) -> NoReturn:
    """Reached only when a member was added without its case: mypy flags the call, a test finds the member."""
    raise AssertionError(f"unhandled value: {value!r}")
