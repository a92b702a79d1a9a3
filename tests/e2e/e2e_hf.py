"""Hugging Face transformers language models, exported as users export them, trained by Scorch
against the same models trained by PyTorch (tests/e2e.cmake). Run with /usr/bin/python3 (torch 1.13)
with transformers 4.36 installed (scripts/install.sh); without transformers the test exits 77, which
ctest reports as skipped with the reason. --check is required by the shared parser and ignored:
this script runs its one check.

--model gpt2 | gpt_neox | llama | llama_gqa | opt | bloom | gptj: a 2-layer model built from its config
(dim 64, 4 heads, vocab 512; random init, seed 0, dropout 0; the head not tied to the embedding:
torch.onnx.export's constant folding writes a tied head as a transposed copy, a second weight, so
an exported tied model trains as an untied one), exported at opset 17 with dynamic batch and
sequence, as `torch.onnx.export` of AutoModelForCausalLM gives it:
  --mask yes  inputs (input_ids, attention_mask): OPT computes its position ids with CumSum of the
              mask, BLOOM its ALiBi bias from it; Scorch is not given the mask and fills it with
              ones, PyTorch is given ones;
  --mask no   input_ids only.
--source data | tokens: Scorch reads the batch from `--data input_ids=ids.npy --labels labels.npy`,
or from a uint16 token file through `--tokens` (4 windows of 17 tokens).

The check: 3 steps of SGD (lr 0.05, momentum 0.9) on one batch of 4 seeded sequences of 16 tokens,
labels the next tokens. The reference is the HF module itself in float64 with torch.optim.SGD and mean
cross-entropy over [B*T, V]. Every step's loss within 1e-4 relative, and every trained weight (the
ONNX file Scorch writes; each parameter found by name, or as the transposed copy the exporter folds
a Linear's weight into, by its exported values) within 1e-4 relative + 1e-5 of its update's largest
element, except the padding row of an nn.Embedding(padding_idx) (OPT's token 1), which PyTorch never
updates and the exported Gather cannot know about (the data avoid tokens 0 and 1 anyway).
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
DIM = dict(vocab_size=VOCAB, tie_word_embeddings=False)


def config(kind):
    import transformers as T
    if kind == "gpt2":
        return T.GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                            attn_pdrop=0.0, **DIM)
    if kind == "gpt_neox":
        return T.GPTNeoXConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                               max_position_embeddings=64, hidden_dropout=0.0, attention_dropout=0.0, **DIM)
    if kind in ("llama", "llama_gqa"):
        return T.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                             num_key_value_heads=2 if kind == "llama_gqa" else 4, max_position_embeddings=64, **DIM)
    if kind == "opt":
        return T.OPTConfig(hidden_size=64, num_hidden_layers=2, ffn_dim=128, num_attention_heads=4,
                           max_position_embeddings=64, word_embed_proj_dim=64, dropout=0.0, attention_dropout=0.0, **DIM)
    if kind == "gptj":
        return T.GPTJConfig(n_embd=64, n_layer=2, n_head=4, n_positions=64, rotary_dim=16, resid_pdrop=0.0,
                            embd_pdrop=0.0, attn_pdrop=0.0, **DIM)
    return T.BloomConfig(hidden_size=64, n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0, **DIM)


def build(kind):
    torch.manual_seed(0)
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_config(config(kind)).eval()
    # torch.onnx.export merges initializers with equal values: at init every LayerNorm weight is ones
    # and every bias zeros, so the file would hold one tensor for all of them, which trains as one.
    # Distinct values keep each parameter its own initializer, as a pretrained checkpoint has them.
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=g))
    return model


class LogitsOnly(torch.nn.Module):
    def __init__(self, m, with_mask):
        super().__init__()
        self.m = m
        self.with_mask = with_mask

    def forward(self, input_ids, attention_mask=None):
        if self.with_mask:
            return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
        return self.m(input_ids=input_ids, use_cache=False).logits


def options(p):
    p.add_argument("--model", choices=["gpt2", "gpt_neox", "llama", "llama_gqa", "opt", "bloom", "gptj"], required=True)
    p.add_argument("--mask", choices=["yes", "no"], default="yes")
    p.add_argument("--source", choices=["data", "tokens"], default="data")


def export(args, wrapped, ids, path):
    names = ["input_ids", "attention_mask"] if args.mask == "yes" else ["input_ids"]
    example = (torch.from_numpy(ids), torch.ones(BATCH, SEQ, dtype=torch.long))[: len(names)]
    torch.onnx.export(wrapped, example, path, opset_version=17, input_names=names, output_names=["logits"],
                      dynamic_axes={n: {0: "batch", 1: "seq"} for n in names + ["logits"]})


def scorch_train(args, path, tokens, ids, labels):
    out, log = os.path.join(args.workdir, "trained.onnx"), os.path.join(args.workdir, "metrics.csv")
    cmd = [args.scorch, "train", path, "-o", out, "--batch", str(BATCH), "--seq", str(SEQ), "--steps", str(STEPS),
           "--optimizer", "sgd", "--lr", str(LR), "--momentum", str(MOMENTUM), "--weight-decay", "0", "--log", log]
    if args.source == "tokens":
        tok_path = os.path.join(args.workdir, "tokens.u16")
        tokens.reshape(-1).astype("<u2").tofile(tok_path)
        cmd += ["--tokens", tok_path, "--token-dtype", "uint16"]
    else:
        ids_path, y_path = os.path.join(args.workdir, "ids.npy"), os.path.join(args.workdir, "labels.npy")
        np.save(ids_path, ids)
        np.save(y_path, labels)
        cmd += ["--data", "input_ids=" + ids_path, "--labels", y_path]
    E.sh(cmd)
    return out, E.read_losses(log)


def torch_train(wrapped, ids, labels):
    torch.set_default_dtype(torch.float64)  # HF builds its causal mask in the default dtype
    ref = wrapped.double()
    start = {k: v.detach().clone() for k, v in ref.named_parameters()}
    opt = torch.optim.SGD(ref.parameters(), lr=LR, momentum=MOMENTUM)
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        logits = ref(torch.from_numpy(ids), mask) if ref.with_mask else ref(torch.from_numpy(ids))
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), torch.from_numpy(labels).reshape(-1))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return ref, start, losses


def initializer_params(path, start):
    """ONNX initializer name -> (torch parameter name, transposed). The exporter keeps a parameter's
    name where the graph reads it as is, and folds a Linear's W^T into a new initializer
    ('onnx::MatMul_N'); those are matched by their exported values."""
    m = {}
    for init in onnx.load(path).graph.initializer:
        a = numpy_helper.to_array(init)
        if init.name in start:
            m[init.name] = (init.name, False)
            continue
        for name, v in start.items():
            w = v.numpy().astype(np.float32)
            if w.ndim == 2 and w.T.shape == a.shape and np.array_equal(w.T, a):
                m[init.name] = (name, True)
                break
    return m


def check_weights(path, out, ref, start):
    trained = {i.name: numpy_helper.to_array(i) for i in onnx.load(out).graph.initializer}
    params = dict(ref.named_parameters())
    pad_rows = {n + ".weight": m.padding_idx for n, m in ref.named_modules()
                if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None}
    checked = set()
    for init_name, (name, transposed) in initializer_params(path, start).items():
        got = trained[init_name].astype(np.float64)
        got = got.T if transposed else got
        want, was = params[name].detach().numpy(), start[name].numpy()
        if name in pad_rows:  # nn.Embedding(padding_idx) gives its row no gradient; ONNX's Gather has no such rule
            keep = np.arange(got.shape[0]) != pad_rows[name]
            got, want, was = got[keep], want[keep], was[keep]
        step = np.abs(want - was).max()
        err = np.abs(got - want).max()
        if err > 1e-4 * np.abs(want).max() + 1e-5 * max(step, 1e-12) + 1e-6:
            E.fail("weight %s (%s): max |scorch - torch| %.3g, update max %.3g" % (name, init_name, err, step))
        checked.add(name)
    missing = sorted(set(params) - checked)
    if missing:
        E.fail("parameters not found among the ONNX initializers: %s" % ", ".join(missing[:5]))
    return len(checked)


def main():
    args = E.parse_args(__doc__, options)
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("SKIP: transformers is not installed for", sys.executable, "(scripts/install.sh installs it)")
        sys.exit(77)
    wrapped = LogitsOnly(build(args.model), args.mask == "yes")
    # ids from 2 up: OPT's padding token (1) would be a row PyTorch freezes and the export does not
    rng = np.random.default_rng(1234)
    tokens = rng.integers(2, VOCAB, size=(BATCH * SEQ + 1,), dtype=np.int64)
    windows = np.stack([tokens[i * SEQ: i * SEQ + SEQ + 1] for i in range(BATCH)])  # --tokens' samples
    ids, labels = windows[:, :SEQ].copy(), windows[:, 1:].copy()
    path = os.path.join(args.workdir, args.model + ".onnx")
    export(args, wrapped, ids, path)
    out, ours = scorch_train(args, path, tokens, ids, labels)
    ref, start, theirs = torch_train(wrapped, ids, labels)
    print("losses  scorch %s\n        torch  %s" % (["%.6f" % x for x in ours], ["%.6f" % x for x in theirs]))
    for s, (a, b) in enumerate(zip(ours, theirs)):
        if abs(a - b) > 1e-4 * abs(b):
            E.fail("step %d: loss %.8g, PyTorch %.8g" % (s + 1, a, b))
    if abs(theirs[-1] - theirs[0]) < 1e-3 * abs(theirs[0]):
        E.fail("the reference loss did not move over %d steps: the check would have no teeth" % STEPS)
    print("ok: %d losses and all %d trained weights match PyTorch" % (len(ours), check_weights(path, out, ref, start)))


if __name__ == "__main__":
    main()
