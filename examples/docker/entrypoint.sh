#!/bin/sh
# Sets LOCAL_KERNELS (written at build time by `kernel-factory local-kernels --shell`), then runs the command.
set -eu
. "${KERNELS_ENV_FILE:?}"
exec "$@"
