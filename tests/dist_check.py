#!/usr/bin/env python3
"""Data-parallel training checks (tests/dist.cmake): `mpirun` on localhost launching scorch-run.

    dist_check.py SCORCH MPIEXEC WORKDIR CHECK

CHECK:
  invariance  GPT, SGD (momentum 0.9), 3 steps: 2 ranks x batch 4 against 1 rank x batch 8 on the same
              synthetic data. Every float tensor within 1e-6 of its max abs value (float32 summation order:
              the ranks' means are averaged instead of one mean over 8 samples; measured 3.8e-7). Two runs
              with 2 ranks give the same bytes (the all-reduce sums in rank order). The same with a
              --tokens file (synthetic data and .npy are the other sources; e2e_ddp.py uses .npy). The control: 2 ranks x
              batch 4 against 1 rank x batch 4, which sees half the data, must differ by far more.
              AdamW is not used here: the attention key bias has a gradient that is mathematically zero
              (softmax ignores a shift of every logit), so its float32 value is rounding noise, which AdamW
              normalises to +-lr whatever its size (5e-4 of the tensor's max after 3 steps); the PyTorch
              DDP peer (tests/e2e/e2e_ddp.py) checks AdamW against PyTorch's own spread instead.
  shard       The same GPT with AdamW: --shard-optimizer against unsharded, 2 ranks each, bit for bit
              (sharding moves each update to one rank; the arithmetic is the same), and the same
              --dump-grads files (the owners send theirs to rank 0); the largest rank
              holds at most 0.65 of the optimizer state (measured 0.54: whole buckets per owner); a
              sharded run's checkpoint (rank 0 gathers the shards) resumes sharded and unsharded to the
              bytes of an uninterrupted run; fp16 with overflowing (skipped) steps gives the same bytes
              sharded; --clip on 3 ranks agrees within 1e-6 (the norm's partial sums are added per
              owner, then over the ranks; measured 1.7e-7); ResNet-18 (batch norm) sharded under a dc
              checkpointing plan gives the bytes of unsharded store-all.
  kill        A rank killed (SIGKILL) mid-run: mpirun exits non-zero within 60 s, its output names the
              dead rank, and the last checkpoint (--save-every) resumes.
  hang        A rank stopped (SIGSTOP) mid-run with --comm-timeout 5: the job exits non-zero within 60 s,
              naming the silent rank.
  cuda        The CUDA backend (on a GPU, or on the CPU emulator of CUDA in CI): 2 ranks x batch 4 with
              --device cuda against 1 rank x batch 4 x 2 on the CPU, within 1e-5 (two backends' kernels
              and NCCL's sums, or the host round trip without NCCL; measured 3.3e-7 on the emulator, whose
              NCCL runs over MPI); --shard-optimizer on cuda gives the same bytes as unsharded. Each rank
              takes the GPU of its local rank. SKIP (77) without a usable CUDA device.
  nompi       A build without MPI launched as rank 1 of 2 (the launcher's environment): an error saying
              MPI is missing and what to install, exit code non-zero, nothing written; without the
              launcher it trains as one process (registered for builds without MPI only).
"""
import os
import signal
import struct
import subprocess
import sys
import time

try:
    import numpy as np
except ImportError:  # nompi needs none of it
    np = None

SCORCH, MPIEXEC, WORKDIR, CHECK = sys.argv[1:5]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
GPT = ["--layers", "2", "--heads", "2", "--dim", "64", "--vocab", "128", "--seq", "16"]


def run(cmd, **kw):
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def mpirun(n, args):
    return [MPIEXEC, "--oversubscribe", "--bind-to", "none", "-np", str(n), SCORCH] + args


