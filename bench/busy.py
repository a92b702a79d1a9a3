"""A competing process for the contention benchmarks (torchvision_sweep.py --busy,
train_vs_torch.py --busy): a busy loop pinned to core 0, the load of a data loader or another job,
bounded to BUSY_CAP_S seconds so that a crashed benchmark cannot leave it spinning."""
import subprocess
import sys
import time

BUSY_CAP_S = 600
BUSY_LOOP = "import os, time\nos.sched_setaffinity(0, {0})\nend = time.time() + %d\nwhile time.time() < end: pass\n"


class Busy:
    """A busy loop on core 0 for the duration of a with-block (and BUSY_CAP_S at most)."""

    def __enter__(self):
        self.p = subprocess.Popen([sys.executable, "-c", BUSY_LOOP % BUSY_CAP_S])
        time.sleep(0.2)  # let it start spinning
        return self

    def __exit__(self, *exc):
        self.p.kill()
        self.p.wait()
