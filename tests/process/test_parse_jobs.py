"""``parse --jobs N`` with real worker processes: the merged report equals one process's, a worker that dies
is one error line (never a hang), and a bad ``--jobs`` is a usage error. No torch needed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def run_script(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=ENV)


def test_workers_merge_to_the_one_process_report(tmp_path):
    proc = run_script(tmp_path, f"""
        import importlib.util, sys
        from pathlib import Path
        from nccl_doctor import render
        from nccl_doctor.logs.parse import parallel
        from nccl_doctor.logs.diagnosis.diagnose import diagnose
        from nccl_doctor.logs.parse.api import parse_paths

        if __name__ == "__main__":
            spec = importlib.util.spec_from_file_location("bench_parse", "{ROOT}/benchmarks/bench_parse.py")
            bench = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(bench)
            log = Path("{tmp_path}") / "gen.log"
            bench.generate(log, 6)
            want = render.render_json(diagnose(parse_paths([log])))
            for jobs, range_bytes in ((2, 20_000), (3, 9_000)):
                result, merged = parallel.parse_paths_parallel([log], jobs=jobs, min_bytes=0, range_bytes=range_bytes)
                assert render.render_json(diagnose(result)) == want, jobs
                assert merged >= 2, merged
            assert "torch" not in sys.modules
            print("ok")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_a_worker_that_dies_is_one_error_line(tmp_path):
    proc = run_script(tmp_path, f"""
        import os, sys
        from nccl_doctor.errors import InputError
        from nccl_doctor.logs.parse import parallel

        def die(task):
            os._exit(3)

        if __name__ == "__main__":
            log = "{ROOT}/fixtures/nccl-logs/041-h20-ib-gdrdma-cumem-2node.log"
            try:
                parallel.parse_paths_parallel([log], jobs=2, min_bytes=0, range_bytes=200,
                                              runner=parallel._pool_runner(1, die))
            except InputError as exc:
                print(exc)
                sys.exit(2)
    """)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.strip() == ("parse --jobs: a worker process died (out of memory or killed?); "
                                   "rerun with --jobs 1")


def test_cli_jobs_option(tmp_path):
    log = ROOT / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log"
    outs = [subprocess.run([sys.executable, "-m", "nccl_doctor", "parse", "--format", "json", "--jobs", j, str(log)],
                           check=False, capture_output=True, timeout=60, cwd=ROOT, env=ENV) for j in ("1", "2")]
    assert [o.returncode for o in outs] == [0, 0] and outs[0].stdout == outs[1].stdout
    bad = subprocess.run([sys.executable, "-m", "nccl_doctor", "parse", "--jobs", "0", str(log)], check=False,
                         capture_output=True, text=True, timeout=60, cwd=ROOT, env=ENV)
    assert bad.returncode == 2 and "--jobs" in bad.stderr
