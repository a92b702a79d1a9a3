#!/usr/bin/env python3
"""GPU training-step time of `scorch-run train --device cuda` against PyTorch eager on the same GPU.

Same model, batch, precision and TF32 setting on both sides, SGD lr 0.01 momentum 0.9, one
optimizer step per batch, synthetic seeded data, softmax cross-entropy (next-token for the GPT,
per-pixel for DRANet). Models (the GPU speed targets):
  resnet50   `gen resnet --depth 50`, batch 64, 3x224x224   vs torchvision.models.resnet50()
  gpt2       `gen gpt --preset small` (12 layers, 12 heads, 768, vocab 50257), batch 8, seq 1024
             vs the same architecture written below (pre-LayerNorm blocks, exact-erf GELU, explicit
             causal softmax attention as our graph computes it, tied LM head)
  dranet50   `gen dranet --depth 50 --image 512`, batch 4, 19 classes, vs the generated ONNX file
             itself run by tests/e2e/onnx_torch.py (no hand-written DRANet exists; same graph, ops
             dispatched one by one from Python)
  stream     weight streaming: `gen gpt --preset medium`, batch 1, seq 256, whose weights plus SGD
             momentum are twice --memory (the cap = the weights' bytes); ours with that cap
             (--strategy auto --offload auto) against ours without a cap. Targets (host-memory
             training issue): >= 0.9x the uncapped throughput, and the link used at >= 80% of the
             pinned cudaMemcpy rate that PyTorch measures in the same call (256 MiB pinned tensors,
             each direction; the busier direction's bytes per step over the step time). PyTorch
             is timed uncapped for reference.
Precision: --precision fp32,bf16 (default fp32). bf16 runs ours with --precision bf16 and PyTorch's
forward and loss under torch.autocast("cuda", dtype=torch.bfloat16), fp32 weights and SGD on both
sides (mixed-precision issue: ours <= 0.9x autocast's step time). TF32 does not apply to bf16 GEMMs,
so bf16 is run once, with --tf32's last setting.
Prediction: every row also carries the planner's predicted step time against the measured median
from train's "plan ..." line (planning issue: within 15% on a lent GPU, profiles measured there).
TF32: --tf32 off,on (default both): off sets torch.backends.cuda.matmul.allow_tf32 and
torch.backends.cudnn.allow_tf32 to False and runs ours without --tf32; on sets both True and passes
--tf32. torch.backends.cudnn.benchmark is True (both sides choose convolution algorithms).

Timing: ours from `train --log FILE.csv` (elapsed_s per step; every step reads its loss back, so
steps are synchronous); PyTorch with torch.cuda.synchronize() after each step. The first --warmup
steps are dropped, the median of the rest is reported; the ratio is ours / PyTorch (lower is
better). Peak memory: torch.cuda.max_memory_allocated; ours from the "plan ..." line of train.
Bytes moved: the "moved per step: ... measured h2d H d2h D (...; N staged)" line of train, N the
bytes copied through the backend's staging buffers rather than straight from pinned memory; the
JSON also keeps train's "prefetch: N of M steps" (batches drawn during the step before).

Without a CUDA GPU (or without torch) it prints "SKIP: ..." and exits 0. --smoke-cpu runs every
model at a tiny size on the CPU on both sides (no GPU needed; checks this script, measures nothing
of interest). --budget-s bounds the whole run: models not started in time are listed as skipped.
Writes OUT_DIR/<date>-gpu-train-<device>.md and .json. On the device: scripts/gpu_session.sh bench.
"""
import argparse
import csv
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import check_selection, torch_step_times, write_json
from torch_gpt import gpt_class

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def gpt_case(batch, seq, layers, heads, dim, vocab=50257, gen=None):
    """gen args (gen: the model's own, default its layer sizes with --seq seq and --vocab vocab), train
    args and torch side of a GPT trained at batch x seq."""
    cfg = dict(layers=layers, heads=heads, dim=dim, seq=seq, vocab=vocab)
    gen = gen or [a for k, v in cfg.items() for a in ("--" + k, str(v))]
    return {"gen": ["gpt", *gen], "train": ["--batch", str(batch), "--seq", str(seq)], "torch": ("gpt", batch, cfg)}


