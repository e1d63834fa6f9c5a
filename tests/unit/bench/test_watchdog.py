"""Our per-rank watchdog (issue 21, points 1 and 6), its pure half: a stage that outlives the timeout on a fake
clock, the thread that hands it on once, PyTorch's own timeout set later than ours, and who holds a stage up
from every rank's marks in the store."""

from __future__ import annotations

import threading

import pytest

from nccl_doctor.bench import watchdog
from nccl_doctor.bench.watchdog import Laggards, Overdue, Reached, StageWatch, laggards, torch_timeout_s


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_stage_is_overdue_only_once_it_outlived_the_timeout():
    clock = FakeClock()
    w = StageWatch(15.0, clock)
    assert w.overdue() is None  # nothing entered yet
    w.arm("node-pairs round 1: a<->b")
    clock.now += 15.0
    assert w.overdue() is None  # exactly the timeout: not yet
    clock.now += 0.5
    assert w.overdue() == Overdue("node-pairs round 1: a<->b", 1000.0, 15.5)


def test_entering_the_next_stage_restarts_the_clock_and_leaving_stops_it():
    clock = FakeClock()
    w = StageWatch(10.0, clock)
    w.arm("all_gather world 1 MiB")
    clock.now += 9.0
    w.arm("all_gather world 4 MiB")  # the run moved on: its 9 s do not count against the next stage
    clock.now += 9.0
    assert w.overdue() is None
    w.disarm()  # between stages only our own code runs
    clock.now += 3600.0
    assert w.overdue() is None and not w.armed


def test_a_timeout_that_cannot_bound_anything_is_refused():
    with pytest.raises(ValueError, match="must be positive"):
        StageWatch(0.0)


def test_the_thread_hands_an_overdue_stage_on_once_then_ends():
    w = StageWatch(0.05)
    seen: list[Overdue] = []
    done = threading.Event()

    def on_overdue(late: Overdue) -> None:
        seen.append(late)
        done.set()

    w.arm("groups")
    stop = watchdog.start(w, on_overdue, poll_s=0.01)
    assert done.wait(5.0)
    stop.set()
    assert [s.stage for s in seen] == ["groups"] and seen[0].waited_s > 0.05


def test_a_stopped_thread_hands_nothing_on():
    w = StageWatch(0.01)
    seen: list[Overdue] = []
    stop = threading.Event()
    stop.set()
    watchdog.watch(w, seen.append, stop, poll_s=0.01)  # returns at once
    assert seen == []


def test_pytorchs_own_timeout_is_later_than_ours_so_ours_fires_first():
    assert torch_timeout_s(5.0) == 20.0  # at least 15 s later: the store reads and the abort come first
    assert torch_timeout_s(120.0) == 150.0  # a quarter later for long timeouts
    assert all(torch_timeout_s(t) > t for t in (0.5, 15.0, 600.0))


E, W, L, A = Reached.ENTERED, Reached.WARM, Reached.LEFT, Reached.ABSENT


def test_ranks_that_never_reached_the_stage_are_missing():
    assert laggards({0: E, 1: A, 2: E, 3: A}, me=0) == Laggards(missing=(1, 3), never_left=(2,))


def test_a_rank_that_stopped_before_the_collective_the_others_wait_in_is_the_one_named():
    """STALL_INSIDE: rank 1 entered and warmed up with the others but never reached the timed loop, where
    ranks 0, 2 and 3 wait for it: it alone is behind, whichever rank looks."""
    marks = {0: W, 1: E, 2: W, 3: W}
    assert laggards(marks, me=0) == Laggards(missing=(), never_left=(1,))
    assert laggards(marks, me=1) == Laggards(missing=(), never_left=(1,))  # its own watchdog blames itself


def test_a_peer_dead_inside_a_collective_everyone_reached_names_the_others_still_inside():
    """All entered and nobody is behind: every other rank that never left is named, not "none recorded"."""
    assert laggards({0: E, 1: E, 2: L, 3: E}, me=0) == Laggards(missing=(), never_left=(1, 3))


def test_nobody_is_named_when_every_other_rank_left():
    assert laggards({0: E, 1: L, 2: L}, me=0) == Laggards(missing=(), never_left=())
