"""The grader's own process: verdicts on one submission's answers, computed from the snapshot.

    python -I SNAPSHOT/mzlite/grading/judge.py SNAPSHOT REQUEST.json RESULT.json
    python -I SNAPSHOT/mzlite/grading/judge.py SNAPSHOT --serve   # a child per request

The grader starts one ``--serve`` process per grading run (:func:`serve`): it imports the
snapshot's mzlite and every chapter's exercises once and judges each submission in a child
forked for it, which exits when that submission is judged.

The grading process (:mod:`mzlite.grading.grader`) starts this in a fresh interpreter that
imports mzlite from the read-only snapshot only (it refuses to run otherwise), with none of the
student's code in it, a home and caches of its own and the compiled kernels off
(``MZLITE_FUSED=0``): nothing a sandbox could have written is imported or loaded here. Value
answers arrive as plain data (:mod:`mzlite.exercises.wire`, recorded by the submission's
``check`` calls) and are judged for the roster's seed. A coding exercise's function stays in a
sandboxed worker process (:mod:`mzlite.grading.worker`), one per submission, started in a fresh,
empty box (never the folder the notebook ran in), where each exercise runs in a child that starts
from none of the student's code, in an emptied box: the checker here calls a
:class:`RemoteFunction` that sends the arguments there and gets the result back as data, so the
student's code can never reach a checker, ``torch.allclose`` or a mark. Each coding exercise is
checked on ``trials`` hidden seeds derived from the roster's seed and the grader's secret (the
student never saw these inputs); the fraction passed is its partial credit.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

MAX_REPLY = 64 * 2**20


class StudentError(Exception):
    """What the student's function raised (or did wrong) in the worker."""


def hidden_seed(secret: str, roster_seed: int, key: str, trial: int) -> int:
    """The seed of hidden trial ``trial`` of exercise ``key`` for a student: known to nobody
    without the grader's ``secret``, never the student's own seed."""
    if not isinstance(secret, str) or not secret.strip():
        raise ValueError("secret must be a non-empty string: hidden trials need a secret")
    digest = hashlib.sha256(f"{secret}|{roster_seed}|{key}|{trial}".encode()).hexdigest()
    return 1_000_000 + int(digest[:12], 16) % 1_000_000_000


