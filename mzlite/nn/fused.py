"""Fused CPU kernels of the MZ blocks, and the one place where mzlite chooses them over eager
PyTorch. The math is in ``mzlite.nn.attention``; these only run parts of it faster.

What they compute
-----------------
``add_norm(x, a, norm, p=p, seed=seed)`` is ``norm(x + dropout(a))`` with one dropout mask per
token (shared by a token's centre and generator rows, choice 4 of ``mzlite.nn``), computed in
float32 from float32 or bfloat16 inputs, in one pass over memory forward and one backward. In
eager PyTorch the same step is six passes with autocast's float32 <-> bfloat16 casts between
them, and on the generator stream ``(B, n, n_g, d)`` these passes cost more than its matrix
products. The MZ blocks of choice 7's ``"layernorm"`` reading use it
(``attention.add_norm_rows``); ``reference_add_norm`` is the same computation in PyTorch, and the
tests hold the two equal, gradients included.

``zonotope_norm(c, G, a_c, a_G, norm, p=p, seed=seed)`` is the default reading's step
(``attention.add_zonotope_norm``): residual and dropout of both streams (one mask per token),
``norm`` on the centre and its affine map without bias on the generators
(``attention.zonotope_layer_norm``: every generator row centred and scaled by the centre's
``w / sigma``), forward and backward in one pass over the generator stream each; eager PyTorch
takes ~5 passes forward (the float32 copies autocast needs, residual, mean, centring, scaling)
and more backward. The kernel and the eager function agree to rounding (tests: float64
reference and the eager function in float32 and bf16, every width and dtype mix). As in the
``"layernorm"`` reading, the model's stand-in returns both streams in the branches' dtype: under
bf16 autocast bf16 where eager returns float32 for a float32 residual (the learned tokens' stream,
and the centres after a LayerNorm), rounded once per block.

``unpack_heads`` / ``pack_heads`` move the generator values between the packed (or token-major)
layout ``(R, n_g, H d_k)`` and the head-major one attention reads, ``(B, H, n, n_g, d_k)``, in
one pass of ``d_k``-element copies (for ``Packing.unpack_heads`` / ``pack_heads`` and the padded
layout's permutes, every reading).

When they run: ``fast_path``, the only switch
--------------------------------------------
A function of ``mzlite.nn.attention`` marked ``@fused.fast_path(KERNEL)`` is the eager math; the
kernel runs in its place when all of these hold (``fast_path`` checks them, nowhere else does):

1. the kernels are loaded in this process. ``build()`` compiles them (or loads this machine's
   earlier build); ``MZAttention``'s constructor (so every MZ block and model) calls
   ``prepare()``, which builds them and, under ``auto``, measures them (``choose``), so the
   build and the measurement happen before the first forward pass, never inside one;
2. the policy selects them, environment variable ``MZLITE_FUSED``: ``auto`` (or unset, the
   default) where they were *measured faster on this machine*: ``choose()`` times each kernel
   against its eager function, forward and backward, on the shapes ``fit`` trains MZ-Full with
   (``MEASURED_SHAPE``: 128 sets of 10-30 elements packed, 8 generators, d = 64), in float32
   and bfloat16, interleaved repeat by repeat in alternating order, CPU time, medians
   (``MEASURE_REPEATS``; about 2 s of CPU time in all), and keeps for each kernel and dtype
   the faster side. The choice is stored beside the build and re-measured when its key changes
   (``choice_key``: machine, CPU model, torch, Python, the sources of the kernels and of both
   sides' Python); ``choice()`` returns it. So the fast path follows the CPU it runs on, not an
   instruction-set flag: on the AVX2 EPYC of issue 51 the kernels without AVX-512 measured up to
   5x eager, on another CPU eager may win. ``add_norm`` runs under ``auto`` only at the widths
   with vector code in this build (``simd_widths()``: AVX-512 or AVX2; its generic loops
   measured 0.76x-1.4x eager); ``zonotope_norm`` at every width (its generic loops measured
   2.1x-3.9x eager: eager takes five passes and more). ``1``: wherever they can run, unmeasured;
   ``0``: never, and never built;
3. the code is not inside a ``disabled()`` block, and the arguments are ones the kernel takes
   (CPU tensors; ``add_norm``, ``zonotope_norm``: float32 or bfloat16 and an affine float32
   LayerNorm, residual and branch of one shape; anything else runs the eager function). The
   kernels serve the literal reading of the MZ layer only (``layer_reading``, choice 9 of
   ``mzlite.nn``): an MZ block of another reading runs inside ``disabled()``.

``calls`` counts the kernel calls per kernel (for tests and benchmarks).

Build
-----
C++ (``_fused_cpu.cpp``) compiled by ``torch.utils.cpp_extension`` in a child process (once per
machine, CPU, source and torch version, 1-2 min of CPU time on 2 cores), cached in torch's
extension folder (``TORCH_EXTENSIONS_DIR``); later processes import the cached library directly.
It is compiled for this CPU (``-march=native``): AVX-512 code where the CPU has AVX-512F, AVX2
code where it has AVX2 and FMA, else the generic loops alone (``simd()``).
``MZLITE_FUSED_MARCH`` (default ``native``) builds for another target, e.g. ``x86-64`` for the
generic loops on any CPU (to test the fallback). torch finds ninja on ``PATH`` only; mzlite looks
for it on ``PATH``, beside this interpreter (a venv's ``ninja`` package, on ``PATH`` only when
the venv is activated) and in the ``ninja`` package, and hands its folder to the child's
environment: this process's ``PATH`` is never changed. Where the build fails (no C++ compiler,
no ninja) mzlite warns once, naming the cause, and runs the eager
path (``build_error()`` says why).

Dropout
-------
The kernel's dropout mask is not drawn by torch's RNG but hashed from a 64-bit seed that is drawn
from torch's default generator (``draw_seed``): ``keep[t, j] = hash(seed, t d + j) >= p``, so runs
stay reproducible under ``torch.manual_seed`` and a resumed run's RNG state, and the backward
pass recomputes the mask instead of storing it. ``keep_mask`` returns it. The eager path draws
``bernoulli_`` masks: other numbers from the same distribution (i.i.d. keep with probability
``1 - p``, scaled by ``1 / (1 - p)``, one row per token; ``tests/test_fused.py`` holds both to
it), and, under bf16 autocast, the kernel returns bf16 where eager LayerNorm returns float32. So a
result records which path ran: ``loaded()``, saved as ``provenance["fused_cpu_kernels"]``."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn

from mzlite._io import atomic_write_json

_SOURCE = Path(__file__).with_name("_fused_cpu.cpp")
_DTYPES = (torch.float32, torch.bfloat16)
ENV = "MZLITE_FUSED"
MARCH_ENV = "MZLITE_FUSED_MARCH"  # the compiler's -march (default: native)
POLICIES = ("auto", "1", "0")
# "ext": the loaded module; "error": why the build failed (tried once); "choice": the measured
# choice of this process (choose())
_state: dict = {}
_off = [0]  # depth of nested ``disabled()`` blocks
calls: Counter = Counter()  # kernel name -> times it ran in place of the eager function


def policy() -> str:
    """``MZLITE_FUSED``: ``"auto"`` (default: where measured faster on this machine, ``choose``),
    ``"1"`` (wherever the kernels can run) or ``"0"`` (never)."""
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in POLICIES:
        raise ValueError(f"{ENV} must be one of {POLICIES} (unset: 'auto'), got {value!r}")
    return value


def _cpuinfo(field: str) -> str:
    """The first ``field`` line of ``/proc/cpuinfo`` as it stands (``flags``, ``model name``),
    else ``platform.processor()`` (macOS, Windows)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line
    return platform.processor()


