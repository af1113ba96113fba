#!/bin/sh
# The image's build-time steps (the Dockerfile runs this script; tests/integration/test_ci_templates.py
# runs it too, in a fresh virtual environment against a local index).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${KERNEL_INDEX_URL:?set KERNEL_INDEX_URL to the root of your kernel index}"
: "${KERNEL_FACTORY_VERSION:?set KERNEL_FACTORY_VERSION to a released kernel-factory version}"
: "${KERNELS_ENV_FILE:?set KERNELS_ENV_FILE to where LOCAL_KERNELS is written}"

# 1. torch and the kernels library, at the versions the kernel wheels were built for.
python -m pip install -r "$here/requirements.txt"

# 2. The kernel wheels: pinned versions and labels, from the kernel index.
python -m pip install --index-url "${KERNEL_INDEX_URL%/}/simple" -r "$here/kernels.txt"

# 3. LOCAL_KERNELS for the installed wheels, written where the entrypoint reads it. kernel-factory
#    is needed only for this step (local-kernels uses the standard library and packaging), so it
#    goes into a throwaway folder rather than into the image's environment.
kf=$(mktemp -d)
python -m pip install --no-deps --target "$kf" "kernel-factory==${KERNEL_FACTORY_VERSION}"
PYTHONPATH="$kf" python -m kernel_factory local-kernels --shell > "$KERNELS_ENV_FILE"
# Fail the build, not the first request, when an installed kernel would not load here.
PYTHONPATH="$kf" python -m kernel_factory local-kernels --check
rm -rf "$kf"

# 4. The locked path (load_kernel(..., lockfile=...), get_locked_kernel): with a kernels.lock next to this
#    script (add it to the Dockerfile's COPY line), `kernel-factory download` fills the Hub cache at
#    $KERNELS_CACHE from the kernel index, as `kernels download .` would from the Hub. It needs
#    kernel-factory's dependencies, so it runs from a throwaway venv and probes the image's python.
if [ -f "$here/kernels.lock" ]; then
    kfenv=$(mktemp -d)
    python -m venv "$kfenv"
    "$kfenv/bin/python" -m pip install "kernel-factory==${KERNEL_FACTORY_VERSION}"
    "$kfenv/bin/kernel-factory" download "$here" --index-url "$KERNEL_INDEX_URL" --python "$(command -v python)"
    rm -rf "$kfenv"
fi
cat "$KERNELS_ENV_FILE"
