"""``reader.read_blocks``: every physical line comes back once, in order, cut at ``MAX_LINE`` bytes,
wherever the line ends fall relative to the reader's blocks."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nccl_doctor.logs.parse import reader
from nccl_doctor.logs.parse.reader import MAX_LINE, ReadStats, Source, read_lines

# line lengths around the cut and around the reader's window of MAX_LINE // 2 bytes
LENGTHS = [0, 1, 80, 200, MAX_LINE // 2 - 1, MAX_LINE // 2, MAX_LINE - 1, MAX_LINE, MAX_LINE + 1, 3 * MAX_LINE + 5]


def _expected(lines: list[bytes]) -> tuple[list[str], int]:
    """What the reader must give: each line's first MAX_LINE bytes, and how many were cut."""
    return [x[:MAX_LINE].decode() for x in lines], sum(len(x) >= MAX_LINE for x in lines)


def _read(tmp_path: Path, lines: list[bytes], trailing_newline: bool) -> tuple[list[str], ReadStats]:
    path = tmp_path / "job.log"
    path.write_bytes(b"\n".join(lines) + (b"\n" if trailing_newline else b""))
    stats = ReadStats()
    return list(read_lines(Source(str(path), path), stats)), stats


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.sampled_from(LENGTHS), min_size=1, max_size=40), chunk=st.sampled_from([4096, 65536]),
       trailing_newline=st.booleans())
def test_every_line_once_in_order_cut_at_max_line(tmp_path_factory, lengths, chunk, trailing_newline):
    lines = [(f"{i}:" * n).encode()[:n] for i, n in enumerate(lengths)]
    if not trailing_newline and lines[-1] == b"":
        lines.append(b"x")  # a file cannot end in an empty line without its newline
    with patch.object(reader, "CHUNK", chunk):  # small blocks: line ends land everywhere in them
        got, stats = _read(tmp_path_factory.mktemp("r"), lines, trailing_newline)
    want, cut = _expected(lines)
    assert got == want
    assert (stats.lines, stats.cut_lines) == (len(want), cut)


@pytest.mark.parametrize("n", [MAX_LINE - 1, MAX_LINE, MAX_LINE + 1])
def test_one_long_line_among_short_ones_in_a_big_block(tmp_path, n):
    lines = [b"a" * 100] * 3000 + [b"L" * n] + [b"b" * 100] * 3000  # one block of the default size holds it
    got, stats = _read(tmp_path, lines, True)
    assert got == _expected(lines)[0]
    assert stats.cut_lines == (n >= MAX_LINE)

