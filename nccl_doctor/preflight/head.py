"""Node 0: open the store, wait for every node, compare them, start the ranks, watch them and the other
nodes' heartbeats, gather the results and each node's NCCL logs, and decide. A store value that is forged
or malformed (``RejectedValueError``) stops the run with a FAIL naming its key."""

from __future__ import annotations

import subprocess
import time

from nccl_doctor.cluster.stages import Stage
from nccl_doctor.codes import Code
from nccl_doctor.node import compare
from nccl_doctor.preflight.auth import RejectedValueError
from nccl_doctor.preflight.heartbeat import Beats
from nccl_doctor.preflight.launcher import Launcher
from nccl_doctor.preflight.nccllogs import nccl_log_findings, nccl_log_table
from nccl_doctor.preflight.payload import preflight_payload
from nccl_doctor.preflight.protocol import (
    CLOSED_KEY,
    ERRORS_KEY,
    GO_KEY,
    LOGS_WANTED_KEY,
    RESULT_KEY,
    RUN_KEY,
    TOTAL,
    Closed,
    LogSummary,
    NodePost,
    NodeStages,
    RankError,
    RankResult,
    RunStamp,
    StageMark,
    error_key,
    heartbeat_key,
    logs_key,
    node_key,
    stages_key,
)
from nccl_doctor.preflight.store import Seen, bind_address, first_line, open_store, parsed, port_fix
from nccl_doctor.preflight.verdict import (
    NodeVerdict,
    RankState,
    add_probe_findings,
    files_limit,
    lost_after_run,
    lost_during_run,
    missing_nodes,
    nodes_agree,
    plan_keys,
    rank_failed,
    rank_picture,
    rejected_value,
    stuck_stage,
    timed_out,
    unauthenticated,
)
from nccl_doctor.report import Report, Table, hosts_text, plural

STAGE_POLL_S = 1.0  # one multi_get of every node's stages/<i>: not every tick at 1,000 nodes
WATCH_TICK_S = 0.2
REPORT_WAIT_S = 2.0  # after a failure, for the other ranks to report theirs
RANK_EXIT_WAIT_S = 10.0  # after the result, for our ranks to exit
LOGS_WAIT_S = 15.0  # after the result, for every node's NCCL log summary
LOST_CHECK_S = 1.0


