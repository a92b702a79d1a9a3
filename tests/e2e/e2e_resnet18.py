"""End-to-end check of torchvision's resnet18 against PyTorch (tests/e2e.cmake; e2e_common.py has the
checks and tolerances). The model is torchvision.models.resnet18(num_classes=10) with seeded weights,
exported in training mode (batch normalization with batch statistics, do_constant_folding off, opset
17) for a batch of 16 images 3x32x32; labels are 16 class ids (batch 16, not 4: with 4, layer4 normalizes over 4 values per channel (1x1 maps) and even PyTorch float32 misses the float64 gradients by 3e-4 relative). The gradient check also runs the real
torchvision module on the same weights and data and requires the ONNX interpreter to agree with it
(1e-6), which validates the reference itself. Run with /usr/bin/python3.
"""
import os
import warnings

import numpy as np
import torch
import torchvision

import e2e_common as E

CLASSES, IMAGE, BATCH = 10, 32, 16


def make_module():
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=CLASSES)
    m.train()
    return m


def export(path):
    m = make_module()
    x = torch.zeros(BATCH, 3, IMAGE, IMAGE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # num_batches_tracked mutation removed: not part of the math
        torch.onnx.export(m, x, path, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          opset_version=17, input_names=["input"], output_names=["logits"])


def torchvision_reference(case):
    """Loss and gradients of the torchvision module itself (float64, same weights and data)."""
    m = make_module().to(E.REF_DTYPE)
    loss = E.torch_loss(m(torch.from_numpy(case.x).to(E.REF_DTYPE)), case.y)
    loss.backward()
    named = [(n, p.grad.detach().numpy().astype(np.float64)) for n, p in m.named_parameters()]
    return [("torchvision.models.resnet18", float(loss.detach()), named)]


def main():
    args = E.parse_args(__doc__)
    path = os.path.join(args.workdir, "resnet18.onnx")
    export(path)
    rng = np.random.default_rng(1818)
    x = rng.standard_normal((BATCH, 3, IMAGE, IMAGE)).astype(np.float32)
    y = rng.integers(0, CLASSES, size=(BATCH,), dtype=np.int64)
    case = E.Case("resnet18", path, x, y, ["--batch", str(BATCH)], f64=args.check.endswith("64"))
    E.run_check(args, case, lambda: torchvision_reference(case))


if __name__ == "__main__":
    main()
