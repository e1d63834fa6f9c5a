"""Build nccl_doctor/logs/data/nccl-catalog.json: every INFO/WARN format string NCCL can print, from its source.

Usage (the repositories are bare or normal git clones; any of them may be left out):

    python tools/nccl_catalog.py --nccl PATH/TO/nccl.git --ofi PATH/TO/aws-ofi-nccl.git \
        [--pytorch-file ProcessGroupNCCL.cpp --pytorch-file NCCLUtils.cpp ... --pytorch-ref v2.x]

For NCCL, every release tag from v2.3.5 on is read (``git ls-tree`` + ``git cat-file --batch``: each distinct
blob is parsed once, whatever the number of tags that hold it). Every ``INFO(mask, fmt, ...)``,
``INFO_LOC(mask, fmt, ...)``, ``WARN(fmt, ...)`` and ``VERSION(fmt, ...)`` call (multi-line calls, string
literal concatenation, ``PRIu64``-style macros, calls inside ``#define`` bodies such as ``NCCLCHECK``) gives one
format string with its subsystem mask, file and tags. TRACE is left out. For aws-ofi-nccl, ``NCCL_OFI_WARN`` /
``NCCL_OFI_INFO`` the same way (their macros prefix ``"NET/OFI "``). For PyTorch's c10d sources, the message
texts built with ``c10::str(...)`` / ``fmt::format(...)`` / ``<<`` chains are read as formats whose non-literal
parts are ``%s``; so are ``std::string err = "..." + x + "..."`` concatenations (NCCLUtils.hpp's C10D_NCCL_CHECK).
Formats are deduplicated across tags; each keeps the ranges of tags it appears in.

Every WARN entry also records ``then``, what its source does right after the call (``return ncclSystemError``,
``goto fail``, ``continue``, ``set ncclInternalError`` for ``ret = ...``: NCCL's error paths), and ``error_class``
(fatal, recoverable, informational) that ``nccl_doctor.logs.catalog.formats.error_class`` gives it from its text, files
and ``then`` (catalog_version 2). The parser judges a WARN by that stored class.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: this checkout's rules
from nccl_doctor.logs.catalog.formats import CATALOG_VERSION, error_class  # the error classes are the parser's

SOURCE_EXTS = (".cc", ".cu", ".h", ".c", ".cpp", ".hpp", ".cuh")
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "nccl_doctor" / "logs" / "data" / "nccl-catalog.json.gz"

# macro -> (level, index of the mask argument or -1, index of the format argument, text prepended to the format)
NCCL_MACROS = {
    "INFO": ("INFO", 0, 1, ""),
    "INFO_LOC": ("INFO", 0, 1, ""),
    "WARN": ("WARN", -1, 0, ""),
    "VERSION": ("INFO", -1, 0, ""),
}
OFI_MACROS = {
    "NCCL_OFI_INFO": ("INFO", 0, 1, "NET/OFI "),
    "NCCL_OFI_WARN": ("WARN", -1, 0, "NET/OFI "),
}
# <inttypes.h> conversions, as glibc spells them on x86_64
PRI = {f"PRI{c}{w}": ("l" if w == "64" else "") + c for c in "diuxXo" for w in ("8", "16", "32", "64")}
PRI.update({f"PRI{c}PTR": "l" + c for c in "diuxX"})
STRING_RE = re.compile(r'(?:u8|L|u|U)?"((?:[^"\\\n]|\\.)*)"')
DEFINE_RE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(.+)$", re.M)
ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "\r", "0": "\0", "?": "?", "a": "\a"}
TAG_RE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:-(\d+))?")


def tag_key(tag: str) -> tuple[int, ...]:
    m = TAG_RE.match(tag)
    return tuple(int(g or 0) for g in m.groups()) if m else (0,)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          errors="replace").stdout


def unescape(body: str) -> str:
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def strip_comments(text: str) -> str:
    """Comments out, strings and character literals kept, line breaks kept (line numbers stay)."""
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if ch == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        if ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def call_args(text: str, start: int) -> tuple[list[str], int] | None:
    """The top-level comma-separated arguments of the call whose '(' is at ``start``."""
    depth, i, n, args, cur = 0, start, len(text), [], start + 1
    while i < n:
        ch = text[i]
        if ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[cur:i])
                return [a.strip() for a in args], i
        elif ch == "," and depth == 1:
            args.append(text[cur:i])
            cur = i + 1
        elif ch == ";" and depth <= 1:
            return None
        i += 1
    return None


def string_defines(text: str) -> dict[str, str]:
    """``#define NAME "lit" "lit"`` in a file: NAME -> its text (only all-literal bodies)."""
    out = {}
    for name, body in DEFINE_RE.findall(text):
        body = body.strip()
        if not body.startswith('"'):
            continue
        if not STRING_RE.sub("", body).strip():
            out[name] = "".join(unescape(s) for s in STRING_RE.findall(body))
        elif re.fullmatch(r'(?:\s*(?:"(?:[^"\\]|\\.)*"|STR\(\w+\)|\w+))+\s*', body):
            # "NCCL version " STR(NCCL_MAJOR) "." ... NCCL_SUFFIX: numbers as %d, other macros as %s
            parts = re.findall(r'"((?:[^"\\]|\\.)*)"|(STR\(\w+\))|(\w+)', body)
            out[name] = "".join(unescape(lit) if lit or not (num or word) else ("%d" if num else "%s")
                                for lit, num, word in parts)
    return out