def cpu_model() -> str:
    """This CPU's model name (``AMD EPYC``, ``Intel(R) Xeon(R) Processor``)."""
    return _cpuinfo("model name").split(":", 1)[-1].strip() or platform.machine()


def _march() -> str:
    march = os.environ.get(MARCH_ENV, "").strip() or "native"
    if not march.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ValueError(f"{MARCH_ENV} must be a compiler -march target such as native or "
                         f"x86-64, got {march!r}")  # fmt: skip
    return march


def _build_tag() -> str:
    """A short tag of the kernel's source, this CPU's instruction set, the ``-march`` target and
    the torch and Python versions, part of the extension's name: the kernel is built for this
    CPU, so a cache shared by two kinds of machine must not hand one the other's build, and two
    checkouts with other sources (a run in a worktree beside an edited main) must not load each
    other's."""
    march = _march()
    key = "|".join([platform.machine(), _cpuinfo("flags"), torch.__version__,
                    sys.version.split()[0]] + ([] if march == "native" else [march]))  # fmt: skip
    return hashlib.sha1(key.encode() + _SOURCE.read_bytes()).hexdigest()[:12]


def _ninja() -> str | None:
    """ninja's executable: on ``PATH``, beside this interpreter, or the ``ninja`` package's."""
    found = shutil.which("ninja") or shutil.which("ninja", path=os.path.dirname(sys.executable))
    if found is None:
        with contextlib.suppress(ImportError, AttributeError):
            import ninja

            found = shutil.which("ninja", path=ninja.BIN_DIR)
    return found


