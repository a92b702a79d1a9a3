#!/usr/bin/env python3
"""Exports the PyTorch models of the oracle tests to ONNX. Run with Debian's /usr/bin/python3
(torch 1.13, torchvision 0.14); the comparison itself runs under the python3 that has onnxruntime.

    /usr/bin/python3 tests/oracle/export_torch.py KIND OUT.onnx

KIND:
  resnet18_eval   torchvision resnet18 (random init, seed 0) in eval mode, dynamic batch, opset 17
  resnet18_train  the same in training export mode (BatchNormalization with training_mode=1, batch
                  statistics), no constant folding, fixed batch 2
  gpt2            the GPT-2-style module below: token + position embeddings, 2 pre-LN blocks of causal
                  self-attention and GELU MLP, final LayerNorm, head tied to the token embedding;
                  dynamic batch and sequence axes, opset 17
  gpt2_cumsum     the same with an attention_mask input and OPT's position ids from it:
                  cumsum(mask) * mask + 1 (CumSum); the example mask pads one row
  einsum          Einsum equations as maxvit and attention code write them: batched q k^T, three
                  operands with parameters, letters summed out of one operand, an outer product,
                  ellipses (one broadcast over a dim of size 1) and diagonals (batched, a trace,
                  a letter three times, a parameter's)
  resize_cubic    bicubic F.interpolate up and down, align_corners on and off, by scale and size
  swin_t          torchvision swin_t (random init) at 64x64, batch 1: window padding sizes from Mod,
                  the shifted-window mask built with ScatterND

With --reference DIR the model is also run in PyTorch on seeded inputs, written as DIR/<input>.npy
and DIR/<output>.npy, so a test can compare with PyTorch where onnxruntime has no kernel (batch
norm in training mode).
"""
import argparse
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads, max_seq):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(max_seq, max_seq)).view(1, 1, max_seq, max_seq))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        hs = C // self.heads
        q = q.view(B, T, self.heads, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.heads, hs).transpose(1, 2)
        v = v.view(B, T, self.heads, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, dim, heads, max_seq):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, max_seq)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class EinsumMix(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5, 6))
        self.v = nn.Parameter(torch.randn(6))

    def forward(self, x):  # x [2, 3, 4, 5]
        s = torch.einsum("b h i d, b h j d -> b h i j", x, x)
        t = torch.einsum("bhid,de,e->bhi", x, self.w, self.v)
        u = torch.einsum("bhij->bj", s)
        w = torch.einsum("bhi,bj->bij", t, u)
        e = torch.einsum("...id,...jd->...ij", x, x[:, :1])  # an ellipsis, broadcast over heads
        f = torch.einsum("b...d,d->b...", x, self.v[:5])
        g = torch.einsum("bhii->bhi", s)  # diagonals: batched, a trace, a letter three times
        h = torch.einsum("bhjj", s)
        k = torch.einsum("biii->bi", s[:, :, :3, :3])
        m = torch.einsum("ii,bhi->bh", self.w[:, :5], x[:, :, 0])
        return torch.cat([s.flatten(1), t.flatten(1), u, w.flatten(1), e.flatten(1), f.flatten(1), g.flatten(1),
                          h.flatten(1), k, m.flatten(1)], 1)


class BicubicMix(nn.Module):
    """F.interpolate(mode="bicubic") as exports write it: Resize cubic (a = -0.75), up and down,
    align_corners on and off, by scale and by size, around a convolution."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):  # x [N, 3, 7, 9]
        a = F.interpolate(x, scale_factor=2.0, mode="bicubic", align_corners=False)
        b = F.interpolate(self.conv(a), size=(5, 11), mode="bicubic", align_corners=True)
        c = F.interpolate(b, size=(3, 4), mode="bicubic", align_corners=False)
        return torch.cat([b.flatten(1), c.flatten(1)], 1)


class TinyGPT(nn.Module):
    def __init__(self, vocab=256, dim=64, heads=4, layers=2, max_seq=64, cumsum_positions=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(max_seq + 2, dim)
        self.blocks = nn.ModuleList([Block(dim, heads, max_seq) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied, as in GPT-2
        self.cumsum_positions = cumsum_positions

    def forward(self, idx, mask=None):
        T = idx.shape[1]
        if self.cumsum_positions:  # transformers' OPT: (mask.cumsum(1) * mask) - 1, offset by 2
            pos = torch.cumsum(mask, dim=1) * mask + 1
        else:
            pos = torch.arange(0, T, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def build(kind):
    torch.manual_seed(0)
    if kind.startswith("resnet18"):
        import torchvision

        model = torchvision.models.resnet18(weights=None)
        # Random init leaves running stats at 0/1; give them values so eval mode tests real folding.
        g = torch.Generator().manual_seed(1)
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(0.1 * torch.randn(m.num_features, generator=g))
                m.running_var.copy_(0.5 + torch.rand(m.num_features, generator=g))
        x = torch.randn(2, 3, 64, 64, generator=g)
        return model, (x,), ["input"], ["logits"]
    if kind in ("gpt2", "gpt2_cumsum"):
        model = TinyGPT(cumsum_positions=kind == "gpt2_cumsum")
        idx = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))
        if kind == "gpt2":
            return model, (idx,), ["idx"], ["logits"]
        mask = torch.ones(2, 32, dtype=torch.long)
        mask[1, 25:] = 0  # right padding
        return model, (idx, mask), ["idx", "attention_mask"], ["logits"]
    if kind == "einsum":
        return EinsumMix(), (torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(1)),), ["x"], ["y"]
    if kind == "resize_cubic":
        return BicubicMix(), (torch.randn(2, 3, 7, 9, generator=torch.Generator().manual_seed(1)),), ["x"], ["y"]
    if kind == "swin_t":
        import torchvision

        model = torchvision.models.swin_t(weights=None)
        x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
        return model, (x,), ["input"], ["logits"]
    raise SystemExit(f"unknown kind {kind}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["resnet18_eval", "resnet18_train", "gpt2", "gpt2_cumsum", "swin_t", "einsum",
                                     "resize_cubic"])
    ap.add_argument("out")
    ap.add_argument("--reference", help="folder for PyTorch's inputs and outputs (.npy)")
    args = ap.parse_args()

    model, example, in_names, out_names = build(args.kind)
    train = args.kind == "resnet18_train"
    model.train(train)
    kw = dict(input_names=in_names, output_names=out_names, opset_version=OPSET)
    if train:
        kw.update(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    elif args.kind in ("swin_t", "einsum", "resize_cubic"):
        pass  # fixed shapes: the window padding and mask are constants of the 64x64 input
    elif args.kind.startswith("gpt2"):
        axes = {n: {0: "batch", 1: "seq"} for n in in_names + out_names}
        kw.update(dynamic_axes=axes)
    else:
        kw.update(dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    # Export first: training export runs the model once, which would update BN running stats.
    with torch.no_grad():
        ref = model(*example) if args.reference else None
    torch.onnx.export(model, example, args.out, **kw)
    if args.reference:
        os.makedirs(args.reference, exist_ok=True)
        for name, t in zip(in_names, example):
            np.save(os.path.join(args.reference, name + ".npy"), t.numpy())
        np.save(os.path.join(args.reference, out_names[0] + ".npy"), ref.numpy())


if __name__ == "__main__":
    main()
