#!/usr/bin/env python3
"""Streaming table: GPT models of growing size trained with their weights in host memory.

usage: streaming_table.py SCORCH_RUN [--sizes small,medium,...] [--memory SIZE] [--optimizer adamw]
                          [--measure N] [--threads N] [--workdir DIR]

For each size it generates the model (`scorch-run gen gpt`), then for updates on the device and on
the host runs `scorch-run plan --offload weights --json --measure N` (batch 1, seq 256): the plan's
bytes moved per parameter and step each way, its predicted step time and the resource that bounds
it, and the median measured step time of N steps on the CPU backend after a warm-up. Prints one
markdown table. Times are CPU times of this machine; the link is the CPU backend's copy thread.
"""
import argparse
import json
import os
import subprocess
import sys

SIZES = {
    "L6-D512": ["--layers", "6", "--heads", "8", "--dim", "512", "--vocab", "50257", "--seq", "256"],
    "small": ["--preset", "small", "--seq", "256"],
    "medium": ["--preset", "medium", "--seq", "256"],
    "large": ["--preset", "large", "--seq", "256"],
}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stderr.strip()))
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scorch")
    ap.add_argument("--sizes", default="L6-D512,small,medium")
    ap.add_argument("--memory", default="1GiB")
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--measure", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--workdir", default=".")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    print("| model | params | updates | h2d B/param | d2h B/param | total | predicted s | measured s | bound |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---|")
    for size in a.sizes.split(","):
        path = os.path.join(a.workdir, "gpt-%s.onnx" % size)
        if not os.path.exists(path):
            run([a.scorch, "gen", "gpt"] + SIZES[size] + ["-o", path])
        for place in ["device", "host"]:
            cmd = [a.scorch, "plan", path, "--batch", "1", "--seq", "256", "--memory", a.memory, "--offload", "weights",
                   "--optimizer", a.optimizer, "--optimizer-on", place, "--json", "--measure", str(a.measure)]
            if a.threads:
                cmd += ["--threads", str(a.threads)]
            js = json.loads(run(cmd))
            n = max(1, js["params"])
            h2d, d2h = js["bytes_h2d"] / n, js["bytes_d2h"] / n
            print("| %s | %.1fM | %s | %.2f | %.2f | %.2f | %.3f | %.3f | %s |" %
                  (size, n / 1e6, js["update_on"], h2d, d2h, h2d + d2h, js["predicted_time"], js["measured_time"],
                   js["bound"]), flush=True)


if __name__ == "__main__":
    main()
