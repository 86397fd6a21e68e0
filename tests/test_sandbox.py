"""The jail a submission runs in, and the copy of mzlite it gets (issue 52).

From inside the jail, as a student's code would try: unmounting or remounting anything, becoming
root again in a new user namespace, reading any ``.git``, any checkout's ``notebooks/``, the
report folder, the grader's snapshot or another box, writing outside its own box, and sharing
System V memory with another box all fail; its own box stays readable and writable (so the
refusals are the jail's, not a broken command). The box's mzlite holds the exercises' inputs
(the same numbers as the instructor's modules) and a recording ``check``, and no checker,
reference, verdict or grader: reaching for one raises and is recorded. No kernel is started here;
the graded classes of tests/test_grading.py run the whole path.
"""

from __future__ import annotations

import ctypes
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mzlite.exercises import wire
from mzlite.exercises.checker import CAPTURE_ENV, keys
from mzlite.grading import sandbox, student_view

ROOT = Path(__file__).resolve().parents[1]


def _need_jail() -> None:
    if not sandbox.jail_available():
        if os.environ.get("CI"):
            pytest.fail("CI grades in the jail: bubblewrap must be installed (make test does)")
        pytest.skip("needs the jail: bubblewrap and user namespaces")


def _layout(tmp_path: Path) -> dict[str, Path]:
    """A grading run's folders as the grader lays them out: two students' boxes, the snapshot,
    the report folder with its secret, and a checkout of the book beside them."""
    base = tmp_path / "mzlite-grade-x"
    box, other = base / "students" / "0000", base / "students" / "0001"
    for b in (box, other):
        for part in ("home", "tmp", "work"):
            (b / part).mkdir(parents=True)
    (box / "work" / "mine.txt").write_text("mine")
    (other / "work" / "answers.txt").write_text("a classmate's answers")
    (base / "snapshot" / "mzlite" / "exercises").mkdir(parents=True)
    (base / "snapshot" / "mzlite" / "exercises" / "checker.py").write_text("def verdict(): ...")
    (tmp_path / "grades").mkdir()
    (tmp_path / "grades" / "grading-secret.txt").write_text("s3cret")
    (tmp_path / "checkout" / ".git").mkdir(parents=True)
    (tmp_path / "checkout" / ".git" / "HEAD").write_text("ref: refs/heads/main")
    (tmp_path / "checkout" / "notebooks").mkdir()
    (tmp_path / "checkout" / "notebooks" / "01_zonotopes.ipynb").write_text("{}")
    return {"base": base, "box": box, "other": other}


ESCAPES = textwrap.dedent(
    r"""
    import ctypes, json, os, socket, subprocess, sys
    libc = ctypes.CDLL(None, use_errno=True)
    reads, listed, writes, box = json.loads(sys.argv[1])
    out = {}

    def syscall(name, ret):
        out[name] = "allowed" if ret == 0 else "refused: " + os.strerror(ctypes.get_errno())

    def attempt(name, f):
        try:
            f()
            out[name] = "allowed"
        except OSError as e:
            out[name] = f"refused: {e.strerror}"

    def command(name, argv):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            out[name] = "allowed" if done.returncode == 0 else "refused: " + done.stderr.strip()
        except OSError as e:
            out[name] = f"refused: {e.strerror}"

    MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096
    for where in ("/", "/usr", sys.prefix, box):
        syscall(f"umount {where}", libc.umount2(where.encode(), 0))
        syscall(f"umount -l {where}", libc.umount2(where.encode(), 2))
        syscall(f"remount,rw {where}", libc.mount(None, where.encode(), None, MS_REMOUNT, None))
        syscall(f"remount,bind,rw {where}",
                libc.mount(None, where.encode(), None, MS_REMOUNT | MS_BIND, None))
    command("umount /usr (util-linux)", ["umount", "/usr"])
    command("mount -o remount,rw / (util-linux)", ["mount", "-o", "remount,rw", "/"])
    syscall("unshare a user namespace", libc.unshare(0x10000000))
    syscall("unshare a mount namespace", libc.unshare(0x00020000))
    syscall("sethostname", libc.sethostname(b"mine", 4))
    for path in reads:
        attempt(f"read {path}", lambda p=path: open(p, "rb").read())
    for path in listed:
        try:
            out[f"list {path}"] = sorted(os.listdir(path))
        except OSError as e:
            out[f"list {path}"] = f"refused: {e.strerror}"
    for path in writes:
        attempt(f"write {path}", lambda p=path: open(p, "w").write("x"))
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
    out["capabilities"] = status["CapEff"].strip()
    out["uid"] = os.getuid()
    out["hostname"] = socket.gethostname()
    out["processes"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    print(json.dumps(out))
    """
)