# the child process that compiles: torch.utils.cpp_extension, which runs ninja from PATH
_COMPILE = """
import sys
from torch.utils import cpp_extension
name, source, build_dir, march = sys.argv[1:]
cpp_extension.load(name=name, sources=[source], build_directory=build_dir,
                   extra_cflags=["-O3", "-march=" + march, "-fopenmp-simd"], verbose=False)
"""


def _build_dir(name: str) -> Path:
    from torch.utils import cpp_extension

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    return Path(root) / name


def _compile(name: str, build_dir: Path) -> None:
    """Compile the extension into ``build_dir`` in a child process (whose environment gets
    ninja's folder on its ``PATH``); raise RuntimeError with the cause when that fails."""
    ninja = _ninja()
    if ninja is None:
        raise RuntimeError(
            "ninja not found (on PATH, beside the Python interpreter, or as the ninja package): "
            "pip install ninja"
        )
    env = dict(os.environ, PATH=os.path.dirname(ninja) + os.pathsep + os.environ.get("PATH", ""))
    build_dir.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        [sys.executable, "-c", _COMPILE, name, str(_SOURCE), str(build_dir), _march()],
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode:
        # the cause: a compiler's first "error:" line, a shell's "not found", else the last line
        lines = [ln.strip() for ln in out.stderr.splitlines() if ln.strip()]
        causes = [ln for ln in lines if "error:" in ln] + [ln for ln in lines if "not found" in ln]
        raise RuntimeError((causes or lines[-1:] or [f"exit status {out.returncode}"])[0])
    (build_dir / f"{name}.built").touch()  # written last: the library is complete


