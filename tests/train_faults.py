#!/usr/bin/env python3
"""Faults during `scorch-run train` (registered by tests/train_faults.cmake).

  train_faults.py SCORCH_RUN signal INT|TERM
      a run of 40 steps gets the signal after step 3 (read from its progress lines): it must finish
      the step, save the training state (INT: to the default MODEL.state/ folder; TERM: to --state
      DIR), write no model, and exit 130 / 143; --resume then finishes the run and its -o output is
      byte-identical (cmp) to an uninterrupted run's.
  train_faults.py SCORCH_RUN disk
      saving under RLIMIT_FSIZE smaller than the state (writes fail with EFBIG, SIGXFSZ ignored):
      exit 1 with a message naming the file and the error, the previous state.bin byte-identical
      and loadable, no temporary left; the same for the output model (no partial -o file).
  train_faults.py SCORCH_RUN data
      labels out of range, non-integral labels, token ids beyond the vocabulary, a token file of
      odd length, data arrays of the wrong shape or dtype, and sample counts that disagree: exit 1
      with a message naming the file (and the flat index for values); nothing crashes. A state saved
      with the GPT's table whole and resumed with it as row blocks (--param-block), and back: exit 1
      naming the state, the record and --param-block, no model written; a bad --param-block: exit 2.
  train_faults.py SCORCH_RUN hostmem
      a machine with too little available memory for the optimizer state and the per-step snapshot
      (SCORCH_TEST_MEMAVAILABLE, in place of /proc/meminfo's MemAvailable): exit 1 before step 1
      with a message giving the bytes needed and available, and no model written; with enough, the
      same run trains.
  train_faults.py SCORCH_RUN alloc
      SCORCH_ALLOC_FAIL=n (core/alloc_fail.h) makes the n-th counted host allocation of `scorch-run
      train` fail, for n = 1, 2, 3, 5, 8, ... (about x1.6) until a run no longer reaches it: import,
      passes, training graph, plan and steps each meet a failure. Every run must exit 1 with an "out
      of memory" message or succeed, never crash; under a sanitizer build (ASAN_OPTIONS set here to
      exit 99) no AddressSanitizer or LeakSanitizer report may appear.
Fails through the exit code.
"""
import filecmp
import os
import resource
import shutil
import signal
import subprocess
import sys

import numpy as np

SCORCH = None
GEN_RESNET = ["gen", "resnet", "--depth", "18", "--width", "8", "--image", "32", "--classes", "10", "-o", "m.onnx"]
GEN_GPT = ["gen", "gpt", "--layers", "1", "--heads", "2", "--dim", "16", "--vocab", "64", "--seq", "8", "-o", "g.onnx"]
TAIL = 40
TRAIN = ["--batch", "4", "--lr", "0.02", "--threads", "1", "--print-every", "1", "--device", "cpu"]


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def run(args, **kw):
    return subprocess.run([SCORCH] + args, capture_output=True, text=True, **kw)


