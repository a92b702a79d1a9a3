"""End-to-end check of a GPT-2-style model against PyTorch (tests/e2e.cmake; e2e_common.py has the
checks and tolerances). The model is `scorch-run gen gpt --layers 2 --heads 2 --dim 64 --vocab 128
--seq 16`; the data are 4 seeded token sequences of 17 tokens: input ids [4, 16] and their next
tokens [4, 16] as labels (the LM head of autodiff/loss.c). Run with /usr/bin/python3.
"""
import os

import numpy as np

import e2e_common as E

VOCAB, SEQ, BATCH = 128, 16, 4


def main():
    args = E.parse_args(__doc__)
    path = os.path.join(args.workdir, "gpt.onnx")
    E.sh([args.scorch, "gen", "gpt", "--layers", "2", "--heads", "2", "--dim", "64", "--vocab", str(VOCAB),
          "--seq", str(SEQ), "-o", path])
    rng = np.random.default_rng(1234)
    tokens = rng.integers(0, VOCAB, size=(BATCH, SEQ + 1), dtype=np.int64)
    case = E.Case("gpt", path, tokens[:, :SEQ].copy(), tokens[:, 1:].copy(),
                  ["--batch", str(BATCH), "--seq", str(SEQ)], f64=args.check.endswith("64"))
    E.run_check(args, case)


if __name__ == "__main__":
    main()
