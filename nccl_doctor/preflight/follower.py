"""A follower (every node but node 0): join node 0's store once it is sure the store is this run's, start
the ranks on node 0's go, send its NCCL log summary when asked, and leave with node 0's verdict."""

from __future__ import annotations

import time

from nccl_doctor.cluster.stages import Stage
from nccl_doctor.codes import Code
from nccl_doctor.preflight.auth import SECRET_ENV, RejectedValueError
from nccl_doctor.preflight.heartbeat import start_watchdog
from nccl_doctor.preflight.launcher import Launcher
from nccl_doctor.preflight.protocol import (
    ACKS_KEY,
    CLOSED_KEY,
    GO_KEY,
    LOGS_WANTED_KEY,
    RUN_KEY,
    VERDICT_KEY,
    Closed,
    NodePost,
    RunStamp,
    VerdictMessage,
    logs_key,
)
from nccl_doctor.preflight.store import Store, connect_store, first_line, parsed, port_fix, process_age
from nccl_doctor.preflight.verdict import NodeVerdict, rejected_value

IMPORTED_AT = time.monotonic()  # this process's own start-up begins about here (a late node was delayed before)
OWNER_WAIT_S = 5.0  # for node 0's run key to appear on a store that answered
OWNER_POLL_S = 0.05
FOLLOW_TICK_S = 0.2
# while our ranks run, node 0's verdict is polled this often, not every tick: 1,024 followers' polls were
# most of node 0's CPU while it watched (a verdict then reaches the ranks at most a second later)
RUNNING_POLL_S = 1.0
STAGE_RELAY_S = 0.5  # node 0 reads every node's stages each second
VERDICT_GRACE_S = 15.0  # past the deadline without node 0's verdict: the follower's own backstop
STORE_ERRORS = (RuntimeError, OSError)  # torch's store errors are RuntimeErrors


