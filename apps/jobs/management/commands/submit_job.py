"""`manage.py submit_job`: submit a job from the shell (ARCHITECTURE §9).

The command only parses, calls the submission service and prints: the request body it builds
goes through `parse_job_request`, so the API and the CLI accept exactly the same jobs.

Exit codes: 0 submitted (with --wait: COMPLETED); 1 with --wait: FAILED, CANCELLED or the wait
timed out; 2 bad input (one line on stderr, nothing persisted).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time

from jobweaver.conf import settings
from jobweaver.core.commands import EXIT_FAILED, CommandExit, JobWeaverCommand, user_named
from jobweaver.core.errors import InvalidRequest
from jobweaver.core.jsonutil import loads_strict
from jobweaver.jobs.selectors import job_detail
from jobweaver.jobs.services import job_submit, job_submit_batch
from jobweaver.jobs.validation import JobSpec, parse_job_request
from jobweaver.scheduler.models import TERMINAL_STATUSES, ExecutionStatus

POLL_INTERVAL_SECONDS = 0.1
DEFAULT_WAIT_TIMEOUT_SECONDS = 600.0

# Request fields that a flag overrides: (option dest, body field, flag).
FIELD_FLAGS = (
    ("max_retries", "maxRetryCount", "--max-retries"),
    ("priority", "priority", "--priority"),
    ("queue", "queueName", "--queue"),
    ("run_at", "runAt", "--run-at"),
    ("timeout", "timeoutSeconds", "--timeout"),
    ("unique_key", "uniqueKey", "--unique-key"),
    ("unique_scope", "uniqueScope", "--unique-scope"),
    ("unique_for", "uniqueForSeconds", "--unique-for"),
)
# A PENDING job's last error is why it waits for a retry; a RUNNING one's is stale.
SHOWS_LAST_ERROR = (ExecutionStatus.PENDING, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED)
STEP_PATH = re.compile(r"^payload\.steps\[(\d+)\]\.?")


class _StepFlag(argparse.Action):
    """Appends (flag, value) to one shared list, so steps keep their command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        steps = list(getattr(namespace, self.dest) or [])
        steps.append((self.const, values))
        setattr(namespace, self.dest, steps)


def _step_from_flag(flag: str, value) -> dict:
    if flag == "--sleep":
        return {"action": "SLEEP", "durationMs": value}
    if flag == "--log":
        return {"action": "LOG", "message": value}
    if flag == "--compute":
        return {"action": "COMPUTE", "iterations": value}
    if flag == "--fail":
        return {"action": "FAIL", "message": value}
    if flag == "--flaky":
        return {"action": "FLAKY", "failTimes": value}
    # --http URL:MS; the URL may hold colons of its own (scheme, port), MS follows the last one.
    url, _, latency = value.rpartition(":")
    try:
        latency_ms = int(latency)
    except ValueError:
        raise CommandExit(
            f"--http expects URL:MS (e.g. https://example.com/api:250), got {value!r}"
        ) from None
    return {"action": "HTTP_CALL", "url": url, "latencyMs": latency_ms}


def _check_size(raw: bytes, source: str) -> None:
    limit = settings.JOBWEAVER_MAX_REQUEST_BYTES
    if len(raw) > limit:
        raise CommandExit(f"{source} exceeds the request limit of {limit} bytes")


def _read_file(path: str) -> str:
    """The body of --file: a path, or standard input for `-`. Read at most one byte past the
    limit, so a huge file is refused without loading it."""
    limit = settings.JOBWEAVER_MAX_REQUEST_BYTES
    source = "standard input" if path == "-" else path
    if path == "-":
        stream = getattr(sys.stdin, "buffer", sys.stdin)
        raw = stream.read(limit + 1)
        raw = raw.encode() if isinstance(raw, str) else raw
    else:
        try:
            with open(path, "rb") as file:
                raw = file.read(limit + 1)
        except OSError as exc:
            raise CommandExit(f"cannot read {path}: {exc.strerror or exc}") from None
    _check_size(raw, source)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CommandExit(f"{source} is not UTF-8 text") from None


def _progress_line(detail: dict) -> str:
    progress = detail["progress"]
    line = f"{detail['status']} {progress['stepsCompleted']}/{progress['totalSteps']}"
    if detail["retryCount"]:
        line += f" (retry {detail['retryCount']}/{detail['maxRetryCount']})"
    if detail["lastError"] and detail["status"] in SHOWS_LAST_ERROR:
        line += f" - {detail['lastError']}"
    return line


