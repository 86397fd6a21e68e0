"""The sandboxed process that runs a student's functions for the grader (never imported by it).

The judge (:mod:`mzlite.grading.judge`) starts ``python -I -c BOOT`` where BOOT is the sandbox's
audit hook, :mod:`mzlite.exercises.wire` and this file, read from the grader's snapshot (so a
submission cannot have replaced any of them), in a fresh, empty box of its own. The process
sends and receives one JSON object a line over copies of its stdin and stdout; the student's
code sees ``/dev/null`` there instead.

It serves every coding exercise of one submission, each in a process of its own:

1. It receives the submission's definitions (imports, functions, classes, constants), drops the
   imports whose names none of them uses (:func:`used_definitions`: a notebook's
   ``import matplotlib.pyplot as plt`` serves its figures, not the functions judged here) and,
   before any of the student's code runs, imports the heavy libraries the rest name from the
   read-only environment (:data:`PRELOAD`: torch, numpy, matplotlib...), once.
2. Per exercise (``{"start": key}``) it forks: the child runs the definitions, one statement at
   a time, with mzlite unavailable (a coding exercise is answered with torch and numpy, not with
   the library it reimplements), answers ``ready``, then calls one function per request on
   decoded arguments and answers with the encoded result or the error it raised, until
   ``{"end": true}``. The parent waits for it, kills whatever it left running, empties the box
   it was given (``box``: files, and in the jail its shared memory) and answers
   ``{"ended": status}``.

So each exercise starts from a process that has run none of the student's code and a box with
nothing in it, as if started afresh, without importing torch once per exercise. The parent is
not dumpable: a child cannot attach to it (ptrace) or write its memory to change what the next
exercise starts from. Whatever the student's code does (patch torch, exit, loop) stays in its
child: the judge compares the results in its own process, and kills this process after
``call_timeout`` seconds without an answer (and starts it again for the next exercise).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import sys

# In the sandbox, wire's source precedes this file and mzlite is not to be imported at all (an
# installed copy may be out of sight, and reading it raises PermissionError); imported as a module
# (tests), it comes from mzlite.
if "to_data" not in globals():
    from mzlite.exercises.wire import from_data, to_data

# What the parent imports before forking, when the definitions import it: libraries of the
# read-only environment, slow to import (torch alone takes seconds), that start no thread when
# imported. Anything else is imported by each child, as the student's statement asks.
PRELOAD = frozenset(
    {"torch", "numpy", "scipy", "matplotlib", "matplotlib.pyplot", "IPython", "IPython.display"}
    | {"ipywidgets", "pandas", "sklearn"}
)
PR_SET_DUMPABLE = 4
SHM = "/dev/shm"


def imported_modules(definitions: str) -> list[str]:
    """The modules ``definitions`` import (``import a.b`` and ``from a.b import c``: ``a.b``)."""
    try:
        tree = ast.parse(definitions)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return list(dict.fromkeys(names))


def _bound_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The names an import statement binds (``import a.b`` binds ``a``)."""
    return [(a.asname or a.name).split(".")[0] for a in node.names]


def used_definitions(definitions: str) -> str:
    """``definitions`` without the import statements whose names nothing in them loads.

    A judged function reaches a module through a name of its globals; an import none of the
    definitions names (a function, a class, a constant) can change no result, and costs an
    import per exercise: the figures' and widgets' libraries (matplotlib, IPython, ipywidgets)
    or scipy take a second or more of CPU each time, and torch 2-3 s where no function names it
    (chapter 10's answer with numpy alone). Kept whatever they bind: star imports and
    ``__future__`` ones. What is not valid Python is returned as it is (the child reports it)."""
    try:
        tree = ast.parse(definitions)
    except SyntaxError:
        return definitions
    loaded = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)
    }
    kept = [
        node
        for node in tree.body
        if not isinstance(node, ast.Import | ast.ImportFrom)
        or any(a.name == "*" for a in node.names)
        or (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        or loaded & set(_bound_names(node))
    ]
    if len(kept) == len(tree.body):
        return definitions
    # the grader's definitions are ast.unparse's text already (submission._definitions)
    return "\n\n".join(ast.unparse(node) for node in kept) + "\n"


def _preload(definitions: str) -> None:
    import importlib

    for name in imported_modules(definitions):
        if name in PRELOAD:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001, S110 - the child's own import reports it
                pass


def not_dumpable() -> None:
    """No process of the same user may attach to this one (ptrace, /proc/PID/mem): Linux's
    PR_SET_DUMPABLE 0. Where it cannot be set, nothing else changes."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _remove_all(folder: str) -> None:
    """Remove everything in ``folder``, keeping the folder. A folder a process locked (it owns
    it) is unlocked first; what still cannot be removed raises."""
    for root, dirs, _files in os.walk(folder):  # top down: each folder unlocked, then entered
        for name in dirs:
            try:
                os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
            except (OSError, NotImplementedError):
                pass
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def empty_box(box: str) -> None:
    """``box`` as a fresh one: nothing in it but empty ``home/``, ``tmp/`` and ``work/``."""
    _remove_all(box)
    for part in ("home", "tmp", "work"):
        os.mkdir(os.path.join(box, part))


def _kill_the_rest(jailed: bool) -> None:
    """Whatever a child left running goes: in the jail every process but this one and the
    jail's init (its pid namespace is its own); elsewhere every other process of this process
    group, which the child stays in, so that the judge's kill of the group reaches it too."""
    if jailed:
        try:
            os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return
    group, me = os.getpgid(0), os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                if os.getpgid(int(entry)) == group:
                    os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass


def _run_child(proto_in, reply, definitions: str) -> None:
    """The child's part: run the definitions, then serve calls until told to end."""
    namespace = {"__name__": "__submission__"}
    errors = []
    try:
        statements = ast.parse(definitions).body
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
        if request.get("end"):
            return
        function = namespace.get(request["name"])
        try:
            if not callable(function):
                raise NameError(f"your notebook defines no function {request['name']!r}")
            result = function(*from_data(request["args"]))
            reply({"result": to_data(result)})
        except BaseException as e:  # noqa: BLE001
            reply({"error": f"{type(e).__name__}: {e}"[:2000]})


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
    not_dumpable()
    setup = json.loads(proto_in.readline())
    definitions, jailed = used_definitions(setup["definitions"]), bool(setup.get("jailed"))
    box = setup.get("box")  # emptied after each exercise: the worker's own box, nothing else
    _preload(definitions)
    reply({"preloaded": True})
    for line in proto_in:
        if not json.loads(line).get("start"):
            continue
        pid = os.fork()
        if pid == 0:  # the child: the student's code from here on
            code = 0
            try:
                _run_child(proto_in, reply, definitions)
            except BaseException:  # noqa: BLE001 - SystemExit included: the parent reports
                code = 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        _kill_the_rest(jailed)
        if jailed and os.path.isdir(SHM):
            _remove_all(SHM)
        if box:  # what cannot be emptied ends this process: the judge empties it, outside
            os.chdir(box)  # not in work/, which goes
            empty_box(box)
            os.chdir(os.path.join(box, "work"))
        reply({"ended": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    serve()
