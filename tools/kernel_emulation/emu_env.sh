# Sourced by the run_*.sh scripts of this folder, with the CPU build's folder as their first argument or none:
# here (this folder), src (the repository), build (that CPU build, default src/build) and work (a scratch folder,
# removed when the script exits).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
