#!/usr/bin/env bash
# Installs MegaTrain's build and test dependencies from Debian packages (Debian 12 and newer), and the header-only
# libraries from pinned PyPI wheels into .deps/ (CUTLASS's headers, for the CUDA backend's grouped expert GEMMs;
# cudnn-frontend's, for its cuDNN attention graphs).
# Invariant: idempotent; installs only what is missing; needs root (or sudo) and the package registry, and PyPI's
# file host where a pinned header folder is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libopenmpi-dev openmpi-bin
  libhdf5-openmpi-dev hdf5-tools
  libhwloc-dev libnuma-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libpcre2-dev libicu-dev
  catch2
  libopenblas-openmp-dev
  liburing-dev               # the NVMe state tier (store.offload) reads and writes through io_uring
  patchelf
  python3                    # tests/cli/bad_input.sh edits fixture configs; scripts/wheel_headers.py
  ca-certificates            # scripts/wheel_headers.py: https from files.pythonhosted.org
  python3-jinja2             # tests/data: the exported chat_template rendered by Jinja itself
  libcairo2-dev fonts-dejavu-core  # training.plot_loss: training_loss.png, drawn and lettered by cairo
  slurm-wlm munge            # tests/slurm: a real single-node Slurm on localhost
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install_deps: all dependencies present"
fi

# CUTLASS 4.2.0.0's headers (cutlass/, cute/), from NVIDIA's wheel on PyPI (the wheel ships them under
# cutlass_library/source/include/): CMakeLists.txt reads them from .deps/cutlass-4.2.0.0/include where nvcc builds.
repo=$(cd "$(dirname "$0")/.." && pwd)
python3 "$repo/scripts/wheel_headers.py" \
  https://files.pythonhosted.org/packages/21/6b/e86fc2fd536dd4b8bd2209aa31d7002610c501b0802337787eac9c9b328c/nvidia_cutlass-4.2.0.0-py3-none-any.whl \
  f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6 \
  cutlass_library/source/include/ "$repo/.deps/cutlass-4.2.0.0/include"

# cudnn-frontend 1.32.0's headers (cudnn_frontend.h and cudnn_frontend/, with its bundled nlohmann json), from NVIDIA's
# nvidia-cudnn-frontend wheel on PyPI (every platform's wheel ships the same include/; this is the CPython 3.11 x86-64
# one): CMakeLists.txt reads them from .deps/cudnn-frontend-1.32.0/include where cuDNN is found.
python3 "$repo/scripts/wheel_headers.py" \
  https://files.pythonhosted.org/packages/11/02/660e2dd9f9d9f940e1641443771730612c3aadaafbc5ef7a93cc313d519d/nvidia_cudnn_frontend-1.32.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl \
  c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0 \
  include/ "$repo/.deps/cudnn-frontend-1.32.0/include"
