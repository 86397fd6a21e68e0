"""Where a submission runs while it is graded, and what it may touch.

Each submission gets a folder of its own, its box (:func:`make_sandbox`): a writable copy of the
students' mzlite (the library and the exercises' inputs, with a ``check`` that only records:
no checker, reference or verdict, :mod:`mzlite.grading.student_view`) and of ``data/`` (so a
chapter that writes a results cache writes it there), a home, a temporary folder and a working
folder. A submission's judged functions get a fresh one (:func:`make_box`) and no mzlite at
all, emptied again before each exercise (:mod:`mzlite.grading.worker`).
Nothing of the instructor's is handed to it: not ``notebooks/`` (the solutions), not the
grader's snapshot (:func:`make_snapshot`), not the reports, not another student, not a compiled
kernel (``MZLITE_FUSED=0``: the eager path runs, and nothing is loaded from a kernel cache).

Three layers keep it there:

- **The jail** (:func:`jail_mounts`, bubblewrap), built from an allow-list: the process starts in
  an empty root that holds the operating system's ``/usr``, the interpreter and its environment
  (all read-only) and its box, nothing else; no checkout, no ``.git``, no ``notebooks/``, no
  report folder, no other box is there at all, so there is nothing to uncover. Its user, mount,
  IPC, UTS, PID and network namespaces are its own (no network; no shared memory with another
  box; every process killed when the run ends), and after the mounts it holds no capability: it
  runs as an ordinary uid of its own user namespace with an empty capability set and
  no_new_privs, and may not create another user namespace, so it can neither unmount nor
  remount anything. ``isolation='auto'`` uses it wherever bubblewrap can make it.
- **An audit hook** (PEP 578, which code cannot remove once installed) in every sandboxed Python
  process, also where the jail is missing: opening a denied path for reading, or anything
  outside the sandbox for writing, raises ``PermissionError`` (:data:`SITECUSTOMIZE`; the
  grader's own mzlite is denied, and mzlite's modules import from the box alone). It does
  not see a program the process starts (a shell), so without the jail a shell can still write
  wherever the grader's user may, the Python installation the judge imports included: the
  judge's own home, the kernels off and the hashed snapshot then shut out a planted cache or
  checker, not a planted library. Marks that count need the jail (the summary names the
  isolation used), or a grading user who cannot write the installation.
- **Limits** (:class:`Limits`): address space, processes, file size and CPU time per process,
  and the jail's own ``pid_max`` (a jail run by root is mapped to root's user, which
  ``RLIMIT_NPROC`` does not bind); a run that reaches one is reported on its student's row
  (:func:`limit_hits`).

And one check that does not rely on any of them: :func:`tree_digest` of the installed mzlite,
the notebooks and the snapshot before and after every run, so a change is reported, and the
grader refuses to judge with a snapshot that changed."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POLICY_ENV = "MZLITE_SANDBOX_POLICY"
ISOLATIONS = ("auto", "jail", "audit")
_NOT_COPIED = ("__pycache__", "*.pyc", ".tmp-*", "cache")
_SKIP = shutil.ignore_patterns(*_NOT_COPIED)
# data/in-flight: checkpoints of training runs a session's end interrupted, kept to resume them;
# no chapter, checker or reference reads them (data/in-flight/README.md: "Nothing here is a
# result"), and at ~20 MB they were half of what every box copied
_SKIP_DATA = shutil.ignore_patterns(*_NOT_COPIED, "in-flight")
_SKIP_CACHE = shutil.ignore_patterns(".tmp-*", "cache")  # a copy that keeps __pycache__
_SKIP_HOME = shutil.ignore_patterns("*.lock", "*.matplotlib-lock")

# Installed first thing in every sandboxed interpreter (``sitecustomize`` for a kernel, imported
# by the function worker): the policy comes from the environment the grader sets.
SITECUSTOMIZE = r"""
import json as _json
import os as _os
import sys as _sys


