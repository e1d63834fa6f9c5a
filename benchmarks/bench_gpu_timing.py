"""The first GPU run's timing figures as the rows of ``docs/benchmarks.md``'s GPU table, read from its fixtures.

``fixtures/gpu/h200-2026-12-04/timing-blocking-wait-{0,1}.out`` hold what ``timing.py`` there printed on one
H200 (NCCL 2.28.9, torch 2.11, 1 rank): for each op and size, ``bench.worker.measure``'s time per call as the
code was then (``time_loop_us``: the end event recorded after the host's blocking ``Work.wait()``) and a
stream-ordered reference (``reference_us``: ``Work.synchronize()``, then the end event, then the wait), with
``TORCH_NCCL_BLOCKING_WAIT`` 0 and 1. One Markdown row per op and size, the two runs side by side; nothing
is measured here.

    .venv/bin/python benchmarks/bench_gpu_timing.py [FIXTURE_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nccl_doctor.bench.busbw import GB, Op, format_size  # noqa: E402

FIXTURE = ROOT / "fixtures" / "gpu" / "h200-2026-12-04"
COPIES = (Op.ALL_GATHER, Op.REDUCE_SCATTER)  # on one rank a copy of the buffer; all-reduce in place: nothing


def rows(fixture: Path) -> list[str]:
    """``| op | size | iters | wait 0: loop / reference us | wait 1: loop / reference us (loop over ref) | GB/s |``;
    GB/s: the size over the stream-ordered reference (wait 1), for the ops that copy the buffer."""
    runs = {w: json.loads((fixture / f"timing-blocking-wait-{w}.out").read_text())["rows"] for w in (0, 1)}
    out = []
    for r0, r1 in zip(runs[0], runs[1], strict=True):
        size = r0["size"]
        copy = f"{size / (r1['reference_us'] / 1e6) / GB:.0f}" if r0["op"] in COPIES else "-"
        out.append(f"| {r0['op']} | {format_size(size)} | {r0['iters']} | {r0['time_loop_us']:.1f} / "
                   f"{r0['reference_us']:.1f} | {r1['time_loop_us']:.1f} / {r1['reference_us']:.1f} "
                   f"({r1['time_loop_us'] / r1['reference_us'] - 1:+.0%}) | {copy} |")
    return out


def main(argv: list[str]) -> int:
    fixture = Path(argv[0]) if argv else FIXTURE
    print("| op | size | iters | wait 0: time_loop / reference (us) | wait 1: time_loop / reference (us) "
          "| copy, wait 1 (GB/s) |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows(fixture)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
