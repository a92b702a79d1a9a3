"""The PyTorch peer's BLAS kernels, chosen from the CPU's feature flags before torch loads.

Debian's torch runs its matrix products (nn.Linear, matmul and their gradients) on OpenBLAS, which
picks its kernels from the CPU model that cpuid reports. A virtual machine that reports a generic
model ("Intel(R) Xeon(R) Processor") gets OpenBLAS's fallback, the SSE3 kernels of a Prescott
Pentium 4. On the 2-core AVX-512 KVM guest of the 2026-11-29 results, `OPENBLAS_VERBOSE=2` said
"Core: Prescott"; an 8192x512 @ 512x256 product took 58 ms against 17 ms with the SkylakeX kernels,
and the GPT of train_vs_torch.py 450-690 ms a step against 160-190 ms. A peer running at a third of
its speed flatters every ratio against it, so the peer gets the kernels its CPU's flags allow.

OPENBLAS_CORETYPE set by the caller is kept. oneDNN (PyTorch's convolutions, all of Scorch) and
onnxruntime's MLAS choose their kernels from the feature flags already and are not affected.
"""
import os

# OpenBLAS core names by the flags they need, best first.
CORES = (
    ("SkylakeX", ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")),
    ("Haswell", ("avx2", "fma")),
    ("SandyBridge", ("avx",)),
)


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def openblas_core(flags):
    """The best OpenBLAS core whose instructions the flags include, or None (x86 only)."""
    for name, need in CORES:
        if all(f in flags for f in need):
            return name
    return None


def setup():
    """Sets OPENBLAS_CORETYPE for this process and its children unless set; returns its value."""
    if "OPENBLAS_CORETYPE" not in os.environ:
        core = openblas_core(cpu_flags())
        if core:
            os.environ["OPENBLAS_CORETYPE"] = core
    return os.environ.get("OPENBLAS_CORETYPE", "")