def _import(name: str, build_dir: Path):
    suffix = ".pyd" if sys.platform == "win32" else ".so"
    spec = importlib.util.spec_from_file_location(name, build_dir / f"{name}{suffix}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build() -> bool:
    """Compile the kernels now, or load this machine's earlier build (~1 s); True once they are
    loaded. Never called by a forward pass: ``MZAttention``'s constructor calls ``prepare()``, and a
    script or notebook may call this ahead. ``MZLITE_FUSED=0``: False, nothing built. A failed
    build (no C++ compiler, no ninja) warns once, naming the cause, and returns False here and
    on later calls (``build_error()``); the eager path runs."""
    if "ext" in _state:
        return True
    if "error" in _state or policy() == "0":
        return False
    name = f"mzlite_fused_cpu_{_build_tag()}"
    try:
        build_dir = _build_dir(name)
        if not (build_dir / f"{name}.built").exists():
            _compile(name, build_dir)
        _state["ext"] = _import(name, build_dir)
    except Exception as e:  # no compiler, no ninja, a read-only cache: the eager path still works
        _state["error"] = f"{type(e).__name__}: {str(e).strip() or 'no message'}"
        warnings.warn(
            f"mzlite's fused CPU kernels could not be built ({_state['error']}); the eager "
            f"PyTorch path runs (same math). Set {ENV}=0 to silence this.",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    return True


def build_error() -> str | None:
    """Why the build failed in this process (None: not tried, or it worked)."""
    return _state.get("error")


def prepare() -> None:
    """Build the kernels if this process may select them (``MZLITE_FUSED`` ``1`` or ``auto``)
    and, under ``auto``, measure which to run (``choose``); at most one try per process. Called
    by ``MZAttention``'s constructor, so that the build (once per machine) and the measurement
    (once per machine and source, about 2 s) come before the first forward."""
    if "error" in _state or "choice" in _state:
        return
    chosen = policy()
    if chosen != "0" and build() and chosen == "auto":
        choose()


def has_avx512() -> bool:
    """Whether the loaded build has the AVX-512 kernels (False when none is loaded)."""
    ext = _state.get("ext")
    return ext is not None and ext.has_avx512()


def simd() -> str | None:
    """The instruction set of the loaded build's vector code: ``"avx512"``, ``"avx2"`` (AVX2 and
    FMA) or ``"generic"`` (compiled loops alone); None when none is loaded."""
    ext = _state.get("ext")
    return None if ext is None else ext.simd()


@functools.lru_cache(maxsize=1)
def _simd_widths(ext) -> frozenset:
    return frozenset(ext.simd_widths())


def simd_widths() -> frozenset:
    """The widths d with vector code in the loaded build (others run the generic loops)."""
    ext = _state.get("ext")
    return frozenset() if ext is None else _simd_widths(ext)


def loaded() -> bool:
    """Whether MZ blocks on CPU in this process run kernels: loaded and selected by the policy
    (``MZLITE_FUSED``; by default those measured faster here, ``choice()``), ``disabled()``
    blocks aside. What result provenance records (``fused_cpu_kernels``); builds nothing."""
    if "ext" not in _state:
        return False
    chosen = policy()
    return chosen == "1" or (chosen == "auto" and any(_state.get("choice", {}).values()))


# ----------------------------------------------------------------------------- the measured choice

MEASURED_SHAPE = dict(sets=128, n_g=8, d=64, heads=4)  # fit's MZ-Full batch: 10-30 elements a set
MEASURE_REPEATS = 5  # timed repeats per side, after one warm-up pair
_clock = time.process_time  # CPU time: what a shared machine's load touches least


def choice_key() -> dict:
    """What the measured choice depends on; a stored choice with another key is measured again.
    The CPU's flags, torch's and Python's versions are also in the build's name (the choice is
    stored beside the build); the sources are the kernel's and those of both sides' Python
    (this module, ``attention``'s eager functions)."""
    here = Path(__file__).parent
    sources = hashlib.sha1()
    for path in (_SOURCE, here / "fused.py", here / "attention.py"):
        sources.update(path.read_bytes())
    return {
        "machine": platform.node(),
        "cpu": cpu_model(),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "threads": torch.get_num_threads(),
        "sources": sources.hexdigest()[:12],
        "shape": MEASURED_SHAPE,
        "repeats": MEASURE_REPEATS,
    }


def _choice_path(key: dict) -> Path:
    """Beside the build, one file per key (processes with other thread counts keep theirs)."""
    name = f"mzlite_fused_cpu_{_build_tag()}"
    tag = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    return _build_dir(name) / f"choice-{tag}.json"


def choice() -> dict[str, bool]:
    """This process's measured choice, ``{"kernel:dtype": runs the kernel}`` (empty where
    ``choose`` has not run: the kernels then run only under ``MZLITE_FUSED=1``)."""
    return dict(_state.get("choice", {}))


def choose(remeasure: bool = False) -> dict[str, bool]:
    """Which kernels run under ``MZLITE_FUSED=auto`` on this machine: each kernel and its eager
    function timed side by side (``measure``) on fit's shapes, the faster kept, per kernel and
    dtype. Stored beside the build and read back while ``choice_key()`` is unchanged (so once
    per machine, CPU, torch and source); ``remeasure``: measure again. Needs ``build()``;
    a measurement that fails (it should not) warns and chooses eager throughout."""
    _require()
    key = choice_key()
    path = _choice_path(key)
    stored = None
    with contextlib.suppress(OSError, ValueError):
        stored = json.loads(path.read_text())
    if not remeasure and isinstance(stored, dict) and stored.get("key") == key:
        _state["choice"] = {k: bool(v["kernel"]) for k, v in stored["measured"].items()}
        return choice()
    try:
        measured = measure()
    except Exception as e:  # a broken measurement must not stop training: eager is always right
        warnings.warn(
            f"mzlite could not time its fused CPU kernels ({type(e).__name__}: {e}); the eager "
            f"PyTorch path runs. Set {ENV}=1 to run the kernels anyway.",
            RuntimeWarning,
            stacklevel=2,
        )
        _state["choice"] = {}
        return choice()
    _state["choice"] = {k: v["kernel"] for k, v in measured.items()}
    record = {"key": key, "measured": measured, "simd": simd(),
              "loadavg": _loadavg(), "when": time.strftime("%Y-%m-%dT%H:%M:%S%z")}  # fmt: skip
    with contextlib.suppress(OSError):  # a read-only cache: measured again next process
        atomic_write_json(path, record)
    return choice()


def _loadavg():
    with contextlib.suppress(OSError, AttributeError):
        return [round(x, 2) for x in os.getloadavg()]
    return None


def measure(repeats: int = MEASURE_REPEATS) -> dict[str, dict]:
    """Each kernel against its eager function, forward and backward, on ``MEASURED_SHAPE`` in
    float32 and bfloat16: ``{"kernel:dtype": {"kernel_s", "eager_s", "kernel": faster}}`` with
    the median CPU seconds (``_clock``) of ``repeats`` calls of each, interleaved in
    alternating order after one warm-up pair. No choice is changed, and torch's global RNG is
    left as it was (both sides draw dropout masks from it): a model built in a process that
    measures trains as one built where the choice was read back. Gradients on, autocast off,
    whatever the caller's context (a model built under ``no_grad`` or autocast)."""
    out = {}
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.random.fork_rng(devices=[]))
        stack.enter_context(torch.inference_mode(False))
        stack.enter_context(torch.enable_grad())
        stack.enter_context(torch.autocast("cpu", enabled=False))
        for name, dtype, kernel_step, eager_step in _cases():
            times = {"kernel": [], "eager": []}
            steps = {"kernel": kernel_step, "eager": eager_step}
            for r in range(repeats + 1):
                for side in ("kernel", "eager") if r % 2 == 0 else ("eager", "kernel"):
                    t = _clock()
                    steps[side]()
                    if r:
                        times[side].append(_clock() - t)
            k, e = (statistics.median(times[s]) for s in ("kernel", "eager"))
            out[f"{name}:{_dtype_name(dtype)}"] = {"kernel_s": k, "eager_s": e, "kernel": k < e}
    return out


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def fwd_bwd(f, *args):
    """A step of ``f(*args)`` forward and backward, with a dense gradient of ones per output
    (made once; as a model's gradients, not the stride-0 one a ``.sum()`` would send back), the
    outputs made contiguous first (as attention reads them). For the measurements here and in
    ``benchmarks/fused_kernels.py``."""
    grads = []

    def step():
        out = f(*args)
        out = out if isinstance(out, tuple) else (out,)
        out = tuple(o.contiguous() for o in out)  # as attention reads them
        if not grads:
            grads.extend(torch.ones(o.shape, dtype=o.dtype) for o in out)
        torch.autograd.backward(out, grads)

    return step


# The cases ``measure`` times are the eager functions of ``mzlite.nn.attention`` beside their
# kernels. attention imports this module, so it registers its cases here when it loads
# (``register_cases``) and this module never imports it.
_case_source: list = []


def register_cases(source) -> None:
    """Set the function that yields ``measure``'s cases: ``(kernel name, dtype, kernel step,
    eager step)`` for every kernel and dtype (``mzlite.nn.attention`` calls it when it loads)."""
    _case_source[:] = [source]


def _cases():
    """``(kernel name, dtype, kernel step, eager step)`` for every kernel and dtype, on fit's
    shapes (``MEASURED_SHAPE``), from the source ``register_cases`` set."""
    if not _case_source:
        raise RuntimeError("no measurement cases: import mzlite.nn.attention first")
    return _case_source[0]()


def selects(kernel: Kernel, args) -> bool:
    """Under ``auto``, whether ``kernel`` was measured faster here in the dtype of these
    arguments (bfloat16 where any tensor is, as under autocast; else float32)."""
    if policy() == "1":
        return True
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    dtype = "bfloat16" if any(t.dtype == torch.bfloat16 for t in tensors) else "float32"
    return _state.get("choice", {}).get(f"{kernel.name}:{dtype}", False)


@contextlib.contextmanager
def disabled():
    """Within the block the MZ blocks run the eager PyTorch path (for side-by-side
    comparisons: ``benchmarks/fused_kernels.py``, the tests)."""
    _off[0] += 1
    try:
        yield
    finally:
        _off[0] -= 1


@dataclass(frozen=True)
class Kernel:
    """A kernel that can stand in for an eager function of the same signature: ``run(*args)``
    computes it, ``accepts(*args)`` says whether ``run`` takes these arguments."""

    name: str
    run: Callable
    accepts: Callable


def fast_path(kernel: Kernel):
    """Decorator for an eager function of ``mzlite.nn.attention``: calls run ``kernel`` in its
    place where the kernels are loaded (``loaded()``), not ``disabled()``, ``kernel.accepts``
    the arguments and the policy selects this kernel for their dtype (``MZLITE_FUSED=1``, or
    measured faster here: ``choice()``); the eager function otherwise. The one place mzlite
    chooses between the two. The result keeps ``.eager`` and ``.kernel``."""

    def decorate(eager):
        @functools.wraps(eager)
        def dispatch(*args, **kwargs):
            if (
                not _off[0]
                and loaded()
                and kernel.accepts(*args, **kwargs)
                and selects(kernel, args)
            ):
                calls[kernel.name] += 1
                return kernel.run(*args, **kwargs)
            return eager(*args, **kwargs)

        dispatch.eager, dispatch.kernel = eager, kernel
        return dispatch

    return decorate


def usable(norm: nn.LayerNorm, *tensors: torch.Tensor) -> bool:
    """Whether ``add_norm`` takes these: CPU tensors of float32 or bfloat16 and a LayerNorm over
    the last axis with float32 weight and bias (any width: the policy's width rule is
    ``fast_path``'s). Otherwise (CUDA, float64, no norm) the eager path runs."""
    if not all(t.device.type == "cpu" and t.dtype in _DTYPES for t in tensors):
        return False
    if not isinstance(norm, nn.LayerNorm) or norm.weight is None or norm.bias is None:
        return False
    if len(norm.normalized_shape) != 1:
        return False
    return norm.weight.dtype == torch.float32 and norm.weight.device.type == "cpu"


def draw_seed() -> int:
    """A 64-bit dropout seed from torch's default CPU generator (reproducible under
    ``torch.manual_seed``)."""
    return int(torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64))