def weights(path):
    """Float initializers of an ONNX file, read with the onnx package when present."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    return {i.name: numpy_helper.to_array(i) for i in m.graph.initializer if numpy_helper.to_array(i).dtype.kind == "f"}


def worst(a, b):
    out = []
    for k in a:
        scale = max(float(np.abs(a[k]).max()), 1e-30)
        out.append((float(np.abs(a[k].astype(np.float64) - b[k]).max()) / scale, k))
    return max(out)


def gen_gpt():
    run([SCORCH, "gen", "gpt"] + GPT + ["-o", "gpt.onnx"])


def train(n, batch, out, extra=()):
    args = ["train", "gpt.onnx", "--batch", str(batch), "--seq", "16", "--steps", "3", "--threads", "1", "-o", out]
    args += list(extra)
    return run(mpirun(n, args) if n > 1 else [SCORCH] + args)


def check_invariance():
    gen_gpt()
    train(1, 8, "one.onnx")
    train(2, 4, "two.onnx")
    train(2, 4, "two_again.onnx")
    train(1, 4, "half.onnx")
    one, two = weights("one.onnx"), weights("two.onnx")
    err, name = worst(one, two)
    print(f"2 ranks x 4 vs 1 rank x 8: worst {err:.3g} of the tensor's max ({name})")
    if err > 1e-6:
        sys.exit(f"FAIL: {name} differs by {err:.3g} of its max (> 1e-6)")
    if open("two.onnx", "rb").read() != open("two_again.onnx", "rb").read():
        sys.exit("FAIL: two runs with 2 ranks wrote different bytes")
    # a token file: rank r reads windows r*4.. of the global batch's 8, as one process would
    rng = np.random.RandomState(0)
    rng.randint(0, 128, size=20000).astype("<u2").tofile("tokens.bin")
    train(1, 8, "tok_one.onnx", ["--tokens", "tokens.bin"])
    train(2, 4, "tok_two.onnx", ["--tokens", "tokens.bin"])
    terr, tname = worst(weights("tok_one.onnx"), weights("tok_two.onnx"))
    print(f"token file, 2 ranks x 4 vs 1 rank x 8: worst {terr:.3g} of the tensor's max ({tname})")
    if terr > 1e-6:
        sys.exit(f"FAIL: with --tokens, {tname} differs by {terr:.3g} of its max (> 1e-6)")
    ctrl, cname = worst(one, weights("half.onnx"))
    print(f"control, 1 rank x 4 (half the data) vs 1 rank x 8: worst {ctrl:.3g} ({cname})")
    if ctrl < 100 * 1e-6:
        sys.exit("FAIL: the control does not differ: the check could not fail")


def same_bytes(a, b, what):
    if open(a, "rb").read() != open(b, "rb").read():
        err, name = worst(weights(a), weights(b))
        sys.exit(f"FAIL: {what}: {name} differs by {err:.3g} of its max")
    print(f"{what}: the same bytes")


def check_shard():
    gen_gpt()
    adamw = ["--optimizer", "adamw"]
    train(2, 4, "full.onnx", adamw + ["--dump-grads", "grads_full"])
    r = train(2, 4, "shard.onnx", adamw + ["--shard-optimizer", "--dump-grads", "grads_shard"])
    line = [l for l in r.stderr.splitlines() if l.startswith("sharded optimizer:")][0]
    print(line)
    share = float(line.split("(")[1].split(" of it")[0])
    if share > 0.5 + 0.15:
        sys.exit(f"FAIL: the largest rank holds {share:.2f} of the optimizer state (2 ranks: want <= 0.65)")
    same_bytes("full.onnx", "shard.onnx", "--shard-optimizer against unsharded")
    # --dump-grads: the owners send their buckets' averaged gradients to rank 0, which writes them all
    names = sorted(os.listdir("grads_full"))
    if names != sorted(os.listdir("grads_shard")) or len(names) < 29:
        sys.exit(f"FAIL: --dump-grads sharded wrote {sorted(os.listdir('grads_shard'))}, unsharded {names}")
    for n in names:
        same = open(os.path.join("grads_full", n), "rb").read() == open(os.path.join("grads_shard", n), "rb").read()
        if not same:
            sys.exit(f"FAIL: --dump-grads {n} differs sharded")
    print(f"--dump-grads: the same {len(names)} files sharded")
    # checkpoints: a sharded run's state (rank 0 gathers the shards) resumes sharded and unsharded
    args6 = ["--steps", "6", "--optimizer", "adamw"]
    run(mpirun(2, ["train", "gpt.onnx", "--batch", "4", "--seq", "16", "--threads", "1", "-o", "full6.onnx"] + args6))
    run(mpirun(2, ["train", "gpt.onnx", "--batch", "4", "--seq", "16", "--threads", "1", "-o", "half.onnx",
                   "--steps", "3", "--optimizer", "adamw", "--shard-optimizer", "--state", "sst", "--save-every", "3"]))
    run(mpirun(2, ["train", "gpt.onnx", "--batch", "4", "--seq", "16", "--threads", "1", "-o", "r_shard.onnx",
                   "--resume", "sst", "--state", "sst_a", "--shard-optimizer"] + args6))
    run(mpirun(2, ["train", "gpt.onnx", "--batch", "4", "--seq", "16", "--threads", "1", "-o", "r_full.onnx",
                   "--resume", "sst", "--state", "sst_b"] + args6))
    same_bytes("full6.onnx", "r_shard.onnx", "3 sharded steps, saved, resumed sharded for 3")
    same_bytes("full6.onnx", "r_full.onnx", "3 sharded steps, saved, resumed unsharded for 3")
    # fp16 with loss scaling, overflowing steps included: the owners' non-finite updates reach every
    # rank through the broadcast, so every rank skips the same steps
    fp16 = ["--optimizer", "adamw", "--precision", "fp16", "--loss-scale", "1e30", "--steps", "3"]
    train(2, 4, "fp16_full.onnx", fp16)
    r = train(2, 4, "fp16_shard.onnx", fp16 + ["--shard-optimizer"])
    if "update skipped" not in r.stderr:
        sys.exit("FAIL: fp16 at loss scale 1e30 skipped no step: the check could not fail")
    same_bytes("fp16_full.onnx", "fp16_shard.onnx", "fp16 with skipped steps, sharded against unsharded")
    # global-norm clipping: each owner sums its buckets' squares, an all-reduce adds the ranks' parts;
    # the order of that sum differs from one rank's, so float32 rounding apart (3 ranks, SGD)
    clip = ["--clip", "0.1", "--steps", "3"]
    run(mpirun(3, ["train", "gpt.onnx", "--batch", "4", "--seq", "16", "--threads", "1", "-o", "clip_full.onnx"] + clip))
    run(mpirun(3, ["train", "gpt.onnx", "--batch", "4", "--seq", "16", "--threads", "1", "-o", "clip_shard.onnx",
                   "--shard-optimizer"] + clip))
    err, name = worst(weights("clip_full.onnx"), weights("clip_shard.onnx"))
    print(f"--clip 0.1, 3 ranks, sharded against unsharded: worst {err:.3g} of the tensor's max ({name})")
    if err > 1e-6:
        sys.exit(f"FAIL: with --clip, sharding moved {name} by {err:.3g} of its max (> 1e-6)")
    # a model with batch norm (per-rank statistics written back), and a checkpointing plan: every plan
    # gives the store-everything weights, sharded or not
    run([SCORCH, "gen", "resnet", "--depth", "18", "--image", "32", "--classes", "10", "-o", "r18.onnx"])
    r18 = ["train", "r18.onnx", "--batch", "4", "--threads", "1", "--steps", "3"]
    run(mpirun(2, r18 + ["-o", "r18_full.onnx"]))
    run(mpirun(2, r18 + ["-o", "r18_shard_dc.onnx", "--shard-optimizer", "--strategy", "dc"]))
    same_bytes("r18_full.onnx", "r18_shard_dc.onnx", "ResNet-18, sharded with the dc plan against unsharded store-all")


def check_cuda():
    gen_gpt()
    probe = subprocess.run([SCORCH, "train", "gpt.onnx", "--seq", "16", "--steps", "1", "--device", "cuda", "-o",
                            "probe.onnx"], env=ENV, capture_output=True, text=True)
    if probe.returncode != 0:
        print("SKIP: --device cuda does not run here: %s" % (probe.stderr.strip().splitlines() or ["?"])[-1])
        sys.exit(77)
    # two ranks need two GPUs (NCCL refuses two ranks on one device); the emulator's devices are
    # per process, and nvidia-smi is absent there
    try:
        gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU ")
    except OSError:
        gpus = -1
    if 0 <= gpus < 2:
        print(f"SKIP: 2 ranks need 2 GPUs, this machine has {gpus} (test_cuda_ops runs NCCL with one rank)")
        sys.exit(77)
    train(1, 8, "cpu.onnx", ["--device", "cpu"])
    r = train(2, 4, "cuda.onnx", ["--device", "cuda"])
    print(r.stderr.strip().splitlines()[0])
    err, name = worst(weights("cpu.onnx"), weights("cuda.onnx"))
    print(f"2 ranks x 4 on cuda vs 1 rank x 8 on the cpu: worst {err:.3g} of the tensor's max ({name})")
    if err > 1e-5:
        sys.exit(f"FAIL: {name} differs by {err:.3g} of its max (> 1e-5)")
    train(2, 4, "cuda_shard.onnx", ["--device", "cuda", "--shard-optimizer"])
    same_bytes("cuda.onnx", "cuda_shard.onnx", "--shard-optimizer on cuda (reduce to owners, broadcast) against unsharded")


def wait_for_step(log, step, proc, limit=120):
    t0 = time.time()
    while time.time() - t0 < limit:
        if proc.poll() is not None:
            sys.exit(f"FAIL: the job ended before step {step}:\n{open(log).read()}")
        if os.path.exists("state/state.bin"):
            return
        time.sleep(0.2)
    sys.exit("FAIL: no checkpoint within the time limit")


def ranks_pids(proc):
    """The scorch-run children of mpirun (its ranks), by /proc."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = open(f"/proc/{d}/stat").read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmd = open(f"/proc/{d}/cmdline").read()
        except OSError:
            continue
        if ppid == proc.pid and "scorch-run" in cmd:
            pids.append(int(d))
    return pids


