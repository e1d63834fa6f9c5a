"""The one table of fatal NCCL error categories: what sorts a WARN into a category (read by the parse half,
``parse/state.py``), the finding code it becomes and the fixes its own text selects (read by the diagnose half,
``diagnosis/errorfindings.py``). A new kind of fatal WARN with its fix is one row here plus a fixture
(``tests/unit/logs/test_error_rules.py`` pins the table).

Rows are tried in order on a WARN's text; the first whose pattern matches wins; none: a warning, not fatal
(unless the catalog says so, ``catalog/warnclass.py``). A row's fixes split its errors into findings by what
selects their fix: the first fix whose words the group's kind holds (or, for IB completions, whose class is
the completion status); the last fix of a row, without words, is its default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nccl_doctor.codes import Code
from nccl_doctor.enums import StrEnum
from nccl_doctor.logs.parse.model import Category, Group

DEFAULT_FIX = ""  # the fix class of a row's default fix


class FixBy(StrEnum):
    """What picks a group's fix among a row's fixes."""

    TEXT = "text"  # words of the group's kind (its text, numbers and addresses masked)
    STATUS = "status"  # the IB completion status the group's lines printed (``Group.detail["status"]``)


@dataclass(frozen=True)
class Fix:
    """One fix of a category: ``cls`` names it (groups of one category share a finding only if their classes are
    equal); ``words`` select it (any one in the group's kind); ``if_ifname`` replaces ``text`` where the log shows
    NCCL_SOCKET_IFNAME set (``{ifname}``: its value)."""

    cls: str
    text: str
    words: tuple[str, ...] = ()
    if_ifname: str | None = None


@dataclass(frozen=True)
class ErrorRule:
    """One fatal error category: the pattern of the WARNs that say it, its finding code, the variant of the
    code's message templates it renders (``codes/parse.py``: over ``on``, ``times``, ``first``, ``first_two``,
    ``kinds``, ``retcodes``, ``status``, ``vendor``, ``ranks``; a template, so that preflight merges the same error
    on many nodes by its parameters) and fixes."""

    category: Category
    pattern: re.Pattern[str]
    code: Code
    variant: str
    fixes: tuple[Fix, ...]
    by: FixBy = FixBy.TEXT

    def fix_class(self, g: Group) -> str:
        """What in a group's own text selects its fix."""
        if self.by == FixBy.STATUS:
            return g.detail.get("status", DEFAULT_FIX)
        text = g.kind
        return next((f.cls for f in self.fixes if any(w in text for w in f.words)), DEFAULT_FIX)

    def fix(self, cls: str) -> Fix:
        """The fix of a class (a status no fix names: the default)."""
        return next((f for f in self.fixes if f.cls == cls), self.fixes[-1])


