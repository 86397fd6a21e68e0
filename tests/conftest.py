"""Test-wide settings.

One intra-op thread: the models under test are small, and on a 2-core machine (CI) two threads
cost more in synchronisation than they win, and make timings of neighbouring processes erratic.

The suite runs on whatever CPU the machine has (a Zen 4 with AVX512-BF16, an Intel Xeon with AMX,
an EPYC with AVX2 only), so a test may not lean on the CPU it happens to find. To check that,
``MZLITE_TEST_CPU`` forces the answer of each CPU probe for the whole test session, e.g.
``MZLITE_TEST_CPU=bf16=0,avx512=0`` (what an AVX2-only CPU answers) or ``bf16=1`` (a CPU with
native bf16): every test then holds, or skips saying which premise it lacks. The probes:

- ``bf16``: native bfloat16 dot products (``torch.cpu._is_avx512_bf16_supported`` and
  ``_is_amx_tile_supported``, which ``mzlite.train.precision.cpu_has_bf16`` reads);
- ``avx512``: the CPU capability PyTorch reports (``torch.backends.cpu.get_cpu_capability``,
  which ``mzlite.nn.fused`` reads).

It patches this test process only; the CLI subprocesses of the integration tests see the real CPU.
"""

import os

import torch

torch.set_num_threads(1)

CPU_PROBES = ("bf16", "avx512")


def _forced_cpu(spec: str) -> dict[str, bool]:
    forced = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, sep, value = item.partition("=")
        if name not in CPU_PROBES or sep != "=" or value not in ("0", "1"):
            raise ValueError(
                f"MZLITE_TEST_CPU: {item!r} is not PROBE=0 or PROBE=1; valid probes: "
                f"{', '.join(CPU_PROBES)} (e.g. MZLITE_TEST_CPU=bf16=0,avx512=0)"
            )
        forced[name] = value == "1"
    return forced


def _force_cpu_probes(forced: dict[str, bool]) -> None:
    if "bf16" in forced:
        answer = forced["bf16"]
        torch.cpu._is_avx512_bf16_supported = lambda: answer
        torch.cpu._is_amx_tile_supported = lambda: answer
    if "avx512" in forced:
        real = torch.backends.cpu.get_cpu_capability
        without = "AVX2" if real() != "DEFAULT" else "DEFAULT"
        capability = "AVX512" if forced["avx512"] else without
        torch.backends.cpu.get_cpu_capability = lambda: capability


_force_cpu_probes(_forced_cpu(os.environ.get("MZLITE_TEST_CPU", "")))