def keep_mask(tokens: int, d: int, p: float, seed: int) -> torch.Tensor:
    """The dropout mask ``(tokens, d)`` that ``add_norm`` uses for ``p`` and ``seed``:
    ``1 / (1 - p)`` where kept, 0 where dropped (all ones for ``p = 0``)."""
    _check_p(p)
    return _require().keep_mask(tokens, d, float(p), int(seed))


def _require():
    ext = _state.get("ext")
    if ext is None:
        why = build_error() or f"not built in this process ({ENV}={policy()})"
        raise RuntimeError(
            f"mzlite's fused CPU kernels are not loaded ({why}): call mzlite.nn.fused.build() "
            "first and use them where it returns True"
        )
    return ext


def _check_p(p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1), got {p!r}")


class _AddNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, a, weight, bias, p, seed, eps, out_bf16):
        y, mean, rstd = _state["ext"].add_norm_forward(x, a, weight, bias, p, seed, eps, out_bf16)
        ctx.save_for_backward(x, a, weight, mean, rstd)
        ctx.p, ctx.seed = p, seed
        return y

    @staticmethod
    def backward(ctx, gy):
        x, a, weight, mean, rstd = ctx.saved_tensors
        gx, ga, gw, gb = _state["ext"].add_norm_backward(
            gy.contiguous(), x, a, weight, mean, rstd, ctx.p, ctx.seed
        )
        return gx, ga, gw, gb, None, None, None, None


