#!/usr/bin/env bash
# One call on a lent GPU, prepared so that it fits the lease (issues 36 and 33):
#   1. with BENCH=1, benchmarks/gpu_throughput.py: the throughput table, and whole runs of
#      fit_stacked with and without the CUDA graph against a loop of fit (the graph path's check
#      on a GPU); by default the committed benchmarks/gpu-throughput-h200.json stands for it;
#   2. the paper-protocol cells (profile `full`) of tab:tdof-verify L = 32 and MEB d = 8 per-set
#      normalised, each cell's seeds stacked, the graph on where step 1 found it equal to the loop,
#      until DEADLINE_S after the start; what does not finish leaves its stack checkpoint.
# Everything that comes back is under $OUT: the table (text and JSON), the runs' logs, the new
# results and the checkpoints (split into 15 MB parts: the device tool returns files <= 16 MiB).
#
#   run(command="MZLITE_GIT_COMMIT=<commit> bash benchmarks/gpu_lease.sh", timeout_s=600)
#   (<commit> typed in, here's HEAD: a $(git rev-parse HEAD) would run there, on a stale .git)
#
# Then, here: tar xzf <files_at>/results.tgz; cat <files_at>/ckpt.tgz.* | tar xz (data/cache/...),
# and `python -m mzlite run ... --profile full --stack` resumes the stacks.
set -u
OUT=${OUT:-/tmp/gpu-lease-out}
DEADLINE_S=${DEADLINE_S:-530}
# The device machine's .git can be older than the files sent: results name the commit given here.
: "${MZLITE_GIT_COMMIT:?name the commit whose files were sent: MZLITE_GIT_COMMIT=<commit> bash $0}"
# mzlite is not installed there: the benchmark (run as a script) imports it from the tree.
export PYTHONUNBUFFERED=1 MZLITE_GIT_COMMIT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PROFILE=${PROFILE:-full}        # PROFILE, DEVICE, BENCH_ARGS: only to try the script on a CPU
DEVICE=${DEVICE:-cuda}
BENCH_ARGS=${BENCH_ARGS:---repeats 3 --fit-k 4 --train 1024 --epochs 3}
mkdir -p "$OUT"
touch /tmp/gpu-lease-start
t0=$(date +%s)
left() { echo $((DEADLINE_S - ($(date +%s) - t0))); }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"

measured=benchmarks/gpu-throughput-h200.json
if [ "${BENCH:-0}" = 1 ]; then
    measured="$OUT/gpu-throughput-h200.json"
    timeout 200 python3 benchmarks/gpu_throughput.py $BENCH_ARGS --json "$measured" 2>&1 \
        | tee "$OUT/gpu-throughput-h200.txt"
fi

# The graph path only where whole runs with it matched the loop of fit; stacking only where
# fit_stacked ran at all (else one eager model a process).
ways=$(python3 - "$measured" <<'EOF'
import json, sys
try:
    runs = json.load(open(sys.argv[1]))["whole_runs"]
except (OSError, KeyError, ValueError):
    print("--no-stack"); sys.exit()
ok = lambda mode: {r["model"] for r in runs if r["mode"] == mode
                   and r["largest_relative_val_loss_difference"] < 1e-3} == {"mz_full", "st"}
print("--stack --graph" if ok("fit_stacked+graph") else "--stack --no-graph" if ok("fit_stacked") else "--no-stack")
EOF
)
echo "cells run with: $ways; $(left) s left"

R="python3 -m mzlite run --profile $PROFILE --device $DEVICE --seeds 0-2 $ways"
timeout "$(left)" $R tab:tdof-verify --cells L32-mz_1l,L32-st_4l --workers 2 > "$OUT/tdof.log" 2>&1 &
meb=abl-d8-scale-mz_full,abl-d8-scale-st,abl-d8-scale-st_meanpool  # raw targets: the verdict's
meb=$meb,abl-d8-scale-ynorm-mz_full,abl-d8-scale-ynorm-st,abl-d8-scale-ynorm-st_meanpool  # ablation
timeout "$(left)" $R tab:meb --workers 3 --cells "$meb" > "$OUT/meb.log" 2>&1 &
wait
sleep 3  # the pools' workers notice their driver is gone within a second (pool.PARENT_POLL_S)
nvidia-smi --query-gpu=memory.used --format=csv,noheader

tar czf "$OUT/logs.tgz" -C "$OUT" tdof.log meb.log && rm "$OUT/tdof.log" "$OUT/meb.log"
new=$(find "data/results/$PROFILE" -name '*.json' -newer /tmp/gpu-lease-start)
[ -n "$new" ] && tar czf "$OUT/results.tgz" $new && tar tzf "$OUT/results.tgz"
if [ -d "data/cache/checkpoints/$PROFILE" ]; then
    tar czf - "data/cache/checkpoints/$PROFILE" | split -b 15M -a 1 - "$OUT/ckpt.tgz."
fi
ls -la "$OUT"
