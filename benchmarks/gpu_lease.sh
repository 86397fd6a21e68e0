#!/usr/bin/env bash
# One call on a lent GPU, prepared so that it fits the lease (issues 36, 33 and 49):
#   1. with BENCH=1, benchmarks/gpu_throughput.py: the throughput table, and whole runs of
#      fit_stacked with and without the CUDA graph against a loop of fit (the graph path's check
#      on a GPU); by default the committed benchmarks/gpu-throughput-h200.json stands for it;
#   2. the lanes of LANES (a file, one lane a line), each lane a process sharing the GPU, each
#      cell's seeds stacked, the graph on where step 1 found it equal to the loop, until
#      DEADLINE_S after the start; what does not finish leaves its stack checkpoint.
#
# A lane is "TREE COMMIT TABLE CELLS SEEDS [WORKERS]", or "TREE COMMIT search FAMILIES SEEDS
# [WORKERS]": the learning-rate search's studies of FAMILIES (comma-separated), WORKERS of them side
# by side on the GPU (device "auto"), resuming the Optuna journals and trial checkpoints that TREE's
# data/cache/lr-search/ holds (copy them there from main's data/in-flight/lr-search/ before the
# call). TREE is `.` (the tree sent) or a folder
# carried beside it that holds a pinned commit's code, so that a campaign begun on the CPU at that
# commit gets its remaining seeds there (the scorecard averages a cell's seeds at one commit):
#
#   git archive <commit> mzlite pyproject.toml data/paper data/results/lr-search \
#       data/results/<profile> | (mkdir -p .gpu/<name> && tar x -C .gpu/<name>)
#
# then main's result files of the lane's cells copied in, so that `run` skips the seeds done
# (`.gpu/` in .git/info/exclude, named in the call's `carry`). COMMIT is the full 40-hex commit:
# the device machine's `.git` can be older than the files sent, and results name what is given.
#
#   run(command="LANES=.gpu/lanes bash benchmarks/gpu_lease.sh", carry=[".gpu"], timeout_s=600)
#
# Everything that comes back is under $OUT: the runs' logs, the new results of every tree and
# the checkpoints (split into 15 MB parts: the device tool returns files <= 16 MiB). Then, here:
# tar xzf <files_at>/results.tgz; cat <files_at>/ckpt.tgz.* | tar xz, and
# `python -m mzlite run ... --stack` in the lane's worktree resumes the stacks;
# cat <files_at>/search.tgz.* | tar xz gives the searches' journals (then `search --write-only`).
set -u
OUT=${OUT:-/tmp/gpu-lease-out}
DEADLINE_S=${DEADLINE_S:-530}
: "${LANES:?name the lanes file: LANES=<file> bash $0 (its format: see the header)}"
PROFILE=${PROFILE:-paper-sizes}  # PROFILE, DEVICE, WAYS: only to try the script on a CPU
DEVICE=${DEVICE:-cuda}
BENCH_ARGS=${BENCH_ARGS:---repeats 3 --fit-k 4 --train 1024 --epochs 3}
export PYTHONUNBUFFERED=1
ROOT=$PWD
mkdir -p "$OUT"
touch /tmp/gpu-lease-start
t0=$(date +%s)
left() { echo $((DEADLINE_S - ($(date +%s) - t0))); }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"

measured=benchmarks/gpu-throughput-h200.json
if [ "${BENCH:-0}" = 1 ]; then
    measured="$OUT/gpu-throughput-h200.json"
    PYTHONPATH=$ROOT timeout 200 python3 benchmarks/gpu_throughput.py $BENCH_ARGS \
        --json "$measured" 2>&1 | tee "$OUT/gpu-throughput-h200.txt"
fi

# The graph path only where whole runs with it matched the loop of fit; stacking only where
# fit_stacked ran at all (else one eager model a process).
ways=${WAYS:-$(python3 - "$measured" <<'EOF'
import json, sys
try:
    runs = json.load(open(sys.argv[1]))["whole_runs"]
except (OSError, KeyError, ValueError):
    print("--no-stack"); sys.exit()
ok = lambda mode: {r["model"] for r in runs if r["mode"] == mode
                   and r["largest_relative_val_loss_difference"] < 1e-3} == {"mz_full", "st"}
print("--stack --graph" if ok("fit_stacked+graph") else "--stack --no-graph" if ok("fit_stacked") else "--no-stack")
EOF
)}
echo "cells run with: $ways; $(left) s left"

n=0
trees=()
searches=()
while read -r tree commit table cells seeds workers; do
    case "$tree" in ''|'#'*) continue ;; esac
    n=$((n + 1))
    [[ $commit =~ ^[0-9a-f]{40}$ ]] || { echo "lane $n: COMMIT must be 40 hex digits, not '$commit'"; exit 2; }
    trees+=("$tree")
    if [ "$table" = search ]; then  # a trial interrupted by the deadline resumes from its checkpoint
        searches+=("$tree")
        (cd "$tree" && PYTHONPATH=$PWD MZLITE_GIT_COMMIT=$commit timeout "$(left)" \
            python3 -m mzlite search "$PROFILE" --families "$cells" --seeds "$seeds" \
            --workers "${workers:-1}" --threads 1) > "$OUT/lane$n.log" 2>&1 &
        echo "lane $n: $tree at ${commit:0:7}: the search of $cells, seeds $seeds"
        continue
    fi
    # mzlite is not installed there: each lane imports its own tree's copy
    (cd "$tree" && PYTHONPATH=$PWD MZLITE_GIT_COMMIT=$commit timeout "$(left)" \
        python3 -m mzlite run "$table" --profile "$PROFILE" --device "$DEVICE" --seeds "$seeds" \
        --cells "$cells" --workers "${workers:-1}" $ways) > "$OUT/lane$n.log" 2>&1 &
    echo "lane $n: $tree at ${commit:0:7}: $table $cells seeds $seeds"
done < "$LANES"
wait
sleep 3  # the pools' workers notice their driver is gone within a second (runner.PARENT_POLL_S)
nvidia-smi --query-gpu=memory.used --format=csv,noheader

(cd "$OUT" && tar czf logs.tgz lane*.log && rm lane*.log)
uniq_trees=$(printf '%s\n' "${trees[@]}" | sort -u)
new=$(for t in $uniq_trees; do find "$t/data/results/$PROFILE" -name '*.json' -newer /tmp/gpu-lease-start; done)
[ -n "$new" ] && tar czf "$OUT/results.tgz" $new && tar tzf "$OUT/results.tgz"
ckpts=$(for t in $uniq_trees; do d="$t/data/cache/checkpoints/$PROFILE"; [ -d "$d" ] && echo "$d"; done)
[ -n "$ckpts" ] && tar czf - $ckpts | split -b 15M -a 1 - "$OUT/ckpt.tgz."
# the searches' journals and their unfinished trials' checkpoints, to resume here or on the next GPU
srch=$(for t in $(printf '%s\n' "${searches[@]}" | sort -u); do d="$t/data/cache/lr-search/$PROFILE"; [ -d "$d" ] && echo "$d"; done)
[ -n "$srch" ] && tar czf - $srch | split -b 15M -a 1 - "$OUT/search.tgz."
ls -la "$OUT"
