"""Where this node stands in a multi-node run, from flags or from the launcher that started it.

Each launcher says it in its own environment variables, one process per node:

- Slurm (``srun --ntasks-per-node=1``): ``SLURM_*`` (the node list, ``SLURM_NODEID``), as ``slurm.py`` reads;
- the Kubernetes training operator's PyTorchJob (one pod per node): ``PET_NNODES``, ``PET_NODE_RANK``,
  ``MASTER_ADDR``/``MASTER_PORT`` (the Trainer v2 names them ``PET_MASTER_ADDR``/``PET_MASTER_PORT``);
  operators before 1.7 set only ``WORLD_SIZE``/``RANK``, which then count pods;
- Open MPI / PMIx (``mpirun -N 1``): ``OMPI_COMM_WORLD_SIZE``/``OMPI_COMM_WORLD_RANK`` or ``PMIX_RANK``;
  node 0's address is not in their environment: ``--master-addr`` or ``MASTER_ADDR`` gives it.

``--nnodes``, ``--node-rank`` and ``--master-addr`` win over any of them, each on its own; a flag that
disagrees with the environment is said in one line. Pure: the environment comes in as a mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from nccl_doctor.cluster.slurm import slurm_launch_config
from nccl_doctor.cluster.validate import check_port, env_int
from nccl_doctor.errors import InputError

SLURM, PYTORCHJOB, OPEN_MPI, PMIX, FLAGS = "Slurm", "PyTorchJob", "Open MPI", "PMIx", "flags"
SRUN_HINT = "run `srun --ntasks-per-node=1 nccl-doctor preflight` (not bare in the batch script)"
ADDR_HINT = "pass --master-addr HOST[:PORT] (node 0's address) or set MASTER_ADDR on every node"


@dataclass(frozen=True)
class Said:
    """One value as the environment (or a flag) spelled it: ``PET_NNODES=3``, ``--nnodes 2``."""

    name: str
    text: str

    def __str__(self) -> str:
        return f"{self.name} {self.text}" if self.name.startswith("--") else f"{self.name}={self.text}"


@dataclass(frozen=True, kw_only=True)
class Convention:
    """What one launcher's environment says about the layout; a value it does not give is None.

    ``missing`` is the line that says how to give a value it lacks (in that launcher's words); ``run_id`` is
    what every node of the job shares and no other job does (empty when the launcher gives none)."""

    name: str
    nnodes: Said | None = None
    node_rank: Said | None = None
    head: Said | None = None
    port: Said | None = None
    run_id: str = ""
    hosts: tuple[str, ...] = ()
    missing: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class LayoutFlags:
    """``--nnodes``, ``--node-rank``, ``--master-addr HOST[:PORT]`` and ``--port`` as given (None: not given)."""

    nnodes: int | None = None
    node_rank: int | None = None
    master_addr: str | None = None
    port: int | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.nnodes, self.node_rank, self.master_addr))


@dataclass(frozen=True, kw_only=True)
class JobLayout:
    """This node's place in the run: ``nnodes`` nodes, this one ``node_rank``, node 0 at ``head``:``port``
    (None: the caller's default port). ``source`` names who said it (``flags``, ``PyTorchJob``, ``flags +
    Open MPI``); ``overrides`` is the one line that says which flags replaced which variables."""

    nnodes: int
    node_rank: int
    head: str
    port: int | None
    source: str
    launcher: str = ""  # the convention read (``Slurm``), or ``flags`` alone
    run_id: str = ""
    hosts: tuple[str, ...] = ()
    overrides: str = ""

    @property
    def under_slurm(self) -> bool:
        return self.launcher == SLURM

    @property
    def names_nodes(self) -> bool:
        """The launcher named every node (Slurm's node list); else the names are known once nodes arrive."""
        return len(self.hosts) == self.nnodes

    def host_names(self) -> tuple[str, ...]:
        """A name per node rank: the launcher's (Slurm's node list), else node 0's address and
        ``node-rank-N`` for the others, whose names nobody knows before they arrive."""
        if self.names_nodes:
            return self.hosts
        return (self.head, *(f"node-rank-{i}" for i in range(1, self.nnodes)))


def parse_master_addr(text: str) -> tuple[str, int | None]:
    """``HOST``, ``HOST:PORT``, ``[v6]:PORT`` or a bare IPv6 address -> (host, port or None)."""
    value = text.strip()
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise InputError(f"--master-addr {text!r} is not HOST[:PORT] (e.g. node1:29500)")
        port_text = rest[1:] if rest else None
    elif value.count(":") == 1:
        host, _, port_text = value.partition(":")
    else:  # a name, an IPv4 address or a bare IPv6 address
        host, port_text = value, None
    if not host or any(c.isspace() for c in host) or (port_text is not None and not port_text.isdigit()):
        raise InputError(f"--master-addr {text!r} is not HOST[:PORT] (e.g. node1:29500)")
    port = check_port(int(port_text), f"--master-addr {text!r}: port") if port_text is not None else None
    return host, port


def _said(env: Mapping[str, str], *names: str) -> Said | None:
    """The first of ``names`` set (non-empty) in ``env``."""
    for name in names:
        if env.get(name, "").strip():
            return Said(name, env[name].strip())
    return None


def slurm_convention(env: Mapping[str, str]) -> Convention | None:
    """Inside a Slurm job; the node rank only inside a step (``srun``), where ``SLURM_NODEID`` means it."""
    slurm = slurm_launch_config(env)
    if slurm is None:
        return None
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or "0"
    step = env.get("SLURM_STEP_ID", "")
    in_step = bool(step and env.get("SLURM_NODEID"))
    return Convention(name=SLURM, nnodes=Said("SLURM_NNODES", str(slurm.nnodes)),
                      node_rank=Said("SLURM_NODEID", env["SLURM_NODEID"]) if in_step else None,
                      head=Said("SLURM_NODELIST[0]", slurm.rdzv_host), port=_said(env, "MASTER_PORT"),
                      run_id=f"{job}.{step}", hosts=slurm.hosts,
                      missing={"node_rank": f"this {slurm.nnodes}-node allocation needs one preflight per node: "
                                            f"{SRUN_HINT}"})


def pytorchjob_convention(env: Mapping[str, str]) -> Convention | None:
    """A PyTorchJob pod: ``PET_NNODES``/``PET_NODE_RANK`` (operator 1.7+, Trainer v2), else the older
    operators' ``WORLD_SIZE``/``RANK`` next to ``MASTER_ADDR`` (one per pod; never torchrun's own, which
    count processes and come with ``TORCHELASTIC_RUN_ID``)."""
    nnodes, rank = _said(env, "PET_NNODES"), _said(env, "PET_NODE_RANK")
    head = _said(env, "PET_MASTER_ADDR", "MASTER_ADDR")
    if nnodes is None and rank is None:
        if head is None or "TORCHELASTIC_RUN_ID" in env or not (env.get("WORLD_SIZE") and env.get("RANK")):
            return None
        nnodes, rank = _said(env, "WORLD_SIZE"), _said(env, "RANK")
    port = _said(env, "PET_MASTER_PORT", "MASTER_PORT")
    return Convention(name=PYTORCHJOB, nnodes=nnodes, node_rank=rank, head=head, port=port,
                      missing={"nnodes": f"PyTorchJob's environment gives no node count ({rank} is set): set "
                                         "PET_NNODES (the operator sets it on every pod) or pass --nnodes N",
                               "node_rank": f"PyTorchJob's environment gives no node rank ({nnodes} is set): set "
                                            "PET_NODE_RANK or pass --node-rank R",
                               "head": "PyTorchJob's environment gives no node 0 address: set MASTER_ADDR (the "
                                       "operator sets it) or pass --master-addr HOST[:PORT]"})


def mpi_convention(env: Mapping[str, str]) -> Convention | None:
    """Open MPI (``OMPI_COMM_WORLD_*``) or another PMIx launcher (``PMIX_RANK``), one task per node."""
    rank = _said(env, "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
    if rank is None:
        return None
    local = _said(env, "OMPI_COMM_WORLD_LOCAL_SIZE")
    if local is not None and local.text != "1":
        raise InputError(f"{local}: mpirun started {local.text} tasks on this node; nccl-doctor starts one rank "
                         "per GPU itself: run one task per node (`mpirun -N 1` or `--map-by ppr:1:node`)")
    name = OPEN_MPI if rank.name.startswith("OMPI") else PMIX
    run = env.get("PMIX_NAMESPACE") or env.get("OMPI_MCA_ess_base_jobid") or ""
    return Convention(name=name, nnodes=_said(env, "OMPI_COMM_WORLD_SIZE"), node_rank=rank,
                      head=_said(env, "MASTER_ADDR"), port=_said(env, "MASTER_PORT"), run_id=run,
                      missing={"nnodes": f"{name} gives no node count ({rank} is set; PMIx does not put the job "
                                         "size in the environment): pass --nnodes N",
                               "head": f"{name} does not say where node 0 is: {ADDR_HINT} (`mpirun -x "
                                       "MASTER_ADDR=node1 ...`)"})


CONVENTIONS = (slurm_convention, pytorchjob_convention, mpi_convention)  # the first present wins


def detect(env: Mapping[str, str]) -> Convention | None:
    """The launcher whose variables this process has (Slurm first, as before any other was read)."""
    for read in CONVENTIONS:
        if (found := read(env)) is not None:
            return found
    return None


def job_layout(flags: LayoutFlags, env: Mapping[str, str]) -> JobLayout | None:
    """Flags first, each on its own, then the launcher's variables; None when neither says anything
    (this machine alone). A value nobody gives is one line naming how to give it."""
    conv = detect(env)
    if conv is None and not flags.given:
        return None
    conv = conv or Convention(name=FLAGS, head=_said(env, "MASTER_ADDR"), port=_said(env, "MASTER_PORT"))
    head_flag, port_flag = _flag_head(flags)
    pick = _Picker(conv)
    nnodes = pick.number(flags.nnodes, "--nnodes", "nnodes")
    if nnodes < 1:
        raise InputError(f"{_origin(flags.nnodes, '--nnodes', conv.nnodes)} must be >= 1")
    if nnodes == 1 and flags.node_rank in (None, 0):
        return JobLayout(nnodes=1, node_rank=0, head="127.0.0.1", port=port_flag, source=_source(flags, conv),
                         launcher=conv.name, overrides=pick.said())
    rank = pick.number(flags.node_rank, "--node-rank", "node_rank")
    if not 0 <= rank < nnodes:
        raise InputError(f"{_origin(flags.node_rank, '--node-rank', conv.node_rank)} is not a node rank of "
                         f"{nnodes} nodes (0-{nnodes - 1})")
    head = pick.text(head_flag, "--master-addr", "head")
    port = pick.port(port_flag)
    return JobLayout(nnodes=nnodes, node_rank=rank, head=head, port=port, source=_source(flags, conv),
                     launcher=conv.name, run_id=conv.run_id, hosts=conv.hosts, overrides=pick.said())


def _flag_head(flags: LayoutFlags) -> tuple[str | None, int | None]:
    """``--master-addr``'s host and port, and ``--port``; the two ports must agree."""
    if flags.master_addr is None:
        return None, flags.port
    host, port = parse_master_addr(flags.master_addr)
    if port is not None and flags.port is not None and port != flags.port:
        raise InputError(f"--master-addr {flags.master_addr} and --port {flags.port} name two ports: give one")
    return host, port if port is not None else flags.port


class _Picker:
    """Each value from its flag when given, else from the launcher's variable; remembers each flag that
    replaced a different value (a value the flag replaces is never parsed: a bad one does not matter)."""

    def __init__(self, conv: Convention):
        self.conv = conv
        self.overrides: list[str] = []

    def said(self) -> str:
        """The one line: ``--nnodes 2 overrides PET_NNODES=3; ... (flags win over PyTorchJob's environment)``."""
        if not self.overrides:
            return ""
        whose = "the environment" if self.conv.name == FLAGS else f"{self.conv.name}'s environment"
        return f"{'; '.join(self.overrides)} (flags win over {whose})"

    def _given(self, what: str) -> Said | None:
        said: Said | None = getattr(self.conv, what)
        return said

    def number(self, flag: int | None, option: str, what: str) -> int:
        said = self._given(what)
        if flag is None:
            if said is None:
                raise InputError(_incomplete(self.conv, what))
            return _int(said)
        if said is not None and said.text.strip() != str(flag):
            self.overrides.append(f"{option} {flag} overrides {said}")
        return flag

    def text(self, flag: str | None, option: str, what: str) -> str:
        said = self._given(what)
        if flag is None:
            if said is None:
                raise InputError(_incomplete(self.conv, what))
            return said.text
        if said is not None and said.text != flag:
            self.overrides.append(f"{option} {flag} overrides {said}")
        return flag

    def port(self, flag: int | None) -> int | None:
        said = self.conv.port
        if flag is None:
            return None if said is None else check_port(env_int(said.text, said.name), said.name)
        if said is not None and said.text.strip() != str(flag):
            self.overrides.append(f"port {flag} overrides {said}")
        return flag


def _incomplete(conv: Convention, what: str) -> str:
    """The one line for a value nobody gave: the launcher's own words, else which flag gives it."""
    if what in conv.missing:
        return conv.missing[what]
    label = {"nnodes": "the node count", "node_rank": "this node's rank", "head": "node 0's address"}[what]
    how = {"nnodes": "pass --nnodes N", "node_rank": "pass --node-rank R", "head": ADDR_HINT}[what]
    if conv.name == FLAGS:
        return f"nothing gives {label} (no launcher's variables are set): {how}"
    return f"{conv.name}'s environment does not give {label}: {how}"


def _int(said: Said) -> int:
    """A count or rank; an elastic ``MIN:MAX`` is one only when both ends agree (``2:2``)."""
    text = said.text
    if ":" in text:
        low, _, high = text.partition(":")
        if low.strip() != high.strip():
            raise InputError(f"{said} is a range (an elastic job): preflight needs a fixed node count: "
                             "pass --nnodes N")
        text = low
    value = env_int(text, said.name)
    if value < 0:
        raise InputError(f"{said} is negative")
    return value


def _origin(flag: int | None, option: str, said: Said | None) -> str:
    return f"{option} {flag}" if flag is not None else str(said)


def _source(flags: LayoutFlags, conv: Convention) -> str:
    if conv.name == FLAGS:
        return FLAGS
    return f"{FLAGS} + {conv.name}" if flags.given else conv.name
