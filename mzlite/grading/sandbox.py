"""Where a submission runs while it is graded, and what it may touch.

Each submission gets a folder of its own (:func:`make_sandbox`): a writable copy of mzlite and of
``data/`` (so a chapter that writes a results cache writes it there, and a notebook that rewrites
``mzlite/exercises/checker.py`` rewrites its own copy), a home, a temporary folder and a working
folder. Each judged function gets a fresh, empty one (:func:`make_box`). Nothing of the
instructor's is handed to it: not ``notebooks/`` (the solutions), not the grader's copy of the
checkers (:func:`make_snapshot`), not the reports, not another student, not a compiled kernel
(``MZLITE_FUSED=0``: the eager path runs, and nothing is loaded from a kernel cache).

Three layers keep it there:

- **Linux namespaces**, where ``unshare`` can create them without privileges (most Linux
  systems; no container runtime): every file system is read-only but the box (host ``/tmp``,
  the home and its caches, the interpreter and its standard library, the virtual environment,
  every installed mzlite), the solutions, reports, snapshot, submissions and other boxes are
  empty folders, there is no network, and the run has its own processes, all killed when it
  ends (:func:`isolated_command`).
- **An audit hook** (PEP 578, which code cannot remove once installed) in every sandboxed Python
  process, also where namespaces are missing: opening a denied path for reading, or anything
  outside the sandbox for writing, raises ``PermissionError`` (:data:`SITECUSTOMIZE`). It does
  not see a program the process starts (a shell), so without namespaces a shell can still write
  wherever the grader's user may, the Python installation the judge imports included: the
  judge's own home, the kernels off and the hashed snapshot then shut out a planted cache or
  checker, not a planted library. Marks that count need namespaces (the summary names the
  isolation used), or a grading user who cannot write the installation.
- **Limits** (:class:`Limits`): address space, processes, file size and CPU time per process,
  and the box's own ``pid_max`` (root is not bound by ``RLIMIT_NPROC``); a run that reaches one
  is reported on its student's row (:func:`limit_hits`).

And one check that does not rely on any of them: :func:`tree_digest` of the installed mzlite,
the notebooks and the snapshot before and after every run, so a change is reported, and the
grader refuses to judge with a snapshot that changed.
"""

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
ISOLATIONS = ("auto", "namespaces", "audit")
# own user, mount, network and process namespaces; every process of the run (a daemon it forks
# included) is killed when the run ends
UNSHARE = ["unshare", "-rmnpf", "--kill-child", "--mount-proc", "--"]
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".tmp-*", "cache")

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


if _os.environ.get("MZLITE_SANDBOX_POLICY"):
    _mzlite_sandbox_hook()
"""


def tree_digest(*roots: Path) -> dict[str, str]:
    """SHA-256 of every file under ``roots`` (``__pycache__`` skipped), by path."""
    out = {}
    for root in roots:
        root = Path(root)
        if not root.exists():
            continue
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for p in files:
            if "__pycache__" in p.parts or p.suffix == ".pyc":
                continue
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths added, removed or rewritten between two :func:`tree_digest` calls."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def _copy_repo_parts(dest: Path, data: bool = True) -> None:
    shutil.copytree(ROOT / "mzlite", dest / "mzlite", ignore=_SKIP)
    if data and (ROOT / "data").is_dir():
        shutil.copytree(ROOT / "data", dest / "data", ignore=_SKIP)
    if (ROOT / "pyproject.toml").is_file():
        shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")


def make_snapshot(dest: Path) -> Path:
    """The grader's own copy of mzlite (checkers included, no notebooks: no solutions) and of
    ``data/``, made read-only. The judge imports mzlite from here and from nowhere else."""
    dest = Path(dest)
    dest.mkdir(parents=True)
    _copy_repo_parts(dest)
    for p in sorted(dest.rglob("*"), reverse=True):
        mode = p.stat().st_mode
        p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return dest


def make_box(base: Path, name: str) -> Path:
    """A fresh, empty box (``home/``, ``tmp/``, ``work/``) where one judged function runs: none
    of what the student's notebook run left behind is there to import or to read."""
    box = Path(base) / name
    for part in ("home", "tmp", "work"):
        (box / part).mkdir(parents=True)
    return box


