"""``nccl_doctor.cluster`` is a namespace, not a facade: callers import from the module a name lives in.

Run in a fresh interpreter: in this one, other tests have imported the submodules, which become attributes.
"""

import json
import subprocess
import sys

import nccl_doctor.cluster

SCRIPT = "import json, nccl_doctor.cluster as c; print(json.dumps(sorted(n for n in vars(c) if not n.startswith('_'))))"


def test_cluster_package_exports_nothing():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout) == []
    assert not hasattr(nccl_doctor.cluster, "__all__")
