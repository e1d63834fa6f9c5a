#!/usr/bin/env bash
# The GPU checks issue 21's fixes still owe (docs/benchmarks.md, "What a GPU run must confirm"), as one call
# for a machine with one NVIDIA GPU. Run from the project root, with the prepared first-contact script
# copied into the checkout (../shared does not travel):
#
#     OUT=/some/dir GPU_CHECK=.device/gpu-check.sh bash tools/gpu_recheck.sh
#
# 1. gpu-check.sh again (PYBIN=python3: a CUDA torch already there), to compare with
#    fixtures/gpu/h200-2026-12-04 (timing rows, the three fake two-host runs);
# 2. two fake hosts on GPU 0 (NCCL_HOSTID, NET/Socket on loopback), --collective-timeout 10: healthy, a peer
#    missing at the pair round, a peer stalled inside an all-reduce, a peer missing at init: each must end in
#    about 10 s plus the watchdog's lead, naming rank 1 (missing_ranks / never_left_ranks), init charged to init;
# 3. a slow rail on NCCL (rank 1 sleeps 3 s an exchange): fewer iters, named slow, no timeout;
# 4. the healthy pair under `taskset -c 0`: an NCCL rank on one CPU is ND314;
# 5. NVML as bench reads it (bench/nvlinks.py).
# Everything lands in $OUT/recheck.tgz, with $OUT/summary.txt beside it.
set -u -o pipefail
OUT=${OUT:-$PWD/gpu-recheck-out}
W=$(mktemp -d); R=$W/r; mkdir -p "$R"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONWARNINGS=ignore PYTHONUNBUFFERED=1
if [ -f "${GPU_CHECK:-.device/gpu-check.sh}" ]; then
    OUT=$W/gc PYBIN=python3 GPU_CHECK_BUDGET_S=${GPU_CHECK_BUDGET_S:-260} timeout 300 \
        bash "${GPU_CHECK:-.device/gpu-check.sh}" > "$R/gpu-check.console" 2>&1
    echo "gpu-check exit $?" >> "$R/summary.out"
fi
python3 -c 'import inspect, torch, torch.distributed as d; print("torch", torch.__version__, "cuda", torch.version.cuda,
    "nccl", torch.cuda.nccl.version(), "device_id", "device_id" in inspect.signature(d.init_process_group).parameters,
    "_abort_process_group", hasattr(d.distributed_c10d, "_abort_process_group"))' >> "$R/summary.out" 2>&1

pair() {  # pair NAME [PREFIX ...] [VAR=VALUE ...] -- BENCH_ARGS...: two launchers, two NCCL "hosts" on GPU 0
    local name=$1; shift; local pre=() envs=()
    while [ "$1" != "--" ]; do case $1 in *=*) envs+=("$1") ;; *) pre+=("$1") ;; esac; shift; done; shift
    local port; port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    local base=(env CUDA_VISIBLE_DEVICES=0 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo
        NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,ENV,NET "NCCL_DEBUG_FILE=$R/$name.%h.%p.nccl.log" "${envs[@]}")
    local common=(--nnodes 2 --nproc-per-node 1 --rdzv-endpoint "127.0.0.1:$port" --format json "$@")
    local t0; t0=$(date +%s)
    timeout -k 5 90 "${pre[@]}" "${base[@]}" NCCL_HOSTID=ncd-fake-a python3 -m nccl_doctor bench "${common[@]}" \
        > "$R/$name-a.json" 2> "$R/$name-a.stderr" &
    local a=$!; sleep 1
    timeout -k 5 90 "${pre[@]}" "${base[@]}" NCCL_HOSTID=ncd-fake-b python3 -m nccl_doctor bench "${common[@]}" \
        > "$R/$name-b.json" 2> "$R/$name-b.stderr" &
    local b=$!
    wait $a; local ra=$?; wait $b; local rb=$?
    echo "$name: exits $ra $rb after $(( $(date +%s) - t0 )) s" >> "$R/summary.out"
    python3 - "$R/$name-a.json" "$R/$name-b.json" >> "$R/summary.out" 2>&1 <<'PY'
import json, sys
for p in sys.argv[1:]:
    try:
        d = json.load(open(p))
    except ValueError as e:
        print("  ", p.rsplit("/", 1)[-1], "no JSON:", e)
        continue
    print("  ", p.rsplit("/", 1)[-1], d.get("verdict"), "|", d.get("stage"), "| missing", d.get("missing_ranks"),
          "never left", d.get("never_left_ranks"), "|", d.get("summary"))
    for f in d.get("findings", [])[:4]:
        print("     ", f["code"], f["severity"], f["message"][:200])
PY
}
pair healthy -- --sizes 1M,16M --iters 5 --pair-size 8M --timeout 60 --collective-timeout 30
pair missing-at-pairs NCCL_DOCTOR_TEST_STALL=1:node-pairs -- --sizes 1M --iters 5 --pair-size 8M --timeout 60 --collective-timeout 10
pair stalled-inside "NCCL_DOCTOR_TEST_STALL_INSIDE=1:all_reduce world" -- --sizes 1M --iters 5 --no-pairs --timeout 60 --collective-timeout 10
pair missing-at-init NCCL_DOCTOR_TEST_STALL=1:init -- --sizes 1M --iters 5 --no-pairs --timeout 60 --collective-timeout 10
pair slow-rail NCCL_DOCTOR_TEST_SLOW_RANK=1:3 -- --sizes 1M --iters 5 --pair-size 8M --timeout 80 --collective-timeout 40
pair one-cpu taskset -c 0 -- --sizes 1M --iters 5 --no-pairs --timeout 60 --collective-timeout 30
grep -l "NO watchdog thread" "$R"/*.stderr >> "$R/summary.out" 2>&1 || echo "no 'NO watchdog thread' line" >> "$R/summary.out"
timeout 30 python3 -c 'from nccl_doctor.bench.nvlinks import load_nvml, read_nvlinks
nvml, why = load_nvml(); print("nvml", why, read_nvlinks(nvml) if nvml else None)' >> "$R/summary.out" 2>&1
mkdir -p "$OUT"; cp "$R/summary.out" "$OUT/summary.txt"
tar -C "$W" -czf "$OUT/recheck.tgz" . && rm -rf "$W"
cat "$OUT/summary.txt"
