"""Where a setting comes from (the environment or an nccl.conf line) and the fix that changes it there.

NCCL rereads nccl.conf at every init and the environment wins over it, so a value from a file is
overridden with an exported default, or its line deleted (and the environment's copy unset, else the
file's value comes back).
"""

from __future__ import annotations

from nccl_doctor.node.model import ENVIRONMENT, NodeProbe, Setting
from nccl_doctor.node.ncclenv import show

# The value that turns IB back on for each variable that can turn it off.
IB_ON = {"NCCL_IB_DISABLE": "0", "NCCL_NET": "IB"}

SHOWN_MAX = 4  # names a message lists before it stops


def source_note(node: NodeProbe, name: str) -> str:
    """`` (set in /etc/nccl.conf line 3)`` for a conf file value; empty for the environment's."""
    st = node.settings.values.get(name)
    if st is None or st.source == ENVIRONMENT:
        return ""
    return f" (set in {st.source}" + (f" line {st.line})" if st.line else ")")


def conf_origin(node: NodeProbe, name: str) -> Setting | None:
    """The nccl.conf line that sets ``name`` now, or that takes over once the environment's value is unset."""
    st = node.settings.values.get(name)
    if st is not None and st.source != ENVIRONMENT:
        return st
    return next(iter(node.settings.shadowed.get(name, [])), None)


def conf_file(node: NodeProbe, *names: str) -> str | None:
    """The conf file a finding is about, when the values come from one."""
    return next((c.source for c in (conf_origin(node, n) for n in names) if c is not None), None)


def undo_fix(node: NodeProbe, items: list[tuple[str, str | None]]) -> str:
    """Back to NCCL's default for each (variable, value meaning 'default'; None: only deleting the line
    does): ``unset`` where only the environment sets it, else override or delete the conf file line."""
    unsets: list[str] = []
    exports: list[str] = []
    lines: dict[str, list[tuple[int | None, str]]] = {}
    env_too: list[str] = []
    need_file = False
    for name, default in items:
        conf = conf_origin(node, name)
        if conf is None:
            unsets.append(f"unset {name}")
            continue
        lines.setdefault(conf.source, []).append((conf.line, f"{name}={show(conf.value)}"))
        if node.settings.source(name) == ENVIRONMENT:
            env_too.append(name)
        if default is None:
            need_file = True
        else:
            exports.append(f"export {name}={default}")
    if not lines:
        return "; ".join(unsets)
    files = _delete_lines(lines, env_too)
    if need_file:  # some value only goes away with its line
        return "; ".join([*unsets, *exports, files])
    alt = f"{'; '.join(exports)} (the environment wins over nccl.conf), or {files}"
    return "; ".join(unsets) + "; and " + alt if unsets else alt


def _delete_lines(lines: dict[str, list[tuple[int | None, str]]], env_too: list[str]) -> str:
    """``unset A and delete lines 1 and 2 of /etc/nccl.conf (A=1, B=2)``."""
    unset = "unset " + " ".join(env_too) + " and " if env_too else ""
    return unset + "delete " + ", ".join(
        f"line{'s' if len(n) > 1 else ''} {' and '.join(str(k) for k, _ in n)} of {path} ({', '.join(t for _, t in n)})"
        for path, n in lines.items())


def set_fix(node: NodeProbe, name: str, value: str) -> str:
    """Give ``name`` this value where it is set now (a conf file line, or the environment)."""
    st = node.settings.values.get(name)
    if st is None or st.source == ENVIRONMENT:
        return f"export {name}={value}"
    return f"change line {st.line} of {st.source} to {name}={value}, or export {name}={value} (the environment wins)"


def undo_line(node: NodeProbe, name: str, default: str) -> str:
    """One exports line: ``unset`` where only the environment sets it; over a nccl.conf value (NCCL rereads
    the file and the environment wins) export the default instead."""
    conf = conf_origin(node, name)
    if conf is None:
        return f"unset {name}"
    return f"export {name}={default}  # overrides {name}={show(conf.value)} in {conf.source} line {conf.line}"
