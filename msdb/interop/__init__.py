"""Interoperability with other tuning systems' files (TVM MetaSchedule today)."""
