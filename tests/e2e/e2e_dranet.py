"""End-to-end check of our generated DRANet against PyTorch (tests/e2e.cmake; e2e_common.py has the
checks and tolerances). The model is `scorch-run gen dranet --depth 50 --image 32 --classes 5
--width 8 --gamma 0.5` (a nonzero gamma, so the position and channel attention branches carry
gradient); batch 2 of seeded images, per-pixel labels [2, 32, 32] with about 10% of the pixels set
to the ignore index -100. Every BatchNormalization runs with batch statistics on both sides. Run
with /usr/bin/python3.
"""
import os

import numpy as np

import e2e_common as E

CLASSES, IMAGE, BATCH, WIDTH = 5, 32, 2, 8


def main():
    args = E.parse_args(__doc__)
    path = os.path.join(args.workdir, "dranet.onnx")
    E.sh([args.scorch, "gen", "dranet", "--depth", "50", "--image", str(IMAGE), "--classes", str(CLASSES),
          "--width", str(WIDTH), "--gamma", "0.5", "-o", path])
    rng = np.random.default_rng(4321)
    x = rng.standard_normal((BATCH, 3, IMAGE, IMAGE)).astype(np.float32)
    y = rng.integers(0, CLASSES, size=(BATCH, IMAGE, IMAGE), dtype=np.int64)
    y[rng.random(y.shape) < 0.1] = -100
    case = E.Case("dranet", path, x, y, ["--batch", str(BATCH)], f64=args.check.endswith("64"))
    E.run_check(args, case)


if __name__ == "__main__":
    main()
