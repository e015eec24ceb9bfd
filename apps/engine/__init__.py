"""THE engine: the only writer of executions, attempts and job events (ARCHITECTURE §2, §4).

    transitions.py  the transition table: from-states, to-state, actors, fence, events, counters
    mover.py        the one mover: a locked row, a fenced statement, or a set of rows
    executions.py   the named transitions, one function each (the list is its docstring)
    ledger.py       the attempt ledger: attempt rows open, progress and close
    events.py       the domain events, one definition each (a Python dict or SQL, same fields)
    retry.py        the pure retry policy (§5)
    claim/          the claim and its rules: credits, pauses and limits, set-aside, put-back
    store/          every SQL statement, named, with a line saying what it does
    signals.py      what the engine tells the processes around it (events committed)

Dependencies point down: the faces call services, the services and processes call the engine,
the engine reads and writes models through its store. No face imports the engine's store; no
module outside the engine writes a `status` (tests/unit/test_layering.py, import-linter).

A new transition touches transitions.py (its row), executions.py (its function), the store's
statement when it is fenced or set-based, and the table's unit test.
"""
