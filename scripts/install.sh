#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build Scorch and run its tests. Idempotent: a
# Debian package is installed only when `dpkg -s` says it is missing, a Python package only when the
# `python3` on PATH (which may be a pyenv interpreter, not /usr/bin/python3) cannot import it at the
# wanted version. Runs as root (CI) or through sudo.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev
  libdnnl-dev libopenblas-dev libbenchmark-dev
  python3-torch python3-torchvision python3-onnx python3-numpy
  clang libclang-rt-14-dev pkg-config
  openmpi-bin libopenmpi-dev
)
# module name, pip requirement, wanted version ("" = any). onnx is pinned: the 1.16.2 wheel ships the
# backend node test data at opsets <= 21 that tests/conformance/cases.txt was generated from.
PIP_PACKAGES=(
  "numpy numpy "
  "onnx onnx==1.16.2 1.16.2"
  "onnxruntime onnxruntime "
  "highspy highspy "
)

log() { echo "install.sh: $*"; }

if [ "$(id -u)" -eq 0 ]; then SUDO=(); else SUDO=(sudo); fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  # dpkg -s also succeeds for removed packages whose config files remain: check the status line.
  if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  log "Debian packages: all ${#APT_PACKAGES[@]} present"
fi

PY=python3
if ! command -v "$PY" >/dev/null 2>&1; then
  log "no python3 on PATH" >&2
  exit 1
fi
log "python: $(command -v "$PY") ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"

# Debian's python marks its site-packages externally managed (PEP 668); pip needs consent there.
PIP_FLAGS=(--quiet)
if "$PY" -m pip install --help 2>/dev/null | grep -q -- --break-system-packages; then
  if [ -n "$("$PY" -c 'import sys,sysconfig,os; p=os.path.join(sysconfig.get_path("stdlib"),"EXTERNALLY-MANAGED"); print(p if os.path.exists(p) else "")')" ]; then
    PIP_FLAGS+=(--break-system-packages)
  fi
fi
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  log "installing pip for $PY"
  if [ "$(command -v "$PY")" = /usr/bin/python3 ]; then
    "${SUDO[@]}" apt-get install -y -q python3-pip
  else
    "$PY" -m ensurepip --upgrade
  fi
fi

for entry in "${PIP_PACKAGES[@]}"; do
  read -r module req want <<<"$entry"
  have=$("$PY" -c "import importlib; m = importlib.import_module('$module'); print(m.__version__)" 2>/dev/null || true)
  if [ -n "$have" ] && { [ -z "${want:-}" ] || [ "$have" = "$want" ]; }; then
    log "pip: $module $have present"
  else
    log "pip install $req (found: ${have:-none})"
    "$PY" -m pip install "${PIP_FLAGS[@]}" "$req"
  fi
done
# transformers for the torch side (Debian's /usr/bin/python3 with python3-torch): tests/e2e/e2e_hf.py
# exports Hugging Face models with it. Optional: without it those tests report themselves skipped.
TORCH_PY=/usr/bin/python3
if ! "$TORCH_PY" -c 'import transformers' 2>/dev/null; then
  if ! "$TORCH_PY" -m pip --version >/dev/null 2>&1; then "${SUDO[@]}" apt-get install -y -q python3-pip || true; fi
  log "pip install transformers==4.36.2 for $TORCH_PY"
  "$TORCH_PY" -m pip install --quiet --break-system-packages transformers==4.36.2 ||
    log "transformers could not be installed: the e2e_hf tests will be skipped"
else
  log "pip: transformers present for $TORCH_PY"
fi
log "done"
