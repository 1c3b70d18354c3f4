"""The design space (docs/architecture.md, "Tuner"): what the tuner may do to a workload.

- `generators`: `SpaceGenerator`, `PostOrderApply`, `ScheduleFn`;
- `rules`: schedule rules (what the design space does to each block);
- `postprocs`: post-processors (what every candidate goes through before it is built);
- `mutators`: mutators (how the evolutionary search changes a candidate);
- `analysis`: the block predicates the rules share.

Subpackages are imported on use: `from msdb.tuner.space.rules import MultiLevelTiling`.
"""
