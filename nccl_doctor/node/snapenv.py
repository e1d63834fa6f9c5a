"""The environment a snapshot was taken with. ``probe --snapshot`` stores the NCCL/Gloo/torch variables
the probe read (never this tool's own ``NCCL_DOCTOR_*``), and ``probe --root SNAPSHOT`` replays them, so
its report is the one the node gave; ``--env live`` applies this shell's variables instead (the member
is then not read). The member also lists the address files the node itself lacks (no if_inet6 without
IPv6): the replay calls them absent, not unknown.

The member is read through the ``FsReader`` like any file of the snapshot (size-capped, in memory) and
checked: a JSON object of string variables the probe records, else one line and exit 2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from nccl_doctor.enums import StrEnum
from nccl_doctor.errors import InputError
from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.ncclenv import OWN_PREFIX, SETTING_PREFIXES, user_conf_path
from nccl_doctor.node.sysfs import ADDRESS_FILES

ENV_MEMBER = "/nccl-doctor/environment.json"  # inside the snapshot, beside sys/ proc/ etc/
FORMAT = 1
HOME = "HOME"  # where NCCL looked for ~/.nccl.conf on the node: replayed so the same file applies


class EnvSource(StrEnum):
    """``--env``: which variables a ``--root`` probe applies."""

    SNAPSHOT = "snapshot"  # those recorded in the snapshot (this shell's when it has none)
    LIVE = "live"  # this shell's


@dataclass
class Recorded:
    """What a snapshot recorded of the node's process: the environment to replay, and the address files
    the node itself did not have (a kernel without IPv6 has no if_inet6: absent there, not unknown)."""

    env: dict[str, str]
    absent: set[str] = field(default_factory=set)


def recorded(env: Mapping[str, str]) -> dict[str, str]:
    """The variables the probe reads from ``env``, as a snapshot stores them."""
    return {k: v for k, v in sorted(env.items()) if k.startswith(SETTING_PREFIXES) and not k.startswith(OWN_PREFIX)}


def encode(env: Mapping[str, str], fs: FsReader) -> bytes:
    """The member's bytes: the recorded variables, the home directory NCCL's user conf file is under, and
    the address files the node has not (read after the probe: on the live root a missing one is a fact)."""
    conf = user_conf_path(env, fs)
    home = conf.rsplit("/", 1)[0] if conf else None
    absent = sorted(p for p in ADDRESS_FILES if p in fs.absent or (fs.live and fs.read(p) is None))
    doc = {"format": FORMAT, "variables": recorded(env), "home": home, "absent": absent}
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")


def replayed(fs: FsReader, where: str) -> Recorded | None:
    """What was recorded under ``fs`` (None: the snapshot has none, e.g. a tree or an older snapshot). A
    member that is not what ``encode`` writes is refused with one line naming ``where``."""
    text = fs.read(ENV_MEMBER)
    if text is None:
        return None
    bad = f"--root {where}: {ENV_MEMBER.lstrip('/')} is not a recorded environment"
    try:
        doc = json.loads(text)
    except ValueError:
        raise InputError(f"{bad} (not JSON); replay with --env live") from None
    variables = doc.get("variables") if isinstance(doc, dict) else None
    home = doc.get("home") if isinstance(doc, dict) else None
    absent = doc.get("absent", []) if isinstance(doc, dict) else None
    if not isinstance(variables, dict) or not (home is None or isinstance(home, str)):
        raise InputError(f"{bad} (no 'variables' object); replay with --env live")
    if not isinstance(absent, list) or not set(absent) <= set(ADDRESS_FILES):
        raise InputError(f"{bad} ('absent' lists files the probe does not record); replay with --env live")
    for k, v in variables.items():
        if not isinstance(v, str) or recorded({k: v}) != {k: v}:
            raise InputError(f"{bad}: {k!r} is not a variable the probe records; replay with --env live")
    env = dict(variables)
    if home:
        env[HOME] = home
    return Recorded(env, set(absent))
