"""The inputs both golden runs use: the suite's exact-output test (``tests/unit/test_golden.py``) and the
two-checkout diff (``tools/capture_outputs.py``), so the two never drift apart."""

from __future__ import annotations

SPECS = ("dgx_h100", "roce_node", "p5_node", "cloud_vm", "degraded_ib")  # sysfs_builder's node trees
PROBE_ENVS: dict[str, dict[str, str]] = {
    "plain": {},
    "ifname-typo": {"NCCL_SOCKET_IFNAME": "eht0", "NCCL_IB_HCA": "mlx5_0,mlx5_9", "NCCL_DEBUG": "info"},
    "ibdisable": {"NCCL_IB_DISABLE": "1", "GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "=eth"},
    "odd": {"NCCL_P2P_DISABLE": "1", "NCCL_NET_GDR_LEVEL": "abc", "NCCL_SOCKET_IFNAME": "^docker,lo",
            "NCCL_NCHANELS": "4"},
}
BAD_INPUTS = {"bad-parse": ["parse", "/nonexistent"], "bad-bench": ["bench", "--ops", ""],
              "bad-preflight": ["preflight", "--nodes", "x"], "bad-plan": ["plan", "--params", "lots"],
              # argparse's own usage errors, one line each like the options' own (issue 22 point 15)
              "bad-plan-zero-gbps": ["plan", "--params", "7B", "--intra-gbps", "0"],
              "bad-plan-negative-params": ["plan", "--params", "-5B"],
              "bad-plan-dtype": ["plan", "--params", "7B", "--param-dtype", "bf61"],
              "bad-parse-option-typo": ["parse", "--formt", "json", "job.log"],
              "bad-bench-not-an-integer": ["bench", "--iters", "x"],
              "bad-bench-negative-size": ["bench", "--sizes", "-1M"],
              "bad-command-typo": ["pars", "job.log"],
              "bad-explain-prom-out": ["explain", "--prom-out", "x.prom"],
              "bad-plan-no-figures": ["plan", "--params", "70B"]}
