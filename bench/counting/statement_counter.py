"""Counts of a process's database statements, transactions and Kafka client calls, for
bench/per_job_costs.py (bench only: nothing of the product imports it).

Loaded at interpreter start by `sitecustomize.py` beside it, in every Python process started
with this directory on PYTHONPATH and BENCH_COUNTS_DIR set: the bench's scheduler, beat,
executor and gunicorn processes inherit both from the bench's environment. It wraps, in this
process only:

- psycopg's `Cursor.execute` / `executemany` (every statement Django or plain psycopg sends,
  keyed by its SQL text; the first time a text is seen, the stack names the code that sent
  it), `Connection.commit` / `rollback`, and the BEGIN psycopg sends before the first
  statement of a transaction (`_get_tx_start_command`, called exactly then). Each of these is
  one round trip to the server; a statement sent outside a transaction block is a transaction
  of its own (counted as `db.autocommit_statements`); `Connection.connect` (new sessions) and
  the notifications `Connection.notifies` hands out (a LISTEN session's);
- confluent_kafka's `Producer` and `Consumer` (subclasses put in their place before any module
  imports them): records produced per topic, `flush` calls (each waits for the broker's
  acknowledgements), `commit` calls (synchronous or not), and `poll`/`consume` calls with the
  records they returned.

A thread writes the counts (cumulative since the process started) to
BENCH_COUNTS_DIR/<pid>.json every DUMP_SECONDS; after a fork (gunicorn's workers) the child
starts from zero with a thread of its own. What it costs: a lock and a dict update per call,
and a walk up the stack the first time a statement's text is seen.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

DUMP_SECONDS = 0.5

_lock = threading.Lock()
_counts: dict[str, int] = {}
_sql: dict[str, int] = {}
_labels: dict[str, str] = {}
_installed: set[str] = set()


def add(key: str, n: int = 1) -> None:
    with _lock:
        _counts[key] = _counts.get(key, 0) + n


def snapshot() -> dict:
    """This process's counts so far: {"counts": {key: n}, "sql": {text: [n, label]}}."""
    with _lock:
        return {
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "argv": _argv(),
            "counts": dict(_counts),
            "sql": {text: [n, _labels.get(text, "?")] for text, n in _sql.items()},
        }


def _argv() -> list[str]:
    try:
        with open(f"/proc/{os.getpid()}/cmdline", "rb") as f:
            return [part.decode(errors="replace") for part in f.read().split(b"\0") if part]
    except OSError:
        return list(sys.argv)


# --- who sent a statement ---------------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))
_SKIP = (
    _HERE,
    f"{os.sep}psycopg{os.sep}",
    f"{os.sep}django{os.sep}db{os.sep}",
    f"{os.sep}apps{os.sep}core{os.sep}db.py",
    f"{os.sep}contextlib.py",
)


def _label(depth: int = 3) -> str:
    """The two innermost frames of our own code (apps/, kombu_kafka/, jobweaver_site/) below
    the statement, or the innermost frame outside the database layers."""
    frame = sys._getframe(depth)
    ours: list[str] = []
    other = ""
    while frame is not None and len(ours) < 2:
        path = frame.f_code.co_filename
        if not any(part in path for part in _SKIP):
            for root in ("apps", "kombu_kafka", "jobweaver_site", "bench"):
                marker = f"{os.sep}{root}{os.sep}"
                if marker in path:
                    where = root + os.sep + path.split(marker, 1)[1]
                    ours.append(f"{where}:{frame.f_code.co_name}")
                    break
            else:
                if not other:
                    parts = path.split(os.sep)
                    other = f"{os.sep.join(parts[-2:])}:{frame.f_code.co_name}"
        frame = frame.f_back
    if ours:
        return " < ".join(ours)
    return other or "?"


def _count_statement(cursor, query, rows: int | None = None) -> None:
    if isinstance(query, str):
        text = query
    elif isinstance(query, bytes):
        text = query.decode(errors="replace")
    else:  # psycopg.sql.Composable
        text = f"<{type(query).__name__}> {query!r}"
    label = None
    if text not in _labels:
        label = _label()
    try:
        autocommit = cursor.connection.autocommit
    except Exception:  # noqa: BLE001 - a closed connection: counted as in a transaction
        autocommit = False
    with _lock:
        _sql[text] = _sql.get(text, 0) + 1
        if label is not None:
            _labels.setdefault(text, label)
        _counts["db.statements"] = _counts.get("db.statements", 0) + 1
        if autocommit:
            _counts["db.autocommit_statements"] = _counts.get("db.autocommit_statements", 0) + 1
        if rows is not None:
            _counts["db.executemany_rows"] = _counts.get("db.executemany_rows", 0) + rows


