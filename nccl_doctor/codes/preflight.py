"""ND4xx: ``preflight``, across the nodes of a job."""

from __future__ import annotations

from nccl_doctor.codes.text import CodeText

TEXTS: dict[str, CodeText] = {
    "ND401": CodeText(
        "version-mismatch",
        "torch, NCCL, CUDA or driver versions differ between nodes (pass: all agree).",
        (
            "Nodes of one job should run one torch/NCCL/CUDA build: NCCL fails init on mismatched versions "
            "between ranks, and a mix means different software per node. A different GPU driver is a WARN; PASS "
            "when all agree."
        ),
        (
            "Install the same torch/NCCL/CUDA build on every node (one container image or venv); update the GPU "
            "driver on the odd nodes, or drain them."
        ),
    ),
    "ND402": CodeText(
        "setting-mismatch",
        "An NCCL_*/GLOO_* setting differs between nodes, or is unset on some.",
        (
            "An NCCL_*/GLOO_* setting that differs between nodes, or is unset on some, makes nodes choose "
            "different interfaces or transports: ranks then fail to connect, or run on the slower choice."
        ),
        "Export the same value on every node in the job script (or set it in /etc/nccl.conf everywhere).",
    ),
    "ND403": CodeText(
        "nic-mismatch",
        "The NIC inventory, link state or link rate differs between nodes.",
        (
            "A node whose NIC inventory, link state or link rate differs from the others has a missing, down or "
            "slower link, and collectives run at the pace of the slowest node."
        ),
        "Check the odd nodes' links (`ip link`, `ibstat`) and cabling, or drain them.",
    ),
    "ND404": CodeText(
        "net-plugin-mismatch",
        "Nodes would load different NCCL net plugins.",
        (
            "Nodes that would load different NCCL net plugins (or none) pick different networks, while every rank"
            " of a communicator must speak the same one to connect."
        ),
        "Install the same NCCL net plugin on every node, or unset NCCL_NET_PLUGIN everywhere.",
    ),
    "ND405": CodeText(
        "node-missing",
        "Nodes of the allocation never arrived at the rendezvous; they are named.",
        (
            "A node that never reaches the rendezvous would hold a training job at init until its timeout; "
            "preflight names it after --rendezvous-timeout instead. It was not started, started late, or cannot "
            "reach node 0's port."
        ),
        (
            "Start preflight on every node (`srun --ntasks-per-node=1 nccl-doctor preflight`) and check that "
            "every node reaches the first node's port (firewall, hostname resolution); for a late node find why "
            "it started late, or raise --rendezvous-timeout."
        ),
    ),
    "ND406": CodeText(
        "stage-failed",
        "A stage failed or passed its deadline; names the stage and the ranks behind.",
        (
            "A stage that fails or passes its deadline (init, a collective on the HSDP mesh, a pair round) would "
            "stop or hang the training job the same way. The finding names the rank that failed first, the ranks "
            "behind, and a node whose own probe explains a failed connection; a rendezvous port held by another "
            "program is one too."
        ),
        (
            "Check that every node reaches the others on GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (`nccl-doctor "
            "probe` on each) and that firewalls allow the ephemeral ports; read the named hosts first (dmesg, the"
            " NCCL log) and drain one that fails again; for a busy port pass a free one with --port (or "
            "MASTER_PORT)."
        ),
    ),
    "ND407": CodeText(
        "node-lost",
        "A node stopped responding mid-run (no heartbeat); the others stopped fast.",
        (
            "A node that stops sending heartbeats mid-run (crashed, rebooted, OOM-killed or cut off) would hang "
            "the whole job at its next collective; preflight names it within seconds and the other nodes stop."
        ),
        (
            "Check the node (dmesg, `scontrol show node`) and drain it before the job (`scontrol update "
            "nodename=HOST state=drain reason=preflight`)."
        ),
    ),
    "ND408": CodeText(
        "rank-count-mismatch",
        "Nodes would start different numbers of ranks (GPUs, --nproc-per-node): none starts.",
        (
            "Global ranks are numbered assuming one count per node: nodes that would start different numbers (a "
            "lost GPU, another --nproc-per-node) would collide and cannot form the HSDP mesh, so no rank is "
            "started."
        ),
        (
            "Start the same number of ranks on every node: request the same GPUs per node (`--gpus-per-node`), "
            "check what the odd nodes see (`nvidia-smi -L`, CUDA_VISIBLE_DEVICES), or pass one --nproc-per-node "
            "everywhere; drain a node that lost a GPU."
        ),
    ),
    "ND410": CodeText(
        "fsdp-smoke",
        "The FSDP2 + DCP training smoke test failed on some rank (pass: it ran).",
        (
            "The smoke test runs what the job will: FSDP2 fully_shard on the (dp, fsdp) mesh, bf16 steps and a "
            "DCP save/load round trip; a failure there (such as a checkpoint directory that the nodes do not "
            "share) would stop the training or its first checkpoint."
        ),
        (
            "Put the checkpoint directory on a shared file system (--fsdp-smoke-dir); otherwise rerun with "
            "TORCH_DISTRIBUTED_DEBUG=DETAIL and NCCL_DEBUG=INFO on the named rank."
        ),
    ),
    "ND411": CodeText(
        "store-value-rejected",
        "A value in the rendezvous store was forged, malformed or too big; names its key and writer.",
        (
            "Node 0's store answers anyone who reaches its port. With NCCL_DOCTOR_SECRET every value carries an "
            "HMAC of its run, key and value: one that does not verify was written by someone without the secret "
            "(or copied from another key or run). Any value that is not what its key holds is rejected: nothing "
            "in it is used, and the run fails rather than pass on it."
        ),
        (
            "Find who writes to node 0's port (`ss -tnp 'sport = :PORT'` on node 0) and keep the port to the "
            "job's nodes; give every node of the job the same NCCL_DOCTOR_SECRET."
        ),
    ),
    "ND412": CodeText(
        "store-unauthenticated",
        "NCCL_DOCTOR_SECRET is not set: the rendezvous store is unauthenticated.",
        (
            "Without a secret anyone who reaches node 0's port can read every node's versions, settings and NICs "
            "and write a forged rank result or verdict that preflight cannot tell apart."
        ),
        (
            "export NCCL_DOCTOR_SECRET=$(openssl rand -hex 16) before srun (srun passes the environment to every "
            "task); with another launcher give every node the same value."
        ),
    ),
    "ND413": CodeText(
        "open-files-limit",
        "Node 0's open-file limit is below what its store needs for this many nodes and ranks.",
        (
            "Node 0's store holds a connection from every node and every rank; past RLIMIT_NOFILE it silently "
            "stops accepting and ranks time out in init. Preflight raises the soft limit to the hard one at start; "
            "this says even the hard limit is too low."
        ),
        (
            "Raise the hard open-file limit on node 0 (`ulimit -Hn`, /etc/security/limits.conf, LimitNOFILE= for "
            "slurmd; Slurm's PropagateResourceLimits passes the submitting shell's)."
        ),
    ),
}
