"""The PyTorch twin of tools/gen_gpt.c's model, the peer of train_vs_torch.py and train_vs_torch_gpu.py.

GPT2LMHeadModel / nanoGPT layout: pre-LayerNorm blocks, exact-erf GELU, explicit causal softmax
attention as our graph computes it (masked scores set to the dtype's minimum), tied LM head.
torch is passed in, so that a script can choose its threads and BLAS kernels before loading it.
"""
import math


def gpt_class(torch):
    """The GPT module class; GPT(layers, heads, dim, seq, vocab)(ids) gives the logits."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h = h
            self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x, mask):
            b, t, d = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q = q.view(b, t, self.h, d // self.h).transpose(1, 2)
            k = k.view(b, t, self.h, d // self.h).permute(0, 2, 3, 1)
            v = v.view(b, t, self.h, d // self.h).transpose(1, 2)
            att = (q @ k) * (1.0 / math.sqrt(d // self.h))
            att = att.masked_fill(~mask[:t, :t], torch.finfo(att.dtype).min).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.c_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self, layers, heads, dim, seq, vocab):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
            self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(dim, eps=1e-5)
            self.register_buffer("mask", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

        def forward(self, ids):
            t = ids.shape[1]
            x = self.wte(ids) + self.wpe(torch.arange(t, device=ids.device))
            for blk in self.blocks:
                x = blk(x, self.mask)
            return self.ln_f(x) @ self.wte.weight.t()

    return GPT