def format_of(expr: str, defines: dict[str, str]) -> tuple[str, list[str]] | None:
    """The text of a concatenation of string literals and macros; unknown macros become ``%s``.

    None when the expression holds no string literal at all (a format passed in a variable).
    """
    parts, macros, pos, had_literal = [], [], 0, False
    expr = expr.strip()
    while pos < len(expr):
        if expr[pos].isspace():
            pos += 1
            continue
        m = STRING_RE.match(expr, pos)
        if m:
            parts.append(unescape(m.group(1)))
            had_literal = True
            pos = m.end()
            continue
        m = re.compile(r"(\w+)(\s*\((?:[^()]|\([^()]*\))*\))?").match(expr, pos)
        if not m:
            return None
        name = m.group(1)
        if name in PRI:
            parts.append(PRI[name])
        elif name in defines:
            parts.append(defines[name])
            had_literal = True
        else:
            parts.append("%s")
            macros.append(m.group(0))
        pos = m.end()
    if not had_literal:
        return None
    return "".join(parts), macros


def composed(text: str, at: int, arg: str, defines: dict[str, str]) -> tuple[str, list[str]] | None:
    """The text of ``"%s", x`` calls: a string macro x (``VERSION_STRING``), or a buffer x filled by
    ``sprintf(x, "head", ...)`` then appended to: ``head%s`` (the head is what a log line starts with)."""
    arg = arg.strip()
    if arg in defines:
        return defines[arg], []
    if not re.fullmatch(r"\w+", arg):
        return None
    window = text[max(0, at - 4000):at]
    heads = list(re.finditer(rf"\bs?n?printf\s*\(\s*{arg}\s*,(?:\s*[\w.>()-]+\s*,)?\s*(\"(?:[^\"\\]|\\.)*\")",
                             window))
    if not heads:
        return None
    head = unescape(heads[-1].group(1)[1:-1])
    return (head if head.endswith("%s") else head + "%s"), []


Call = tuple[str, str, str, list[str], int, str]  # level, mask, format, unresolved macros, line, what follows
# What a WARN's error path does next, read from the statements that follow the call (NCCL's return paths):
# "return ncclSystemError", "goto fail", "continue", "NCCLCHECK" ...; "" when nothing of these follows.
_THEN_RE = re.compile(r"\s*(?:\}\s*)?(?:(return)\s*\(?\s*(nccl\w+|[\w.>-]+)|(goto)\s+(\w+)|(continue|break)\b"
                      r"|(throw)\b|(NCCLCHECK\w*|NCCLCHECKGOTO|CUDACHECK\w*|SYSCHECK\w*)\s*\(|(\w+)\s*=\s*(nccl\w+(?:Error|Usage|Argument|Timeout))\b)")
Macros = dict[str, tuple[str, int, int, str]]


