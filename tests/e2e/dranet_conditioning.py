"""Why the float32 DRANet checks of e2e_dranet.py cannot hold (tests/e2e/README.md, "DRANet at a small
size"): measures, for one generated DRANet and seeded batch, the conditioning that bounds any float32
implementation. Not a test: it prints numbers and exits 0. Run with /usr/bin/python3.

For each seed it reports
  - forward: at every ReLU input, max |f32 - f64| / std(f64) (PyTorch float32 vs float64, onnx_torch)
    and the sign flips (elements on different sides of 0 in the two runs);
  - input-ulp test: the float64 gradients with every input pixel multiplied by (1 + 6e-8 * N(0,1)),
    i.e. about one float32 rounding of the input and nothing else, compared with the unperturbed
    float64 gradients through the grads tolerance of e2e_common (rtol 1e-4, 1e-5 max|r|, 1e-7):
    the number of tensors out and the worst excess. Float32 arithmetic rounds every layer, not only
    the input, so where this float64 experiment already fails, no float32 implementation can pass;
  - the float64 gradient norm (SGD's step is lr times it).
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_common as E  # noqa: E402
from onnx_torch import OnnxTorch  # noqa: E402

INPUT_REL = 6e-8  # float32 unit roundoff


class ReluRecorder(OnnxTorch):
    """OnnxTorch that keeps every ReLU input (node name, tensor)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.relu_inputs = []

    def op_Relu(self, ins, a, node):
        self.relu_inputs.append((node.name, ins[0].detach().clone()))
        return super().op_Relu(ins, a, node)


def forward_flips(model, x):
    """(ReLU elements, worst max|d|/std, [(node, flips)]) of float32 vs float64 on batch x."""
    feed = model.graph.input[0].name
    m32, m64 = ReluRecorder(model, dtype=torch.float32), ReluRecorder(model, dtype=torch.float64)
    with torch.no_grad():
        m32({feed: torch.from_numpy(x)})
        m64({feed: torch.from_numpy(x.astype(np.float64))})
    elems, worst, flips = 0, 0.0, []
    for (name, v32), (_, v64) in zip(m32.relu_inputs, m64.relu_inputs):
        d = (v32.double() - v64).abs()
        worst = max(worst, float(d.max() / v64.std()))
        elems += v64.numel()
        f = int(((v32 > 0) != (v64 > 0)).sum())
        if f:
            flips.append((name, f))
    return elems, worst, flips


def f64_grads(model, x, y):
    m = OnnxTorch(model, dtype=torch.float64)
    out = m({model.graph.input[0].name: torch.from_numpy(x)})[model.graph.output[0].name]
    loss = E.torch_loss(out, y)
    loss.backward()
    return float(loss), {n: p.grad.numpy().copy() for n, p in m.named_onnx_parameters() if p.grad is not None}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scorch", required=True, help="path of scorch-run (its `gen dranet` writes the model)")
    p.add_argument("--workdir", required=True)
    p.add_argument("--image", type=int, default=16)
    p.add_argument("--width", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--gamma", type=float, default=0.0)
    p.add_argument("--residual-gamma", type=float, default=1.0)
    p.add_argument("--seeds", default="1,2,3,4,5", help="data seeds, as e2e_dranet.py --data-seed")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    path = os.path.join(a.workdir, "dranet.onnx")
    subprocess.run([a.scorch, "gen", "dranet", "--depth", "50", "--image", str(a.image), "--classes", "5",
                    "--width", str(a.width), "--gamma", repr(a.gamma), "--residual-gamma", repr(a.residual_gamma),
                    "-o", path], check=True, capture_output=True)
    model = onnx.load(path)
    print("DRANet depth 50, image %d, width %d, batch %d, gamma %g, residual gamma %g" % (
        a.image, a.width, a.batch, a.gamma, a.residual_gamma))
    for seed in [int(s) for s in a.seeds.split(",")]:
        rng = np.random.default_rng(seed)  # the same draws as e2e_dranet.py (one batch)
        x = rng.standard_normal((a.batch, 3, a.image, a.image)).astype(np.float32)
        y = rng.integers(0, 5, size=(a.batch, a.image, a.image), dtype=np.int64)
        y[rng.random(y.shape) < 0.1] = -100
        elems, worst, flips = forward_flips(model, x)
        x64 = x.astype(np.float64)
        loss0, g0 = f64_grads(model, x64, y)
        pert = np.random.default_rng(1000 + seed).standard_normal(x.shape)
        loss1, g1 = f64_grads(model, x64 * (1 + INPUT_REL * pert), y)
        rows = sorted(((E.compare_tensor(g1[n], g0[n])[0], n) for n in g0), reverse=True)
        gnorm = float(np.sqrt(sum(float((g ** 2).sum()) for g in g0.values())))
        print("seed %d: forward f32 vs f64: %d ReLU elements, worst |d|/std %.2e, %d flips %s" % (
            seed, elems, worst, sum(f for _, f in flips), flips))
        print("        input-ulp test (float64): loss rel %.2e, %d of %d gradients out of tolerance, worst %s "
              "excess %.3g; |grad| %.3g" % (abs(loss1 - loss0) / loss0, sum(r[0] > 1 for r in rows), len(rows),
                                             rows[0][1], rows[0][0], gnorm))


if __name__ == "__main__":
    main()
