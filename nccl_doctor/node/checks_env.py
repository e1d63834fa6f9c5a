"""Checks of the NCCL/Gloo variables themselves: values NCCL reads otherwise than meant, names nothing reads,
and nccl.conf files. A fix this tool suggests must never lead to a finding of its own: ``rejected``
re-runs the other checks on the node as the fix would leave it."""

from __future__ import annotations

from nccl_doctor.codes import Code
from nccl_doctor.node.checks_rdma import check_bonds, check_gpus, check_net, check_rdma
from nccl_doctor.node.checks_socket import check_gloo, check_names, check_socket, check_summary
from nccl_doctor.node.fixes import conf_file, set_fix, source_note, undo_fix
from nccl_doctor.node.model import ENVIRONMENT, NodeProbe, Setting, Settings
from nccl_doctor.node.ncclenv import (
    DEBUG_LEVELS,
    DEPRECATED_TORCH,
    INT_VARS,
    NOT_READ,
    did_you_mean,
    gdr_level,
    parse_c_int,
    show,
)
from nccl_doctor.node.probe import with_settings
from nccl_doctor.report import Finding, Severity, finding

PASS, WARN, FAIL = Severity.PASS, Severity.WARN, Severity.FAIL

# Every check but the variables' own, in report order: what a changed setting could trip.
SETUP_CHECKS = (check_summary, check_socket, check_names, check_rdma, check_net, check_bonds, check_gpus, check_gloo)

LEVEL_VARS = ("NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL")
UPPER_LEVELS = ("LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS")  # a lower-case one was probably meant
CROSS_NIC_VALUES = (0, 1, 2)
P2P_DISABLE_VALUES = (0, 1)
INTRA_NODE_TRANSPORTS = {"NCCL_P2P_DISABLE": "NVLink/PCIe peer-to-peer",
                         "NCCL_SHM_DISABLE": "the shared-memory transport"}
READ_PREFIXES = ("NCCL_", "GLOO_")  # names NCCL or torch's Gloo would read


def _hypothetical(node: NodeProbe, name: str, value: str, drop: str | None = None) -> NodeProbe:
    """This node with ``name=value`` exported (and ``drop`` gone): what a suggested fix would lead to."""
    values = {k: v for k, v in node.settings.values.items() if k != drop}
    values[name] = Setting(name, value, ENVIRONMENT)
    return with_settings(node, Settings(values, node.settings.conf_files, node.settings.missing_conf_file))


def rejected(node: NodeProbe, name: str, value: str, drop: str | None = None) -> Finding | None:
    """The first WARN/FAIL this tool would raise after ``export name=value`` that it does not raise now:
    a fix must never lead to a finding of our own (None: the value is accepted)."""
    now = {(f.code, f.message) for c in SETUP_CHECKS for f in c(node)}
    hyp = _hypothetical(node, name, value, drop)
    for f in [*(f for c in SETUP_CHECKS for f in c(hyp)), *_value_findings(hyp, hyp.settings.values[name])]:
        if f.severity is not PASS and (f.code, f.message) not in now:
            return f
    return None


def check_env(node: NodeProbe) -> list[Finding]:
    """Every variable set (environment and conf files), then NCCL_CONF_FILE and each conf file read."""
    out: list[Finding] = []
    s = node.settings
    for name, st in sorted(s.values.items()):
        if st.value == "":
            continue
        if name != name.strip():
            out += _spaced_name(node, st)
            continue
        out += _value_findings(node, st)
        out += _name_findings(node, st)
    if s.missing_conf_file:
        path = s.missing_conf_file
        rel = "" if path.startswith("/") else " (a relative path: NCCL opens it from the job's working directory)"
        out.append(finding(Code.NCCL_CONF_FILE, WARN, f"NCCL_CONF_FILE={path}: no such readable file{rel}; NCCL "
                           "ignores it silently, so none of its settings apply (and ~/.nccl.conf is not read instead)",
                           "point NCCL_CONF_FILE at the existing file, or unset NCCL_CONF_FILE", host=node.host,
                           file=path))
    out += [_conf_file_finding(node, path) for path in s.conf_files]
    return out


# ---------------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------------