def make_sandbox(base: Path, name: str, snapshot: Path) -> Path:
    """A fresh writable folder for one run: ``mzlite/`` and ``data/`` copied from ``snapshot``,
    ``home/``, ``tmp/``, ``work/`` (the working directory) and ``sitecustomize.py``."""
    box = Path(base) / name
    box.mkdir(parents=True)
    shutil.copytree(snapshot / "mzlite", box / "mzlite", ignore=_SKIP)
    if (snapshot / "data").is_dir():
        shutil.copytree(snapshot / "data", box / "data", ignore=_SKIP)
    for part in ("home", "tmp", "work"):
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
    deny_write = list(installed_roots()) + deny_read + [str(Path.home().resolve())]
    deny_write.append(tempfile.gettempdir())
    own = [str(box.resolve())]
    return {"deny_read": deny_read, "deny_write": deny_write, "allow_write": own, "allow_read": own}


@functools.lru_cache(maxsize=1)
def namespaces_available() -> bool:
    """Whether ``unshare`` can give an unprivileged process its own user, mount, network and
    process namespaces here (and bring up its loopback, which a kernel's connection needs)."""
    if not shutil.which("unshare") or not shutil.which("ip") or not shutil.which("mount"):
        return False
    try:
        done = subprocess.run(
            [*UNSHARE, "sh", "-c", "ip link set lo up && mount -t tmpfs none /mnt"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def choose_isolation(isolation: str) -> str:
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
    if isolation == "auto":
        return "namespaces" if namespaces_available() else "audit"
    if isolation == "namespaces" and not namespaces_available():
        raise ValueError(
            "isolation='namespaces' but unprivileged namespaces (unshare -rmnpf) are not available "
            "here; use 'audit' or 'auto'"
        )
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
    """``cmd`` as run in ``box`` under ``limits``: in namespaces of its own (no network, its own
    processes) where every file system but ``box`` is read-only (host ``/tmp``, the home, the
    interpreter, every installed copy of mzlite) and ``hidden`` (and every other sandbox beside
    ``box``) is out of sight; or with the audit hook alone for ``isolation='audit'``.

    ``RLIMIT_NPROC`` does not bind a process of root (nor one in a user namespace that root
    made), so in namespaces the box's own pid namespace also gets ``pid_max`` (Linux 6.14 or
    newer; older kernels refuse it and the rlimit is all there is)."""
    limits = limits or Limits()
    cmd = limited_command(cmd, limits)
    if isolation == "audit":
        return cmd
    box = box.resolve()
    keep = box.parent.parent / "mnt" / box.name  # a mount point outside the siblings' folder
    keep.mkdir(parents=True, exist_ok=True)
    lines = ["set -e", "ip link set lo up", f'mount --bind "{box}" "{keep}"']
    # every mount read-only (the root file system first: host /tmp and the home are on it
    # here); /proc is the box's own
    lines += [
        "mount -o remount,bind,ro /",
        "awk '$4 ~ /^rw/ && $2 !~ /^\\/proc/ {print $2}' /proc/self/mounts | "
        f'while read -r m; do [ "$m" = "{keep}" ] || mount -o remount,bind,ro "$m" 2>/dev/null '
        "|| true; done",
        "mount -t tmpfs -o size=64m,mode=1777 none /dev/shm 2>/dev/null || true",
        f"echo {limits.processes + 1} > /proc/sys/kernel/pid_max 2>/dev/null || true",
    ]
    for p in [*hidden, ROOT / "notebooks", ROOT / "book", box.parent]:
        if Path(p).is_dir():
            lines.append(f'mount -t tmpfs -o size=64k,mode=755 none "{Path(p).resolve()}"')
    lines += [f'mkdir -p "{box}"', f'mount --bind "{keep}" "{box}"', f'umount "{keep}"']
    lines.append('exec "$@"')
    return [*UNSHARE, "sh", "-c", "\n".join(lines), "sandbox", *cmd]


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
