"""Fixture roots for the node unit tests, built once per module from ``sysfs_builder``'s specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import sysfs_builder as b


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every spec in ``sysfs_builder.SPECS``, by name."""
    return {name: b.build(spec(), tmp_path_factory.mktemp(name)) for name, spec in b.SPECS.items()}


@pytest.fixture(scope="module")
def p5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return b.build(b.p5_node(), tmp_path_factory.mktemp("p5"))
