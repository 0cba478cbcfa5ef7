#!/usr/bin/env bash
# Set up rltune in ./.venv: CPU PyTorch first (so pip never pulls a multi-GB CUDA
# build on a CPU machine), then rltune itself in editable mode.
#   bash scripts/setup.sh          # rltune
#   bash scripts/setup.sh --test   # rltune + what the test suite needs
# TORCH_SPEC overrides the torch requirement (e.g. a CUDA build on a GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
python_bin=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python_bin" -m venv .venv
pip=".venv/bin/pip"
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  "$pip" install -q "${TORCH_SPEC:-torch==2.13.0}" 2> >(grep -v "is ignored: it is neither" >&2)
fi
"$pip" install -q -e ".${extras}" 2> >(grep -v "is ignored: it is neither" >&2)
echo "rltune is set up in .venv ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