GPT_SMOKE = dict(layers=2, heads=2, dim=64, vocab=128)

# key: title, gen args, train args, torch side, and the tiny --smoke-cpu variant
MODELS = {
    "resnet50": {
        "title": "ResNet-50, batch 64, 3x224x224",
        "gen": ["resnet", "--depth", "50"], "train": ["--batch", "64"], "torch": ("torchvision", 64, 224),
        "smoke": {"gen": ["resnet", "--depth", "50", "--image", "32"], "train": ["--batch", "2"],
                  "torch": ("torchvision", 2, 32)},
    },
    "gpt2": {
        "title": "GPT-2 small (12/12/768, vocab 50257), batch 8, seq 1024",
        **gpt_case(8, 1024, 12, 12, 768, gen=["--preset", "small"]),
        "smoke": gpt_case(2, 32, **GPT_SMOKE),
    },
    "dranet50": {
        "title": "DRANet-50 (19 classes), batch 4, 3x512x512",
        "gen": ["dranet", "--depth", "50", "--image", "512"], "train": ["--batch", "4"], "torch": ("onnx", 4, 512),
        "smoke": {"gen": ["dranet", "--depth", "50", "--image", "32", "--width", "8", "--classes", "5"],
                  "train": ["--batch", "1"], "torch": ("onnx", 1, 32)},
    },
    "stream": {
        "title": "GPT-2 medium (24/16/1024), batch 1, seq 256: --memory = weights (weights + momentum = 2x the cap)",
        **gpt_case(1, 256, 24, 16, 1024, gen=["--preset", "medium"]),
        "smoke": gpt_case(1, 32, **GPT_SMOKE),
    },
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- PyTorch side

def torch_setup(torch, spec, onnx_path, device):
    """(model, input, loss_fn, optimizer) on `device`, seeded."""
    F = torch.nn.functional
    kind, batch, size = spec
    g = torch.Generator().manual_seed(0)
    if kind == "torchvision":
        import torchvision
        model = torchvision.models.resnet50(num_classes=1000)
        x = torch.randn(batch, 3, size, size, generator=g)
        y = torch.randint(0, 1000, (batch,), generator=g)
        loss_fn = lambda out: F.cross_entropy(out, y_dev)  # noqa: E731
    elif kind == "gpt":
        model = gpt_class(torch)(**size)
        x = torch.randint(0, size["vocab"], (batch, size["seq"]), generator=g)
        y = torch.randint(0, size["vocab"], (batch, size["seq"]), generator=g)
        loss_fn = lambda out: F.cross_entropy(out.reshape(-1, out.shape[-1]), y_dev.reshape(-1))  # noqa: E731
    else:
        import onnx
        sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
        from onnx_torch import OnnxTorch
        proto = onnx.load(onnx_path)
        net = OnnxTorch(proto, dtype=torch.float32, bn_training=True)
        inits = {i.name for i in proto.graph.initializer}
        feed = [i.name for i in proto.graph.input if i.name not in inits][0]
        out_name = proto.graph.output[0].name
        classes = proto.graph.output[0].type.tensor_type.shape.dim[1].dim_value

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.net = net

            def forward(self, t):
                return self.net({feed: t})[out_name]

        model = Wrap()
        x = torch.randn(batch, 3, size, size, generator=g)
        y = torch.randint(0, classes, (batch, size, size), generator=g)
        loss_fn = lambda out: F.cross_entropy(out, y_dev)  # noqa: E731
    model = model.to(device).train()
    x_dev, y_dev = x.to(device), y.to(device)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01, momentum=0.9)
    return model, x_dev, loss_fn, opt