def _value_findings(node: NodeProbe, st: Setting) -> list[Finding]:
    """Values NCCL reads otherwise than the user meant (ND217, ND218) or that slow it down (ND221)."""
    name, v = st.name, st.value
    out: list[Finding] = []
    if name in INT_VARS:
        n, ok = parse_c_int(v)
        if not ok:
            out.append(_not_integer(node, st, n))
    if name in LEVEL_VARS and gdr_level(v) is None:
        out.append(_unknown_level(node, st))
    out += _out_of_range(node, st)
    if name in INTRA_NODE_TRANSPORTS and parse_c_int(v) == (1, True):
        out.append(finding(Code.P2P_OR_SHM_DISABLED, WARN, f"{name}=1{source_note(node, name)} turns off "
                           f"{INTRA_NODE_TRANSPORTS[name]} inside the node: intra-node collectives slow down a lot",
                           undo_fix(node, [(name, "0")]), host=node.host))
    return out


def _unknown_level(node: NodeProbe, st: Setting) -> Finding:
    """ND218 for a path level NCCL does not know (names are case-sensitive; NODE is nvidia-smi's word)."""
    name, v = st.name, st.value
    up = f" (did you mean {v.upper()}?)" if v.upper() in UPPER_LEVELS else ""
    node_hint = " (NODE is an nvidia-smi term; NCCL calls it PHB)" if v.upper() == "NODE" else ""
    return finding(Code.ENV_VALUE_IGNORED, WARN, f"{name}={show(v)}{source_note(node, name)} is not a level NCCL "
                   f"knows (names are case-sensitive){up}{node_hint}; NCCL ignores it and uses its default",
                   f"export {name}={v.upper() if up else 'PHB' if node_hint else 'PXB'}", host=node.host)


def _out_of_range(node: NodeProbe, st: Setting) -> list[Finding]:
    """ND218 for NCCL_DEBUG, NCCL_CROSS_NIC and NCCL_P2P_DISABLE values NCCL ignores."""
    name, v = st.name, st.value
    sv, src = show(v), source_note(node, name)
    n, whole = parse_c_int(v)
    if name == "NCCL_DEBUG" and v.upper() not in DEBUG_LEVELS:
        return [finding(Code.ENV_VALUE_IGNORED, WARN, f"NCCL_DEBUG={sv}{src} is not one of {', '.join(DEBUG_LEVELS)}; "
                        "NCCL prints nothing extra", "export NCCL_DEBUG=INFO", host=node.host)]
    if name == "NCCL_CROSS_NIC" and whole and n not in CROSS_NIC_VALUES:
        return [finding(Code.ENV_VALUE_IGNORED, WARN, f"NCCL_CROSS_NIC={sv}{src}: valid values are 0, 1, 2 (default 2)",
                        undo_fix(node, [(name, None)]), host=node.host)]
    if name == "NCCL_P2P_DISABLE" and whole and n not in P2P_DISABLE_VALUES:
        return [finding(Code.ENV_VALUE_IGNORED, WARN, f"NCCL_P2P_DISABLE={sv}{src}: only 1 disables P2P; NCCL ignores "
                        f"{sv}", undo_fix(node, [(name, None)]), host=node.host)]
    return []


def _not_integer(node: NodeProbe, st: Setting, n: int) -> Finding:
    """ND217. The obvious fix for a ``*_DISABLE`` flag is ``=1``, unless this tool would then flag that
    (IB off with active ports, P2P off): then back to the default, as ND207/ND221 say."""
    name, src = st.name, source_note(node, st.name)
    meaning = f"NCCL reads it as {n}"
    if name.endswith("_DISABLE") and n == 0:
        meaning += f": {name.removesuffix('_DISABLE').removeprefix('NCCL_')} stays ENABLED"
    if "#" in st.value and st.source != ENVIRONMENT:
        meaning += " (nccl.conf has no end-of-line comments: '#' starts a comment only in column 0)"
    if not name.endswith("_DISABLE"):
        return finding(Code.ENV_NOT_INTEGER, WARN, f"{name}={show(st.value)}{src} is not an integer; {meaning}",
                       undo_fix(node, [(name, None)]), host=node.host)
    bad = rejected(node, name, "1")
    if bad is not None:
        meaning += f"; {name}=1 would be flagged too ({bad.code})"
    fix = undo_fix(node, [(name, "0")]) if bad is not None else set_fix(node, name, "1")
    return finding(Code.ENV_NOT_INTEGER, WARN, f"{name}={show(st.value)}{src} is not an integer; {meaning}", fix,
                   host=node.host, file=conf_file(node, name))


# ---------------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------------


