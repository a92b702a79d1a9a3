"""End-to-end training of torchvision exports against PyTorch (tests/e2e.cmake; e2e_common.py has the
checks and tolerances): mobilenet_v3_small, efficientnet_b0, convnext_tiny, swin_t and a small
VisionTransformer (2 layers, hidden 32, patch 8), each built with num_classes=10 and seeded weights,
with dropout and stochastic depth at p = 0 (their masks are random on each side, so nothing could be
compared) and constant parameters (fresh norm weights and biases) perturbed by 0.1 N(0, 1) (the
exporter merges initializers with equal values into one), exported in training mode (batch normalization with batch statistics, do_constant_folding
off, opset 17). The data are 3 batches (a fresh one each step) of class prototypes plus unit noise.
The reference is the ONNX graph interpreted by torch (onnx_torch.py); the gradient checks also run
the torchvision module itself on the same weights and data and require the interpreter to agree with
it, which validates the reference. Run with /usr/bin/python3.

The tolerances are e2e_common's: the *64 checks run the model and the data in float64 on both sides,
where PyTorch's own float32 run is no yardstick (e2e_common.py states the float32 ones against it).
"""
import os
import warnings

import numpy as np
import torch
import torchvision
from torchvision.models.vision_transformer import VisionTransformer

import e2e_common as E

CLASSES = 10
# model: (image side, batch, SGD learning rate). efficientnet_b0 at 32x32, batch 4 and lr 0.05 is chaotic
# (its updates reach 30, and PyTorch's own float32 run ends 5.5 away from float64): 64x64, batch 8
# and lr 0.01 train it smoothly.
SIZES = {"mobilenet_v3_small": (32, 4, 0.05), "efficientnet_b0": (64, 8, 0.01), "convnext_tiny": (32, 4, 0.05),
         "vit": (32, 4, 0.05), "swin_t": (64, 2, 0.05)}


def add_options(p):
    p.add_argument("--model", required=True, choices=sorted(SIZES))


def make_module(name):
    torch.manual_seed(0)
    if name == "vit":
        m = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                              num_classes=CLASSES)
    else:
        m = getattr(torchvision.models, name)(num_classes=CLASSES)
    for mod in m.modules():
        if isinstance(mod, torch.nn.Dropout) or type(mod).__name__ == "StochasticDepth":
            mod.p = 0.0
    with torch.no_grad():  # distinct values: the exporter merges initializers with equal values (every
        for p in m.parameters():  # fresh norm weight is all ones), which would then train as one
            if p.numel() > 1 and bool((p == p.reshape(-1)[0]).all()):
                p.add_(0.1 * torch.randn_like(p))
    m.train()
    return m


def export(name, path, batch, image):
    m = make_module(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, torch.zeros(batch, 3, image, image), path, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=17, input_names=["input"],
                          output_names=["logits"])


def torchvision_reference(name, case):
    """Loss and gradients of the torchvision module itself (float64, same weights and data)."""
    m = make_module(name).to(E.REF_DTYPE)
    idx = case.step_samples(0)
    loss = E.torch_loss(m(torch.from_numpy(case.x[idx]).to(E.REF_DTYPE)), case.y[idx])
    loss.backward()
    named = [(n, p.grad.detach().numpy().astype(np.float64)) for n, p in m.named_parameters()]
    return [("torchvision.models." + name, float(loss.detach()), named)]


def main():
    args = E.parse_args(__doc__, add_options)
    image, batch, E.SGD["lr"] = SIZES[args.model]
    path = os.path.join(args.workdir, args.model + ".onnx")
    export(args.model, path, batch, image)
    rng = np.random.default_rng(2024)
    n = E.STEPS * batch
    proto = rng.standard_normal((CLASSES, 3, image, image))
    y = rng.integers(0, CLASSES, size=(n,), dtype=np.int64)
    x = (rng.standard_normal((n, 3, image, image)) + proto[y]).astype(np.float32)
    where = np.argsort(E.trainer_permutation(n, 0))  # step k trains on draws [k*batch, (k+1)*batch)
    x, y = x[where], y[where]
    case = E.Case(args.model, path, x, y, [], f64=args.check.endswith("64"), batch=batch)
    E.run_check(args, case, lambda: torchvision_reference(args.model, case))


if __name__ == "__main__":
    main()
