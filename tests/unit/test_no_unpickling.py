"""Nothing a network peer can write is ever deserialised: no module of the package unpickles, calls an object
collective (they unpickle what every peer sends), ``torch.load``s, or launches torch's dynamic rendezvous
(its state is a pickle in a store that listens on every interface). Checked on the code's syntax tree, so a
comment or a docstring that names them is no match, and a call hidden behind an alias is.

The one exception: ``logs/parse/parallel.py`` unpickles what its own process-pool workers send over the pool's
own pipes (the parse of one file, split across this machine's cores); nothing from the network reaches it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "nccl_doctor"
ALLOWED_UNPICKLING = {"nccl_doctor/logs/parse/parallel.py"}  # its own pool's pipes only
PICKLE_LOADERS = {"load", "loads", "Unpickler"}
OBJECT_COLLECTIVES = {"all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list",
                      "send_object_list", "recv_object_list"}
DYNAMIC_BACKENDS = ("c10d", "etcd", "etcd-v2")  # torch's dynamic rendezvous: a pickled state in the store


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for an attribute chain or a name; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local names bound by imports -> what they are (``from pickle import loads as l`` -> l: pickle.loads)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _docstrings(tree: ast.AST) -> set[int]:
    """The docstring constants (prose, never run)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def offences(source: str, path: str) -> list[str]:
    """What in ``source`` deserialises peer data or starts a dynamic rendezvous, one line each."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    docstrings = _docstrings(tree)
    found: list[str] = []

    def resolve(name: str) -> str:
        head, _, rest = name.partition(".")
        full = aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = resolve(_dotted(node.func))
            last = name.rsplit(".", 1)[-1]
            if name.startswith(("pickle.", "cPickle.", "_pickle.", "dill.", "cloudpickle.")) and last in PICKLE_LOADERS:
                found.append(f"{path}:{node.lineno} calls {name}")
            elif last in OBJECT_COLLECTIVES:
                found.append(f"{path}:{node.lineno} calls the object collective {last} (it unpickles peers' data)")
            elif name in ("torch.load", "torch.serialization.load"):
                found.append(f"{path}:{node.lineno} calls {name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
            if any(f"rdzv-backend={b}" in text or f"rdzv_backend={b}" in text for b in DYNAMIC_BACKENDS) \
                    or text.startswith("torch.distributed.elastic.rendezvous.dynamic_rendezvous"):
                found.append(f"{path}:{node.lineno} launches torch's dynamic rendezvous ({text!r})")
        elif isinstance(node, ast.ImportFrom) and node.module and "dynamic_rendezvous" in node.module:
            found.append(f"{path}:{node.lineno} imports {node.module}")
    return found


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_no_module_deserialises_what_a_peer_can_write(path: Path):
    rel = _rel(path)
    found = offences(path.read_text(), rel)
    if rel in ALLOWED_UNPICKLING:
        found = [f for f in found if "pickle." not in f]
    assert found == []


def test_the_allowed_pool_still_is_the_only_unpickler_and_pickles_only_its_own():
    """The exception stays narrow: parallel.py unpickles (or it no longer needs the exception), and nothing
    else in it does what the rule forbids."""
    text = (PACKAGE / "logs" / "parse" / "parallel.py").read_text()
    found = offences(text, "parallel.py")
    assert found and all("pickle.loads" in f for f in found), found


@pytest.mark.parametrize(("source", "needle"), [
    ("import pickle\npickle.loads(b'')", "calls pickle.loads"),
    ("from pickle import loads as l\nl(b'')", "calls pickle.loads"),
    ("import pickle as p\np.Unpickler(f).load()", "calls pickle.Unpickler"),
    ("import torch.distributed as dist\ndist.all_gather_object([], 1)", "all_gather_object"),
    ("from torch.distributed import broadcast_object_list as b\nb([0])", "broadcast_object_list"),
    ("import torch\ntorch.load('x')", "calls torch.load"),
    ("argv = ['--rdzv-backend=c10d']", "dynamic rendezvous"),
    ("argv = [f'--rdzv_backend=etcd']", "dynamic rendezvous"),
    ("from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler", "imports"),
])
def test_the_guard_catches_each_form(source: str, needle: str):
    found = offences(source, "m.py")
    assert len(found) >= 1 and needle in found[0], found


def test_the_guard_ignores_comments_and_docstrings():
    source = '"""We used to call pickle.loads and all_gather_object with --rdzv-backend=c10d."""\n# pickle.loads(x)\n'
    assert offences(source, "m.py") == []
