#!/usr/bin/env bash
# Layering a local database over a shared one at compile time (docs/architecture.md, "Compile"):
# a teammate tuned ResNet-18 into the team's database; you tuned its convolutions a little more
# in your own; now you compile ResNet-34, which shares every layer shape with ResNet-18, over
# both, and ask which operators hit, which layer answered, and why the others missed.
#
#   1. build small ResNet-18 and ResNet-34 ONNX models (32x32 images, 8 base channels, random
#      weights: msdb.model.zoo.resnet) under build/compile_story/
#   2. "the team": ResNet-18's tasks tuned with msdb's tuner into shared.sqlite, 2 trials a task
#   3. "you": ResNet-18's conv2d tasks tuned again into local.sqlite, 4 trials a task
#   4. `msdb compile resnet34.onnx --db local.sqlite --db shared.sqlite --run`: one row per
#      function (the first layer with a record answers: local for the convs, shared for the
#      rest), the summary, the model's latency and its outputs against onnxruntime, and the
#      report as JSON
#   5. the same with `--fuse fold` (batch-norm folded into each conv, bias, residual add and relu
#      fused into it, as onnxruntime runs it): the fused convs are new workloads, yet they hit
#      by anchor block, their conv being the one tuned in local.sqlite (TVM's anchor-trace
#      procedure adapts the trace to the epilogue)
#
# Takes a few minutes on one core (the tuning is deliberately tiny; raise the trials for real
# speed). Needs msdb with its onnx extra: pip install -e '.[onnx]'.
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
out=build/compile_story
rm -rf "$out"
mkdir -p "$out"

echo "== 1. small ResNet-18 and ResNet-34 (ONNX, 32x32, width 8)"
"$PYTHON" - "$out" <<'EOF'
import sys
import onnx
from msdb.model.zoo import resnet
for depth in (18, 34):
    onnx.save(resnet(depth, image=32, width=8, num_classes=10), f"{sys.argv[1]}/resnet{depth}.onnx")
EOF

tune() {  # tune(db, per-task trials, op filter): ResNet-18's tasks with msdb's tuner
    "$PYTHON" - "$out/resnet18.onnx" "$1" "$2" "$3" <<'EOF'
import sys
from msdb.database.sqlite import SQLiteDatabase
from msdb.model import extract_tasks, load
from msdb.tuner.model_tuning import tune_model, tunable_tasks
model_path, db_path, per_task, op = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
model = load(model_path)
op_names = [op] if op else None
count = len(tunable_tasks(extract_tasks(model), op_names))
with SQLiteDatabase(db_path) as db:
    result = tune_model(model, None, db, per_task * count, per_task, max_trials_per_task=per_task,
                        op_names=op_names, task_scheduler="round-robin", seed=0, model_name="resnet18")
print(result.table())
EOF
}

echo "== 2. the team tuned ResNet-18 into shared.sqlite (2 trials per task)"
tune "$out/shared.sqlite" 2 ""

echo "== 3. you tuned ResNet-18's conv2d tasks into local.sqlite (4 trials per task)"
tune "$out/local.sqlite" 4 conv2d

echo "== 4. compile ResNet-34 over --db local --db shared"
msdb compile "$out/resnet34.onnx" --db "$out/local.sqlite" --db "$out/shared.sqlite" --run \
    --report "$out/report.json"
echo "== the JSON report's first entry"
"$PYTHON" -c "import json, sys; print(json.dumps(json.load(open(sys.argv[1]))[0], indent=2))" "$out/report.json"

echo "== 5. the same with --fuse fold: the fused convs hit local.sqlite by anchor block"
msdb compile "$out/resnet34.onnx" --fuse fold --db "$out/local.sqlite" --db "$out/shared.sqlite" --run