BAR_WIDTH = 30


def _progress_bar(detail: dict) -> str:
    """`[#######.......]  40% RUNNING 2/5`: the steps done (all of them once COMPLETED)."""
    progress = detail["progress"]
    total, done = progress["totalSteps"], progress["stepsCompleted"]
    fraction = done / total if total else float(detail["status"] == "COMPLETED")
    filled = round(BAR_WIDTH * fraction)
    return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {fraction:4.0%} {_progress_line(detail)}"


class Command(JobWeaverCommand):
    help = (
        "Submit a job through the same validation and service as POST /api/jobs. Give the job "
        "as --file (a request body), --payload (the payload object) or step flags, which run "
        "in the order given, e.g. --log start --sleep 500 --http https://example.com:200. "
        "Exit status: 0 submitted (with --wait: completed), 1 with --wait: failed, cancelled "
        "or timed out, 2 bad input."
    )

    def add_arguments(self, parser):
        source = parser.add_mutually_exclusive_group()
        source.add_argument(
            "--file", metavar="PATH", help="JSON request body as for POST /api/jobs; - for stdin"
        )
        source.add_argument("--payload", metavar="JSON", help='the payload: {"steps": [...]}')
        source.add_argument(
            "--task",
            metavar="PATH",
            help="run a registered Python task (ARCHITECTURE §13), e.g. "
            "jobweaver_site.examples.tasks.add",
        )
        task_arguments = parser.add_argument_group("task arguments (with --task)")
        # Not dest "args": Django's command runner takes that one for positional arguments.
        task_arguments.add_argument(
            "--args",
            dest="task_args",
            metavar="JSON",
            help="positional arguments, a JSON array, e.g. '[2, 3]'",
        )
        task_arguments.add_argument(
            "--kwargs",
            dest="task_kwargs",
            metavar="JSON",
            help='keyword arguments, a JSON object, e.g. {"b": 3}',
        )
        steps = parser.add_argument_group("steps (repeatable; run in the order given)")
        for flag, value_type, metavar, help_text in (
            ("--sleep", int, "MS", "SLEEP for MS milliseconds"),
            ("--log", str, "MSG", "LOG a message"),
            ("--compute", int, "N", "COMPUTE for N iterations"),
            ("--http", str, "URL:MS", "simulated HTTP_CALL to URL taking MS milliseconds"),
            ("--fail", str, "MSG", "FAIL the attempt (retryable)"),
            ("--flaky", int, "N", "FLAKY: fail the first N attempts, then succeed"),
        ):
            steps.add_argument(
                flag,
                action=_StepFlag,
                const=flag,
                dest="steps",
                type=value_type,
                metavar=metavar,
                help=help_text,
            )
        fields = parser.add_argument_group(
            "job options (these win over the same fields of a --file body)"
        )
        fields.add_argument("--max-retries", type=int, metavar="N", help="maxRetryCount")
        fields.add_argument("--priority", type=int, metavar="P", help="0-9, higher runs first")
        fields.add_argument(
            "--run-at", metavar="ISO", help="not before this time, e.g. 2026-01-01T12:00:00Z"
        )
        fields.add_argument("--timeout", type=int, metavar="S", help="timeoutSeconds")
        fields.add_argument(
            "--queue", metavar="NAME", help="queueName: executors serving it run the job (§15)"
        )
        fields.add_argument("--idempotency-key", metavar="K", help="as the Idempotency-Key header")
        fields.add_argument(
            "--unique-key",
            metavar="K",
            help="uniqueKey: if one of your jobs with this key is in scope, that job is returned",
        )
        fields.add_argument(
            "--unique-scope",
            choices=["waiting", "active", "period"],
            help="uniqueScope (default active: waiting or running)",
        )
        fields.add_argument(
            "--unique-for", type=int, metavar="S", help="uniqueForSeconds (--unique-scope period)"
        )
        fields.add_argument("--user", metavar="USERNAME", help="submit as this user")
        fields.add_argument(
            "--count",
            type=int,
            metavar="N",
            help="submit N copies in one batch (one transaction, as POST /api/jobs/batch)",
        )
        output = parser.add_argument_group("output")
        output.add_argument(
            "--wait",
            action="store_true",
            help="follow the job until it ends; exit 0 on COMPLETED, 1 on FAILED or CANCELLED",
        )
        output.add_argument(
            "--wait-timeout",
            type=float,
            metavar="SECONDS",
            help=f"stop waiting after SECONDS, exit 1 (default {DEFAULT_WAIT_TIMEOUT_SECONDS:g})",
        )
        output.add_argument(
            "--json",
            action="store_true",
            help="print the job detail as JSON (with --wait: the final detail; progress on stderr)",
        )

    def handle(self, *args, **options):
        wait_timeout = self._wait_timeout(options)
        count = self._count(options)
        spec = self._job_spec(options)
        user = user_named(options["user"])
        if count is not None:
            self._submit_copies(spec, user, count, as_json=options["json"])
            return
        result = job_submit(
            spec=spec, submitted_by=user, idempotency_key=options["idempotency_key"]
        )
        job = result.job
        detail = job_detail(job_id=job.id)
        if options["json"]:
            if not options["wait"]:
                self._print_json(detail)
        elif result.created:
            self.stdout.write(
                f"job {job.id} submitted, trace {job.trace_id}, status {detail['status']}"
            )
        else:
            replayed = options["idempotency_key"] is not None
            replayed = replayed and job.idempotency_key == options["idempotency_key"]
            reason = "idempotency key" if replayed else "unique key"
            self.stdout.write(
                f"job {job.id} already submitted with this {reason}, "
                f"trace {job.trace_id}, status {detail['status']}"
            )
        if not options["wait"]:
            return
        try:
            detail = self._follow(detail, timeout=wait_timeout, quiet_stdout=options["json"])
        except KeyboardInterrupt:
            raise CommandExit(f"stopped waiting; job {job.id} carries on", returncode=130) from None
        if options["json"]:
            self._print_json(detail)
        elif detail["status"] == ExecutionStatus.COMPLETED and "result" in detail:
            self.stdout.write(f"result: {json.dumps(detail['result'])}")  # a TASK job's
        if detail["status"] != ExecutionStatus.COMPLETED:
            reason = f": {detail['lastError']}" if detail["lastError"] else ""
            raise CommandExit(
                f"job {job.id} ended {detail['status']}{reason}", returncode=EXIT_FAILED
            )

    def _wait_timeout(self, options) -> float:
        timeout = options["wait_timeout"]
        if timeout is None:
            return DEFAULT_WAIT_TIMEOUT_SECONDS
        if not options["wait"]:
            raise CommandExit("--wait-timeout needs --wait")
        if not (math.isfinite(timeout) and timeout > 0):
            raise CommandExit(
                f"--wait-timeout must be a positive number of seconds, got {timeout:g}"
            )
        return timeout

    def _count(self, options) -> int | None:
        count = options["count"]
        if count is None:
            return None
        limit = settings.JOBWEAVER_MAX_BATCH_JOBS
        if not 1 <= count <= limit:
            raise CommandExit(f"--count must be between 1 and {limit}, got {count}")
        for option, flag in (("wait", "--wait"), ("idempotency_key", "--idempotency-key")):
            if options[option]:
                raise CommandExit(f"--count cannot be combined with {flag}")
        return count

    def _submit_copies(self, spec: JobSpec, user, count: int, *, as_json: bool) -> None:
        jobs = job_submit_batch(specs=[spec] * count, submitted_by=user)
        if as_json:
            accepted = [
                {"jobId": str(job.id), "traceId": job.trace_id, "status": job.execution.status}
                for job in jobs
            ]
            self.stdout.write(json.dumps({"jobs": accepted}, indent=2))
            return
        for job in jobs:
            self.stdout.write(f"job {job.id} submitted, trace {job.trace_id}")
        self.stdout.write(f"{len(jobs)} jobs submitted in one batch")

    def _job_spec(self, options) -> JobSpec:
        """The request body from --file, --payload or the step flags, with the flags' fields
        laid over it, validated exactly as the API validates it."""
        flag_steps = options["steps"] or []
        if (options["file"] is not None or options["payload"] is not None) and flag_steps:
            raise CommandExit(
                "give the steps either as --file/--payload or as step flags, not both"
            )
        task_arguments = (options["task_args"], options["task_kwargs"])
        if options["task"] is None and task_arguments != (None, None):
            raise CommandExit("--args and --kwargs go with --task")
        if options["task"] is not None:
            if flag_steps:
                raise CommandExit("give either --task or step flags, not both")
            body = {"jobType": "TASK", "payload": self._task_payload(options)}
        elif options["file"] is not None:
            source = "standard input" if options["file"] == "-" else options["file"]
            body = loads_strict(_read_file(options["file"]), source=source)
        elif options["payload"] is not None:
            _check_size(options["payload"].encode(), "--payload")
            body = {
                "jobType": "SIMULATION",
                "payload": loads_strict(options["payload"], source="--payload"),
            }
        elif flag_steps:
            steps = [_step_from_flag(flag, value) for flag, value in flag_steps]
            body = {"jobType": "SIMULATION", "payload": {"steps": steps}}
        else:
            raise CommandExit(
                "no job given: use --file, --payload or step flags (--sleep, --log, ...)"
            )
        overridden = {}
        if isinstance(body, dict):  # otherwise parse_job_request says what is wrong
            for dest, field, flag in FIELD_FLAGS:
                if options[dest] is not None:
                    body[field] = options[dest]
                    overridden[field] = flag
        try:
            return parse_job_request(body)
        except InvalidRequest as exc:
            raise InvalidRequest(self._name_the_flag(exc.message, flag_steps, overridden)) from None

    @staticmethod
    def _task_payload(options) -> dict:
        """The TASK payload of --task, --args and --kwargs (validated by parse_job_request)."""
        payload: dict = {"task": options["task"]}
        for name in ("args", "kwargs"):
            raw = options[f"task_{name}"]
            if raw is not None:
                _check_size(raw.encode(), f"--{name}")
                payload[name] = loads_strict(raw, source=f"--{name}")
        return payload

    @staticmethod
    def _name_the_flag(message: str, flag_steps: list, overridden: dict) -> str:
        """Point a validation message at the flag the user typed, not at the body it built."""
        step = STEP_PATH.match(message)
        if step and flag_steps:
            flag, value = flag_steps[int(step.group(1))]
            value = str(value) if len(str(value)) <= 40 else f"{str(value)[:37]}..."
            return f"{flag} {value}: {message[step.end() :]}"
        field = message.split(" ", 1)[0]
        if field in overridden:
            return f"{overridden[field]}: {message}"
        return message

    def _follow(self, detail: dict, *, timeout: float, quiet_stdout: bool) -> dict:
        """Poll the job until it ends, printing a line whenever its status or progress moves.
        With --json the lines go to stderr, so stdout stays one JSON document."""
        out = self.stderr if quiet_stdout else self.stdout
        if out.isatty():
            return self._follow_with_bar(detail, out=out, timeout=timeout)
        deadline = time.monotonic() + timeout
        shown = _progress_line(detail)
        printed_any = False
        while detail["status"] not in TERMINAL_STATUSES:
            self._check_deadline(detail, deadline, timeout)
            time.sleep(POLL_INTERVAL_SECONDS)
            detail = job_detail(job_id=detail["jobId"])
            line = _progress_line(detail)
            if line != shown:
                out.write(line, style_func=str)
                shown, printed_any = line, True
        if not printed_any:  # ended before the first poll: still say how
            out.write(shown, style_func=str)
        return detail

    @staticmethod
    def _check_deadline(detail: dict, deadline: float, timeout: float) -> None:
        if time.monotonic() >= deadline:
            raise CommandExit(
                f"gave up waiting after {timeout:g} s; job {detail['jobId']} is {detail['status']}",
                returncode=EXIT_FAILED,
            )

    def _follow_with_bar(self, detail: dict, *, out, timeout: float) -> dict:
        """On a terminal: one line redrawn in place, a bar of the steps done, then a newline."""
        deadline = time.monotonic() + timeout
        shown = ""
        try:
            while True:
                line = _progress_bar(detail)
                if line != shown:
                    # Pad over the rest of a longer previous line.
                    out.write("\r" + line.ljust(len(shown)), ending="", style_func=str)
                    out.flush()
                    shown = line
                if detail["status"] in TERMINAL_STATUSES:
                    return detail
                self._check_deadline(detail, deadline, timeout)
                time.sleep(POLL_INTERVAL_SECONDS)
                detail = job_detail(job_id=detail["jobId"])
        finally:
            out.write("", style_func=str)  # end the redrawn line

    def _print_json(self, detail: dict) -> None:
        self.stdout.write(json.dumps(detail, indent=2))
