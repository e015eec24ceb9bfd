"""The cockpit keeps no tables of its own: what it records (dead-letter discards) lives in
the jobs app (jobweaver.jobs.models)."""
