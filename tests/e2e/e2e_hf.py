"""Hugging Face transformers language models, exported as users export them, trained by Scorch
against the same models trained by PyTorch (tests/e2e.cmake). Run with /usr/bin/python3 (torch 1.13)
with transformers 4.36 installed (scripts/install.sh); without transformers the test exits 77, which
ctest reports as skipped with the reason. --check is required by the shared parser and ignored:
this script runs its one check.

--model opt | bloom: a 2-layer model built from its config (random init, seed 0, dropout 0, head not
tied to the embedding: torch.onnx.export's constant folding writes a tied head as a transposed copy,
a second weight, so the exported model trains as an untied one), exported
at opset 17 with inputs (input_ids, attention_mask) and dynamic batch and sequence, as
`torch.onnx.export` of AutoModelForCausalLM gives it. OPT computes its position ids with CumSum of
the mask; BLOOM its ALiBi bias from the mask.

The check: 3 steps of SGD (lr 0.05, momentum 0.9) on one batch of 4 seeded sequences of 16 tokens,
labels the next tokens, the attention mask left out (Scorch fills it with ones; PyTorch is given
ones). The reference is the HF module itself in float64 with torch.optim.SGD and mean cross-entropy
over [B*T, V]. Every step's loss within 1e-4 relative, and every trained weight (the ONNX file Scorch
writes, by initializer name) within 1e-4 relative + 1e-5 of its update's largest element, except the
padding row of an nn.Embedding(padding_idx) (OPT's token 1), which PyTorch never updates and the
exported Gather cannot know about.
"""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

import e2e_common as E

VOCAB, SEQ, BATCH, STEPS, LR, MOMENTUM = 512, 16, 4, 3, 0.05, 0.9


def build(kind):
    torch.manual_seed(0)
    if kind == "opt":
        from transformers import OPTConfig as C
        cfg = C(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, ffn_dim=128, num_attention_heads=4,
                max_position_embeddings=64, word_embed_proj_dim=64, dropout=0.0, attention_dropout=0.0,
                tie_word_embeddings=False)
    else:
        from transformers import BloomConfig as C
        cfg = C(vocab_size=VOCAB, hidden_size=64, n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0,
                tie_word_embeddings=False)
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_config(cfg).eval()
    # torch.onnx.export merges initializers with equal values: at init every LayerNorm weight is ones
    # and every bias zeros, so the file would hold one tensor for all of them, which trains as one.
    # Distinct values keep each parameter its own initializer, as a pretrained checkpoint has them.
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g))
    return model


class LogitsOnly(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


def main():
    args = E.parse_args(__doc__, lambda p: p.add_argument("--model", choices=["opt", "bloom"], required=True))
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("SKIP: transformers is not installed for", sys.executable, "(scripts/install.sh installs it)")
        sys.exit(77)
    model = build(args.model)
    wrapped = LogitsOnly(model)
    path = os.path.join(args.workdir, args.model + ".onnx")
    rng = np.random.default_rng(1234)
    # ids from 2 up: OPT's padding token (1) would be a row PyTorch freezes and the export does not
    tokens = rng.integers(2, VOCAB, size=(BATCH, SEQ + 1), dtype=np.int64)
    ids, labels = tokens[:, :SEQ].copy(), tokens[:, 1:].copy()
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    torch.onnx.export(wrapped, (torch.from_numpy(ids), mask), path, opset_version=17,
                      input_names=["input_ids", "attention_mask"], output_names=["logits"],
                      dynamic_axes={n: {0: "batch", 1: "seq"} for n in ("input_ids", "attention_mask", "logits")})
    ids_path, y_path = os.path.join(args.workdir, "ids.npy"), os.path.join(args.workdir, "labels.npy")
    np.save(ids_path, ids)
    np.save(y_path, labels)
    out, log = os.path.join(args.workdir, "trained.onnx"), os.path.join(args.workdir, "metrics.csv")
    E.sh([args.scorch, "train", path, "-o", out, "--data", "input_ids=" + ids_path, "--labels", y_path,
          "--batch", str(BATCH), "--seq", str(SEQ), "--steps", str(STEPS), "--optimizer", "sgd", "--lr", str(LR),
          "--momentum", str(MOMENTUM), "--weight-decay", "0", "--log", log])
    ours = E.read_losses(log)

    # Reference: the HF module in float64, fed the same batch and a mask of ones.
    torch.set_default_dtype(torch.float64)  # HF builds its causal mask in the default dtype
    ref_model = wrapped.double()
    start = {k: v.detach().clone() for k, v in ref_model.named_parameters()}
    opt = torch.optim.SGD(ref_model.parameters(), lr=LR, momentum=MOMENTUM)
    ref = []
    for _ in range(STEPS):
        opt.zero_grad()
        logits = ref_model(torch.from_numpy(ids), mask)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), torch.from_numpy(labels).reshape(-1))
        loss.backward()
        opt.step()
        ref.append(float(loss))
    print("losses  scorch %s\n        torch  %s" % (["%.6f" % x for x in ours], ["%.6f" % x for x in ref]))
    for s, (a, b) in enumerate(zip(ours, ref)):
        if abs(a - b) > 1e-4 * abs(b):
            E.fail("step %d: loss %.8g, PyTorch %.8g" % (s + 1, a, b))
    if abs(ref[-1] - ref[0]) < 1e-3 * abs(ref[0]):
        E.fail("the reference loss did not move over %d steps: the check would have no teeth" % STEPS)

    trained = {i.name: numpy_helper.to_array(i) for i in onnx.load(out).graph.initializer}
    params = dict(ref_model.named_parameters())
    pad_rows = {n + ".weight": m.padding_idx for n, m in ref_model.named_modules()
                if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None}
    checked = 0
    for name, p in params.items():
        if name not in trained:
            continue
        got, want, was = trained[name].astype(np.float64), p.detach().numpy(), start[name].numpy()
        if name in pad_rows:  # nn.Embedding(padding_idx) gives its row no gradient; ONNX's Gather has no such rule
            keep = np.arange(got.shape[0]) != pad_rows[name]
            got, want, was = got[keep], want[keep], was[keep]
        step = np.abs(want - was).max()
        err = np.abs(got - want).max()
        if err > 1e-4 * np.abs(want).max() + 1e-5 * max(step, 1e-12) + 1e-6:
            E.fail("weight %s: max |scorch - torch| %.3g, update max %.3g" % (name, err, step))
        checked += 1
    if checked < len(params) // 2:
        E.fail("only %d of %d parameters found among the ONNX initializers" % (checked, len(params)))
    print("ok: %d losses and %d trained weights match PyTorch" % (len(ours), checked))


if __name__ == "__main__":
    main()