def _mzlite_sandbox_hook():
    policy = _json.loads(_os.environ.get("MZLITE_SANDBOX_POLICY") or "{}")
    deny_read = tuple(policy.get("deny_read", ()))
    allow_read = tuple(policy.get("allow_read", ()))
    deny_write = tuple(policy.get("deny_write", ()))
    allow_write = tuple(policy.get("allow_write", ()))
    real = _os.path.realpath
    sep = _os.sep
    writing = _os.O_WRONLY | _os.O_RDWR | _os.O_CREAT | _os.O_TRUNC | _os.O_APPEND

    def under(path, roots):
        p = real(path)
        return any(p == r or p.startswith(r.rstrip(sep) + sep) for r in roots)

    def deny(event, path):
        raise PermissionError(f"mzlite grader: {event} of {path!s} is not allowed while grading")

    def check_write(event, path):
        if isinstance(path, (str, bytes, _os.PathLike)):
            path = _os.fsdecode(path)
            if under(path, deny_write + deny_read) and not under(path, allow_write):
                deny(event, path)

    def hook(event, args):
        if event == "open" and args and isinstance(args[0], (str, bytes, _os.PathLike)):
            path, mode, flags = (list(args) + [None, None])[:3]
            path = _os.fsdecode(path)
            if under(path, deny_read) and not under(path, allow_read):
                deny("reading", path)
            wants_write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                mode is None and isinstance(flags, int) and flags & writing
            )
            if wants_write:
                check_write("writing", path)
        elif event in ("os.remove", "os.rmdir", "os.chmod", "os.mkdir", "os.truncate",
                       "os.utime", "os.chown", "shutil.rmtree", "os.chflags"):
            if args:
                check_write(event, args[0])
        elif event in ("os.rename", "shutil.move"):
            for a in args[:2]:
                check_write(event, a)
        elif event in ("os.link", "os.symlink", "shutil.copyfile", "shutil.copytree"):
            if len(args) > 1:
                check_write(event, args[1])

    _sys.addaudithook(hook)


# mzlite and its modules come from the path alone (the box's copy, first on it): a module the
# box's mzlite lacks is not found, where an editable install's finder, later on sys.meta_path,
# would load the grader's own (mzlite.grading) from its checkout
class _MzliteFromTheBox:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] != "mzlite":
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return spec


if _os.environ.get("MZLITE_SANDBOX_POLICY"):
    _mzlite_sandbox_hook()
    _sys.meta_path.insert(0, _MzliteFromTheBox)
