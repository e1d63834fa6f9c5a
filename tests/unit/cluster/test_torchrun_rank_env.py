"""The environment the self-launcher hands torchrun and bench's ranks: ``rank_env``'s settings in force (NCCL
connects at init; PyTorch's error handling left as the user's), the user's own values replaced with a note."""

import json

from nccl_doctor.cluster import torchrun
from nccl_doctor.cluster.rankenv import RANK_SETTINGS


def cfg(**kw):
    return torchrun.LaunchConfig(nproc_per_node=2, rdzv_endpoint="127.0.0.1:29500", rdzv_id="x", **kw)


def test_ranks_connect_at_init_without_blocking_wait(tmp_path):
    base = {"PATH": "/bin", "RANK": "3"}
    torchrun._worker_env(base, cfg(notes=("rendezvous note",)), tmp_path, "log")
    assert "TORCH_NCCL_BLOCKING_WAIT" not in base and base["NCCL_RUNTIME_CONNECT"] == "0"
    assert all(base[k] == v for k, v in RANK_SETTINGS.items())
    assert json.loads(base[torchrun.NOTES_ENV]) == ["rendezvous note"]  # nothing of the user's replaced
    assert "RANK" not in base


def test_a_users_own_value_is_replaced_with_a_note(tmp_path):
    base = {"TORCH_NCCL_BLOCKING_WAIT": "0", "NCCL_RUNTIME_CONNECT": "1"}
    torchrun._worker_env(base, cfg(), tmp_path, "log")
    assert base["TORCH_NCCL_BLOCKING_WAIT"] == "0"  # the user's: no longer ours to set
    (note,) = json.loads(base[torchrun.NOTES_ENV])
    assert note.startswith("NCCL_RUNTIME_CONNECT=1 replaced by 0")
    assert torchrun.launch_notes(base) == [note]  # what the ranks put in the report's notes
