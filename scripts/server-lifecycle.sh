# Sourced by the benchmark scripts. start_server LOG PORT COMMAND... runs COMMAND in the
# background with its output in LOG until http://127.0.0.1:PORT/health answers (up to 10
# minutes; if the server exits first, the script exits with its log); stop_server stops it
# (also on the script's exit).
SERVER=
start_server() {
  local log=$1 port=$2
  shift 2
  "$@" >"$log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 1200); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && return 0
    kill -0 "$SERVER" 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.5
  done
  echo "the server did not start (log: $log)" >&2
  exit 1
}
stop_server() {
  if [ -n "$SERVER" ]; then
    kill "$SERVER" 2>/dev/null
    wait "$SERVER" 2>/dev/null || true
  fi
  SERVER=
}
trap stop_server EXIT