"""


def tree_digest(*roots: Path, bytecode: bool = False) -> dict[str, str]:
    """SHA-256 of every file under ``roots``, by path; ``__pycache__`` skipped unless
    ``bytecode`` (the snapshot's compiled modules are what the judge runs: they count)."""
    out = {}
    for root in roots:
        root = Path(root)
        if not root.exists():
            continue
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for p in files:
            if not bytecode and ("__pycache__" in p.parts or p.suffix == ".pyc"):
                continue
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def compile_tree(root: Path) -> None:
    """Byte-compile every module under ``root`` into its ``__pycache__``. Done by the grader
    before any submission runs, on a copy of its own: a tree a sandboxed process may not write
    is otherwise compiled again by every process that imports it (a second of CPU for mzlite
    in each kernel, judge and worker)."""
    import compileall

    if not compileall.compile_dir(str(root), quiet=2, workers=1):
        raise RuntimeError(f"could not byte-compile {root}")


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or rewritten between two :func:`tree_digest` calls."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def _copy_repo_parts(dest: Path, data: bool = True) -> None:
    shutil.copytree(ROOT / "mzlite", dest / "mzlite", ignore=_SKIP)
    if data and (ROOT / "data").is_dir():
        shutil.copytree(ROOT / "data", dest / "data", ignore=_SKIP_DATA)
    if (ROOT / "pyproject.toml").is_file():
        shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")


def make_snapshot(dest: Path) -> Path:
    """The grader's own copy of mzlite (checkers included, no notebooks: no solutions) and of
    ``data/``, byte-compiled and made read-only. The judge imports mzlite from here and from
    nowhere else (hash it with ``bytecode=True``: its compiled modules are what runs)."""
    dest = Path(dest)
    dest.mkdir(parents=True)
    _copy_repo_parts(dest)
    compile_tree(dest / "mzlite")  # never the checkout's own __pycache__: anyone may write it
    for p in sorted(dest.rglob("*"), reverse=True):
        mode = p.stat().st_mode
        p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return dest


def make_box(base: Path, name: str, home: Path | None = None) -> Path:
    """A fresh box (``home/``, ``tmp/``, ``work/``) where a submission's functions run: none
    of what the student's notebook run left behind is there to import or to read. ``home``
    (:func:`make_home`) is copied in as its home."""
    box = Path(base) / name
    box.mkdir(parents=True)
    _fill_home(box / "home", home)
    for part in ("tmp", "work"):
        (box / part).mkdir()
    return box


def make_home(dest: Path) -> Path:
    """The home every box starts from, made by the grader before any submission runs:
    matplotlib's font list, which a process with an empty home builds by reading every font
    on the system (half a second of CPU in each kernel and worker that imports pyplot). Each
    box gets a copy of its own: what one run does to it reaches no other."""
    dest = Path(dest)
    config = dest / ".config" / "matplotlib"
    config.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
    env.update({"HOME": str(dest), "MPLCONFIGDIR": str(config), "MPLBACKEND": "Agg"})
    subprocess.run(
        [sys.executable, "-I", "-c", "import matplotlib.font_manager"],
        env=env,
        cwd=dest,
        capture_output=True,
        timeout=300,
        check=False,  # no matplotlib: every box builds nothing, as before
    )
    return dest


def _fill_home(home: Path, template: Path | None) -> None:
    if template is not None and Path(template).is_dir():
        shutil.copytree(template, home, ignore=_SKIP_HOME)
    else:
        home.mkdir()


def make_sandbox(base: Path, name: str, view: Path, home: Path | None = None) -> Path:
    """A fresh writable folder for one run: ``mzlite/`` (byte-compiled) and ``data/`` copied
    from the students' copy ``view`` (:func:`mzlite.grading.student_view.make_student_view`:
    no checker, no reference, no grader), ``home/`` (a copy of ``home``, :func:`make_home`),
    ``tmp/``, ``work/`` (the working directory) and ``sitecustomize.py``."""
    box = Path(base) / name
    box.mkdir(parents=True)
    # the view's compiled modules come along: the box's copy is the student's own, so what a
    # run does to them reaches no other run
    shutil.copytree(view / "mzlite", box / "mzlite", ignore=_SKIP_CACHE)
    if (view / "data").is_dir():
        shutil.copytree(view / "data", box / "data", ignore=_SKIP)
    _fill_home(box / "home", home)
    for part in ("tmp", "work"):
        (box / part).mkdir()
    for p in box.rglob("*"):  # the snapshot is read-only; the copy is the student's own
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    (box / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return box


@functools.lru_cache(maxsize=1)
def installed_roots() -> tuple[str, ...]:
    """Folders the sandbox must not write: the checkout, the interpreter's environment and the
    folder the installed mzlite is imported from (an editable install may point elsewhere)."""
    import site

    roots = {str(ROOT), os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    roots |= {os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)}
    try:
        found = subprocess.run(
            [sys.executable, "-I", "-c", "import mzlite; print(mzlite.__file__)"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
        if found:
            roots.add(str(Path(found).resolve().parents[1]))
    except (OSError, subprocess.SubprocessError):
        pass
    return tuple(sorted(roots))


def policy(box: Path, hidden: list[Path]) -> dict:
    """The audit hook's policy for ``box``: write inside it only, read nothing of ``hidden``."""
    deny_read = [str(Path(p).resolve()) for p in hidden]
    deny_read += [str(ROOT / "notebooks"), str(ROOT / "book"), str(box.resolve().parent)]
    deny_read.append(str(ROOT / "mzlite"))  # the grader's own mzlite: its checkers
    deny_write = list(installed_roots()) + deny_read + [str(Path.home().resolve())]
    deny_write.append(tempfile.gettempdir())
    own = [str(box.resolve())]
    return {"deny_read": deny_read, "deny_write": deny_write, "allow_write": own, "allow_read": own}


# The jail: bubblewrap (Debian's ``bubblewrap``), run by any user. Every namespace of its own
# (user, mount, IPC, UTS, PID, network, cgroup), an empty root file system that holds only what
# :func:`jail_mounts` lists, and a process that holds no capability: it runs as uid 1000 of a
# user namespace of its own, with an empty capability set and no_new_privs, and may not create
# another user namespace (where it would be root again). It can neither unmount nor remount
# anything, and under no mount is anything of the instructor's: there is nothing to uncover.
BWRAP = "bwrap"
JAIL_UID = 1000
# Started around bwrap: a pid namespace whose pid_max bounds every process of the jail below it
# (the rlimit does not bind a jail mapped to root); only the jail's own command runs in it
PID_BOUND = ["unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork"]
PID_BOUND += ["--kill-child", "--mount-proc", "--"]
JAIL_FLAGS = [
    "--unshare-all",  # user, IPC, PID, network, UTS and cgroup namespaces of its own
    "--unshare-user",
    "--disable-userns",  # no nested user namespace: never root (nor any capability) again
    "--cap-drop",
    "ALL",
    "--uid",
    str(JAIL_UID),
    "--gid",
    str(JAIL_UID),
    "--hostname",
    "sandbox",
    "--die-with-parent",
    "--new-session",  # no terminal to push keystrokes into
]
# what of /etc a process needs (the dynamic loader's cache, the time zone); nothing else of it
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives")


def _system_mounts() -> list[str]:
    """The operating system, read-only: ``/usr`` and the merged-``/usr`` links beside it."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / top
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def _python_mounts() -> list[str]:
    """The interpreter and its environment, read-only, at the paths they have here: the base
    installation, the virtual environment (and the link through which it was started), and any
    installed copy of mzlite in them covered by an empty folder (the box has its own copy)."""
    args = []
    prefixes = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    for prefix in sorted(prefixes):
        if not prefix.startswith("/usr/"):
            args += ["--ro-bind", prefix, prefix]
    for path in (sys.prefix, os.path.dirname(sys.executable)):
        if os.path.islink(path):
            args += ["--symlink", os.path.realpath(path), os.path.abspath(path)]
    import site

    for packages in site.getsitepackages():
        installed = Path(packages) / "mzlite"
        if installed.is_dir() and not installed.is_symlink():
            args += ["--tmpfs", str(installed.resolve()), "--remount-ro", str(installed.resolve())]
    return args


def jail_mounts(box: Path) -> list[str]:
    """bubblewrap's arguments for a jail whose only writable folder is ``box`` (its working
    folder ``box/work``): the operating system, the interpreter and its environment, read-only;
    a /proc of its own processes, a minimal /dev, a small /dev/shm; the root read-only."""
    box = str(Path(box).resolve())
    return [
        *JAIL_FLAGS,
        *_system_mounts(),
        *_python_mounts(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(64 * 2**20),
        "--tmpfs",
        "/dev/shm",
        "--bind",
        box,
        box,
        "--remount-ro",
        "/",
        "--chdir",
        str(Path(box) / "work"),
    ]


@functools.lru_cache(maxsize=1)
def jail_available() -> bool:
    """Whether bubblewrap is installed and can make the jail here (user namespaces allowed)."""
    if not shutil.which(BWRAP) or not shutil.which(PID_BOUND[0]):
        return False
    with tempfile.TemporaryDirectory(prefix="mzlite-jail-probe-") as tmp:
        (Path(tmp) / "work").mkdir()
        probe = [sys.executable, "-I", "-c", "pass"]
        try:
            done = subprocess.run(
                isolated_command(probe, Path(tmp), [], "jail"), capture_output=True, timeout=60
            )
        except (OSError, subprocess.SubprocessError):
            return False
    return done.returncode == 0


JAIL_MISSING = (
    "isolation='jail' needs bubblewrap (Debian: apt-get install bubblewrap) and user namespaces "
    "(`bwrap --unshare-all --unshare-user --disable-userns --ro-bind / / true` must succeed); "
    "without them use 'auto' (which falls back to 'audit') or 'audit'"
)


def choose_isolation(isolation: str) -> str:
    """``'jail'`` or ``'audit'`` for ``isolation`` (``'auto'``: the jail where it can be made;
    ``'namespaces'``, the former name, is the jail)."""
    if isolation == "namespaces":
        isolation = "jail"
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
    if isolation == "auto":
        return "jail" if jail_available() else "audit"
    if isolation == "jail" and not jail_available():
        raise ValueError(JAIL_MISSING)
    return isolation


MIN_PROCESSES = 300


@dataclass(frozen=True)
class Limits:
    """What one sandboxed process may use: address space (``memory`` bytes), processes and
    threads (``processes``), the size of a file it writes (``file_size`` bytes) and CPU time
    (``cpu`` seconds). A process that reaches one gets ``MemoryError``, ``EAGAIN`` from
    ``fork``, ``EFBIG`` or ``SIGXCPU``, and the grader reports it on the student's row."""

    memory: int = 4 * 2**30
    processes: int = 512
    file_size: int = 2**30
    cpu: int = 1800

    def __post_init__(self):
        for name in ("memory", "processes", "file_size", "cpu"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"limits.{name} must be a positive integer, got {value!r}")
        if self.processes < MIN_PROCESSES:
            raise ValueError(
                f"limits.processes must be at least {MIN_PROCESSES} (Linux's smallest pid_max), "
                f"got {self.processes!r}"
            )


# Sets the limits, then becomes the command: rlimits are inherited by every process the command
# starts. A wrapper rather than ``preexec_fn``, which is unsafe in a process with threads.
LIMITER = r"""
import json, os, resource, sys
limits = json.loads(sys.argv[1])
for name, value in limits.items():
    which = getattr(resource, "RLIMIT_" + name.upper())
    hard = value + 5 if name == "cpu" else value  # SIGXCPU first, then SIGKILL
    resource.setrlimit(which, (value, hard))
os.execvp(sys.argv[2], sys.argv[2:])
"""


# what a process that reached a limit reports (its error, or how it ended), per limit
_LIMIT_SIGNS = {
    "memory": ("MemoryError", "can't allocate memory", "bad_alloc", "Cannot allocate memory"),
    "processes": ("Resource temporarily unavailable", "can't start new thread", "BlockingIOError"),
    "file size": ("File too large", "SIGXFSZ"),
    "CPU time": ("SIGXCPU", "CPU time limit"),
}


def limit_hits(text: str, limits: Limits) -> list[str]:
    """The limits ``text`` (errors of a run, how its processes ended) says were reached, each
    with its value: what the student's row reports."""
    values = {
        "memory": f"{limits.memory / 2**30:g} GiB of address space",
        "processes": f"{limits.processes} processes and threads",
        "file size": f"{limits.file_size / 2**20:g} MiB per file",
        "CPU time": f"{limits.cpu} s of CPU per process",
    }
    return [
        f"{k} ({values[k]})" for k, signs in _LIMIT_SIGNS.items() if any(x in text for x in signs)
    ]


def limited_command(cmd: list[str], limits: Limits) -> list[str]:
    """``cmd`` run under ``limits`` (``RLIMIT_AS``, ``RLIMIT_NPROC``, ``RLIMIT_FSIZE``,
    ``RLIMIT_CPU``)."""
    spec = {
        "as": limits.memory,
        "nproc": limits.processes,
        "fsize": limits.file_size,
        "cpu": limits.cpu,
    }
    return [sys.executable, "-I", "-c", LIMITER, json.dumps(spec), *cmd]


def isolated_command(
    cmd: list[str],
    box: Path,
    hidden: list[Path],
    isolation: str,
    limits: Limits | None = None,
) -> list[str]:
    """``cmd`` as run in ``box`` under ``limits``: in the jail (:func:`jail_mounts`), where only
    ``box`` exists of everything the grader has, or with the audit hook alone for
    ``isolation='audit'`` (``hidden`` is what its policy refuses to read).

    A jail run by root is mapped to root's user, which ``RLIMIT_NPROC`` does not bind, so the
    jail is started inside a pid namespace of its own whose ``pid_max`` is the process limit
    (:data:`PID_BOUND`; Linux 6.14 or newer, older kernels refuse it and the rlimit is all
    there is, which binds a grader that is not root)."""
    limits = limits or Limits()
    cmd = limited_command(cmd, limits)
    if isolation == "audit":
        return cmd
    if isolation != "jail":
        raise ValueError(f"isolation must be 'jail' or 'audit' here, got {isolation!r}")
    bound = f"echo {limits.processes + 1} > /proc/sys/kernel/pid_max 2>/dev/null || true"
    return [
        *PID_BOUND,
        "sh",
        "-c",
        f'{bound}; exec "$@"',
        "jail",
        BWRAP,
        *jail_mounts(box),
        "--",
        *cmd,
    ]


def environment(box: Path, hidden: list[Path], extra: dict | None = None) -> dict:
    """The environment of a sandboxed process: its home, temporary and config folders in
    ``box``, mzlite imported from ``box``, the audit policy, and nothing of the grader's own
    (no ``MZLITE_CHECK_LOG``, no ``MZLITE_*`` at all)."""
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.setdefault("OMP_NUM_THREADS", "1")
    home = box / "home"
    env.update(
        {
            "HOME": str(home),
            "TMPDIR": str(box / "tmp"),
            "PYTHONPATH": str(box),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "MPLCONFIGDIR": str(home / ".config" / "matplotlib"),
            "MPLBACKEND": "Agg",
            "JUPYTER_RUNTIME_DIR": str(home / ".jupyter-runtime"),
            "IPYTHONDIR": str(home / ".ipython"),
            "TORCH_EXTENSIONS_DIR": str(home / ".cache" / "torch_extensions"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            # no compiled kernel is loaded or built: nothing a box leaves in a kernel cache runs
            "MZLITE_FUSED": "0",
            POLICY_ENV: json.dumps(policy(box, hidden)),
        }
    )
    env.update(extra or {})
    return env