def then_of(text: str, end: int) -> str:
    """What the code does right after a logging call ending at ``end``: how its error path goes on."""
    stop = text.find(";", end)
    m = _THEN_RE.match(text, stop + 1 if stop >= 0 else end)
    if m is None:
        return ""
    ret, value, goto, label, jump, throw, check, _var, code = m.groups()
    if ret:
        return f"return {value}" if value.startswith("nccl") else "return"
    if goto:
        return f"goto {label}"
    return jump or throw or (check and "check") or (code and f"set {code}") or ""


def find_calls(text: str, macros: Macros) -> Iterator[Call]:
    """(level, mask, format, unresolved macros, line, what follows) for every logging call in one source file."""
    text = strip_comments(text.replace("\\\r\n", " ").replace("\\\n", " "))
    defines = string_defines(text)
    names = "|".join(sorted(macros, key=len, reverse=True))
    for m in re.finditer(rf"(?<![\w.>#])({names})\s*\(", text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if re.match(r"\s*#\s*define\s+$", text[line_start:m.start()]):
            continue  # the macro's own definition
        level, mask_at, fmt_at, prefix = macros[m.group(1)]
        got = call_args(text, m.end() - 1)
        if got is None or len(got[0]) <= fmt_at:
            continue
        args = got[0]
        fmt = format_of(args[fmt_at], defines)
        if fmt is None:
            continue
        if fmt[0] == "%s" and len(args) == fmt_at + 2:  # INFO(mask, "%s", x): x's own text, where we can know it
            fmt = composed(text, m.start(), args[fmt_at + 1], defines) or fmt
        mask = " ".join(args[mask_at].split()) if mask_at >= 0 else "NCCL_ALL"
        yield (level, mask, prefix + fmt[0], fmt[1], text.count("\n", 0, m.start()) + 1,
               then_of(text, got[1]) if level == "WARN" else "")
    if "INFO" in macros:
        yield from dumped_lines(text, defines)


def dumped_lines(text: str, defines: dict[str, str]) -> Iterator[Call]:
    """``dumpLine(values, n, prefix)`` (graph/rings.cc) prints ``INFO(NCCL_INIT, "%s", line)`` where line
    is the prefix its caller wrote (``"Channel %02d/%02d :"``) and the values: head + ``%s``."""
    for m in re.finditer(r"(?<![\w.])dumpLine\s*\(", text):
        got = call_args(text, m.end() - 1)
        if got is None or len(got[0]) != 3:
            continue
        fmt = composed(text, m.start(), got[0][2], defines)
        if fmt is not None and fmt[0] != "%s":
            yield "INFO", "NCCL_INIT", fmt[0], [], text.count("\n", 0, m.start()) + 1, ""


def subsystems(mask: str) -> list[str]:
    names = re.findall(r"(?:NCCL_)?([A-Z][A-Z0-9_]+)", mask)
    return sorted({n for n in names if n not in {"NCCL", "ALL"} or mask.strip() in {"NCCL_ALL", "ALL"}}) or [mask]


class Catalog:
    """Formats seen, keyed by (source, level, format), with their subsystems, files and tags."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        self.tags: dict[str, list[str]] = {}

    def add(self, source: str, tag: str, path: str, calls: Iterable[Call]) -> None:
        for level, mask, fmt, macros, _line, then in calls:
            entry = self.entries[(source, level, fmt)]
            if then:
                entry["then"].add(then)
            entry["subsys"].update(subsystems(mask))
            entry["files"].add(path)
            entry["tags"].add(tag)
            entry["macros"].update(macros)

    def to_json(self) -> dict[str, object]:
        out = []
        thens: dict[tuple[str, str], set[str]] = defaultdict(set)  # variants that differ in trailing blanks
        for (source, level, fmt), entry in self.entries.items():
            if level == "WARN":
                thens[(source, fmt.rstrip())] |= entry["then"]
        for (source, level, fmt), entry in sorted(self.entries.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
            order = self.tags.get(source, [])
            index = {t: i for i, t in enumerate(order)}
            idx = sorted(index[t] for t in entry["tags"] if t in index)
            ranges: list[list[str]] = []
            for i in idx:
                if ranges and index[ranges[-1][1]] == i - 1:
                    ranges[-1][1] = order[i]
                else:
                    ranges.append([order[i], order[i]])
            item: dict[str, object] = {"source": source, "level": level, "format": fmt,
                                       "subsys": sorted(entry["subsys"]), "files": sorted(entry["files"]),
                                       "tags": ranges}
            if entry["macros"]:
                item["macros"] = sorted(entry["macros"])
            if level == "WARN":
                item["then"] = sorted(entry["then"])  # (one class for the variants: a log line has no trailing blank)
                item["error_class"] = error_class(source, fmt, tuple(sorted(entry["files"])),
                                                  tuple(sorted(thens[(source, fmt.rstrip())]))).value
            out.append(item)
        return {"catalog_version": CATALOG_VERSION,
                "built_from": {src: {"first": tags[0], "last": tags[-1], "count": len(tags), "tags": tags}
                               for src, tags in self.tags.items() if tags},
                "entries": out}


def read_repo(cat: Catalog, source: str, repo: Path, tags: list[str], *, roots: tuple[str, ...],
              macros: Macros) -> None:
    """Every tag's source files under ``roots``; each distinct blob read and parsed once."""
    cat.tags[source] = tags
    blobs: dict[str, list[tuple[str, str]]] = defaultdict(list)  # blob -> [(tag, path)]
    for tag in tags:
        for row in git(repo, "ls-tree", "-r", tag, "--", *roots).splitlines():
            meta, path = row.split("\t", 1)
            kind, sha = meta.split()[1:3]
            if kind == "blob" and path.endswith(SOURCE_EXTS):
                blobs[sha].append((tag, path))
    proc = subprocess.Popen(["git", "-C", str(repo), "cat-file", "--batch"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    names = tuple(macros)
    for sha, where in blobs.items():
        proc.stdin.write(sha.encode() + b"\n")
        proc.stdin.flush()
        size = int(proc.stdout.readline().split()[2])
        data = proc.stdout.read(size + 1)[:size].decode("utf-8", "replace")
        if not any(f"{n}(" in data or f"{n} (" in data for n in names):
            continue
        calls = list(find_calls(data, macros))
        for tag, path in where:
            cat.add(source, tag, path, calls)
    proc.stdin.close()
    proc.wait()


PT_CALL_RE = re.compile(r"(?<![\w.])(?:c10::str|fmt::format|TORCH_CHECK\w*|C10_THROW_ERROR|TORCH_WARN\w*|LOG)\s*\(")


# std::string err = "NCCL error in: " + std::string(__FILE__) + ":" + ... ; (NCCLUtils.hpp's C10D_NCCL_CHECK macros)
PT_CONCAT_RE = re.compile(r"\b(?:std::string|auto|const auto)\s+\w+\s*=\s*(?=\")")
PT_INTERPRET_RE = re.compile(r"\binterpret\s*=\s*((?:\s*\"(?:[^\"\\\\]|\\\\.)*\")+)\s*;")


def pytorch_formats(text: str) -> Iterator[Call]:
    """Messages of c10d's NCCL sources: ``c10::str(a, "b", c)`` / ``fmt::format("{} x", a)`` / ``LOG(..) << ...``.

    Non-literal parts become ``%s``; a message must have a literal of 8+ characters to count.
    """
    text = strip_comments(text)
    for m in PT_CALL_RE.finditer(text):
        got = call_args(text, m.end() - 1)
        if got is None:
            continue
        args, end = got
        head = m.group(0).split("(")[0].strip()
        if head == "LOG":
            stop = text.find(";", end)
            chain = text[end + 1:stop]
            args = [a.strip() for a in re.split(r"<<(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", chain) if a.strip()]
            level = "WARN" if "ERROR" in got[0][0] or "WARNING" in got[0][0] else "INFO"
        else:
            if head.startswith("TORCH_CHECK") or head == "C10_THROW_ERROR":
                args = args[1:]
            level = "WARN"
        if head == "fmt::format" and args:
            lit = format_of(args[0], {})
            if lit is None:
                continue
            fmt = re.sub(r"\{[^{}]*\}", "%s", lit[0].replace("%", "%%"))
        else:
            pieces = []
            for a in args:
                lit = format_of(a, {}) if a.startswith('"') else None
                pieces.append(lit[0].replace("%", "%%") if lit and not lit[1] else "%s")
            fmt = "".join(pieces)
        fmt = re.sub(r"(?:%s)+", "%s", fmt)
        if len(re.sub(r"%s", "", fmt).strip()) < 8:
            continue
        yield level, "C10D", fmt, [], text.count("\n", 0, m.start()) + 1, ""
    for m in PT_CONCAT_RE.finditer(text):
        fmt = _concatenation(text[m.end():text.find(";", m.end())])
        if fmt is not None:
            yield "WARN", "C10D", fmt, [], text.count("\n", 0, m.start()) + 1, ""
    for m in PT_INTERPRET_RE.finditer(text):  # getNcclErrorDetailStr: "ncclRemoteError: A call failed ..."
        lit = format_of(m.group(1), {})
        if lit is not None:
            yield "WARN", "C10D", lit[0].replace("%", "%%").strip(), [], text.count("\n", 0, m.start()) + 1, ""


def _concatenation(expr: str) -> str | None:
    """``"a" + x + "b"`` as ``a%sb`` (only the first line of a multi-line message: what a log line starts with);
    None unless it starts with a literal of 8+ characters."""
    pieces, depth, cur, i = [], 0, 0, 0
    while i < len(expr):
        ch = expr[i]
        if ch == '"':
            j = i + 1
            while j < len(expr) and expr[j] != '"':
                j += 2 if expr[j] == "\\" else 1
            i = j + 1
            continue
        depth += (ch in "([{") - (ch in ")]}")
        if ch == "+" and depth == 0:
            pieces.append(expr[cur:i].strip())
            cur = i + 1
        i += 1
    pieces.append(expr[cur:].strip())
    out = []
    for piece in pieces:
        lit = format_of(piece, {}) if piece.startswith('"') else None
        out.append(lit[0].replace("%", "%%") if lit and not lit[1] else "%s")
    fmt = re.sub(r"(?:%s)+", "%s", "".join(out)).split("\n", 1)[0]
    return fmt if len(re.sub(r"%s", "", fmt).strip()) >= 8 and not fmt.startswith("%s") else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nccl", type=Path, help="NVIDIA/nccl git directory")
    ap.add_argument("--ofi", type=Path, help="aws/aws-ofi-nccl git directory")
    ap.add_argument("--pytorch-file", type=Path, action="append", default=[],
                    help="a c10d source file (ProcessGroupNCCL.cpp, NCCLUtils.cpp/.hpp, ...)")
    ap.add_argument("--pytorch-ref", default="main", help="the PyTorch revision those files are from")
    ap.add_argument("--min-tag", default="v2.3.5", help="first NCCL tag read")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    started = time.monotonic()
    cat = Catalog()
    if args.nccl:
        tags = sorted((t for t in git(args.nccl, "tag").split() if TAG_RE.match(t)
                       and tag_key(t) >= tag_key(args.min_tag)), key=tag_key)
        read_repo(cat, "nccl", args.nccl, tags, roots=("src",), macros=NCCL_MACROS)
    if args.ofi:
        tags = sorted((t for t in git(args.ofi, "tag").split() if TAG_RE.match(t)), key=lambda t: (tag_key(t), t))
        read_repo(cat, "aws-ofi-nccl", args.ofi, tags, roots=("src", "include"), macros=OFI_MACROS)
    if args.pytorch_file:
        cat.tags["pytorch"] = [args.pytorch_ref]
        for path in args.pytorch_file:
            cat.add("pytorch", args.pytorch_ref, f"torch/csrc/distributed/c10d/{path.name}",
                    pytorch_formats(path.read_text()))
    data = cat.to_json()
    text = json.dumps(data, indent=None, separators=(",", ":"), ensure_ascii=False)
    text = text.replace('},{"source"', '},\n{"source"')
    if args.out.suffix == ".gz":
        args.out.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        args.out.write_text(text + "\n")
    entries = data["entries"]
    assert isinstance(entries, list)
    print(f"{len(entries)} formats -> {args.out} in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
