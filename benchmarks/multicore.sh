#!/usr/bin/env bash
# The multicore curves on a machine with more cores than the development one (the 16-core device
# machine): builds the engine there, then runs benchmarks.threading (the IBM Streams paper's
# shapes, at 1 to 16 workers and elastic), its full-size shapes (1,000 operators), runs ten times
# longer (about 1.3 s at 16 workers) with elastic ones beside 8 and 16 workers, traced (plot them with
# --plot or po.plot_thread_levels: the paper's Figure 11), the paper's costs (1 to 100,000 flops:
# 0 to 100 us) at about 2 s of work each, and benchmarks.scaling. Each part writes its
# markdown to $OUT (default ./multicore-out) as it ends, under its own time limit, so a part that
# overruns costs only itself.
#     SCALE=0.01 benchmarks/multicore.sh   # a dry run of every part in seconds
#     PARTS="threading trace" benchmarks/multicore.sh   # some parts (default all; merge needs Polars)
# Wheels in .whl/ (Polars for the merge part, say, where the machine has none) are installed first.
set -uo pipefail
OUT=${OUT:-$PWD/multicore-out}
SCALE=${SCALE:-1}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
rows() { python3 -c "print(max(200, int($1 * $SCALE)))"; }
nproc; python3 -c "import sys, pyarrow, nanobind; print(sys.version.split()[0], 'pyarrow', pyarrow.__version__, 'nanobind', nanobind.__version__)"
PARTS=${PARTS:-threading threading-full trace sweep scaling merge}
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/wheels .whl/*.whl || exit 1; fi
if [ -z "${PYTHONPATH_ENGINE:-}" ]; then
  start=$(date +%s)
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/site \
    -Ccmake.define.PYARROW_OPS_TESTING=ON . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  echo "built in $(( $(date +%s) - start )) s"
  PYTHONPATH_ENGINE=/tmp/site
fi
# Run from a copy of benchmarks/ alone, so the checkout's pyarrow_ops (no compiled engine) does not
# shadow the installed one.
work=$(mktemp -d); cp -r benchmarks "$work/"; cd "$work"
export PYTHONPATH=$PYTHONPATH_ENGINE
[ -d /tmp/wheels ] && export PYTHONPATH=$PYTHONPATH:/tmp/wheels
part() { local name=$1 limit=$2; shift 2; case " $PARTS " in *" $name "*) ;; *) return;; esac
  echo "== $name"; local s=$(date +%s)
  timeout "$limit" python3 -m "$@" 2>&1 | tee "$OUT/$name.md"; echo "== $name: rc ${PIPESTATUS[0]}, $(( $(date +%s) - s )) s"; }
part threading 130 benchmarks.threading --rows "$(rows 20000)" --depth 100 --width 10 --costs "${COSTS:-0,1}" \
  --threads 1,2,4,8,16 --repeat 2
part threading-full 90 benchmarks.threading --rows "$(rows 4000)" --depth 1000 --width 10 --costs 1 \
  --threads 1,4,16 --repeat 1 --only "manual,dedicated,ordered 1,ordered 4,ordered 16,ordered auto,dynamic 1,dynamic 4,dynamic 16,dynamic auto"
part trace 150 benchmarks.threading --rows "$(rows 200000)" --depth 100 --width 10 --costs 1 --threads 8,16 --repeat 2 \
  --most-parallel-rows "$(rows 20000000)" --only "ordered 8,ordered 16,ordered auto,dynamic 8,dynamic 16,dynamic auto" \
  --trace "$OUT/trace.json"
part sweep 200 benchmarks.threading --rows "$(rows 20000)" --depth 100 --width 10 --costs 0,0.1,1,10,100 --work-s 2 \
  --threads 1,4,16 --repeat 1
part scaling 150 benchmarks.scaling --rows "$(rows 10000000)" --threads 1,2,4,8,16 --repeat 2 ${SCALING_ONLY:+--only "$SCALING_ONLY"}
part merge 90 benchmarks.merge --rows "$(rows 2000000)" --inputs 4 20 --threads 16 --repeat 3
rm -f "$OUT/build.log"; ls -la "$OUT"
