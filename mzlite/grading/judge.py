"""The grader's own process: verdicts on one submission's answers, computed from the snapshot.

    python -I SNAPSHOT/mzlite/grading/judge.py SNAPSHOT REQUEST.json RESULT.json

The grading process (:mod:`mzlite.grading.grader`) starts this in a fresh interpreter that
imports mzlite from the read-only snapshot only (it refuses to run otherwise), with none of the
student's code in it, a home and caches of its own and the compiled kernels off
(``MZLITE_FUSED=0``): nothing a sandbox could have written is imported or loaded here. Value
answers arrive as plain data (:mod:`mzlite.exercises.wire`, recorded by the submission's
``check`` calls) and are judged for the roster's seed. A coding exercise's function stays in a
sandboxed worker process (:mod:`mzlite.grading.worker`), one per exercise, started in a fresh,
empty box (never the folder the notebook ran in): the checker here calls a
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
    """The sandboxed process holding the student's functions (started lazily, restarted after a
    timeout or a crash)."""

    def __init__(self, cmd, env, cwd, definitions: str, call_timeout: float):
        self.cmd, self.env, self.cwd = cmd, env, cwd
        self.definitions, self.call_timeout = definitions, call_timeout
        self.proc = None
        self.errors: list[str] = []

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            self.cmd,
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._send({"definitions": self.definitions})
        ready = self._receive(max(self.call_timeout, 120.0))
        self.errors = list(ready.get("errors", []))

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
            raise StudentError("your function's result could not be read")
        return reply

    def call(self, name: str, args: tuple):
        from mzlite.exercises.wire import WireError, from_data, to_data

        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self._send({"name": name, "args": to_data(tuple(args))})
        except (BrokenPipeError, OSError):
            self.stop()
            raise StudentError("the process running your function ended") from None
        reply = self._receive(self.call_timeout)
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
        if code is not None and code < 0:
            try:
                return f"ended ({signal.Signals(-code).name})"
            except ValueError:
                return f"ended (signal {-code})"
        return "ended" if code is None else f"ended (status {code})"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None


class RemoteFunction:
    """Stands for the student's function ``name`` in the checker: calls it in the worker."""

    def __init__(self, worker: Worker, name: str):
        self.worker, self.__name__ = worker, name

    def __call__(self, *args):
        return self.worker.call(self.__name__, args)


def judge(request: dict) -> dict:
    from mzlite.exercises.checker import get, verdict
    from mzlite.exercises.wire import WireError, decode
    from mzlite.repro import exercises as _on_the_scorecard  # noqa: F401  registers ch9.not_run

    seed, secret, trials = request["roster_seed"], request["secret"], request["trials"]
    out, errors = {}, []
    for key, item in request["exercises"].items():
        ex = get(key)
        if ex.kind == "coding":
            # a worker of its own, in a fresh box: nothing one function left behind (files,
            # patched modules) reaches the next one
            spec = request["workers"][key]
            worker = Worker(
                spec["cmd"],
                spec["env"],
                spec["cwd"],
                request["definitions"],
                request["call_timeout"],
            )
            try:
                name = item.get("function")
                out[key] = _judge_function(ex, name, worker, seed, secret, trials)
            finally:
                worker.stop()
            errors += [e for e in worker.errors if e not in errors]
            continue
        entries = item.get("answers", [])
        if not entries:
            out[key] = {"status": "missing", "message": "never checked: not reached"}
            continue
        distinct = {json.dumps(e, sort_keys=True) for e in entries}
        if len(distinct) > 1:
            out[key] = {
                "status": "wrong",
                "message": f"{len(distinct)} different answers were checked in one run; a "
                "submission gives one answer",
            }
            continue
        entry = entries[-1]
        if "answer" not in entry:
            if entry.get("unencodable"):
                why = entry["unencodable"]
            elif "function" in entry:
                why = "a function where a value is asked for"
            else:
                why = "no answer was recorded"
            out[key] = {"status": "wrong", "message": f"cannot grade this answer: {why}"}
            continue
        try:
            answer = decode(entry["answer"])
        except WireError as e:
            out[key] = {"status": "wrong", "message": f"cannot grade this answer: {e}"}
            continue
        r = verdict(ex, answer, seed)
        out[key] = {
            "status": r.status,
            "message": r.message,
            "score": float(r.status == "correct"),
        }
    out["__worker_errors__"] = errors
    return out


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


def main(argv: list[str]) -> int:
    snapshot, request_path, result_path = (Path(a) for a in argv)
    import mzlite

    if not Path(mzlite.__file__).resolve().is_relative_to(snapshot.resolve()):
        print(f"judge: mzlite imported from {mzlite.__file__}, not {snapshot}", file=sys.stderr)
        return 3
    result = judge(json.loads(request_path.read_text()))
    from mzlite._io import atomic_write_json

    atomic_write_json(result_path, result)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])  # the snapshot, ahead of any installed mzlite
    sys.exit(main(sys.argv[1:]))