def rank_of(pid):
    env = open(f"/proc/{pid}/environ").read().split("\0")
    for e in env:
        if e.startswith("OMPI_COMM_WORLD_RANK="):
            return int(e.split("=")[1])
    return -1


def check_fault(sig, extra):
    gen_gpt()
    log = "job.log"
    args = ["train", "gpt.onnx", "--batch", "4", "--seq", "16", "--steps", "1000000", "--threads", "1",
            "--save-every", "20", "--state", "state", "-o", "never.onnx"] + extra
    with open(log, "w") as f:
        proc = subprocess.Popen(mpirun(2, args), env=ENV, stdout=f, stderr=subprocess.STDOUT)
    wait_for_step(log, 20, proc)
    pids = ranks_pids(proc)
    if len(pids) != 2:
        proc.kill()
        sys.exit(f"FAIL: expected 2 ranks under mpirun, found {pids}")
    victim = max(pids, key=rank_of)
    vrank = rank_of(victim)
    t0 = time.time()
    os.kill(victim, sig)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        os.kill(victim, signal.SIGKILL)
        sys.exit("FAIL: the job did not end within 60 s")
    took = time.time() - t0
    if sig == signal.SIGSTOP:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
    out = open(log).read()
    print(f"rank {vrank} {signal.Signals(sig).name}: job exit {rc} after {took:.1f} s")
    if rc == 0:
        sys.exit(f"FAIL: the job exited 0\n{out}")
    names = [f"rank {vrank}"]
    if not any(n in out for n in names):
        sys.exit(f"FAIL: the output does not name rank {vrank}\n{out}")
    print("named: " + [l for l in out.splitlines() if f"rank {vrank}" in l][0].strip())
    # the last checkpoint resumes (one process continues the global batch of 8)
    st = run([SCORCH, "train", "gpt.onnx", "--batch", "8", "--seq", "16", "--threads", "1", "--resume", "state",
              "--state", "state2", "--steps", "21", "-o", "resumed.onnx"], timeout=120)
    print("checkpoint: " + st.stdout.strip().splitlines()[0])