def add_norm(
    x: torch.Tensor,
    a: torch.Tensor,
    norm: nn.LayerNorm,
    *,
    p: float = 0.0,
    seed: int = 0,
    rows_per_token: int = 1,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``norm(x + a * keep)``: residual ``x``, branch ``a`` (same shape ``(..., d)``), dropout
    with probability ``p`` (0: none) and one mask row per token: the leading axes, read as
    ``(tokens, rows_per_token, d)``, give the token of each row (``rows_per_token = n_g`` for
    generators ``(..., n_g, d)``, 1 for centres). ``out_dtype`` (float32 or bfloat16): None
    gives bfloat16 when ``x`` and ``a`` both are, else float32 (as eager ``norm(x + a)`` under
    autocast). Needs ``build()`` and ``usable``."""
    if x.shape != a.shape:
        raise ValueError(f"x and a must have one shape, got {tuple(x.shape)} and {tuple(a.shape)}")
    _check_p(p)
    _require()
    d = x.shape[-1]
    if x.numel() % (rows_per_token * d):
        raise ValueError(
            f"x {tuple(x.shape)} is not a whole number of tokens of {rows_per_token} rows of {d}"
        )
    if out_dtype is None:
        out_dtype = torch.promote_types(x.dtype, a.dtype)
    if out_dtype not in _DTYPES:
        raise ValueError(f"out_dtype must be torch.float32 or torch.bfloat16, got {out_dtype}")
    out_bf16 = out_dtype == torch.bfloat16
    shape = x.shape
    y = _AddNorm.apply(
        x.contiguous().view(-1, rows_per_token, d),
        a.contiguous().view(-1, rows_per_token, d),
        norm.weight,
        norm.bias,
        float(p),
        int(seed),
        float(norm.eps),
        out_bf16,
    )
    return y.view(shape)


def reference_add_norm(
    x: torch.Tensor,
    a: torch.Tensor,
    norm: nn.LayerNorm,
    keep: torch.Tensor,
    rows_per_token: int = 1,
) -> torch.Tensor:
    """``add_norm`` in PyTorch with a given mask ``keep`` ``(tokens, d)`` (from ``keep_mask``),
    in the dtype of ``x``: the computation the kernel is tested against."""
    d = x.shape[-1]
    k = keep.to(x.dtype).view(-1, 1, d)  # (T, 1, d): one row per token, shared by its rows
    s = x.reshape(-1, rows_per_token, d) + a.reshape(-1, rows_per_token, d).to(x.dtype) * k
    return norm(s).view(x.shape)


class _ZonotopeNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, c, G, a_c, a_G, weight, bias, p, seed, eps, c_bf16, G_bf16):
        y_c, y_G, mean, rstd = _state["ext"].zonotope_norm_forward(
            c, G, a_c, a_G, weight, bias, p, seed, eps, c_bf16, G_bf16
        )
        ctx.save_for_backward(c, G, a_c, a_G, weight, mean, rstd)
        ctx.p, ctx.seed = p, seed
        return y_c, y_G

    @staticmethod
    def backward(ctx, gy_c, gy_G):
        c, G, a_c, a_G, weight, mean, rstd = ctx.saved_tensors
        gc, ga_c, gG, ga_G, gw, gb = _state["ext"].zonotope_norm_backward(
            gy_c.contiguous(), gy_G.contiguous(), c, G, a_c, a_G, weight, mean, rstd, ctx.p,
            ctx.seed,
        )  # fmt: skip
        return gc, gG, ga_c, ga_G, gw, gb, None, None, None, None, None


def zonotope_norm(
    c: torch.Tensor,
    G: torch.Tensor,
    a_c: torch.Tensor,
    a_G: torch.Tensor,
    norm: nn.LayerNorm,
    *,
    p: float = 0.0,
    seed: int = 0,
    out_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``attention.add_zonotope_norm`` in one pass: residual + dropout (one mask per token, from
    ``keep_mask(tokens, d, p, seed)``, shared by the centre and its generators) and the zonotope
    LayerNorm (``attention.zonotope_layer_norm``: ``norm`` on the centre, its affine map without
    bias on the generators). ``c``, ``a_c`` ``(..., d)``; ``G``, ``a_G`` ``(..., n_g, d)``; each
    float32 or bfloat16. ``out_dtype`` (float32 or bfloat16) for both outputs; None: each stream
    in the promoted dtype of its two inputs, as the eager ``c + a_c`` gives it. Needs ``build()``
    and ``usable``."""
    if c.shape != a_c.shape or G.shape != a_G.shape:
        raise ValueError(
            f"c and a_c, G and a_G must have one shape each, got {tuple(c.shape)}, "
            f"{tuple(a_c.shape)}, {tuple(G.shape)}, {tuple(a_G.shape)}"
        )
    if G.dim() != c.dim() + 1 or G.shape[:-2] != c.shape[:-1] or G.shape[-1] != c.shape[-1]:
        raise ValueError(
            f"G must be (..., n_g, d) for c (..., d), got c {tuple(c.shape)}, G {tuple(G.shape)}"
        )
    _check_p(p)
    _require()
    if out_dtype not in (None, *_DTYPES):
        raise ValueError(
            f"out_dtype must be None, torch.float32 or torch.bfloat16, got {out_dtype}"
        )
    d, ng = c.shape[-1], G.shape[-2]
    c_dtype = out_dtype or torch.promote_types(c.dtype, a_c.dtype)
    G_dtype = out_dtype or torch.promote_types(G.dtype, a_G.dtype)
    y_c, y_G = _ZonotopeNorm.apply(
        c.contiguous().view(-1, 1, d),
        G.contiguous().view(-1, ng, d),
        a_c.contiguous().view(-1, 1, d),
        a_G.contiguous().view(-1, ng, d),
        norm.weight,
        norm.bias,
        float(p),
        int(seed),
        float(norm.eps),
        c_dtype == torch.bfloat16,
        G_dtype == torch.bfloat16,
    )
    return y_c.view(c.shape), y_G.view(G.shape)


class _UnpackHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, packing, n_heads):
        ctx.packing = packing
        return _state["ext"].unpack_heads(x, packing.slot_row, packing.B, packing.n, n_heads)

    @staticmethod
    def backward(ctx, g):  # the adjoint: real rows gathered back, spare rows get no gradient
        pk = ctx.packing
        return _state["ext"].pack_heads(g.contiguous(), pk.rows, pk.N), None, None


