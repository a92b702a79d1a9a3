#!/usr/bin/env python3
"""Translates a CUDA source file of the backend into C++ for the CPU emulator (tests/cuda_emu).

The one construct g++ cannot parse is the launch `kernel<<<grid, block, shmem, stream>>>(args)`.
It becomes `emu::launch("kernel", kernel, grid, block, shmem, stream)(args)`, where `kernel` may
carry template arguments (`k_unary<OP, float>`) and may sit in a macro body. Everything else
(__global__, threadIdx, __shared__, __syncthreads, shuffles, atomics) is provided by
emu_device.h, which the output includes first; a #line directive keeps compiler messages pointing
at the original file.

usage: cu2cpp.py input.cu output.cpp
"""
import re
import sys


def kernel_start(text, end):
    """Index where the kernel expression ending just before `end` starts: an identifier, optionally
    followed by balanced template arguments."""
    i = end
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    if i > 0 and text[i - 1] == ">":
        depth = 0
        while i > 0:
            i -= 1
            if text[i] == ">":
                depth += 1
            elif text[i] == "<":
                depth -= 1
                if depth == 0:
                    break
        if depth != 0:
            raise ValueError("unbalanced template arguments before <<< at offset %d" % end)
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_:"):
        i -= 1
    return i


def translate(text):
    out, pos = [], 0
    for m in re.finditer(r"<<<", text):
        start = kernel_start(text, m.start())
        if start < pos:
            raise ValueError("overlapping launches at offset %d" % m.start())
        close = text.find(">>>", m.end())
        if close < 0:
            raise ValueError("<<< without >>> at offset %d" % m.start())
        kernel = text[start:m.start()].strip()
        if not kernel:
            raise ValueError("no kernel name before <<< at offset %d" % m.start())
        config = text[m.end():close]
        label = re.sub(r"\s+", " ", kernel).replace("\\", "").replace('"', "")
        out.append(text[pos:start])
        out.append('emu::launch("%s", %s, %s)' % (label, kernel, config))
        pos = close + 3
    out.append(text[pos:])
    return "".join(out)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        text = f.read()
    body = translate(text)
    if "<<<" in body or ">>>" in body:
        sys.exit("%s: a launch was not translated" % src)
    with open(dst, "w") as f:
        f.write('#include "emu_device.h"\n#line 1 "%s"\n' % src)
        f.write(body)


if __name__ == "__main__":
    main()
