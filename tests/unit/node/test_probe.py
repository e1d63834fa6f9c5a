"""``probe_node``: a root that is not a Linux root, and speed."""

import time

import pytest

from nccl_doctor.errors import InputError
from nccl_doctor.node import probe_node
from nccl_doctor.node.view import probe_report

pytestmark = pytest.mark.usefixtures("no_nccl_env")


def test_missing_root_sys_is_input_error(tmp_path):
    from nccl_doctor.node.probe import probe_node
    with pytest.raises(InputError, match="no sys/class/net"):
        probe_node(tmp_path, {})


@pytest.mark.serial  # times itself
def test_probe_node_is_fast(roots):
    t = time.perf_counter()
    probe_report(probe_node(roots["dgx_h100"], {}))
    assert time.perf_counter() - t < 0.5
