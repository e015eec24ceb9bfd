"""Loaded by Python at start-up in every process that has this directory on PYTHONPATH (the
processes bench/per_job_costs.py starts): counts its statements and Kafka calls when
BENCH_COUNTS_DIR is set (statement_counter.py). No other sitecustomize exists in the dev venv
for this one to hide."""

import os

if os.environ.get("BENCH_COUNTS_DIR"):
    import statement_counter

    statement_counter.install_from_env()