def torch_step_ms(torch, state, steps, warmup, device, precision):
    cuda = device == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    autocast = None
    if precision == "bf16":
        autocast = lambda: torch.autocast(device, dtype=torch.bfloat16)  # noqa: E731
    times, loss = torch_step_times(state, steps, torch.cuda.synchronize if cuda else None, autocast)
    peak = torch.cuda.max_memory_allocated() if cuda else None
    return statistics.median(times[warmup:]), peak, float(loss.detach().cpu())


def pinned_copy_rates(torch, device, mib=256, reps=5):
    """(h2d, d2h) bytes/s of cudaMemcpy between pinned host memory and the GPU, median of `reps`
    copies of `mib` MiB each way, timed with CUDA events: the link's practical bound that streaming
    is held to. None on the CPU."""
    if device != "cuda":
        return None
    n = mib << 20
    host = torch.empty(n, dtype=torch.uint8).pin_memory()
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    rates = []
    for dst, src in ((dev, host), (host, dev)):
        dst.copy_(src, non_blocking=True)  # first touch, mappings
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            dst.copy_(src, non_blocking=True)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1e-3)
        rates.append(n / statistics.median(times))
    del host, dev
    torch.cuda.empty_cache()
    return tuple(rates)


# ---------------------------------------------------------------- Scorch side

