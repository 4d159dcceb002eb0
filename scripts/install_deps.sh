#!/usr/bin/env bash
# Installs MegaTrain's build and test dependencies from Debian packages (Debian 12 and newer).
# Invariant: idempotent; installs only what is missing; needs root (or sudo) and the package registry.
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
  python3                    # tests/cli/bad_input.sh edits fixture configs
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
