"""The sandboxed process that runs a student's functions for the grader (never imported by it).

The judge (:mod:`mzlite.grading.judge`) starts ``python -I -c BOOT`` where BOOT is the sandbox's
audit hook, :mod:`mzlite.exercises.wire` and this file, read from the grader's snapshot (so a
submission cannot have replaced any of them). The process sends and receives one JSON object a
line over copies of its stdin and stdout; the student's code sees ``/dev/null`` there instead.
First it receives the submission's definitions (imports, functions, classes, constants) and runs
them, one statement at a time, with mzlite unavailable (a coding exercise is answered with torch
and numpy, not with the library it reimplements); then, per request, it calls one function on
decoded arguments and answers with the encoded result or the error it raised.

Whatever the student's code does here (patch torch, exit, loop) stays in this process: the judge
compares the results in its own process, and kills this one after ``call_timeout`` seconds.
"""

from __future__ import annotations

import ast
import json
import os
import sys

# In the sandbox, wire's source precedes this file and mzlite is not to be imported at all (an
# installed copy may be out of sight, and reading it raises PermissionError); imported as a module
# (tests), it comes from mzlite.
if "to_data" not in globals():
    from mzlite.exercises.wire import from_data, to_data


def serve() -> None:
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - for the process's lifetime
    sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115

    def reply(obj) -> None:
        proto_out.write(json.dumps(obj, allow_nan=False) + "\n")
        proto_out.flush()

    for name in [m for m in sys.modules if m == "mzlite" or m.startswith("mzlite.")]:
        del sys.modules[name]
    sys.modules["mzlite"] = None  # import mzlite -> ImportError
    setup = json.loads(proto_in.readline())
    namespace = {"__name__": "__submission__"}
    errors = []
    try:
        statements = ast.parse(setup["definitions"]).body
    except SyntaxError as e:
        statements, errors = [], [f"SyntaxError: {e}"]
    for stmt in statements:
        try:
            exec(compile(ast.Module([stmt], []), "<submission>", "exec"), namespace)  # noqa: S102
        except BaseException as e:  # noqa: BLE001 - a student's statement may raise anything
            errors.append(f"line {stmt.lineno}: {type(e).__name__}: {e}")
    reply({"ready": True, "errors": errors})
    for line in proto_in:
        request = json.loads(line)
        function = namespace.get(request["name"])
        try:
            if not callable(function):
                raise NameError(f"your notebook defines no function {request['name']!r}")
            result = function(*from_data(request["args"]))
            reply({"result": to_data(result)})
        except BaseException as e:  # noqa: BLE001
            reply({"error": f"{type(e).__name__}: {e}"[:2000]})


if __name__ == "__main__":
    serve()
