"""The design space (docs/architecture.md, "Tuner"): what the tuner may do to a workload.

- `generators`: `SpaceGenerator`, `PostOrderApply`, `ScheduleFn`;
- `rules`: schedule rules (what the design space does to each block);
- `postprocs`: post-processors (what every candidate goes through before it is built);
- `mutators`: mutators (how the evolutionary search changes a candidate);
- `analysis`: the block predicates the rules share;
- `auto_tensorize`: matching a block against a tensor intrinsic (mapping, tiling) for the
  tensor-core rule (its index maps written by `msdb.schedule.index_map_json`);
- `default_schedule` (with `default_planner`, `register_tile`): the fixed schedule of a function
  no record answers, which compile applies and the search measures;
- `anchor_trace`: TVM's ScheduleUsingAnchorTrace, a trace applied to another fusion of its anchor.

Subpackages are imported on use: `from msdb.tuner.space.rules import MultiLevelTiling`.
"""