class _PackHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, packing):
        ctx.packing, ctx.n_heads = packing, x.shape[1]
        return _state["ext"].pack_heads(x, packing.rows, len(packing.rows))

    @staticmethod
    def backward(ctx, g):  # the adjoint: scattered back, spare rows added to the slot they copy
        pk, H = ctx.packing, ctx.n_heads
        g = g.contiguous()
        gx = _state["ext"].unpack_heads(g, pk.slot_row, pk.B, pk.n, H)
        if len(pk.rows) > pk.N:
            spare = g[pk.N :].sum(0).view(g.shape[1], H, -1).transpose(0, 1)  # (H, n_g, dk)
            b0, i0 = divmod(int(pk.flat[0]), pk.n)
            gx[b0, :, i0] += spare
        return gx, None


def unpack_heads(x: torch.Tensor, packing, n_heads: int) -> torch.Tensor:
    """``Packing.unpack_heads`` in one pass: packed ``(R, n_g, H d_k)`` -> head-major
    ``(B, H, n, n_g, d_k)``, zeros at the padding. Needs ``build()`` and CPU tensors."""
    _require()
    return _UnpackHeads.apply(x.contiguous(), packing, n_heads)


def pack_heads(x: torch.Tensor, packing) -> torch.Tensor:
    """``Packing.pack_heads`` in one pass: head-major ``(B, H, n, n_g, d_k)`` -> packed
    ``(R, n_g, H d_k)``. Needs ``build()`` and CPU tensors."""
    _require()
    return _PackHeads.apply(x.contiguous(), packing)


