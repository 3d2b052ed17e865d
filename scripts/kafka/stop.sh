#!/usr/bin/env bash
# Stop the dev Kafka broker started by scripts/kafka/start.sh (npm run kafka:stop):
# SIGTERM (controlled shutdown), wait up to KAFKA_STOP_TIMEOUT seconds (default
# 30), then SIGKILL. Exits 0 when no broker of this checkout is running.
# Only touches the process recorded in .kafka/kafka.pid, or a process whose
# command line is exactly our kafka.Kafka <repo>/.kafka/server.properties.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

pids=()
if pid="$(kafka_running_pid)"; then pids+=("$pid"); fi
while read -r orphan; do
  [ -n "$orphan" ] || continue
  [[ " ${pids[*]-} " == *" $orphan "* ]] || pids+=("$orphan")
done < <(kafka_orphan_pids)

if [ "${#pids[@]}" -eq 0 ]; then
  rm -f "$KAFKA_PID_FILE"
  kafka_log "no Kafka broker of this checkout is running"
  exit 0
fi

for pid in "${pids[@]}"; do
  kafka_log "stopping Kafka (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
done

t0=$SECONDS
deadline=$((SECONDS + KAFKA_STOP_TIMEOUT))
for pid in "${pids[@]}"; do
  while kafka_is_our_pid "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
  if kafka_is_our_pid "$pid"; then
    kafka_err "pid $pid still running after ${KAFKA_STOP_TIMEOUT}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kafka_is_our_pid "$pid" || break; sleep 0.1; done
  fi
done

rm -f "$KAFKA_PID_FILE"
kafka_log "stopped in $((SECONDS - t0))s"
