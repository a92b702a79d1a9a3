"""What the benchmark scripts share: the machine's name and the metadata and JSON every results file
carries (bench/results/<date>-*.json beside the table)."""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_bench_parser(doc):
    """The argument parser of a CPU benchmark, with the options every one takes: the binary, the
    threads both sides use, and the timed repetitions per round."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scorch-run", default=os.path.join(ROOT, "build", "scorch-run"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3)
    return ap


def machine_name():
    """lscpu's model name, else what platform knows."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        if m:
            return m.group(1).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_meta(date, threads, load_start, **extra):
    """The fields every CPU results file records, then the script's own."""
    meta = {"date": date, "machine": machine_name(), "cores": os.cpu_count(), "threads": threads,
            "command": " ".join([sys.executable] + sys.argv), "loadavg_start": load_start,
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", ""),
            "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT", "")}
    meta.update(extra)
    return meta


def write_json(stem, meta, rows):
    with open(stem + ".json", "w") as f:
        json.dump({"meta": meta, "results": rows}, f, indent=2)
        f.write("\n")


def check_selection(script, keys, models, scorch_run):
    """Exits naming the script when a --models key is unknown or scorch-run is not built."""
    for k in keys:
        if k not in models:
            sys.exit(f"{script}: unknown model {k} (have {', '.join(models)})")
    if not os.access(scorch_run, os.X_OK):
        sys.exit(f"{script}: {scorch_run} not found: build first (scripts/run_tests.sh)")


def torch_step_times(state, steps, sync=None, autocast=None):
    """PyTorch training steps on state = (model, x, loss_fn, optimizer): each step's ms (sync() before
    the clock stops, for asynchronous devices) and the last loss tensor. autocast: a factory of the
    context the forward pass and the loss run in (torch.autocast(...) for mixed precision), as
    PyTorch's AMP recipe has it: backward runs outside it, in the dtypes autocast chose."""
    model, x, loss_fn, opt = state
    times, loss = [], None
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if autocast:
            with autocast():
                loss = loss_fn(model(x))
        else:
            loss = loss_fn(model(x))
        loss.backward()
        opt.step()
        if sync:
            sync()
        times.append((time.perf_counter() - t0) * 1000.0)
    return times, loss
