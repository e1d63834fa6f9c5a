"""What bench's launch tells the user when torchrun itself fails (``cluster``'s launcher, as bench uses it):
torchrun's own traceback kept off the terminal but its error in the report, and which phase it reached."""

from nccl_doctor.cluster.stderr import StderrFilter
from nccl_doctor.cluster.torchrun import LaunchConfig, LaunchOutcome, torchrun_phase

TORCHRUN_BUSY = b"""Traceback (most recent call last):
  File "/v/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 156, in _create_tcp_store
    store = TCPStore(
            ^^^^^^^^^
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29623, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "<frozen runpy>", line 88, in _run_code
  File "/v/lib/python3.11/site-packages/torch/distributed/run.py", line 1032, in <module>
    main()
  File "/v/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 343, in launch_agent
    rdzv_handler=rdzv_registry.get_rendezvous_handler(rdzv_parameters),
  File "/v/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 180, in _create_tcp_store
    raise RendezvousConnectionError(
torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.
"""

WORKER_CRASH = b"""Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/w/nccl_doctor/__main__.py", line 5, in <module>
  File "/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 9, in init_process_group
RuntimeError: a worker's own crash stays visible
"""


def feed_all(filt, data):
    return (b"".join(x for line in data.splitlines(keepends=True) for x in filt.feed(line))
            + b"".join(filt.flush())).decode()


def test_torchrun_traceback_never_reaches_the_terminal_and_its_error_reaches_the_report():
    f = StderrFilter()
    assert feed_all(f, TORCHRUN_BUSY + b"after\n") == "after\n"
    assert "EADDRINUSE" in f.errors[0] and "RendezvousConnectionError" in f.errors[1]
    assert feed_all(StderrFilter(), WORKER_CRASH) == WORKER_CRASH.decode()
    cfg = LaunchConfig(nnodes=2, nproc_per_node=1, rdzv_endpoint="n1:29623", rdzv_id="x", is_host=True)
    out = LaunchOutcome(returncode=1, timed_out=False, elapsed_s=3, stages=(), host="n1", cfg=cfg,
                          launcher_error=f.errors[0])
    text = out.describe()
    assert text.startswith("torchrun exited with code 1 before starting any worker on n1") and "EADDRINUSE" in text
    assert "did not join" not in text



def test_torchrun_phase_from_its_log_dir(tmp_path):
    assert torchrun_phase(tmp_path) == "starting"
    run = tmp_path / "torchelastic_abc" / "nccl-doctor_xyz"
    run.mkdir(parents=True)
    assert torchrun_phase(tmp_path) == "rendezvous"
    (run / "attempt_0").mkdir()
    assert torchrun_phase(tmp_path) == "workers"
    assert torchrun_phase(tmp_path / "gone") is None