class Follower:
    """A follower's steps, on its launcher."""

    def __init__(self, launcher: Launcher):
        self.node, self.state, self.ranks = launcher, launcher.state, launcher.ranks
        self.plan = launcher.state.plan

    # --- joining ---------------------------------------------------------------------------------
    def join_store(self, mine: NodePost) -> NodeVerdict | None:
        """Connect to node 0's store, bounded (TCPStore's own connect blocks for as long as a silent
        listener keeps the connection open), and check it is this run's before writing anything."""
        head, port = self.plan.head_host, self.plan.port
        window = self.state.window()
        age = process_age()  # seconds since this node's launch; less our own start-up: how late it was started
        delay = None if age is None else age - (time.monotonic() - IMPORTED_AT)
        store, error, silent = connect_store(self.plan.head, port, window, self.state.seal)
        if silent:
            return self.node.alone(mine, Stage.RENDEZVOUS, f"port {port} on {head} (node 0) accepts connections "
                                   f"but is not an nccl-doctor store (no answer to the store handshake in "
                                   f"{silent:.0f} s): another program holds it", fix=port_fix(port, head),
                                   code=Code.STAGE_FAILED, host=head)
        if store is None:
            if delay is not None and delay > self.state.args.rendezvous_timeout:  # after node 0's whole window
                return self.late(mine, certain=False)
            why = first_line(error) if error else "nothing accepted connections on that port"
            return self.node.alone(mine, Stage.RENDEZVOUS, f"cannot reach the rendezvous store on "
                                   f"{self.plan.head}:{port} (node 0) within {window:.0f} s: {why}")
        self.state.store = store
        return self.check_owner(mine, store, min(OWNER_WAIT_S, window))

    def check_owner(self, mine: NodePost, store: Store, wait_s: float) -> NodeVerdict | None:
        """None when the store is this run's; else why not (and the store is dropped)."""
        head, port = self.plan.head_host, self.plan.port
        try:
            owner = owner_of(store, wait_s)
        except RejectedValueError as exc:
            self.state.store = None  # not provably ours: write nothing there
            return self.node.alone(mine, Stage.RENDEZVOUS, f"port {port} on {head} (node 0) holds a run stamp that "
                                   f"does not verify with this job's {SECRET_ENV} ({exc.why}): another run, a node "
                                   "with another secret, or a forger holds it", fix=port_fix(port, head),
                                   code=Code.STORE_VALUE_REJECTED, host=head)
        if owner is None:
            return self.node.alone(mine, Stage.RENDEZVOUS, f"port {port} on {head} (node 0) answers as a TCP "
                                   "store but not an nccl-doctor run's: another program holds it",
                                   fix=port_fix(port, head), code=Code.STAGE_FAILED, host=head)
        if owner.run != self.plan.run_id:
            step = owner.step or "?"
            self.state.store = None  # not ours: write nothing there, not even the verdict
            return self.node.alone(mine, Stage.RENDEZVOUS, f"port {port} on {head} (node 0) is held by another "
                                   f"nccl-doctor run (step {step}; this is step {self.plan.step or '?'}) or "
                                   "another program", fix=port_fix(port, head), code=Code.STAGE_FAILED, host=head)
        return None

    def late(self, mine: NodePost, *, certain: bool = True) -> NodeVerdict | None:
        """This node arrived after node 0 stopped waiting: say so (node 0 decided without it), never blame
        node 0. ``certain``: node 0's store says so; else the store is gone and this node started so long
        ago that node 0's --rendezvous-timeout had passed before it arrived."""
        if certain and not self.closed_without_us():
            return None
        head, host = self.plan.head_host, self.plan.host
        msg = (f"this node ({host}) arrived after node 0 stopped waiting (--rendezvous-timeout "
               f"{self.state.args.rendezvous_timeout:g} s); the run was already decided on {head}")
        out = self.node.alone(mine, Stage.RENDEZVOUS, msg, code=Code.NODE_MISSING, host=host,
                              fix=f"read the report on {head}; start preflight on every node together and find "
                                  f"why {host} started late (slow file system, busy node), or raise "
                                  "--rendezvous-timeout")
        if out.report is not None:
            out.report.summary = msg
        out.summary = msg
        return out

    def closed_without_us(self) -> bool:
        try:
            closed = self.state.live.get(CLOSED_KEY)
        except STORE_ERRORS:
            return False
        return closed is not None and self.plan.node_rank in parsed(CLOSED_KEY, closed, Closed.from_json).missing

    # --- the run ---------------------------------------------------------------------------------
    def run(self, mine: NodePost) -> NodeVerdict:
        start_watchdog(self.state.beat, self.state.deadline, self.state.args.timeout, self.lost_head_now)
        return self.steps(mine)

    def steps(self, mine: NodePost) -> NodeVerdict:
        """Leave if late, else follow node 0; a store value rejected on the way ends this node with a FAIL."""
        try:
            return self.late(mine) or self.follow(mine)
        except RejectedValueError as exc:  # a forged or malformed go or verdict: never act on it, nor leave with it
            why = rejected_value(self.plan, exc, Stage.RUN, self.state.seal.authenticated)
            return self.node.alone(mine, Stage.RUN, why.message.removeprefix(f"stage {Stage.RUN}: "), fix=why.fix,
                                   code=Code.STORE_VALUE_REJECTED, host=why.where.host)

    def lost_head_now(self, why: str) -> None:
        self.node.abandon(f"lost node 0 ({self.plan.head_host}): {why} (frozen, powered off or cut off?)")

    def follow(self, mine: NodePost) -> NodeVerdict:
        """Start the ranks on node 0's go, send this node's NCCL log summary when asked, return its verdict.
        Only a failing store call means node 0 is gone; any other error is ours and raised as such."""
        store = self.state.live
        started = sent_logs = False
        relayed = polled = 0.0
        while True:
            running = started and not self.ranks.workers_done()
            verdict, go, logs_wanted = None, False, False
            try:
                if time.monotonic() - polled >= (RUNNING_POLL_S if running else 0.0):
                    polled = time.monotonic()
                    verdict = store.get(VERDICT_KEY)
                    go = not started and verdict is None and store.get(GO_KEY) is not None
                    logs_wanted = (started and not sent_logs and not running
                                   and store.get(LOGS_WANTED_KEY) is not None)
                if started and time.monotonic() - relayed > STAGE_RELAY_S:  # our ranks' stages, for node 0
                    self.ranks.relay_stages()
                    relayed = time.monotonic()
            except STORE_ERRORS as exc:
                return self.lost_head(mine, exc)
            if verdict is not None:
                return self.leave_with(mine, parsed(VERDICT_KEY, verdict, VerdictMessage.from_json), started=started)
            if go:
                self.ranks.spawn_workers()
                started = True
            if logs_wanted:
                try:
                    store.set(logs_key(self.plan.node_rank), self.ranks.nccl_logs().to_json())
                except STORE_ERRORS as exc:
                    return self.lost_head(mine, exc)
                sent_logs = True
            if time.monotonic() > self.state.deadline + VERDICT_GRACE_S:  # node 0 enforces the deadline
                return self.node.alone(mine, Stage.VERDICT, f"node 0 ({self.plan.head_host}) gave no verdict "
                                       f"within the {self.state.args.timeout:.0f} s deadline")
            time.sleep(FOLLOW_TICK_S)

    def leave_with(self, mine: NodePost, v: VerdictMessage, *, started: bool) -> NodeVerdict:
        try:
            self.state.live.add(ACKS_KEY, 1)
        except STORE_ERRORS:
            pass  # node 0 left already: we have its verdict
        if not started and (late := self.late(mine)):  # posted just after node 0 stopped waiting
            return late
        return NodeVerdict(code=v.code, verdict=v.verdict, summary=v.summary + f" (report on {self.plan.head_host})")

    def lost_head(self, mine: NodePost, exc: Exception) -> NodeVerdict:
        return self.node.alone(mine, Stage.RUN, f"lost node 0 ({self.plan.head_host}), which holds the rendezvous "
                               f"store: {first_line(exc)}")


def owner_of(store: Store, wait_s: float) -> RunStamp | None:
    """The run identity node 0 stamped on the store (it does so at once), or None: not an nccl-doctor store.
    ``RejectedValueError``: a stamp that does not verify with this job's secret."""
    end = time.monotonic() + wait_s
    while True:
        try:
            stamp = store.get(RUN_KEY)
            if stamp is not None:
                return RunStamp.from_json(stamp)
        except (RuntimeError, OSError, ValueError):
            return None
        if time.monotonic() > end:
            return None
        time.sleep(OWNER_POLL_S)