def param_bytes(path):
    """Bytes of the float initializers (the weights), without loading external data."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    size = {onnx.TensorProto.FLOAT: 4, onnx.TensorProto.DOUBLE: 8, onnx.TensorProto.FLOAT16: 2}
    return sum(math.prod(i.dims) * size[i.data_type] for i in m.graph.initializer if i.data_type in size)


def scorch_step_ms(args, model, train_args, extra, tmp, timeout):
    logf = os.path.join(tmp, "log.csv")
    if os.path.exists(logf):
        os.remove(logf)
    cmd = [args.scorch_run, "train", model, *train_args, *extra, "--steps", str(args.steps), "--optimizer", "sgd",
           "--lr", "0.01", "--momentum", "0.9", "--log", logf, "--print-every", str(args.steps),
           "-o", os.path.join(tmp, "trained.onnx")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {(r.stderr or r.stdout).strip()[-800:]}")
    with open(logf) as f:
        rows = list(csv.DictReader(f))
    elapsed = [float(row["elapsed_s"]) for row in rows]
    if len(elapsed) < args.warmup + 2:
        raise RuntimeError(f"{logf} has {len(elapsed)} steps, need more than {args.warmup + 1}")
    per_step = [(b - a) * 1000.0 for a, b in zip(elapsed, elapsed[1:])]  # step i+1's own time
    text = r.stdout + r.stderr
    plan = re.search(r"peak planned (\d+) measured (\d+) bytes", text)
    times = re.search(r"step time predicted ([0-9.e+-]+) s measured ([0-9.e+-]+) s", text)
    moved = re.search(r"measured h2d (\d+) d2h (\d+)(?: \(feeds and outputs included; (\d+) staged\))?", text)
    hits = re.search(r"prefetch: (\d+) of (\d+) steps", text)
    return {"ms": statistics.median(per_step[args.warmup:]), "command": " ".join(cmd),
            "peak_bytes": int(plan.group(2)) if plan else None, "last_loss": float(rows[-1]["loss"]),
            "predicted_s": float(times.group(1)) if times else None,
            "exec_measured_s": float(times.group(2)) if times else None,
            "h2d_bytes": int(moved.group(1)) if moved else None, "d2h_bytes": int(moved.group(2)) if moved else None,
            "staged_bytes": int(moved.group(3)) if moved and moved.group(3) else None,
            "prefetch_hits": f"{hits.group(1)}/{hits.group(2)}" if hits else None,
            "plan_line": next((ln for ln in text.splitlines() if ln.startswith("plan ")), "")}


def prediction_fields(ours):
    """The planner's predicted step time against train's measured median of the same steps."""
    p, m = ours.get("predicted_s"), ours.get("exec_measured_s")
    if not p or not m:
        return {}
    return {"predicted_ms": round(p * 1e3, 2), "predicted_vs_measured": round(p / m, 3),
            "prediction_within_15pct": abs(p / m - 1) <= 0.15}


def link_fields(capped, rates):
    """Link use of a streaming run: each direction's bytes per step over the step time, against the
    pinned copy rate measured in the same call. Streaming is transfer-bound when the busier
    direction is close to its pinned rate; far under it, the schedule leaves the link idle."""
    if capped.get("h2d_bytes") is None:
        return {}
    moved = {"stream_h2d_bytes": capped["h2d_bytes"], "stream_d2h_bytes": capped["d2h_bytes"],
             "stream_staged_bytes": capped["staged_bytes"]}
    if not rates:
        return moved
    sec = capped["ms"] * 1e-3
    h2d, d2h = capped["h2d_bytes"] / sec, capped["d2h_bytes"] / sec
    use = max(h2d / rates[0], d2h / rates[1])
    return {**moved, "pinned_h2d_GBps": round(rates[0] / 1e9, 2), "pinned_d2h_GBps": round(rates[1] / 1e9, 2),
            "stream_h2d_GBps": round(h2d / 1e9, 2), "stream_d2h_GBps": round(d2h / 1e9, 2),
            "link_use": round(use, 3), "link_target_met": use >= 0.8}


# ---------------------------------------------------------------- driver

def bench_model(args, torch, key, tf32, precision, tmp, deadline, rates):
    m = MODELS[key]
    spec = m["smoke"] if args.smoke_cpu else m
    device = "cpu" if args.smoke_cpu else "cuda"
    path = os.path.join(tmp, key + ".onnx")
    if not os.path.exists(path):
        subprocess.run([args.scorch_run, "gen", *spec["gen"], "-o", path], check=True, capture_output=True,
                       timeout=max(30, deadline - time.time()))
    ours_extra = ["--device", device, "--precision", precision] + (["--tf32"] if tf32 else [])
    row = {"model": key, "title": m["title"] if not args.smoke_cpu else f"{key} (smoke size)", "tf32": tf32,
           "precision": precision}
    left = lambda: max(30, deadline - time.time())  # noqa: E731
    if key == "stream":
        cap = param_bytes(path)
        row["memory_cap_bytes"] = cap
        free = ours_extra + ["--memory", str(cap), "--strategy", "auto", "--offload", "auto"]
        capped = scorch_step_ms(args, path, spec["train"], free, tmp, left())
        plain = scorch_step_ms(args, path, spec["train"], ours_extra, tmp, left())
        row.update(scorch_ms=round(capped["ms"], 2), scorch_uncapped_ms=round(plain["ms"], 2),
                   capped_throughput_vs_uncapped=round(plain["ms"] / capped["ms"], 3),
                   target_met=plain["ms"] / capped["ms"] >= 0.9, scorch_peak_bytes=capped["peak_bytes"],
                   plan=capped["plan_line"], scorch_command=capped["command"], **link_fields(capped, rates),
                   **{"capped_" + k: v for k, v in prediction_fields(capped).items()})
        ours = plain
    else:
        ours = scorch_step_ms(args, path, spec["train"], ours_extra, tmp, left())
        row.update(scorch_ms=round(ours["ms"], 2), scorch_peak_bytes=ours["peak_bytes"], scorch_command=ours["command"])
    row.update(prediction_fields(ours))
    row.update(scorch_staged_bytes=ours["staged_bytes"], scorch_prefetch_hits=ours["prefetch_hits"])
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    state = torch_setup(torch, spec["torch"], path, device)
    t_ms, t_peak, t_loss = torch_step_ms(torch, state, args.steps, args.warmup, device, precision)
    del state
    if device == "cuda":
        torch.cuda.empty_cache()
    row.update(torch_ms=round(t_ms, 2), torch_peak_bytes=t_peak, ratio=round(ours["ms"] / t_ms, 3),
               scorch_last_loss=round(ours["last_loss"], 4), torch_last_loss=round(t_loss, 4))
    return row


def device_name(torch, smoke):
    if smoke:
        return "cpu-smoke"
    return torch.cuda.get_device_name(0)


def write_results(args, torch, rows, meta):
    date = datetime.date.today().isoformat()
    slug = re.sub(r"[^a-z0-9]+", "-", meta["device"].lower()).strip("-")
    os.makedirs(args.out_dir, exist_ok=True)
    stem = os.path.join(args.out_dir, f"{date}-gpu-train-{slug}")
    write_json(stem, meta, rows)
    lines = [f"# GPU training step against PyTorch, {date}", "",
             f"Device: {meta['device']}; torch {meta['torch']} (CUDA {meta['torch_cuda']}, cuDNN {meta['cudnn']}). "
             f"SGD lr 0.01 momentum 0.9, fp32 weights (bf16: ours --precision bf16, PyTorch torch.autocast bf16); "
             f"median step time of {args.steps} steps after {args.warmup} warm-up "
             f"steps, both engines in the same call. Ratio = Scorch / PyTorch (lower is better for Scorch). "
             f"Predicted = the planner's step time (cost profiles of this GPU) over train's measured median.", "",
             f"Command: `{meta['command']}`", "",
             "| model | precision | TF32 | Scorch (ms/step) | PyTorch (ms/step) | Scorch / PyTorch | "
             "peak MiB Scorch / PyTorch | predicted / measured |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    mib = lambda b: f"{b / 1048576:.0f}" if b else "?"  # noqa: E731
    for r in rows:
        head = f"| {r['title']} | {r['precision']} | {'on' if r['tf32'] else 'off'} |"
        if "error" in r:
            lines.append(f"{head} {r['error']} | | | | |")
            continue
        pred = f"{r['predicted_vs_measured']:.2f}" if "predicted_vs_measured" in r else "?"
        lines.append(f"{head} {r['scorch_ms']:.1f} | {r['torch_ms']:.1f} | {r['ratio']:.2f} | "
                     f"{mib(r.get('scorch_peak_bytes'))} / {mib(r.get('torch_peak_bytes'))} | {pred} |")
    streams = [r for r in rows if r["model"] == "stream" and "error" not in r]
    for r in streams:
        link = (f" Link: h2d {r['stream_h2d_GBps']:.1f} GB/s (pinned {r['pinned_h2d_GBps']:.1f}), d2h "
                f"{r['stream_d2h_GBps']:.1f} GB/s (pinned {r['pinned_d2h_GBps']:.1f}): {100 * r['link_use']:.0f}% of the "
                f"pinned rate (target >= 80%: {'met' if r['link_target_met'] else 'NOT met'})."
                if "link_use" in r else " Link: not measured (no pinned rate or no bytes line).")
        if r.get("stream_staged_bytes") is not None:
            link += (f" Of the {r['stream_h2d_bytes'] + r['stream_d2h_bytes']} bytes a step, {r['stream_staged_bytes']} "
                     f"went through staging buffers (a memcpy on the step's thread).")
        lines += ["", f"Streaming ({r['precision']}, TF32 {'on' if r['tf32'] else 'off'}): capped at "
                  f"{r['memory_cap_bytes'] / 1048576:.1f} MiB {r['scorch_ms']:.1f} ms/step vs uncapped "
                  f"{r['scorch_uncapped_ms']:.1f} ms/step: {r['capped_throughput_vs_uncapped']:.2f}x the throughput "
                  f"(target >= 0.9: {'met' if r['target_met'] else 'NOT met'}).{link} {r['plan']}"]
    lines += ["", "```json", json.dumps({"meta": meta, "results": rows}, indent=2), "```", ""]
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines))
    log(f"wrote {stem}.md and {stem}.json")
    print("\n".join(lines[:8 + len(rows) + 2 * len(streams)]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scorch-run", default=os.path.join(ROOT, "build", "scorch-run"))
    ap.add_argument("--models", default="resnet50,gpt2,dranet50,stream")
    ap.add_argument("--tf32", default="off,on", help="off, on or off,on")
    ap.add_argument("--precision", default="fp32", help="fp32, bf16 or fp32,bf16 (bf16 runs once, at --tf32's last)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=480, help="start no model after this many seconds")
    ap.add_argument("--smoke-cpu", action="store_true", help="tiny models on the CPU, both sides (no GPU needed)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    args = ap.parse_args()
    t_start = time.time()
    keys = [k for k in args.models.split(",") if k]
    tf32s = [{"off": False, "on": True}[v] for v in args.tf32.split(",") if v]
    precisions = [p for p in args.precision.split(",") if p]
    if not tf32s or not precisions or any(p not in ("fp32", "bf16") for p in precisions):
        ap.error(f"--precision {args.precision!r} --tf32 {args.tf32!r}: want fp32 and/or bf16, off and/or on")
    modes = [(p, t) for p in precisions for t in (tf32s if p == "fp32" else tf32s[-1:])]
    try:
        import torch
    except ImportError as e:
        print(f"SKIP: PyTorch is not importable here ({e}); nothing measured")
        return 0
    if not args.smoke_cpu and not torch.cuda.is_available():
        print(f"SKIP: no CUDA GPU visible to PyTorch {torch.__version__} (torch.cuda.is_available() is False); "
              f"nothing measured (--smoke-cpu checks this script on the CPU)")
        return 0
    check_selection("train_vs_torch_gpu", keys, MODELS, args.scorch_run)
    if not args.smoke_cpu:
        torch.backends.cudnn.benchmark = True
    deadline = t_start + args.budget_s
    rows = []
    device = "cpu" if args.smoke_cpu else "cuda"
    rates = pinned_copy_rates(torch, device) if "stream" in keys else None
    with tempfile.TemporaryDirectory(prefix="scorch-gpu-bench-") as tmp:
        for key in keys:
            for precision, tf32 in modes:
                base = {"model": key, "title": MODELS[key]["title"], "tf32": tf32, "precision": precision}
                what = f"{key} {precision} tf32={'on' if tf32 else 'off'}"
                if time.time() > deadline:
                    rows.append({**base, "error": f"skipped: the {args.budget_s:.0f} s budget was spent"})
                    continue
                t0 = time.time()
                try:
                    rows.append(bench_model(args, torch, key, tf32, precision, tmp, deadline, rates))
                    r = rows[-1]
                    log(f"{what}: scorch {r['scorch_ms']:.1f} ms, torch {r['torch_ms']:.1f} ms, ratio {r['ratio']:.2f} "
                        f"({time.time() - t0:.0f} s)")
                except (RuntimeError, subprocess.SubprocessError, OSError) as e:
                    rows.append({**base, "error": f"failed: {e}"[:1000]})
                    log(f"{what}: {rows[-1]['error']}")
            for f in os.listdir(tmp):  # the next model's files only
                if f.startswith(key):
                    os.remove(os.path.join(tmp, f))
    meta = {"date": datetime.date.today().isoformat(), "device": device_name(torch, args.smoke_cpu),
            "torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
            "command": " ".join([sys.executable] + sys.argv), "steps": args.steps, "warmup": args.warmup,
            "seconds": round(time.time() - t_start, 1), "loadavg": [round(x, 2) for x in os.getloadavg()],
            "pinned_h2d_GBps": round(rates[0] / 1e9, 2) if rates else None,
            "pinned_d2h_GBps": round(rates[1] / 1e9, 2) if rates else None}
    write_results(args, torch, rows, meta)
    return 1 if any("error" in r and not r["error"].startswith("skipped") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