def must(args, **kw):
    p = run(args, **kw)
    if p.returncode != 0:
        fail("scorch-run %s exited %d:\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def refuse(args, needles, **kw):
    """The command must exit 1 (a status, not a crash) with every needle in its message."""
    p = run(args, **kw)
    msg = p.stdout + p.stderr
    if p.returncode != 1:
        fail("scorch-run %s exited %d (want 1):\n%s" % (" ".join(args), p.returncode, msg))
    for n in needles:
        if n not in msg:
            fail("scorch-run %s: message lacks %r:\n%s" % (" ".join(args), n, msg))
    print("refused as expected: %s" % msg.strip().splitlines()[-1])


def signal_case(which):
    sig = signal.SIGINT if which == "INT" else signal.SIGTERM
    steps = ["--steps", "40"]
    must(GEN_RESNET)
    must(["train", "m.onnx", "-o", "full.onnx"] + TRAIN + steps)
    for d in ("m.state", "st"):
        shutil.rmtree(d, ignore_errors=True)
    state = "m.state" if which == "INT" else "st"
    extra = [] if which == "INT" else ["--state", "st"]
    if os.path.exists("part.onnx"):
        os.unlink("part.onnx")
    p = subprocess.Popen([SCORCH, "train", "m.onnx", "-o", "part.onnx"] + TRAIN + steps + extra,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = []
    sent = False
    for line in p.stderr:
        err.append(line)
        if not sent and line.startswith("step 3/"):
            p.send_signal(sig)
            sent = True
    out = p.stdout.read()
    rc = p.wait()
    msg = out + "".join(err)
    want = 128 + int(sig)
    if not sent:
        fail("never saw step 3 in the progress lines:\n" + msg)
    if rc != want:
        fail("exit %d after SIG%s, want %d:\n%s" % (rc, which, want, msg))
    if "saving the training state to " + state not in msg:
        fail("no message about saving to %s:\n%s" % (state, msg))
    if not os.path.exists(os.path.join(state, "state.bin")):
        fail("no %s/state.bin after SIG%s" % (state, which))
    if os.path.exists("part.onnx"):
        fail("an interrupted run wrote the model")
    print(msg.strip().splitlines()[-2:])
    must(["train", "m.onnx", "-o", "part.onnx", "--resume", state] + TRAIN + steps)
    if not filecmp.cmp("full.onnx", "part.onnx", shallow=False):
        fail("interrupted + resumed weights differ from the uninterrupted run")
    print("SIG%s: exit %d, state in %s, resumed run byte-identical" % (which, rc, state))


def limit_fsize(n):
    def f():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return f


def disk_case():
    must(GEN_RESNET)
    shutil.rmtree("st", ignore_errors=True)
    must(["train", "m.onnx", "-o", "a.onnx"] + TRAIN + ["--steps", "3", "--state", "st"])
    before = open("st/state.bin", "rb").read()
    limit = len(before) // 2
    refuse(["train", "m.onnx", "-o", "b.onnx", "--resume", "st"] + TRAIN + ["--steps", "5", "--save-every", "1"],
           ["st/state.bin.tmp", "write failed", os.strerror(27)], preexec_fn=limit_fsize(limit))
    if open("st/state.bin", "rb").read() != before:
        fail("the previous state.bin changed after a failed save")
    if os.path.exists("st/state.bin.tmp"):
        fail("a failed save left st/state.bin.tmp")
    # the previous state still loads and resumes to the same weights as an uninterrupted run
    must(["train", "m.onnx", "-o", "b.onnx", "--resume", "st"] + TRAIN + ["--steps", "5"])
    must(["train", "m.onnx", "-o", "c.onnx"] + TRAIN + ["--steps", "5"])
    if not filecmp.cmp("b.onnx", "c.onnx", shallow=False):
        fail("resuming from the state kept after a failed save is not bit-identical")
    # the output model under a limit below its size: a message, no partial file
    size = os.path.getsize("c.onnx")
    if os.path.exists("d.onnx"):
        os.unlink("d.onnx")
    p = run(["train", "m.onnx", "-o", "d.onnx"] + TRAIN + ["--steps", "1"], preexec_fn=limit_fsize(size // 2))
    if p.returncode != 1 or "d.onnx" not in p.stderr:
        fail("model save under a full disk: exit %d:\n%s%s" % (p.returncode, p.stdout, p.stderr))
    leftovers = [f for f in os.listdir(".") if f.startswith("d.onnx")]
    if leftovers:
        fail("a failed model save left %s" % leftovers)
    print("model save refused: " + p.stderr.strip().splitlines()[-1])


def data_case():
    must(GEN_RESNET)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, size=8).astype(np.int64)
    np.save("x.npy", x)
    np.save("y.npy", y)
    base = ["train", "m.onnx", "-o", "t.onnx", "--steps", "1", "--batch", "4", "--threads", "1", "--device", "cpu"]
    must(base + ["--data", "x.npy", "--labels", "y.npy"])
    bad = y.copy()
    bad[5] = 10
    np.save("y_range.npy", bad)
    refuse(base + ["--data", "x.npy", "--labels", "y_range.npy"], ["y_range.npy", "flat index 5", "[0, 10)"])
    bad = y.copy()
    bad[2] = -3
    np.save("y_neg.npy", bad)
    refuse(base + ["--data", "x.npy", "--labels", "y_neg.npy"], ["y_neg.npy", "flat index 2"])
    yf = y.astype(np.float32)
    yf[6] = 2.5
    np.save("y_frac.npy", yf)
    refuse(base + ["--data", "x.npy", "--labels", "y_frac.npy"], ["y_frac.npy", "flat index 6"])
    np.save("x_shape.npy", x[:, :, :, :31])
    refuse(base + ["--data", "x_shape.npy", "--labels", "y.npy"], ["x_shape.npy", "[8,3,32,31]"])
    np.save("x_rank.npy", x.reshape(8, -1))
    refuse(base + ["--data", "x_rank.npy", "--labels", "y.npy"], ["x_rank.npy"])
    np.save("y_shape.npy", y.reshape(4, 2))
    refuse(base + ["--data", "x.npy", "--labels", "y_shape.npy"], ["y_shape.npy"])
    np.save("y_count.npy", y[:7])
    refuse(base + ["--data", "x.npy", "--labels", "y_count.npy"], ["x.npy", "y_count.npy", "8", "7"])
    np.save("x_dtype.npy", x.astype(np.complex64))
    refuse(base + ["--data", "x_dtype.npy", "--labels", "y.npy"], ["x_dtype.npy"])
    np.save("x_str.npy", np.array(["a"] * 8))
    refuse(base + ["--data", "x_str.npy", "--labels", "y.npy"], ["x_str.npy"])
    with open("x_trunc.npy", "wb") as f:
        f.write(open("x.npy", "rb").read()[:1000])
    refuse(base + ["--data", "x_trunc.npy", "--labels", "y.npy"], ["x_trunc.npy"])
    # language model: token ids beyond the vocabulary, odd file length
    must(GEN_GPT)
    gbase = ["train", "g.onnx", "-o", "gt.onnx", "--steps", "1", "--batch", "2", "--seq", "8", "--threads", "1",
             "--device", "cpu"]
    tok = rng.integers(0, 64, size=200).astype(np.uint16)
    tok.tofile("tok.bin")
    must(gbase + ["--tokens", "tok.bin"])
    tok[37] = 64
    tok.tofile("tok_big.bin")
    refuse(gbase + ["--tokens", "tok_big.bin"], ["tok_big.bin", "token 37", "64", "vocabulary"])
    with open("tok_odd.bin", "wb") as f:
        f.write(open("tok.bin", "rb").read()[:-1])
    refuse(gbase + ["--tokens", "tok_odd.bin"], ["tok_odd.bin", "not a whole number"])
    t32 = rng.integers(0, 64, size=200).astype(np.int32)
    t32[150] = -1
    t32.tofile("tok_neg.bin")
    refuse(gbase + ["--tokens", "tok_neg.bin", "--token-dtype", "int32"], ["tok_neg.bin", "token 150"])
    # a state saved with the table whole, resumed with it in row blocks (--param-block), and back
    for save, resume, name in (("off", "1KiB", "wte.weight"), ("1KiB", "off", "wte.weight.rows")):
        shutil.rmtree("stb", ignore_errors=True)
        must(gbase + ["--tokens", "tok.bin", "--param-block", save, "--save-every", "1", "--state", "stb"])
        if os.path.exists("gr.onnx"):
            os.remove("gr.onnx")
        refuse(["train", "g.onnx", "-o", "gr.onnx", "--steps", "2", "--batch", "2", "--seq", "8", "--threads", "1",
                "--device", "cpu", "--tokens", "tok.bin", "--param-block", resume, "--resume", "stb"],
               ["stb", name, "--param-block"])
        if os.path.exists("gr.onnx"):
            fail("a refused resume wrote gr.onnx")
    p = run(gbase + ["--tokens", "tok.bin", "--param-block", "lots"])
    if p.returncode != 2 or "--param-block" not in p.stderr:
        fail("--param-block lots: want a usage error (exit 2) naming it, got %d:\n%s" % (p.returncode, p.stderr))
    print("data faults: every bad input refused with a message naming the file")


def hostmem_case():
    params = int(must(GEN_GPT).stdout.split(" parameters")[0].split()[-1])
    if os.path.exists("hm.onnx"):
        os.remove("hm.onnx")  # left by an earlier run in this folder
    common = ["train", "g.onnx", "--seq", "8", "--steps", "2", "--optimizer", "adamw"] + TRAIN
    args = common + ["-o", "hm.onnx"]
    env = dict(os.environ, SCORCH_TEST_MEMAVAILABLE="1000")
    refuse(args, ["g.onnx", "host memory", "bytes more", "but 1000 bytes", "available"], env=env)
    if os.path.exists("hm.onnx"):
        fail("a run refused for host memory wrote its model")
    # rollback: auto keeps the copy only when the state and the copy take half of what is available;
    # asked for, a copy that does not fit is refused with the way out
    sizes = must(common + ["-o", "probe.onnx"]).stderr
    if "rollback off" in sizes:
        fail("rollback is off with the machine's own memory for a tiny model:\n" + sizes)
    # f32 parameters P bytes, AdamW state 2P, the copy 3P: 3P + 4 KiB fits the state (2P) but not
    # the state and the copy (5P)
    env["SCORCH_TEST_MEMAVAILABLE"] = str(3 * 4 * params + 4096)
    p = must(common + ["-o", "probe.onnx"], env=env)
    if "rollback off" not in p.stderr:
        fail("rollback stayed on with too little memory for the copy:\n" + p.stderr)
    refuse(args + ["--rollback", "on"], ["host memory", "rollback copy", "--rollback off"], env=env)
    if os.path.exists("hm.onnx"):
        fail("a run refused for its rollback copy wrote its model")
    env["SCORCH_TEST_MEMAVAILABLE"] = str(1 << 40)
    p = must(args, env=env)
    if not os.path.exists("hm.onnx"):
        fail("the run with enough memory wrote no model")


def alloc_case():
    must(GEN_RESNET)
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = "exitcode=99:" + env.get("ASAN_OPTIONS", "")
    env["UBSAN_OPTIONS"] = "halt_on_error=1:exitcode=98:" + env.get("UBSAN_OPTIONS", "")
    for variant in (["--steps", "2"], ["--steps", "2", "--strategy", "sqrt", "--offload", "activations"]):
        results = {}

        def attempt(n):
            """1: the injected failure was reported; 0: n is past the last counted allocation."""
            if n in results:
                return results[n]
            env["SCORCH_ALLOC_FAIL"] = str(n)
            if os.path.exists("a.onnx"):
                os.unlink("a.onnx")
            args = ["train", "m.onnx", "-o", "a.onnx", "--batch", "2", "--threads", "1", "--device", "cpu"] + variant
            p = run(args, env=env)
            msg = p.stdout + p.stderr
            if "Sanitizer" in msg or p.returncode not in (0, 1):
                fail("SCORCH_ALLOC_FAIL=%d scorch-run %s: exit %d:\n%s" % (n, " ".join(args), p.returncode, msg[-4000:]))
            if p.returncode == 1:
                if "out of memory" not in msg:
                    fail("SCORCH_ALLOC_FAIL=%d: exit 1 without an out-of-memory message:\n%s" % (n, msg))
                if os.path.exists("a.onnx"):
                    fail("SCORCH_ALLOC_FAIL=%d: a failed run wrote the model" % n)
                print("n=%-6d %s" % (n, msg.strip().splitlines()[-1]))
            results[n] = p.returncode
            return p.returncode

        # geometric steps through import and graph building, then bisection for the last counted
        # allocation C (a run succeeds exactly when n > C), then every one of the last TAIL (plan,
        # session, steps, saving)
        n = 1
        while attempt(n):
            n = max(n + 1, int(n * 1.6))
        lo, hi = max(k for k in results if results[k]), n
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if attempt(mid):
                lo = mid
            else:
                hi = mid
        count = lo
        for k in range(max(1, count - TAIL + 1), count + 1):
            if not attempt(k):
                fail("SCORCH_ALLOC_FAIL=%d succeeded though allocation %d fails" % (k, count))
        reported = sum(1 for v in results.values() if v)
        print("%s: %d counted allocations, %d runs, %d failures reported as a status" %
              (" ".join(variant), count, len(results), reported))


def main():
    global SCORCH
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    SCORCH = os.path.abspath(sys.argv[1])
    mode = sys.argv[2]
    if mode == "signal":
        signal_case(sys.argv[3])
    elif mode == "disk":
        disk_case()
    elif mode == "data":
        data_case()
    elif mode == "alloc":
        alloc_case()
    elif mode == "hostmem":
        hostmem_case()
    else:
        fail("unknown mode " + mode)
    print("ok")


if __name__ == "__main__":
    main()
