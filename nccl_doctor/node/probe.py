"""Gathering: read and classify the node under a root, then work out what NCCL and Gloo will use there.

A pure function of the files under ``--root`` (default ``/``) and an environment mapping:
``probe_node`` gathers the facts, ``checks.check`` turns them into findings and ``view.probe_report``
builds the report. ``preflight`` and ``bench`` call the same functions on every node.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from nccl_doctor.errors import InputError
from nccl_doctor.node.classify import classify, gpu_affinity
from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.model import NodeProbe, Settings
from nccl_doctor.node.ncclenv import effective_settings, gloo_ifaces, nccl_ib_ports, nccl_socket_ifaces
from nccl_doctor.node.sysfs import read_node


def probe_node(root: Path | str = "/", env: Mapping[str, str] | None = None, *,
               fs: FsReader | None = None) -> NodeProbe:
    """Read and classify the node under ``root``; compute what NCCL and Gloo will use with ``env``."""
    env = dict(os.environ if env is None else env)
    fs = fs or FsReader(root)
    problem = fs.root_problem()
    if problem:
        raise InputError(f"--root {root}: {problem}")
    if not fs.is_dir("/sys/class/net"):
        raise InputError(f"--root {root}: no sys/class/net under it (not a Linux root or snapshot)")
    facts = read_node(fs, env.get("CUDA_VISIBLE_DEVICES"))
    classify(facts)
    gpu_affinity(facts)
    settings = effective_settings(env, fs)
    facts.skipped_files = dict(fs.skipped)
    return NodeProbe(
        root=str(root),
        facts=facts,
        settings=settings,
        nccl_socket=nccl_socket_ifaces(facts.interfaces, settings),
        nccl_ib=nccl_ib_ports(facts.rdma_devices, settings),
        gloo=gloo_ifaces(facts.interfaces, settings, facts.host, facts.etc_hosts,
                         addresses_known=facts.addresses_known),
    )


def with_settings(node: NodeProbe, settings: Settings) -> NodeProbe:
    """The same node under other settings: NCCL's and Gloo's choices worked out again (no file is read)."""
    f = node.facts
    return NodeProbe(node.root, f, settings, nccl_socket_ifaces(f.interfaces, settings),
                     nccl_ib_ports(f.rdma_devices, settings),
                     gloo_ifaces(f.interfaces, settings, f.host, f.etc_hosts, addresses_known=f.addresses_known))
