"""Which groups a run measures (``bench.groups``): HSDP's mesh must fit the nodes, and every skipped group
says why; nodes that do not fit the mesh are named once (``coverage``)."""

from nccl_doctor.bench import coverage
from nccl_doctor.bench.groups import plan_groups, why_not
from nccl_doctor.bench.model import BenchResult, Measurement, NodeInfo


def nodes_of(*rank_lists):
    return [NodeInfo(index=i, host=f"n{i + 1}", ranks=tuple(r), iface="eth1", link_gbps=1.25)
            for i, r in enumerate(rank_lists)]


def result_of(nodes, skipped):
    return BenchResult(backend="gloo", device="cpu", world_size=sum(len(n.ranks) for n in nodes),
                       local_world_size=len(nodes[0].ranks), nodes=nodes, skipped=skipped,
                       results=[Measurement(op="all_gather", group="world", group_size=3, size_bytes=1 << 20,
                                            count=1, iters=5, time_us=1.0, algbw_gbps=1.0, busbw_gbps=1.0, wrong=0)])


def test_uneven_rank_counts_name_the_odd_node_its_count_and_the_fix():
    nodes = nodes_of((0, 1), (2,))  # --nproc-per-node 2 on n1, 1 on n2
    plan = plan_groups(nodes, ("world", "intra", "inter"))
    assert (plan.world, plan.mesh) == (True, ()) and len(plan.skipped) == 2  # world only
    skipped = plan.skipped
    [f] = coverage(result_of(nodes, skipped), asked=False)  # the default groups: still named
    assert (f.code, f.severity.value, f.where.host) == ("ND001", "warn", "n2")
    assert "n2 runs 1 rank, n1 runs 2 ranks" in f.message and "intra and inter" in f.message
    assert "--nproc-per-node" in f.fix and "CUDA_VISIBLE_DEVICES" in f.fix and "on n2" in f.fix
    # --groups intra,inter named by the user: one finding for the shape, not one more per group
    assert [x.code for x in coverage(result_of(nodes, skipped), asked=True)] == ["ND001"]


def test_uneven_rank_counts_odd_nodes_in_hostlist_form_even_when_node_0_is_odd():
    nodes = nodes_of((0,), (1, 2), (3, 4), (5, 6), (7,))  # n1 and n5 run 1 rank, the rest 2
    plan = plan_groups(nodes, ("intra", "inter"))
    skipped = plan.skipped
    assert (plan.world, plan.mesh) == (False, ()) and all("n[1,5] run 1 rank" in s for s in skipped), skipped
    [f] = coverage(result_of(nodes, skipped), asked=True)  # not "needs 2+ ranks"
    assert f.where.host == "n[1,5]" and "n[1,5] run 1 rank, n[2-4] run 2 ranks" in f.message


def test_ranks_not_numbered_node_by_node_are_named():
    nodes = nodes_of((0, 2), (1, 3))
    skipped = plan_groups(nodes, ("intra", "inter")).skipped
    [f] = coverage(result_of(nodes, skipped), asked=False)
    assert "not numbered node by node (n1 holds ranks 0, 2)" in f.message and f.where.host == "n[1-2]"
    assert coverage(result_of(nodes_of((0, 1), (2, 3)), []), asked=False) == []  # HSDP-shaped: nothing
    assert plan_groups(nodes_of((0, 1), (2, 3)), ("world", "intra", "inter")).mesh == ("intra", "inter")


def test_why_a_group_is_not_measured():
    assert why_not("inter", 1, 2) == "inter: needs 2+ nodes (1 node x 2 ranks per node)"
    assert why_not("intra", 1, 2) == "intra: the same group as world on one node (1 node x 2 ranks per node)"
    assert why_not("intra", 2, 1) == "intra: needs 2+ ranks per node (2 nodes x 1 rank per node)"
    assert why_not("inter", 2, 1).startswith("inter: the same group as world with 1 rank per node")
    one_rank = plan_groups(nodes_of((0,)), ("world", "intra", "inter"))
    assert one_rank.skipped == ["world: 1 rank, no link to measure",
                                "intra: needs 2+ ranks per node (1 node x 1 rank per node)",
                                "inter: needs 2+ nodes (1 node x 1 rank per node)"]
