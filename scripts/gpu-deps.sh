#!/usr/bin/env bash
# Collects, here, the build dependencies that a bare GPU node lacks, so that
# scripts/gpu.sh can build the runtime there. Such a node has CUDA, NCCL, a
# C++ compiler, CMake, ninja and the torch wheel (LibTorch), but no package
# registry and no Debian -dev packages: no nlohmann-json, CLI11, gtest, gloo
# or zlib headers. This copies them, from the Debian packages that
# scripts/setup.sh installs, into one install prefix (default .gpu-deps/,
# git-ignored; about 3 MiB) that gpu.sh puts first on CMAKE_PREFIX_PATH.
#
# usage: scripts/gpu-deps.sh [PREFIX (default .gpu-deps)]
#   Carry PREFIX to the node with the working tree (the device tool: carry
#   [".gpu-deps"]); gpu.sh uses $ROOT/.gpu-deps when it exists, or
#   GPU_DEPS=PREFIX.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${1:-$ROOT/.gpu-deps}
# package: what the runtime build takes from it
#   nlohmann-json3-dev  headers + CMake config (schedule files, metrics)
#   libcli11-dev        headers + CMake config (plan-run, plan-checkpoint)
#   libgtest-dev        static gtest/gtest_main + CMake config (the gtests)
#   libgloo-dev         headers only: LibTorch's ProcessGroupGloo.hpp includes
#                       them; the code is in libtorch_cpu (runtime/CMakeLists.txt)
#   zlib1g-dev          zlib.h + the static libz (checkpoint compression)
PACKAGES=(nlohmann-json3-dev libcli11-dev libgtest-dev libgloo-dev zlib1g-dev)
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg -s "$pkg" > /dev/null 2>&1; then
    echo "gpu-deps.sh: $pkg is not installed here (scripts/setup.sh installs it)" >&2
    exit 1
  fi
done
rm -rf "$PREFIX"
mkdir -p "$PREFIX"
# Every file of the package under /usr, at the same place under PREFIX: the
# packages' CMake configs find their headers relative to themselves. Shared
# libraries are left out (the node links the static ones, or has its own:
# gloo's code is in LibTorch).
for pkg in "${PACKAGES[@]}"; do
  dpkg -L "$pkg" | while read -r f; do
    [[ -f "$f" && ! -L "$f" && "$f" == /usr/* ]] || continue
    case "$f" in
      /usr/share/doc/* | /usr/share/man/* | /usr/src/* | *.so | *.so.*) continue ;;
      /usr/lib/libgloo* | /usr/share/cmake/Gloo/*) continue ;; # headers only
    esac
    dest=$PREFIX/${f#/usr/}
    mkdir -p "$(dirname "$dest")"
    cp "$f" "$dest"
  done
done
echo "gpu-deps.sh: $(find "$PREFIX" -type f | wc -l) files, $(du -sh "$PREFIX" | cut -f1) in $PREFIX"