ERROR_RULES: tuple[ErrorRule, ...] = (
    ErrorRule(
        Category.IB_COMPLETION, re.compile(r"Got completion|Unsupported completion status"), Code.IB_COMPLETION_ERROR,
        "ib-completion",
        (Fix("12", "the peer stopped answering over the fabric: check both ports with `ibstat` / `ibdiagnet` "
                   "(link flaps, cable), for RoCE the GID index (`show_gids`; NCCL_IB_GID_INDEX=3 is the usual "
                   "RoCEv2/IPv4 entry), MTU and PFC/ECN; NCCL_IB_TIMEOUT=22 gives a congested fabric more time"),
         Fix("13", "the receiver had no buffers posted: usually the remote process died; look for its first error"),
         Fix("4", "memory registration problem, most often GPUDirect RDMA: check `lsmod | grep nvidia_peermem` "
                  "(or DMA-BUF support); NCCL_NET_GDR_LEVEL=LOC disables GDR to confirm"),
         Fix("5", "a consequence of an earlier failure on the same connection; find the first error"),
         Fix(DEFAULT_FIX, "check the links of both hosts with `ibstat` and `ibdiagnet`, "
                          "and the peer's log for its first error")),
        by=FixBy.STATUS),
    ErrorRule(
        Category.VERBS,
        re.compile(r"\bibv_\w+ failed|Unable to open device|incompatible devices|Call to ibv_|ibv_\w+\(\) failed"),
        Code.RDMA_VERBS_ERROR, "verbs",
        (Fix("memlock", "the locked-memory limit is too low: `ulimit -l` must print unlimited "
                        "(Slurm: PropagateResourceLimits; containers: --ulimit memlock=-1)", ("create_cq", "reg_mr")),
         Fix("gid", "the queue pair could not reach the peer: for RoCE pick a routable GID with NCCL_IB_GID_INDEX "
                    "(list them with `show_gids`; 3 is the usual RoCEv2/IPv4 entry), and check `ibstat` on both hosts",
             ("modify_qp",)),
         Fix("mixed", "mixing IB and RoCE ports: select one link type with NCCL_IB_HCA (compare `ibstat`)",
             ("incompatible",)),
         Fix(DEFAULT_FIX, "check the RDMA devices with `ibstat` / `ibv_devinfo` (ports ACTIVE) and `ulimit -l` "
                          "(must be unlimited)"))),
    ErrorRule(
        Category.NO_INTERFACE,
        re.compile(r"no socket interface found|No usable listening interface|no interface found|No IP interface found"
            r"|No interface found in the same subnet", re.I),
        Code.NO_SOCKET_INTERFACE, "no-interface",
        (Fix(DEFAULT_FIX, "set NCCL_SOCKET_IFNAME to an interface that has an IP address (`ip -br addr`)",
             if_ifname="NCCL_SOCKET_IFNAME={ifname} matches no interface with an IP address: list them with "
                       "`ip -br addr` and fix it"),)),
    ErrorRule(
        Category.CONNECT,
        re.compile(r"Connect(?:ion)? to .*(?:failed|refused|timed out)|\bConnect to \S|exceeded (?:retries|timeouts)"
            r"|Connection closed by|Call to (?:recv|send|accept|connect)\b.*failed|Socket recv failed"
            r"|returned \d+\(.*errno|No route to host|Connection refused|Connection reset|socketPollConnect"
            r"|socketStartConnect", re.I),
        Code.CONNECT_FAILED, "connect",
        # the interfaces the log shows refine this one (errorfindings._connect_fix): a virtual one, the one set
        (Fix(DEFAULT_FIX, "make sure the nodes reach each other on the interface NCCL uses (ping the peer "
                          "address, check firewalls/security groups) and pin it with "
                          "NCCL_SOCKET_IFNAME=<routable interface>"),)),
    ErrorRule(
        Category.CUDA,
        re.compile(r"Cuda failure|CUDA error|Failed to CUDA|cuda\w* failed|out of memory|unhandled cuda", re.I),
        Code.CUDA_ERROR, "cuda",
        # first match wins: "illegal memory access" names memory but is no allocation
        (Fix("illegal", "a kernel on this rank touched memory it does not own (model code, a custom kernel, or a "
                        "faulty GPU): rerun with CUDA_LAUNCH_BLOCKING=1 to name the kernel, and check `nvidia-smi -q` "
                        "and dmesg for Xid errors on that GPU; drain the node if it repeats on the same GPU",
             ("illegal memory access", "illegal address")),
         Fix("oom", "the GPU ran out of memory while NCCL set up its buffers: free memory before creating "
                    "communicators, or lower NCCL_BUFFSIZE / the number of channels (NCCL_MAX_NCHANNELS)",
             ("out of memory", "MemoryAllocation", "Cannot allocate memory")),
         Fix("invalid", "a CUDA call was handed an argument CUDA refuses, most often a device this process "
                        "cannot use: set each rank's device before NCCL starts (torch.cuda.set_device(LOCAL_RANK), "
                        "or device_id= in init_process_group), keep LOCAL_RANK below the GPUs CUDA_VISIBLE_DEVICES "
                        "leaves, and check that the CUDA runtime is not newer than the driver (`nvidia-smi`)",
             ("invalid argument", "invalid device ordinal")),
         Fix(DEFAULT_FIX, "check the GPU with `nvidia-smi` and the driver/CUDA versions (`nvidia-smi -q`, "
                          "CUDA compat)"))),
    ErrorRule(
        Category.VERSION_MISMATCH, re.compile(r"Mismatched NCCL version|NCCL version mismatch"),
        Code.NCCL_VERSION_MISMATCH,
        "version-mismatch",
        (Fix(DEFAULT_FIX, "install the same NCCL on every node (one container image / one nvidia-nccl wheel)"),)),
    ErrorRule(
        Category.NCCL_ERROR,
        re.compile(r"Failed to execute operation|internal error|system error|remote error|\bInvalid\b|Duplicate GPU"
            r"|does not loop back|does not contain rank|Bootstrap Root|network .* not found"
            r"|Failed to initialize any NET plugin|Unrecognized|No algorithm/protocol|Timeout|timed out|abort", re.I),
        Code.NCCL_ERROR, "nccl-error",
        (Fix("ifname", "find the first WARN line of the first failing rank; "
                       "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV", ("family", "Internal check"),
             if_ifname="NCCL_SOCKET_IFNAME={ifname} probably names no interface with an address on this node "
                       "(check `ip -br addr`); fix or unset it"),
         Fix(DEFAULT_FIX, "find the first WARN line of the first failing rank; "
                          "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV"))),
)
RULE_OF: dict[str, ErrorRule] = {r.category: r for r in ERROR_RULES}
# (category, pattern) of the rows that a WARN's text selects, in order: what the parser tries on each fatal WARN
WARN_PATTERNS: tuple[tuple[Category, re.Pattern[str]], ...] = tuple((r.category, r.pattern) for r in ERROR_RULES)
