"""End-to-end check of our generated DRANet against PyTorch (tests/e2e.cmake; e2e_common.py has the
checks and tolerances). The model is `scorch-run gen dranet --depth 50 --image 16 --classes 5
--width 4 --gamma 0.1 --residual-gamma 0.1`: a small DRANet-50 whose attention gammas are nonzero (so
the position and channel attention branches carry gradient) and whose backbone blocks start with
their last batch-norm gamma at 0.1 (as zero-init residual, Goyal et al. 2017, but not zero, so every
block's convolutions carry gradient too). With gamma 1 the untrained 50-layer net is ill-conditioned
(|grad| 160-22000; one float32 rounding of the input alone moves float64 gradients past the
tolerance), so no float32 implementation, PyTorch's included, can pass the float32 checks on it
(tests/e2e/README.md, tests/e2e/dranet_conditioning.py). Batch 8 of seeded images, per-pixel labels
[8, 16, 16] with about 10% of the pixels set to the ignore index -100; every BatchNormalization runs
with batch statistics on both sides. The SGD curve runs at lr 1e-3 (CURVE_LR). Run with
/usr/bin/python3.
"""
import os

import numpy as np

import e2e_common as E

CLASSES, IMAGE, BATCH, WIDTH, GAMMA, RESIDUAL_GAMMA = 5, 16, 8, 4, 0.1, 0.1
CURVE_LR = {"sgd": 1e-3, "adamw": 1e-3}


def add_options(p):
    p.add_argument("--batch", type=int, default=BATCH, help="samples per step (default %(default)s)")
    p.add_argument("--image", type=int, default=IMAGE, help="image side (default %(default)s)")
    p.add_argument("--width", type=int, default=WIDTH, help="backbone width (default %(default)s)")
    p.add_argument("--gamma", type=float, default=GAMMA, help="initial attention gammas (default %(default)s)")
    p.add_argument("--residual-gamma", type=float, default=RESIDUAL_GAMMA,
                   help="initial gamma of each backbone block's last BN (default %(default)s)")
    p.add_argument("--depth", type=int, default=50, help="backbone depth, 50 or 101 (default %(default)s)")
    p.add_argument("--data-seed", type=int, default=4321, help="seed of the images and labels (default %(default)s)")
    p.add_argument("--stream", action="store_true", help="a fresh batch each step (10 batches) instead of one batch")


def main():
    args = E.parse_args(__doc__, add_options)
    path = os.path.join(args.workdir, "dranet.onnx")
    E.sh([args.scorch, "gen", "dranet", "--depth", str(args.depth), "--image", str(args.image),
          "--classes", str(CLASSES), "--width", str(args.width), "--gamma", repr(args.gamma),
          "--residual-gamma", repr(args.residual_gamma), "-o", path])
    rng = np.random.default_rng(args.data_seed)
    n = E.STEPS * args.batch if args.stream else args.batch
    x = rng.standard_normal((n, 3, args.image, args.image)).astype(np.float32)
    y = rng.integers(0, CLASSES, size=(n, args.image, args.image), dtype=np.int64)
    y[rng.random(y.shape) < 0.1] = -100
    case = E.Case("dranet", path, x, y, [], f64=args.check.endswith("64"), batch=args.batch)
    E.run_check(args, case, curve_lr=CURVE_LR)


if __name__ == "__main__":
    main()
