#!/usr/bin/env bash
# Installs dependencies, builds MegaTrain in build/ and runs the demo training (configs/demo.yaml).
# The README's quick-start command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target megatrain
exec ./build/megatrain train --config configs/demo.yaml "$@"
