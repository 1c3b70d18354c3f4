"""`msdb train-cost-model`: a cost model trained on a database, for `msdb tune --cost-model FILE`
(docs/architecture.md, "Features and cost model")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from msdb.cli.common import open_db, target_option

if TYPE_CHECKING:
    from msdb.records import Target

__all__ = ["train_cost_model_command"]


@click.command(name="train-cost-model")
@click.argument("db", metavar="DB")
@click.option("-o", "--output", required=True, metavar="FILE", type=click.Path(dir_okay=False),
              help="The model file to write (an .npz archive; replaced only once complete).")
@target_option("Train on records of this target's kind (default: the one kind DB has measured records of).")
@click.option("--kind", type=click.Choice(["xgb", "mlp"]), default="xgb", show_default=True,
              help="The model: XGBoost (TVM's default) or the MLP (pip install -e '.[mlp]').")
@click.option("--holdout", type=click.FloatRange(0, 1, max_open=True), default=0.2, show_default=True,
              help="Share of the workloads held out to score the model on workloads it did not see (0: none).")
@click.option("--per-workload", "per_workload", type=click.IntRange(min=1), default=256, show_default=True,
              help="Records of each workload to learn from at most, spread from best to worst.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="Training threads.")
def train_cost_model_command(db: str, output: str, target: Target | None, kind: str, holdout: float,
                             per_workload: int, seed: int, threads: int) -> None:
    """Train a cost model on DB's measured records and write it to FILE.

    Every record that ran on a target of one kind is replayed on its workload and featurized
    (TVM's per-store features); labels are normalized within each workload. A share of the
    workloads is held out: a model trained on the others ranks their candidates, scored with
    TenSet's metrics (top-1 and top-5 peak score, pairwise accuracy) beside a random ranking.
    The file is then trained on every workload. Use it with `msdb tune --cost-model FILE`, or
    ship it with `msdb publish --cost-model FILE`.

    \b
    Example:
        msdb train-cost-model msdb.sqlite -o llvm-xgb.npz
        msdb tune msdb.sqlite --zoo C2D:3 --cost-model llvm-xgb.npz --trials 16
    """
    from msdb.tuner.cost_model.training import train_cost_model

    database = open_db(db, read_only=True)
    try:
        report = train_cost_model(database, output, kind=kind, target=target, holdout=holdout, seed=seed,
                                  max_per_workload=per_workload, num_threads=threads)
    finally:
        database.close()
    click.echo(f"trained a {report.kind} cost model on {report.records} records of {report.workloads} workloads "
               f"({report.target_kind} targets; {report.skipped} other records left out) in {report.seconds:.1f} s")
    if report.held_out is not None and report.random is not None:
        q, r = report.held_out, report.random
        click.echo(f"held out {q.workloads} workloads ({q.candidates} candidates): top-1 peak score {q.top1:.3f}, "
                   f"top-5 {q.top5:.3f}, pairwise accuracy {q.pairwise:.3f} (a random ranking: {r.top1:.3f}, "
                   f"{r.top5:.3f}, {r.pairwise:.3f})")
    else:
        click.echo("no held-out score (fewer than two workloads, --holdout 0, or too few records to rank)")
    click.echo(f"wrote {report.path}")