def _name_findings(node: NodeProbe, st: Setting) -> list[Finding]:
    """ND219: names NCCL (or torch's Gloo) does not read: deprecated, ignored, or misspelt."""
    name, v = st.name, st.value
    if not name.startswith(READ_PREFIXES) or name in INT_VARS:
        return []
    src = source_note(node, name)
    if name in DEPRECATED_TORCH:
        return [finding(Code.ENV_UNKNOWN_NAME, WARN, f"{name}{src} is the pre-2.2 PyTorch name (deprecated)",
                        f"export TORCH_{name}={show(v)}; " + undo_fix(node, [(name, None)]), host=node.host)]
    if name in NOT_READ:
        return [finding(Code.ENV_UNKNOWN_NAME, WARN, f"{name}{src} is not read by NCCL: {NOT_READ[name]}",
                        undo_fix(node, [(name, None)]), host=node.host)]
    guess = did_you_mean(name)
    if not guess:
        return []
    what = "a Gloo" if name.startswith("GLOO_") else "an NCCL"
    return [_renamed(node, st, guess, v, f"{name}{src} is not {what} variable; did you mean {guess}?")]


def _spaced_name(node: NodeProbe, st: Setting) -> list[Finding]:
    """``NAME = value`` in nccl.conf: NCCL's setEnvFile keeps the spaces, so it sets a variable named
    ``'NAME '`` (value ``' value'``) that nothing reads."""
    bare = st.name.strip()
    if not bare.startswith(READ_PREFIXES):
        return []
    where = f"{st.source} line {st.line}" if st.source != ENVIRONMENT else "the environment"
    head = (f"spaces around '=' in {where} ({st.name}={st.value}): NCCL sets a variable named {st.name!r} to "
            f"{st.value!r}, which nothing reads, so {bare} is not set by it; write {bare}={st.value.strip()}")
    return [_renamed(node, st, bare, st.value.strip(), head)]


def _renamed(node: NodeProbe, st: Setting, target: str, value: str, head: str) -> Finding:
    """ND219 for a name nothing reads that stands for ``target``. The fix renames it only when that is
    safe: ``target`` is not already set, and this tool would not flag ``target=value``; else it only
    removes the wrong name. A conf file line is changed in the file."""
    conf = st.source != ENVIRONMENT
    other = node.settings.values.get(target)
    taken = other is not None and other.value != ""
    bad = None
    if other is not None and taken:
        head += (f" ({target} is already set to {show(other.value)}{source_note(node, target)}: just remove "
                 f"{st.name.strip()})")
    else:
        bad = rejected(node, target, value, drop=st.name)
        if bad is not None:
            head += f" (but {target}={show(value)} would itself be flagged here: {bad.code} {bad.message})"
    if taken or bad is not None:
        fix = f"delete line {st.line} of {st.source}" if conf else f"unset {st.name}"
        if bad is not None and bad.fix and f"{target}=" in bad.fix:  # a value that works, not just "unset"
            fix += f" (for {target}, {bad.code} suggests: {bad.fix})"
    elif conf:
        fix = f"change line {st.line} of {st.source} to {target}={value}"
    else:
        fix = f"export {target}={value}; unset {st.name}"
    return finding(Code.ENV_UNKNOWN_NAME, WARN, head, fix, host=node.host, file=st.source if conf else None)


# ---------------------------------------------------------------------------------------------------
# Conf files
# ---------------------------------------------------------------------------------------------------


def _conf_file_finding(node: NodeProbe, path: str) -> Finding:
    """ND220: what a conf file sets; quotes and CRLF line ends are kept in the values by NCCL."""
    mine = [st for st in node.settings.values.values() if st.source == path]
    quoted = [st for st in mine if st.value[:1] in ("'", '"')]
    crlf = [st for st in mine if st.value.endswith("\r")]
    shown = [show(f"{st.name}={st.value}") if st.name != st.name.strip() else f"{st.name}={show(st.value)}"
             for st in mine]
    msg = f"{path} sets {', '.join(shown) or 'nothing new'}"
    fixes = []
    if quoted:
        msg += " (values are taken verbatim: the quotes are part of the value)"
        fixes.append(f"remove the quotes in {path}")
    if crlf:
        msg += ("; the file has Windows (CRLF) line ends and NCCL keeps the carriage return (\\r) at the end of "
                f"{', '.join(st.name for st in crlf)}, so those values match or mean nothing")
        fixes.append(f"convert the file: sed -i 's/\\r$//' {path} (or dos2unix {path})")
    return finding(Code.NCCL_CONF_FILE, WARN if fixes else PASS, msg, "; ".join(fixes) or None, host=node.host,
                   file=path)