# ----------------------------------------------------------------------------- the stand-ins
# Each Kernel takes the arguments of the eager function of mzlite.nn.attention it stands in for.


class _Whole:
    """The packing of a batch without padding (slot i is packed row i): the padded layout's
    head permutes as ``unpack_heads`` / ``pack_heads``."""

    def __init__(self, B: int, n: int, device: torch.device):
        self.B, self.n, self.N = B, n, B * n
        self.rows = self.slot_row = self.flat = torch.arange(B * n, device=device)


def _on_cpu(x: torch.Tensor) -> bool:
    return x.device.type == "cpu"


def _heads_first(x, n_heads):
    B, n, ng, d = x.shape
    return unpack_heads(x.reshape(B * n, ng, d), _Whole(B, n, x.device), n_heads)


def _heads_last(x):
    B, H, n, ng, dk = x.shape
    return pack_heads(x, _Whole(B, n, x.device)).view(B, n, ng, H * dk)


def _add_norm_rows(c, G, a_c, a_G, ln_c, ln_G, p):
    seed = draw_seed() if p > 0 else 0
    c = add_norm(c, a_c, ln_c, p=p, seed=seed, out_dtype=a_c.dtype)
    G = add_norm(G, a_G, ln_G, p=p, seed=seed, rows_per_token=G.shape[-2], out_dtype=a_G.dtype)
    return c, G


def _add_norm_rows_accepts(c, G, a_c, a_G, ln_c, ln_G, p):
    if not (usable(ln_c, c, G, a_c, a_G) and usable(ln_G)):
        return False
    # the generic loops measured 0.76x-1.4x eager: under auto only the vector code runs
    return policy() == "1" or c.shape[-1] in simd_widths()


def _add_zonotope_norm(c, G, a_c, a_G, ln, p):
    # the branches' dtype, as _add_norm_rows: under bf16 autocast the streams leave the block in
    # bf16, rounded once, instead of float32 copies that every product reading them casts
    # (measured: MZ-Full step 312 -> 271 ms on the Intel Xeon, one process, 10 interleaved steps)
    out_dtype = a_c.dtype if a_c.dtype == a_G.dtype else None
    seed = draw_seed() if p > 0 else 0
    return zonotope_norm(c, G, a_c, a_G, ln, p=p, seed=seed, out_dtype=out_dtype)


def _add_zonotope_norm_accepts(c, G, a_c, a_G, ln, p):
    if not usable(ln, c, G, a_c, a_G):
        return False
    if c.shape != a_c.shape or G.shape != a_G.shape:
        return False  # broadcast residuals: the eager path handles them
    if G.dim() != c.dim() + 1 or G.shape[:-2] != c.shape[:-1] or G.shape[-1] != c.shape[-1]:
        return False
    # every width: the generic loops measured 2.1x-3.9x eager at d = 48, 80 on the Intel Xeon
    # (eager takes ~5 passes, so the margin does not hang on vectorisation, unlike add_norm's)
    return True


UNPACK_HEADS = Kernel(
    "unpack_heads",
    lambda packing, x, n_heads: unpack_heads(x, packing, n_heads),
    lambda packing, x, n_heads: _on_cpu(x),
)
PACK_HEADS = Kernel(
    "pack_heads", lambda packing, x: pack_heads(x, packing), lambda packing, x: _on_cpu(x)
)
HEADS_FIRST = Kernel("heads_first", _heads_first, lambda x, n_heads: _on_cpu(x))
HEADS_LAST = Kernel("heads_last", _heads_last, _on_cpu)
ADD_NORM_ROWS = Kernel("add_norm_rows", _add_norm_rows, _add_norm_rows_accepts)
ADD_ZONOTOPE_NORM = Kernel("add_zonotope_norm", _add_zonotope_norm, _add_zonotope_norm_accepts)