def test_the_jail_holds_no_privilege_and_nothing_of_the_instructors(tmp_path):
    _need_jail()
    where = _layout(tmp_path)
    box, base = where["box"], where["base"]
    checkouts = {ROOT, *(Path(r) for r in sandbox.installed_roots())}
    checkouts = {c for c in checkouts if (c / "notebooks").is_dir()} | {tmp_path / "checkout"}
    reads = [str(c / ".git" / "HEAD") for c in checkouts if (c / ".git").is_dir()]
    reads += [str(c / "notebooks" / "01_zonotopes.ipynb") for c in checkouts]
    reads += [
        str(tmp_path / "grades" / "grading-secret.txt"),
        str(where["other"] / "work" / "answers.txt"),
        str(base / "snapshot" / "mzlite" / "exercises" / "checker.py"),
        "/etc/shadow",
        "/etc/passwd",
    ]
    reads += [str(p) for p in Path.home().glob(".*") if p.is_file()][:5]  # the grader's home
    # folders: gone, or (the box's parents, the interpreter's) holding only what the jail needs
    listed = [str(c / ".git") for c in checkouts] + [str(c / "notebooks") for c in checkouts]
    listed += [str(tmp_path / "grades"), str(base / "students"), str(base), str(Path.home())]
    own = str(box / "work" / "mine.txt")
    writes = [
        str(Path(sys.prefix) / "planted.py"),
        str(Path(sys.base_prefix) / "planted.py"),
        "/usr/planted",
        "/planted",
        str(box.parent / "planted"),
    ]
    own_write = str(box / "work" / "written.txt")
    cmd = [
        sys.executable,
        "-I",
        "-c",
        ESCAPES,
        json.dumps([[*reads, own], listed, [*writes, own_write], str(box)]),
    ]
    done = subprocess.run(
        sandbox.isolated_command(cmd, box, [], "jail"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    # its own box: readable and writable (the refusals below are the jail's)
    assert out.pop(f"read {own}") == "allowed" and out.pop(f"write {own_write}") == "allowed"
    assert (box / "work" / "written.txt").read_text() == "x"
    assert out.pop("capabilities") == "0000000000000000"
    assert out.pop("uid") == sandbox.JAIL_UID and out.pop("hostname") == "sandbox"
    # its own processes only (bwrap's init, the limiter's exec, this one): not the grader's
    seen = out.pop("processes")
    assert len(seen) <= 4 and max(seen) < 10, seen
    # the box's parents hold the box alone; the home holds only the interpreter's folder
    assert out.pop(f"list {base / 'students'}") == [box.name]
    assert out.pop(f"list {base}") == ["students"]
    home = out.pop(f"list {Path.home()}")
    assert isinstance(home, str) or set(home) <= {".pyenv", ".local"}, home
    allowed = {k: v for k, v in out.items() if not str(v).startswith("refused")}
    assert not allowed, allowed
    assert len(out) >= 4 * 4 + 5 + len(reads) + len(writes)
    for path in writes:
        assert not Path(path).exists(), path


FORKS = textwrap.dedent(
    """
    import os, time
    kids = []
    try:
        for _ in range(400):
            pid = os.fork()
            if pid == 0:
                time.sleep(3)
                os._exit(0)
            kids.append(pid)
    except OSError as e:
        print("stopped:", e)
    print("forked", len(kids))
    for k in kids:
        os.waitpid(k, 0)
    """
)


def test_the_jail_bounds_its_processes(tmp_path):
    """A jail run by root is mapped to root's user, which RLIMIT_NPROC does not bind: its own
    pid namespace's pid_max does (Linux 6.14 or newer)."""
    _need_jail()
    box = _layout(tmp_path)["box"]
    cmd = [sys.executable, "-I", "-c", FORKS]
    limits = sandbox.Limits(processes=300)
    done = subprocess.run(
        sandbox.isolated_command(cmd, box, [], "jail", limits),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    forked = int(done.stdout.split("forked ")[1])
    release = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
    if release < (6, 14) and os.geteuid() == 0:
        pytest.skip(f"Linux {os.uname().release} has no pid_max per pid namespace")
    assert forked < 300 and "Resource temporarily unavailable" in done.stdout, done.stdout
    assert sandbox.limit_hits(done.stdout, limits) == ["processes (300 processes and threads)"]


SHM = textwrap.dedent(
    """
    import ctypes, os, sys, time
    libc = ctypes.CDLL(None, use_errno=True)
    role, key, box = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if role == "maker":
        shmid = libc.shmget(key, 4096, 0o1000 | 0o666)  # IPC_CREAT
        with open(os.path.join(box, "made"), "w") as f:
            f.write(str(shmid))
        for _ in range(600):  # alive (and its segment with it) until the test is done
            if os.path.exists(os.path.join(box, "done")):
                break
            time.sleep(0.1)
    else:
        print(libc.shmget(key, 0, 0), libc.shmget(int(sys.argv[4]), 0, 0))
    """
)


def test_shared_memory_does_not_cross_boxes(tmp_path):
    _need_jail()
    where = _layout(tmp_path)
    box, other = where["box"], where["other"]
    libc = ctypes.CDLL(None, use_errno=True)
    key, host_key = 0x6D7A0000 + os.getpid() % 0xFFFF, 0x6D7B0000 + os.getpid() % 0xFFFF
    host_segment = libc.shmget(host_key, 4096, 0o1000 | 0o600)
    assert host_segment >= 0, os.strerror(ctypes.get_errno())
    maker = subprocess.Popen(
        sandbox.isolated_command(
            [sys.executable, "-I", "-c", SHM, "maker", str(key), str(box)], box, [], "jail"
        )
    )
    try:
        deadline = time.monotonic() + 60
        while not (box / "made").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert int((box / "made").read_text()) >= 0  # the segment exists in its own box
        look = [sys.executable, "-I", "-c", SHM, "looker", str(key), str(other), str(host_key)]
        done = subprocess.run(
            sandbox.isolated_command(look, other, [], "jail"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        # another box sees neither the first box's segment nor the host's
        assert done.stdout.split() == ["-1", "-1"], done.stdout
        assert libc.shmget(key, 0, 0) == -1  # nor does the host see the box's
    finally:
        (box / "done").write_text("")
        maker.wait(timeout=60)
        libc.shmctl(host_segment, 0, None)  # IPC_RMID


INSIDE = textwrap.dedent(
    """
    import importlib, inspect, json, sys
    out = {}
    for name in ("verdict", "get", "_REGISTRY", "diagnose"):
        try:
            exec(f"from mzlite.exercises.checker import {name}")
            out[name] = "imported"
        except ImportError:
            out[name] = "refused"
    import mzlite.exercises.ch1 as ch1
    try:
        ch1._area
        out["ch1._area"] = "found"
    except AttributeError:
        out["ch1._area"] = "refused"
    for module in ("mzlite.grading", "mzlite.grading.judge"):
        try:
            importlib.import_module(module)
            out[module] = "imported"
        except ImportError:
            out[module] = "refused"
    try:
        open(sys.argv[2]).read()
        out["the grader's checker"] = "read"
    except OSError:  # refused by the audit hook; absent from the jail
        out["the grader's checker"] = "refused"
    from mzlite.exercises import check, wire
    out["check"] = check("ch1.area", 2.5, seed=3).status
    inputs = {}
    for module in sys.argv[1].split(","):
        m = importlib.import_module(module)
        for name, f in sorted(vars(m).items()):
            if (inspect.isfunction(f) and f.__module__ == module and not name.startswith("_")
                    and list(inspect.signature(f).parameters) == ["seed"]):
                try:
                    inputs[f"{module}.{name}"] = wire.encode(f(5))
                except wire.WireError:
                    pass
    out["inputs"] = inputs
    print(json.dumps(out))
    """
)


def test_the_snapshot_holds_the_results_and_not_the_runs_in_flight(tmp_path):
    """data/in-flight (checkpoints kept to resume interrupted training) is copied into no box:
    nothing a notebook or a checker imports reads it, and the results beside it are there."""
    readers = [
        p
        for top in ("mzlite", "notebooks")
        for p in (sandbox.ROOT / top).rglob("*")
        if p.suffix in (".py", ".ipynb") and "data/in-flight" in p.read_text()
    ]  # the grader, which names it to leave it out, aside
    readers.remove(sandbox.ROOT / "mzlite" / "grading" / "sandbox.py")
    assert readers == []
    data = tmp_path / "checkout" / "data"
    for part in ("results/t/run.json", "in-flight/full/ckpt.pt", "results/cache/x.json"):
        (data / part).parent.mkdir(parents=True, exist_ok=True)
        (data / part).write_text("{}")
    copied = tmp_path / "copy"
    shutil.copytree(data, copied, ignore=sandbox._SKIP_DATA)
    assert sorted(str(p.relative_to(copied)) for p in copied.rglob("*.*")) == ["results/t/run.json"]


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["jail", "audit"])
def test_the_box_holds_the_inputs_and_a_recording_check_and_no_oracle(tmp_path, isolation):
    """The students' copy of mzlite in a box, in the jail and under the audit hook alone: no
    verdict, no registry, no chapter's checker, no grader (not even through an editable
    install's finder), no reading the grader's own mzlite; reaching for one is recorded;
    ``check`` records; every input function gives the instructor's numbers."""
    if isolation == "jail":
        _need_jail()
    snapshot = sandbox.make_snapshot(tmp_path / "snapshot")
    view = student_view.make_student_view(snapshot, tmp_path / "view", keys())
    box = sandbox.make_sandbox(tmp_path / "students", "0000", view)
    exercise_files = [*(box / "mzlite" / "exercises").glob("*.py")]
    exercise_files.append(box / "mzlite" / "repro" / "exercises.py")
    text = "\n".join(p.read_text() for p in exercise_files)
    for oracle in ("def verdict(", "_REGISTRY[", "@exercise", "number_exercise(", "def diagnose("):
        assert oracle not in text, oracle
    assert not (box / "mzlite" / "grading").exists()
    modules = [f"mzlite.exercises.ch{n}" for n in range(1, 12)] + ["mzlite.repro.exercises"]
    capture = box / "capture.jsonl"
    env = sandbox.environment(box, [], {CAPTURE_ENV: str(capture)})
    checker = ROOT / "mzlite" / "exercises" / "checker.py"
    cmd = [sys.executable, "-c", INSIDE, ",".join(modules), str(checker)]
    done = subprocess.run(
        sandbox.isolated_command(cmd, box, [], isolation),
        env=env,
        cwd=box / "work",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    for name in ("verdict", "get", "_REGISTRY", "diagnose", "ch1._area", "mzlite.grading",
                 "the grader's checker"):  # fmt: skip
        assert out[name] == "refused", (name, out[name])
    assert out["check"] == "recorded"
    entries = [json.loads(line) for line in capture.read_text().splitlines()]
    assert {"key": "ch1.area", "seed": 3, "answer": wire.encode(2.5)} in entries
    reached = {e["reached"] for e in entries if "reached" in e}
    assert {"mzlite.exercises.checker.verdict", "mzlite.exercises.ch1._area"} <= reached
    # the same inputs as the instructor's modules (which hold the checkers too)
    import importlib

    expected = {}
    for module in modules:
        m = importlib.import_module(module)
        for name, f in sorted(vars(m).items()):
            if (
                inspect.isfunction(f)
                and f.__module__ == module
                and not name.startswith("_")
                and list(inspect.signature(f).parameters) == ["seed"]
            ):
                try:
                    expected[f"{module}.{name}"] = wire.encode(f(5))
                except wire.WireError:
                    pass
    assert len(expected) >= 20 and out["inputs"] == expected


def test_pruning_keeps_what_the_inputs_need_and_refuses_an_oracle():
    source = textwrap.dedent(
        """\
        import math
        from .checker import exercise, rng


        LIMIT = 3


        def _helper(x):
            return math.floor(x) + LIMIT


        def inputs(seed=0):
            return _helper(seed) + rng("k", seed)


        def _reference(seed):
            return 42


        @exercise("ch0.x")
        def _(answer):
            return answer == _reference(0), ""
        """
    )
    text, pruned = student_view.prune(source, ["inputs"])
    assert "def inputs" in text and "def _helper" in text and "LIMIT = 3" in text
    assert "from .checker import rng" in text and "exercise" not in text
    assert "_reference" not in text and pruned == {"_reference", "_"}
    leaky = source.replace("return _helper(seed)", "return _reference(seed) + _helper(seed)")
    leaky = leaky.replace("def _reference(seed):", "def _reference(seed):\n    verdict = 1")
    with pytest.raises(ValueError, match="an oracle"):
        student_view.prune(leaky, ["inputs"], "ch0.py")
