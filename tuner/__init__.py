"""msdb's own tuner (DESIGN.md section 8): search space, search, cost models, codegen,
measurement, task scheduling and compile. Imports point one way: tuner -> msdb."""