def check_nompi():
    env = dict(ENV, OMPI_COMM_WORLD_SIZE="2", OMPI_COMM_WORLD_RANK="1")
    gen_gpt()
    r = subprocess.run([SCORCH, "train", "gpt.onnx", "--seq", "16", "--steps", "1", "-o", "out.onnx"], env=env,
                       capture_output=True, text=True, timeout=60)
    print(r.stderr.strip())
    if r.returncode == 0:
        sys.exit("FAIL: exit code 0")
    if "no MPI" not in r.stderr or "libopenmpi-dev" not in r.stderr:
        sys.exit("FAIL: the message does not say that MPI is missing and what to install")
    if os.path.exists("out.onnx"):
        sys.exit("FAIL: a model was written")
    # without a launcher the same build trains as one process
    run([SCORCH, "train", "gpt.onnx", "--seq", "16", "--steps", "1", "-o", "out.onnx"])


def main():
    os.makedirs(WORKDIR, exist_ok=True)
    os.chdir(WORKDIR)
    for f in os.listdir("."):
        if os.path.isdir(f):
            for g in os.listdir(f):
                os.remove(os.path.join(f, g))
    {"invariance": check_invariance, "shard": check_shard,
     "kill": lambda: check_fault(signal.SIGKILL, []),
     "hang": lambda: check_fault(signal.SIGSTOP, ["--comm-timeout", "5"]),
     "cuda": check_cuda, "nompi": check_nompi}[CHECK]()
    print("PASS")


if __name__ == "__main__":
    main()
