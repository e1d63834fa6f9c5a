"""Transitional (issue 20): the node's own name in the free text of an NCCL log finding (ND1xx), for node 0
to merge the same log problem on many nodes. The log findings name hosts in English until ``nccl_doctor/logs``
makes them from templates (``report.templated``); then every finding merges by its parameters
(``groups.py``) and this module goes. No other finding's text is ever edited."""

from __future__ import annotations

import re
from collections.abc import Sequence

LOG_CODES = "ND1"  # the prefix of the codes whose free text this still reads: the parser's
HOST_MARK = "\x00"  # stands for the node's own name in a grouping key (printable text never holds it)
_EDGE_BEFORE = r"(?<![A-Za-z0-9_.-])"  # a host name stands alone: gpu1 is not inside gpu10 or x.gpu1
_EDGE_AFTER = r"(?![A-Za-z0-9_-])"  # but gpu1.cluster (its FQDN) and gpu1/mlx5_0 still name gpu1


def without_host(text: str | None, names: Sequence[str]) -> str | None:
    """``text`` with every mention of the node's own ``names`` replaced by ``HOST_MARK``."""
    if not text or not names:
        return text
    pattern = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.sub(f"{_EDGE_BEFORE}(?:{pattern}){_EDGE_AFTER}", HOST_MARK, text)
