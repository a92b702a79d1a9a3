"""End-to-end check of torchvision's resnet18 against PyTorch (tests/e2e.cmake; e2e_common.py has the
checks and tolerances). The model is torchvision.models.resnet18(num_classes=10) with seeded weights,
exported in training mode (batch normalization with batch statistics, do_constant_folding off, opset
17) for batches of 16 images 3x32x32. The data are 10 batches (a fresh one each step) of a learnable
task: class prototypes plus unit noise, 10 classes; the gradient check uses the first batch. Batch 16,
not 4: with 4, layer4 normalizes over 4 values per channel (1x1 maps) and even PyTorch float32 misses
the float64 gradients by 3e-4 relative. The curves use fine-tuning learning rates (CURVE_LR): the
AdamW curve is registered as is; the SGD one is registered with `--residual-gamma 0.1` (every block's
last BN gamma started at 0.1: at torchvision's 1, float32 ReLU flips grow past the tolerance under
SGD with momentum; README.md has the measurements). The gradient check also runs the real
torchvision module on the same weights and data and requires the ONNX interpreter to agree with it
(1e-6), which validates the reference itself. Run with /usr/bin/python3.
"""
import os
import warnings

import numpy as np
import torch
import torchvision

import e2e_common as E

CLASSES, IMAGE, BATCH, SIGNAL = 10, 32, 16, 1.0
CURVE_LR = {"sgd": 1e-3, "adamw": 3e-5}


def add_options(p):
    p.add_argument("--batch", type=int, default=BATCH, help="samples per step (default %(default)s)")
    p.add_argument("--image", type=int, default=IMAGE, help="image side (default %(default)s)")
    p.add_argument("--signal", type=float, default=SIGNAL,
                   help="amplitude of the class prototypes added to the noise (default %(default)s)")
    p.add_argument("--one-batch", action="store_true", help="the data set is one batch (every step sees it)")
    p.add_argument("--residual-gamma", type=float,
                   help="start every block's last BN gamma at this value (experiments; default torchvision's 1)")


RESIDUAL_GAMMA = [None]  # set from --residual-gamma before the first make_module


def make_module():
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=CLASSES)
    if RESIDUAL_GAMMA[0] is not None:
        with torch.no_grad():
            for layer in (m.layer1, m.layer2, m.layer3, m.layer4):
                for block in layer:
                    block.bn2.weight.fill_(RESIDUAL_GAMMA[0])
    m.train()
    return m


def export(path, batch, image):
    m = make_module()
    x = torch.zeros(batch, 3, image, image)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # num_batches_tracked mutation removed: not part of the math
        torch.onnx.export(m, x, path, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          opset_version=17, input_names=["input"], output_names=["logits"])


def torchvision_reference(case):
    """Loss and gradients of the torchvision module itself (float64, same weights and data)."""
    m = make_module().to(E.REF_DTYPE)
    idx = case.step_samples(0)
    loss = E.torch_loss(m(torch.from_numpy(case.x[idx]).to(E.REF_DTYPE)), case.y[idx])
    loss.backward()
    named = [(n, p.grad.detach().numpy().astype(np.float64)) for n, p in m.named_parameters()]
    return [("torchvision.models.resnet18", float(loss.detach()), named)]


def main():
    args = E.parse_args(__doc__, add_options)
    RESIDUAL_GAMMA[0] = args.residual_gamma
    path = os.path.join(args.workdir, "resnet18.onnx")
    export(path, args.batch, args.image)
    rng = np.random.default_rng(1818)
    n = args.batch if args.one_batch else E.STEPS * args.batch
    proto = rng.standard_normal((CLASSES, 3, args.image, args.image))
    y = rng.integers(0, CLASSES, size=(n,), dtype=np.int64)
    x = (rng.standard_normal((n, 3, args.image, args.image)) + args.signal * proto[y]).astype(np.float32)
    # stored so that the trainer's shuffle hands out the draws in order: step k trains on draws
    # [k*batch, (k+1)*batch) (the data the conditioning measurements in README.md were taken on)
    where = np.argsort(E.trainer_permutation(n, 0))
    x, y = x[where], y[where]
    case = E.Case("resnet18", path, x, y, [], f64=args.check.endswith("64"), batch=args.batch)
    E.run_check(args, case, lambda: torchvision_reference(case), curve_lr=CURVE_LR)


if __name__ == "__main__":
    main()
