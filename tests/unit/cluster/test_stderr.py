"""torchrun's stderr: its own noise is dropped, the workers' lines and tracebacks stay."""

from nccl_doctor.cluster.stderr import StderrFilter


def test_stderr_filter_drops_torchrun_dump_and_keeps_worker_lines():
    dump = b"""nccl-doctor bench: [1/3] all_gather world 64 KiB: busbw 0.057 GB/s
W1130 10:18:48.603000 19427 .venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 19433 closing signal SIGTERM
Traceback (most recent call last):
  File "/x/torch/distributed/run.py", line 1032, in <module>
    main()
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n============================================================
nccl_doctor FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
============================================================
Traceback (most recent call last):
  File "worker.py", line 1, in <module>
ValueError: a worker's own crash stays visible
after the dump
"""
    f = StderrFilter()
    shown = b"".join(x for line in dump.splitlines(keepends=True) for x in f.feed(line)) + b"".join(f.flush())
    text = shown.decode()
    assert "ChildFailedError" not in text and "FAILED" not in text and "SIGTERM" not in text and "====" not in text
    assert text.startswith("nccl-doctor bench: [1/3]") and "ValueError: a worker's own crash stays visible" in text
    assert text.rstrip().endswith("after the dump") and text.count("Traceback") == 1


def test_stderr_filter_drops_torchrun_signal_traceback_on_interrupt():
    """Ctrl-C: we SIGTERM torchrun, which dies with a SignalException traceback; the user pressed the key."""
    dump = b"""nccl-doctor bench: [3/15] all_gather world 256 KiB: busbw 0.267 GB/s
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/x/torch/distributed/elastic/agent/server/api.py", line 923, in _invoke_run
    time.sleep(monitor_interval)
  File "/x/torch/distributed/elastic/multiprocessing/api.py", line 86, in _terminate_process_handler
    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)
torch.distributed.elastic.multiprocessing.api.SignalException: Process 15513 got signal: 15
"""
    f = StderrFilter()
    shown = b"".join(x for line in dump.splitlines(keepends=True) for x in f.feed(line)) + b"".join(f.flush())
    assert shown.decode() == "nccl-doctor bench: [3/15] all_gather world 256 KiB: busbw 0.267 GB/s\n"
