#!/usr/bin/env bash
# Configures and builds into build/ (or $BUILD_DIR). Extra arguments go to CMake.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# With a CUDA toolkit (CI: CUDA 13 + NCCL in /usr/local/cuda) the CUDA backend
# is required, so that a broken CUDA build fails loudly instead of being left
# out by PLAN_ENABLE_CUDA=AUTO. Arguments given here come last and win.
CUDA_ARGS=()
if [ -x /usr/local/cuda/bin/nvcc ]; then
  CUDA_ARGS=(-DPLAN_ENABLE_CUDA=ON)
fi
if [ ! -f "$BUILD_DIR/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit ${CUDA_ARGS[@]+"${CUDA_ARGS[@]}"} "$@"
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
