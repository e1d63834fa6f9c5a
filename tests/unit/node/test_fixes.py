"""Fixes that work where the setting comes from: nccl.conf values are overridden (the environment wins)
or their lines deleted, and the exports block leaves IB on once run."""


import pytest

from nccl_doctor.node import check, probe_node
from nccl_doctor.node.view import node_dict
from tests.helpers.probing import ENV, apply_exports, dgx_conf, first

pytestmark = pytest.mark.usefixtures("no_nccl_env")


def test_ib_off_in_conf_fix_overrides_the_file_and_names_every_setting(tmp_path):
    root = dgx_conf(tmp_path, "NCCL_IB_DISABLE=1\nNCCL_NET=Socket\n")
    node = probe_node(root, ENV)
    f = first(node, "ND207", "fail")
    assert "/etc/nccl.conf" in f.message and "NCCL_IB_DISABLE" in f.message and "NCCL_NET" in f.message
    assert "unset" not in f.fix
    assert "export NCCL_IB_DISABLE=0" in f.fix and "export NCCL_NET=IB" in f.fix and "/etc/nccl.conf" in f.fix
    ex = node_dict(node)["exports"]
    assert not any(line.startswith(("unset NCCL_IB_DISABLE", "unset NCCL_NET")) for line in ex)
    fixed = probe_node(root, apply_exports(ENV, ex))  # NCCL reads the file again: the exports must still win
    assert fixed.nccl_ib.ports and fixed.nccl_ib.disabled_by is None
    assert "ND207" not in {x.code for x in check(fixed)}


def test_ib_off_in_environment_still_unsets(dgx):
    node = probe_node(dgx, {**ENV, "NCCL_IB_DISABLE": "1"})
    assert first(node, "ND207", "fail").fix == "unset NCCL_IB_DISABLE"
    assert "unset NCCL_IB_DISABLE" in node_dict(node)["exports"]


def test_ib_off_by_env_and_conf_names_both(tmp_path):
    root = dgx_conf(tmp_path, "NCCL_NET=Socket\n")
    node = probe_node(root, {**ENV, "NCCL_IB_DISABLE": "1"})
    f = first(node, "ND207", "fail")
    assert "unset NCCL_IB_DISABLE" in f.fix and "export NCCL_NET=IB" in f.fix
    fixed = probe_node(root, apply_exports({**ENV, "NCCL_IB_DISABLE": "1"}, node_dict(node)["exports"]))
    assert fixed.nccl_ib.ports


def test_env_value_over_same_conf_value_is_not_just_unset(tmp_path):
    """Unsetting the environment's NCCL_IB_DISABLE=1 would let the file's NCCL_IB_DISABLE=1 back in."""
    root = dgx_conf(tmp_path, "NCCL_IB_DISABLE=1\n")
    node = probe_node(root, {**ENV, "NCCL_IB_DISABLE": "1"})
    f = first(node, "ND207", "fail")
    assert f.fix.startswith("export NCCL_IB_DISABLE=0") and "unset NCCL_IB_DISABLE and delete line 1" in f.fix
    ex = node_dict(node)["exports"]
    assert probe_node(root, apply_exports({**ENV, "NCCL_IB_DISABLE": "1"}, ex)).nccl_ib.ports