class Head:
    """Node 0's steps, on its launcher."""

    def __init__(self, launcher: Launcher):
        self.node, self.state, self.ranks = launcher, launcher.state, launcher.ranks
        self.plan = launcher.state.plan
        self.at: str = Stage.RENDEZVOUS  # the stage a rejected store value stops
        self.bound: str | None = None  # the one address node 0's store listens on (None: every interface)
        self.stages_seen: Seen[NodeStages] = {}  # each node's stages value as last read (unchanged: not parsed)

    # --- the store and the rendezvous ------------------------------------------------------------
    def open_store(self, mine: NodePost) -> NodeVerdict | None:
        """Open the store and stamp it with this run's identity before anyone else writes."""
        port, head = self.plan.port, self.plan.host
        self.bound = bind_address(self.plan.head, self.plan.nnodes)
        try:
            self.state.store = open_store(self.plan.head, port, self.state.window(), self.state.seal, bind=self.bound)
        except Exception as exc:
            text = str(exc)
            if "EADDRINUSE" in text or "address already in use" in text.lower():
                why = (f"port {port} is already in use on node 0 ({head}): another program or another "
                       "nccl-doctor run (a second preflight step in this job) holds it")
            else:
                why = f"node 0 ({head}) cannot open the rendezvous store on port {port}: {first_line(exc)}"
            return self.node.alone(mine, Stage.RENDEZVOUS, why, fix=port_fix(port, head), code=Code.STAGE_FAILED,
                                   host=head)
        # every node's heartbeat value exists before anyone may write (node 0 reads them in one multi_get)
        self.state.store.set_all({heartbeat_key(i): "0" for i in range(self.plan.nnodes)})
        stamp = RunStamp(run=self.plan.run_id, step=self.plan.step, host=head)
        self.state.store.set(RUN_KEY, stamp.to_json())
        return None

    def new_report(self) -> Report:
        """Node 0's report, with what holds for the whole run: the plan, replaced settings, an
        unauthenticated store, too few file descriptors."""
        report = Report(command="preflight")
        plan_keys(report, self.plan)
        report.notes.extend(self.ranks.setting_notes())
        if not self.state.seal.authenticated:
            report.add(unauthenticated(self.plan))
        if self.bound is None:
            report.notes.append(f"the rendezvous store listens on every interface of node 0: {self.plan.head} "
                                "resolves there to loopback, to several addresses, or to none of its own")
        if (limit := files_limit(self.plan, self.state.files)) is not None:
            report.add(limit)
        return report

    def run(self, mine: NodePost, t_rdzv: float) -> NodeVerdict:
        report = self.new_report()
        try:
            return self.steps(report, t_rdzv)
        except RejectedValueError as exc:
            report.add(rejected_value(self.plan, exc, self.at, self.state.seal.authenticated))
            self.node.say(f"FAILED in stage {self.at}: store value {exc.key!r} rejected: {exc.why}")
            return self.node.decide(report, self.at)

    def steps(self, report: Report, t_rdzv: float) -> NodeVerdict:
        nodes = self.gather_nodes()
        self.state.mark(Stage.RENDEZVOUS, t_rdzv)
        # a launcher other than Slurm names no node: the report names each by the host it gave here
        self.state.plan = self.plan = self.plan.named([n.host if n else None for n in nodes])
        plan_keys(report, self.plan)
        missing = [self.plan.hosts[i] for i, n in enumerate(nodes) if n is None]
        self.state.absent |= {i for i, n in enumerate(nodes) if n is None}
        if missing:
            self.node.say(f"rendezvous: {plural(len(missing), 'node')} never arrived: {hosts_text(missing)}")
            report.add(missing_nodes(self.plan, missing, self.state.args.rendezvous_timeout))
            return self.node.decide(report, Stage.RENDEZVOUS)
        arrived = [n for n in nodes if n is not None]
        if self.plan.nnodes > 1:
            self.node.say(f"rendezvous: all {self.plan.nnodes} nodes arrived in "
                          f"{self.state.timings[Stage.RENDEZVOUS]} s")
        self.at = Stage.CONSISTENCY
        stop = self.consistency(report, arrived)
        if stop is not None:
            return stop
        self.at = Stage.RUN
        self.preset_ranks()
        self.state.live.set(GO_KEY, "1")
        self.node.say(f"starting {plural(self.plan.nproc, 'rank')} per node")
        self.ranks.spawn_workers()
        return self.watch(report)

    def gather_nodes(self) -> list[NodePost | None]:
        store = self.state.live
        end = min(self.state.deadline, time.monotonic() + self.state.args.rendezvous_timeout)
        keys = [node_key(i) for i in range(self.plan.nnodes)]
        while time.monotonic() < end and not store.has(*keys):
            time.sleep(0.1)
        nodes = [store.read(k, NodePost.from_json) for k in keys]
        for i, n in enumerate(nodes):
            if n is not None and n.node != i:
                raise RejectedValueError(node_key(i), f"it says it is node {n.node}")
        missing = [i for i, n in enumerate(nodes) if n is None]
        if missing:  # a node arriving from now on learns that it came too late (and is not blamed on us)
            store.set(CLOSED_KEY, Closed(missing=missing, host=self.plan.host).to_json())
        return nodes

    def consistency(self, report: Report, nodes: list[NodePost]) -> NodeVerdict | None:
        """Compare the nodes; a verdict when no rank may start."""
        t = time.monotonic()
        add_probe_findings(report, nodes)
        diffs = compare([n.facts for n in nodes])
        report.extend(diffs)
        if self.plan.nnodes > 1 and not diffs:
            report.add(nodes_agree(self.plan.nnodes))
        preflight_payload(report).node_facts = [n.facts for n in nodes]
        self.state.mark(Stage.CONSISTENCY, t)
        if any(n.fatal for n in nodes):
            return self.probe_stop(nodes, report)
        uneven = [f for f in diffs if f.code == Code.RANK_COUNT_MISMATCH]
        if uneven:  # the ranks' numbering assumes one count everywhere: they would collide, not fail cleanly
            report.notes.append(f"no rank was started: the nodes would start different numbers of ranks "
                                f"(odd: {uneven[0].where.host})")
            self.node.say(f"consistency FAILED: {uneven[0].message}")
            return self.node.decide(report, Stage.CONSISTENCY)
        return None

    def probe_stop(self, nodes: list[NodePost], report: Report | None = None) -> NodeVerdict:
        """The probe failed somewhere: report it, start no rank."""
        if report is None:  # one node: no rendezvous and no comparison took place
            report = Report(command="preflight")
            plan_keys(report, self.plan)
            preflight_payload(report).node_facts = [n.facts for n in nodes]
            add_probe_findings(report, nodes)
        fatal = [n.host for n in nodes if n.fatal]
        report.notes.append(f"no rank was started: the probe failed on {hosts_text(fatal)}")
        return self.node.decide(report, Stage.PROBE)

    # --- the ranks -------------------------------------------------------------------------------
    def preset_ranks(self) -> None:
        """Every node's stages and every rank's error value, written before any rank starts: node 0 then
        reads each kind in one round trip (``multi_get`` waits for a missing key); the first write replaces it."""
        items = {stages_key(i): NodeStages.not_started(self.plan.nproc).to_json() for i in range(self.plan.nnodes)}
        items.update({error_key(r): "" for r in range(self.plan.world_size)})
        self.state.live.set_all(items)

    def watch(self, report: Report) -> NodeVerdict:
        """Follow every rank until the result, a failure, a lost node or a deadline."""
        store = self.state.live
        states = [RankState() for _ in range(self.plan.world_size)]
        beats = Beats(store, self.plan.nnodes, self.state.deadline)
        t_run = last_stages = last_beats = time.monotonic()
        while True:
            now = time.monotonic()
            first = store.get(RESULT_KEY)
            if first is not None:
                result = self.settled_result(first)
                self.state.mark(Stage.RUN, t_run)
                self.at = Stage.NCCL_LOGS
                return self.finish(report, result, beats)
            errors = self.errors() if store.count(ERRORS_KEY) else {}  # a hint: the error keys are authenticated
            stuck = None
            if now - last_stages > STAGE_POLL_S:  # stages move once a second at most: so does "stuck"
                self.update_stages(states)
                stuck, last_stages = stuck_stage(states, now, self.state.args.collective_timeout), now
            lost: list[int] = []
            if now - last_beats > LOST_CHECK_S:  # beats come once a second: reading them every tick costs 5x
                lost, last_beats = beats.lost(), now
            local_dead = self.ranks.dead_workers()
            if errors or lost or local_dead:
                time.sleep(self.state.left(REPORT_WAIT_S))  # let the other ranks report
                errors = self.errors()
                self.update_stages(states)
                return self.fail(report, states, errors, lost=lost or beats.settle(), local_dead=local_dead)
            if stuck or now > self.state.deadline:
                return self.fail(report, states, {}, lost=[], local_dead=[], timeout=stuck or TOTAL)
            time.sleep(WATCH_TICK_S)

    def settled_result(self, first: str) -> RankResult:
        """Rank 0's result, once rank 0 (always our own child) has exited: it writes ``result`` once, just
        before it exits, so a value that changed meanwhile had a second writer. With a secret a forgery
        fails its MAC before this; without one this still catches a value written before rank 0's own."""
        parsed(RESULT_KEY, first, RankResult.from_json)  # a malformed value is named at once
        if self.ranks.procs:
            _wait(self.ranks.procs[0], max(0.1, self.state.left(RANK_EXIT_WAIT_S)))
            if self.ranks.procs[0].poll() not in (None, 0):
                raise RejectedValueError(RESULT_KEY, f"rank 0 exited with code {self.ranks.procs[0].returncode} "
                                                     "after it appeared: not rank 0's result")
        final = self.state.live.get(RESULT_KEY)
        if final != first:
            raise RejectedValueError(RESULT_KEY, "it changed after node 0 read it, while rank 0 writes it once: a "
                                                 "second writer (forged)")
        return parsed(RESULT_KEY, first, RankResult.from_json)

    def errors(self) -> dict[int, RankError]:
        """Every rank that reported a failure, by rank (one ``multi_get``)."""
        keys = [error_key(r) for r in range(self.plan.world_size)]
        found = self.state.live.read_all(keys, lambda t: RankError.from_json(t) if t else None)
        return {r: e for r, e in enumerate(found) if e is not None}

    def update_stages(self, states: list[RankState]) -> None:
        """Every rank's stage: ours relayed first, then every node's ``stages/<i>`` in one ``multi_get`` (one
        round trip and one MAC per node, not two round trips per rank)."""
        self.ranks.relay_stages()
        keys = [stages_key(i) for i in range(self.plan.nnodes)]
        marks: list[StageMark] = []
        for key, node in zip(keys, self.state.live.read_all(keys, NodeStages.from_json, self.stages_seen), strict=True):
            if len(node.marks) != self.plan.nproc:
                raise RejectedValueError(key, f"{len(node.marks)} stage marks for {self.plan.nproc} ranks")
            marks.extend(node.marks)
        for st, mark in zip(states, marks, strict=True):
            if mark.seq != st.seq:
                st.seq, st.stage, st.since = mark.seq, mark.name, time.monotonic()

    def fail(self, report: Report, states: list[RankState], errors: dict[int, RankError], *, lost: list[int],
             local_dead: list[int], timeout: str | None = None) -> NodeVerdict:
        pic = rank_picture(self.plan, states, errors)
        backend = self.ranks.backend()
        if lost:
            self.state.absent |= set(lost)
            report.add(lost_during_run(self.plan, lost, pic))
        elif timeout:
            report.add(timed_out(self.plan, report, backend, pic, timeout=timeout, timeout_s=self.state.args.timeout))
        else:
            report.add(rank_failed(self.plan, report, backend, pic, errors=errors, local_dead=local_dead))
        preflight_payload(report).stage = pic.stage
        used = self.ranks.used_backend()
        if used is not None:  # what the ranks ran, as a finished run's data says it (rank 0's result)
            preflight_payload(report).backend = used
        preflight_payload(report).ranks = [{"rank": r, "host": self.plan.host_of(r), "stage": st.stage}
                                           for r, st in enumerate(states)]
        self.node.say(f"FAILED in stage {pic.stage}")
        return self.node.decide(report, pic.stage)

    # --- the result ------------------------------------------------------------------------------
    def finish(self, report: Report, result: RankResult, beats: Beats) -> NodeVerdict:
        """Merge rank 0's results, each node's parsed NCCL logs, then decide. A node whose launcher died
        after its ranks finished sends no logs: its lost heartbeat fails the run (its ranks passed, but
        it would not have started the training either), and nobody waits for it."""
        report.extend(result.findings)
        report.tables.extend(result.tables)
        report.notes.extend(result.notes)
        preflight_payload(report).set_result(result.data)
        self.state.timings.update(result.timings_s)
        self.state.measured_nothing = not result.measured
        t = time.monotonic()
        self.state.live.set(LOGS_WANTED_KEY, "1")
        self.wait_for_ranks()
        logs, lost = self.collect_logs(beats)
        if lost:
            self.state.absent |= lost
            report.add(lost_after_run(self.plan, lost))
        report.extend(nccl_log_findings(logs))
        preflight_payload(report).nccl_logs = [lg.as_dict() for lg in logs]
        table: Table | None = nccl_log_table(logs)
        if table:
            report.tables.append(table)
        self.state.mark(Stage.NCCL_LOGS, t)
        return self.node.decide(report, Stage.NCCL_LOGS if lost else Stage.DONE)

    def wait_for_ranks(self) -> None:
        for p in self.ranks.procs:
            _wait(p, max(0.1, self.state.left(RANK_EXIT_WAIT_S)))

    def collect_logs(self, beats: Beats) -> tuple[list[LogSummary], set[int]]:
        """Every node's NCCL log summary (ours first), and the nodes lost while waiting for theirs."""
        store = self.state.live
        logs = [self.ranks.nccl_logs()]
        end = min(self.state.deadline, time.monotonic() + LOGS_WAIT_S)
        lost: set[int] = set()
        checked = 0.0
        for i in range(1, self.plan.nnodes):
            while time.monotonic() < end and not store.has(logs_key(i)) and i not in lost:
                if time.monotonic() - checked > LOST_CHECK_S:
                    lost.update(beats.lost())
                    checked = time.monotonic()
                time.sleep(0.1)
            v = store.read(logs_key(i), LogSummary.from_json)
            logs.append(v or LogSummary.not_sent(self.plan.hosts[i]))
        return logs, lost


def _wait(proc: subprocess.Popen[bytes], seconds: float) -> None:
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass
