#!/usr/bin/env bash
# Installs everything the project needs to build and test, from Debian and PyPI.
# Idempotent: when everything is already present it only checks, in a few seconds.
#   scripts/setup.sh            compiler + runtime dependencies (needs root for apt-get)
#   SETUP_NO_TORCH=1 scripts/setup.sh   skip LibTorch (the compiler alone)
set -euo pipefail

LLVM_VERSION=22
TORCH_VERSION=2.11.0
# Only the tests use it: plan-run against transformers' own models.
TRANSFORMERS_VERSION=4.57.1
# Only the tests use it: the NF4 codec against bitsandbytes' (CPU build).
BITSANDBYTES_VERSION=0.50.2
# Only the tests use it: exported LoRA adapters loaded by HF PEFT.
PEFT_VERSION=0.17.1

APT_PACKAGES=(
  "libmlir-${LLVM_VERSION}-dev" "mlir-${LLVM_VERSION}-tools"
  "llvm-${LLVM_VERSION}-dev" "llvm-${LLVM_VERSION}-tools"
  cmake ninja-build g++ python3 python3-pip
  libfmt-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev
  # LLVM's static Support library (plan-tblgen links it) needs zstd's.
  libzstd-dev
  # Gloo headers: the torch wheel ships ProcessGroupGloo.hpp but not the gloo
  # headers it includes (the code itself is inside libtorch_cpu.so).
  libgloo-dev
  # planc --timeline=FILE.png renders its SVG with librsvg and cairo.
  librsvg2-dev pkg-config
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: Debian packages present"
fi

PY=${PYTHON:-python3}
pip_has() { "$PY" -c "import importlib.metadata as m,sys; sys.exit(0 if m.version('$1')==sys.argv[1] else 1)" "$2" 2>/dev/null; }

# lit drives the test suite; the Debian llvm-tools ship it too, but the PyPI one
# is what `lit` on PATH resolves to on machines without /usr/lib/llvm-22/bin.
if ! "$PY" -c "import lit" 2>/dev/null; then
  echo "setup: installing lit from PyPI"
  "$PY" -m pip install -q lit
fi

if [ "${SETUP_NO_TORCH:-0}" != "1" ]; then
  if ! pip_has torch "$TORCH_VERSION" && ! "$PY" -c "import torch,sys; sys.exit(0 if torch.__version__.startswith('$TORCH_VERSION') else 1)" 2>/dev/null; then
    echo "setup: installing torch==$TORCH_VERSION (LibTorch) from PyPI"
    "$PY" -m pip install -q "torch==$TORCH_VERSION"
  else
    echo "setup: torch $TORCH_VERSION present"
  fi
  if ! pip_has transformers "$TRANSFORMERS_VERSION"; then
    echo "setup: installing transformers==$TRANSFORMERS_VERSION (tests) from PyPI"
    "$PY" -m pip install -q "transformers==$TRANSFORMERS_VERSION"
  else
    echo "setup: transformers $TRANSFORMERS_VERSION present"
  fi
  if ! pip_has peft "$PEFT_VERSION"; then
    echo "setup: installing peft==$PEFT_VERSION (tests) from PyPI"
    "$PY" -m pip install -q "peft==$PEFT_VERSION"
  else
    echo "setup: peft $PEFT_VERSION present"
  fi
  if ! pip_has bitsandbytes "$BITSANDBYTES_VERSION"; then
    echo "setup: installing bitsandbytes==$BITSANDBYTES_VERSION (tests) from PyPI"
    "$PY" -m pip install -q "bitsandbytes==$BITSANDBYTES_VERSION"
  else
    echo "setup: bitsandbytes $BITSANDBYTES_VERSION present"
  fi
fi
echo "setup: done"