class Worker:
    """The sandboxed process holding one submission's functions (:mod:`.worker`), started
    lazily and again after a timeout or a crash. Each exercise (:meth:`begin`, :meth:`end`)
    runs in a child of it that starts from none of the student's code, in an emptied box."""

    def __init__(self, cmd, env, cwd, definitions, call_timeout, jailed=False, box=None):
        self.cmd, self.env, self.cwd, self.box = cmd, env, cwd, box
        self.definitions, self.call_timeout, self.jailed = definitions, call_timeout, jailed
        self.proc = None
        self.exercise = None  # the exercise being judged
        self.serving = False  # whether a child runs the exercise's definitions now
        self.started = False
        self.errors: list[str] = []

    def _start(self) -> None:
        if self.started and self.box:
            # a worker that ended mid-exercise (a timeout, a crash) left that exercise's files:
            # the next one starts in an emptied box, emptied here since nothing runs there now
            from mzlite.grading.worker import empty_box

            empty_box(self.box)
        self.started = True
        self.proc = subprocess.Popen(
            self.cmd,
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        setup = {"definitions": self.definitions, "jailed": bool(self.jailed), "box": self.box}
        self._send(setup)
        self._receive(max(self.call_timeout, 120.0))  # the libraries imported: preloaded

    def begin(self, key: str) -> None:
        """Judge exercise ``key`` next: its first call starts a fresh child."""
        self.end()
        self.exercise = key

    def _serve(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self._send({"start": self.exercise})
        ready = self._receive(max(self.call_timeout, 120.0))
        if "ended" in ready:
            raise StudentError(f"the process running your function {_exit_words(ready['ended'])}")
        self.serving = True
        self.errors = list(ready.get("errors", []))

    def end(self) -> None:
        """The exercise is judged: its child ends, the box is emptied for the next one."""
        if self.serving and self.proc is not None and self.proc.poll() is None:
            try:
                self._send({"end": True})
                if "ended" not in self._receive(self.call_timeout):
                    self.stop()
            except (StudentError, OSError):
                self.stop()
        self.serving = False

    def _send(self, obj) -> None:
        self.proc.stdin.write((json.dumps(obj, allow_nan=False) + "\n").encode())
        self.proc.stdin.flush()

    def _receive(self, timeout: float) -> dict:
        fd = self.proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        buf, deadline = b"", time.monotonic() + timeout
        try:
            while not buf.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.stop()
                    raise StudentError(f"your function did not return within {timeout:g} s")
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise StudentError(f"the process running your function {self._ended()}")
                buf += chunk
                if len(buf) > MAX_REPLY:
                    self.stop()
                    raise StudentError("your function's result is far too large")
        finally:
            sel.close()
        try:
            reply = json.loads(buf)
        except ValueError:
            self.stop()
            raise StudentError("your function's result could not be read") from None
        if not isinstance(reply, dict):
            self.stop()
            raise StudentError("your function's result could not be read")
        return reply

    def call(self, name: str, args: tuple):
        from mzlite.exercises.wire import WireError, from_data, to_data

        if not self.serving or self.proc is None or self.proc.poll() is not None:
            self._serve()
        try:
            self._send({"name": name, "args": to_data(tuple(args))})
        except (BrokenPipeError, OSError):
            self.stop()
            raise StudentError("the process running your function ended") from None
        reply = self._receive(self.call_timeout)
        if "ended" in reply:  # the child died (exit, signal): the next call starts another
            self.serving = False
            raise StudentError(f"the process running your function {_exit_words(reply['ended'])}")
        if "error" in reply:
            raise StudentError(str(reply["error"])[:2000])
        try:
            return from_data(reply.get("result"))
        except WireError as e:
            raise StudentError(
                f"your function returned something that cannot be graded: {e}"
            ) from None

    def _ended(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.stop()
        return "ended" if code is None else _exit_words(code)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None
        self.serving = False


def _exit_words(code) -> str:
    """How a process with exit code ``code`` (negative: the signal) ended, in words."""
    if not isinstance(code, int):
        return "ended"
    if code < 0:
        try:
            return f"ended ({signal.Signals(-code).name})"
        except ValueError:
            return f"ended (signal {-code})"
    return f"ended (status {code})"


class RemoteFunction:
    """Stands for the student's function ``name`` in the checker: calls it in the worker."""

    def __init__(self, worker: Worker, name: str):
        self.worker, self.__name__ = worker, name

    def __call__(self, *args):
        return self.worker.call(self.__name__, args)


def exercise(key: str):
    """The registered exercise ``key``. The reproduction layer, which registers the live
    scorecard's exercise (ch9.not_run), is imported only when such a key is asked for: it
    costs every other judge a second of CPU."""
    from mzlite.exercises.checker import get

    try:
        return get(key)
    except KeyError:
        from mzlite.repro import exercises as _on_the_scorecard  # noqa: F401

        return get(key)


def preload(keys) -> None:
    """Load the exercises ``keys`` and what their checkers read from the snapshot's committed
    files, before the first fork: chapter 9's live exercise judges against the scorecard
    (:mod:`mzlite.repro.exercises`), about 5 CPU s to evaluate, once for the run instead of once
    in every chapter-9 submission's child. Nothing of any submission is read here. If that
    evaluation fails, the judge still starts (the reason in its log): each child that needs the
    scorecard evaluates it and reports its own error, as without this preload."""
    for key in keys:
        exercise(key)
    live = sys.modules.get("mzlite.repro.exercises")
    if live is not None:
        try:
            live.prepare()
        except Exception:  # noqa: BLE001 - one exercise's input must not stop every judgement
            import traceback

            traceback.print_exc()


def judge(request: dict) -> dict:
    seed, secret, trials = request["roster_seed"], request["secret"], request["trials"]
    out, errors = {}, []
    worker = None
    if "worker" in request:
        spec = request["worker"]
        worker = Worker(
            spec["cmd"],
            spec["env"],
            spec["cwd"],
            request["definitions"],
            request["call_timeout"],
            jailed=spec.get("jailed", False),
            box=spec.get("box"),
        )
    try:
        for key, item in request["exercises"].items():
            out[key] = _judge_one(key, item, worker, seed, secret, trials)
            if worker is not None:
                errors += [e for e in worker.errors if e not in errors]
    finally:
        if worker is not None:
            worker.stop()
    out["__worker_errors__"] = errors
    return out


def _judge_one(key, item, worker, seed, secret, trials) -> dict:
    from mzlite.exercises.checker import verdict
    from mzlite.exercises.wire import WireError, decode

    ex = exercise(key)
    if ex.kind == "coding":
        if worker is None:
            raise ValueError(f"{key} is a coding exercise and the request gives no worker")
        # a child of its own, in an emptied box: nothing one function left behind (files,
        # patched modules) reaches the next one
        worker.begin(key)
        try:
            return _judge_function(ex, item.get("function"), worker, seed, secret, trials)
        finally:
            worker.end()
    entries = item.get("answers", [])
    if not entries:
        return {"status": "missing", "message": "never checked: not reached"}
    distinct = {json.dumps(e, sort_keys=True) for e in entries}
    if len(distinct) > 1:
        return {
            "status": "wrong",
            "message": f"{len(distinct)} different answers were checked in one run; a "
            "submission gives one answer",
        }
    entry = entries[-1]
    if "answer" not in entry:
        if entry.get("unencodable"):
            why = entry["unencodable"]
        elif "function" in entry:
            why = "a function where a value is asked for"
        else:
            why = "no answer was recorded"
        return {"status": "wrong", "message": f"cannot grade this answer: {why}"}
    try:
        answer = decode(entry["answer"])
    except WireError as e:
        return {"status": "wrong", "message": f"cannot grade this answer: {e}"}
    r = verdict(ex, answer, seed)
    return {"status": r.status, "message": r.message, "score": float(r.status == "correct")}


def _judge_function(ex, name, worker, seed, secret, trials) -> dict:
    from mzlite.exercises.checker import verdict

    if not name:
        return {"status": "missing", "message": "no function was passed to the check"}
    seeds = [hidden_seed(secret, seed, ex.key, t) for t in range(trials)] if ex.per_seed else [seed]
    results = [verdict(ex, RemoteFunction(worker, name), s) for s in seeds]
    if any(r.status == "unanswered" for r in results):
        first = next(r for r in results if r.status == "unanswered")
        return {"status": "unanswered", "message": first.message, "score": 0.0}
    passed = sum(r.status == "correct" for r in results)
    failed = [r for r in results if r.status != "correct"]
    if failed and "defines no function" in failed[0].message:
        return {"status": "missing", "message": failed[0].message, "score": 0.0}
    status = "correct" if not failed else ("partial" if passed else "wrong")
    message = results[0].message if not failed else failed[0].message
    return {
        "status": status,
        "message": f"{passed} of {len(seeds)} hidden trials passed; " + message,
        "score": passed / len(seeds),
        "trials": len(seeds),
        "passed": passed,
    }


def _from_snapshot(snapshot: Path) -> bool:
    import mzlite

    if not Path(mzlite.__file__).resolve().is_relative_to(snapshot.resolve()):
        print(f"judge: mzlite imported from {mzlite.__file__}, not {snapshot}", file=sys.stderr)
        return False
    return True


def main(argv: list[str]) -> int:
    snapshot, request_path, result_path = (Path(a) for a in argv)
    if not _from_snapshot(snapshot):
        return 3
    result = judge(json.loads(request_path.read_text()))
    from mzlite._io import atomic_write_json

    atomic_write_json(result_path, result)
    return 0


def serve(snapshot: Path, keys: list[str] = ()) -> int:
    """One judge for a whole grading run: import mzlite and every chapter's exercises from the
    snapshot once, and what the assignment's exercises ``keys`` read from committed files
    (:func:`preload`), then judge each submission in a child forked for it.

    The grader sends one JSON object a line on stdin: ``{"id", "request", "result", "env",
    "cwd", "log"}`` judges the request file into the result file in a fresh child (its
    environment and folder those of the notebook's judge box, its stdout and stderr the log
    file), ``{"kill": id}`` kills that child. For each child that ends it answers ``{"id",
    "returncode"}`` (negative: the signal) on stdout. Several children run at once (the
    grader's ``--jobs``). Each child judges one submission and exits: no verdict, cache or
    patched module of one submission's judge reaches another's, and this process, which runs
    nothing of any submission, is not dumpable (no child can attach to it or write its memory).
    End of input: the children still running are killed, and it exits."""
    if not _from_snapshot(snapshot):
        return 3
    import signal as signals

    from mzlite.exercises import checker, wire  # noqa: F401  what every child needs, once
    from mzlite.grading.worker import not_dumpable

    checker.keys()  # every chapter's exercises registered before the first fork
    preload(keys)
    not_dumpable()
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)

    def reply(obj) -> None:
        proto_out.write(json.dumps(obj) + "\n")
        proto_out.flush()

    sel = selectors.DefaultSelector()
    sel.register(0, selectors.EVENT_READ, None)
    running: dict = {}  # job id -> its pidfd (a signal through it never reaches a reused pid)
    reading, buf = True, b""
    reply({"ready": True})
    while reading or running:
        for key, _ in sel.select():
            if key.data is not None:  # a child ended
                job, pid = key.data
                _, status = os.waitpid(pid, 0)
                sel.unregister(key.fd)
                os.close(running.pop(job))
                reply({"id": job, "returncode": os.waitstatus_to_exitcode(status)})
                continue
            chunk = os.read(0, 1 << 16)
            if not chunk:  # the grader is gone or done: nothing of this run outlives it
                reading = False
                sel.unregister(0)
                for fd in running.values():
                    _pidfd_kill(fd, signals)
                continue
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                if "kill" in msg:
                    if msg["kill"] in running:
                        _pidfd_kill(running[msg["kill"]], signals)
                    continue
                pid = os.fork()
                if pid == 0:
                    proto_out.close()
                    _judge_child(msg)  # never returns
                running[msg["id"]] = os.pidfd_open(pid)
                sel.register(running[msg["id"]], selectors.EVENT_READ, (msg["id"], pid))
    return 0


def _pidfd_kill(fd: int, signals) -> None:
    try:
        signals.pidfd_send_signal(fd, signals.SIGKILL)
    except ProcessLookupError:
        pass


def _judge_child(job: dict):
    """A forked child of :func:`serve`: judge one request as :func:`main` would, then exit."""
    code = 1
    try:
        log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.clear()
        os.environ.update(job["env"])
        os.chdir(job["cwd"])
        import tempfile

        tempfile.tempdir = None  # TMPDIR is this judge's own, read again
        from mzlite._io import atomic_write_json

        result = judge(json.loads(Path(job["request"]).read_text()))
        atomic_write_json(Path(job["result"]), result)
        code = 0
    except BaseException:  # noqa: BLE001 - SystemExit included: the grader reads the log
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])  # the snapshot, ahead of any installed mzlite
    if sys.argv[2:3] == ["--serve"]:
        sys.exit(serve(Path(sys.argv[1]), sys.argv[3:]))
    sys.exit(main(sys.argv[1:]))
