#!/usr/bin/env bash
# msdb's main job: three teammates tuned with TVM MetaSchedule on their own machines; put their
# logs into one team database, look at it, and hand TVM a pruned work_dir to compile with.
#
#   1. each teammate imports their TVM work_dir into their own msdb database
#      (examples/team_logs/team_{a,b,c}: real TVM 0.27 logs; team_a and team_b both tuned GMM)
#   2. the team database ./msdb.sqlite merges the three (GMM is stored once, every record keeps
#      who measured it)
#   3. `msdb ls` shows every workload with its best latency and GFLOPS
#   4. `msdb tune` tunes GMM 128^3 on this machine with msdb's own tuner (32 measurements, one
#      core): every measurement lands in ./msdb.sqlite under a `tune` source, beside the
#      teammates' TVM records of the same workload (the search starts from their best, and the
#      cost model learns from all the stored records first); TVM's statistics table at the end
#   5. `msdb export --top-k 1` writes ./export/tvm_work_dir, which TVM 0.27's
#      JSONDatabase(work_dir=...) loads and `query_schedule`s from: the best of the teammates'
#      and this machine's records
#   6. a model: the bundled Relax-style MLP (examples/models/mlp.py, weights made by
#      make_mlp_weights.py) has its tasks extracted and tuned into ./msdb.sqlite (24 trials), then
#      `msdb compile` layers ./msdb.sqlite over the team database and reports, per function, which
#      record hit; and a small ONNX ResNet-18 (msdb.model.zoo, 32x32) compiles with default
#      schedules wherever no record hits, run and checked against onnxruntime; then again with
#      `--fuse nchwc` (the CPU-fastest mode: activations in 16-channel blocks from conv to conv,
#      3x3 stride-1 convs by Winograd's F(m, 3))
#
# Idempotent: imports and merges add nothing when run again (they deduplicate records; the
# export is replaced atomically); a second tune continues (it measures nothing measured before). Needs only Python 3.11: without an `msdb` on PATH it sets
# up .venv first.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v msdb >/dev/null 2>&1; then
    if [ ! -x .venv/bin/msdb ]; then
        python3 -m venv .venv
        .venv/bin/pip install -q -e '.[onnx]'
    fi
    PATH="$PWD/.venv/bin:$PATH"
fi

PYTHON="$(dirname "$(command -v msdb)")/python"
mkdir -p build/team_dbs export
for who in a:alice b:bob c:carol; do
    team="${who%%:*}" user="${who##*:}"
    echo "== $user imports examples/team_logs/team_$team"
    msdb import "build/team_dbs/team_$team.sqlite" "examples/team_logs/team_$team" --user "$user" --host "${user}-workstation"
done

echo "== merge the three into ./msdb.sqlite"
msdb merge msdb.sqlite build/team_dbs/team_a.sqlite build/team_dbs/team_b.sqlite build/team_dbs/team_c.sqlite

echo "== msdb ls msdb.sqlite"
msdb ls msdb.sqlite

echo "== tune GMM 128^3 here with msdb's tuner (32 trials, seeded)"
msdb tune msdb.sqlite --zoo GMM --target "llvm -num-cores=1" --trials 32 --per-iter 16 --seed 0

echo "== export the best record per workload and target for TVM"
msdb export msdb.sqlite export/tvm_work_dir --top-k 1

echo "== tune the bundled MLP model's tasks into ./msdb.sqlite (24 trials)"
"$PYTHON" examples/models/make_mlp_weights.py --seed 0
msdb tune msdb.sqlite examples/models/mlp.py --target "llvm -num-cores=1" --trials 24 --per-iter 8 --seed 0

echo "== compile it over ./msdb.sqlite and the team database: which functions hit"
msdb compile examples/models/mlp.py --db msdb.sqlite --db build/team_dbs/team_a.sqlite --target "llvm -num-cores=1" --run --report build/mlp_report.json

echo "== a small ONNX ResNet-18: compile (default schedules where nothing hits), run, compare with onnxruntime"
"$PYTHON" -c "import onnx; from msdb.model.zoo import resnet; onnx.save(resnet(18, image=32, width=8, num_classes=10), 'build/resnet18_small.onnx')"
msdb compile build/resnet18_small.onnx --db msdb.sqlite --target "llvm -num-cores=1" --run

echo "== the same ResNet-18 with --fuse nchwc: batch-norm folded, activations in 16-channel blocks, 3x3 convs by Winograd"
msdb compile build/resnet18_small.onnx --db msdb.sqlite --target "llvm -num-cores=1" --fuse nchwc --run
