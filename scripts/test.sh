#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (lit + gtest) through
# ctest. The last line is ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
