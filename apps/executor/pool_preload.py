"""Imported once by the process pool's forkserver (multiprocessing's preload): Django is set up
and the apps and their tasks are imported there, so each child forks ready to run an attempt in
milliseconds instead of setting Django up itself. Nothing here opens a connection: a forked
child must not share one."""

import django

django.setup()

from jobweaver.executor import pool_child  # noqa: E402, F401 - imported once, for every child