def _install_psycopg() -> None:
    import psycopg
    from psycopg import _connection_base

    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany
    commit, rollback = psycopg.Connection.commit, psycopg.Connection.rollback
    tx_start = _connection_base.BaseConnection._get_tx_start_command
    connect = psycopg.Connection.connect.__func__
    notifies = psycopg.Connection.notifies

    def counted_execute(self, query, params=None, **kwargs):
        _count_statement(self, query)
        return execute(self, query, params, **kwargs)

    def counted_executemany(self, query, params_seq, **kwargs):
        _count_statement(self, query, len(params_seq) if hasattr(params_seq, "__len__") else 0)
        return executemany(self, query, params_seq, **kwargs)

    def counted_commit(self):
        add("db.commit")
        return commit(self)

    def counted_rollback(self):
        add("db.rollback")
        return rollback(self)

    def counted_tx_start(self):
        add("db.begin")
        return tx_start(self)

    def counted_connect(cls, *args, **kwargs):
        add("db.connect")
        return connect(cls, *args, **kwargs)

    def counted_notifies(self, *args, **kwargs):
        inner = notifies(self, *args, **kwargs)
        try:
            for notify in inner:
                add("db.notifications received")
                yield notify
        finally:
            inner.close()

    psycopg.Connection.notifies = counted_notifies
    psycopg.Connection.connect = classmethod(counted_connect)
    psycopg.connect = psycopg.Connection.connect  # the module's name was bound at its import
    psycopg.Cursor.execute = counted_execute
    psycopg.Cursor.executemany = counted_executemany
    psycopg.Connection.commit = counted_commit
    psycopg.Connection.rollback = counted_rollback
    _connection_base.BaseConnection._get_tx_start_command = counted_tx_start


def _topic(name) -> str:
    prefix = os.environ.get("JOBWEAVER_KAFKA_TOPIC_PREFIX", "")
    name = str(name)
    return name[len(prefix) :] if prefix and name.startswith(prefix) else name


def _records(result) -> int:
    if result is None:
        return 0
    if isinstance(result, list):
        return len(result)
    return 1


def _install_kafka() -> None:
    import confluent_kafka

    class Producer(confluent_kafka.Producer):
        def produce(self, *args, **kwargs):
            add(f"kafka.produce {_topic(kwargs.get('topic', args[0] if args else '?'))}")
            return super().produce(*args, **kwargs)

        def flush(self, *args, **kwargs):
            add("kafka.flush")
            return super().flush(*args, **kwargs)

    class Consumer(confluent_kafka.Consumer):
        def commit(self, *args, **kwargs):
            add("kafka.commit async" if kwargs.get("asynchronous", True) else "kafka.commit sync")
            return super().commit(*args, **kwargs)

        def poll(self, *args, **kwargs):
            result = super().poll(*args, **kwargs)
            add("kafka.poll calls")
            add("kafka.records received", _records(result))
            return result

        def consume(self, *args, **kwargs):
            result = super().consume(*args, **kwargs)
            add("kafka.consume calls")
            add("kafka.records received", _records(result))
            return result

    Producer.__name__ = Producer.__qualname__ = "Producer"
    Consumer.__name__ = Consumer.__qualname__ = "Consumer"
    confluent_kafka.Producer = Producer
    confluent_kafka.Consumer = Consumer


# --- writing the counts -------------------------------------------------------------------------


def _dump(directory: str) -> None:
    path = os.path.join(directory, f"{os.getpid()}.json")
    temporary = f"{path}.tmp"
    with open(temporary, "w") as f:
        json.dump(snapshot(), f)
    os.replace(temporary, path)


def _dumper(directory: str) -> None:
    pid = os.getpid()
    while os.getpid() == pid:
        try:
            _dump(directory)
        except OSError:
            return  # the bench removed its directory: it has read what it needed
        time.sleep(DUMP_SECONDS)


def _start_dumper(directory: str) -> None:
    threading.Thread(target=_dumper, args=(directory,), name="bench-counts", daemon=True).start()


def _after_fork(directory: str) -> None:
    global _lock
    _lock = threading.Lock()
    _counts.clear()
    _sql.clear()
    _start_dumper(directory)


def install(*, kafka: bool = True, directory: str | None = None) -> None:
    """Wrap psycopg (and confluent_kafka unless `kafka` is false) in this process; with a
    `directory`, write the counts there (and in any child forked later)."""
    if "psycopg" not in _installed:
        _install_psycopg()
        _installed.add("psycopg")
    if kafka and "kafka" not in _installed:
        _install_kafka()
        _installed.add("kafka")
    if directory and "dump" not in _installed:
        _installed.add("dump")
        _start_dumper(directory)
        os.register_at_fork(after_in_child=lambda: _after_fork(directory))


def install_from_env() -> None:
    directory = os.environ.get("BENCH_COUNTS_DIR")
    if directory:
        install(directory=directory)
