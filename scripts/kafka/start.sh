#!/usr/bin/env bash
# Start a real single-node Apache Kafka broker (KRaft, combined broker+controller)
# for local development and tests, from Kafka's jars on Maven Central.
#
#   scripts/kafka/start.sh        (npm run kafka:start)
#
# - Kafka $KAFKA_VERSION (default 4.4.0). Clients connect to PLAINTEXT://127.0.0.1:$KAFKA_PORT
#   (default 9092; controller on $KAFKA_CONTROLLER_PORT, default KAFKA_PORT + 1).
# - State lives in $KAFKA_HOME (default <repo>/.kafka/, gitignored): data/ is wiped and
#   re-formatted on every start, logs/ holds kafka.out + log files, kafka.pid the broker's pid.
# - The first run resolves the jars with Maven into ~/.m2 and caches the classpath
#   in .kafka/classpath-<version>.txt; later starts do not run Maven.
# - Idempotent: if our broker is already running and answering, it says so and
#   exits 0.
# - Returns once a real kafkajs client can talk to the broker (and the group and
#   transaction coordinators are warmed up), or exits 1 with the log tail.
#
# Env overrides (see common.sh): KAFKA_VERSION, KAFKA_PORT, KAFKA_CONTROLLER_PORT, KAFKA_HOME,
# KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS,
# KAFKA_START_TIMEOUT (s, default 120), KAFKA_CDS=0 (no class-data archive), JAVA_HOME.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

JAVA_BIN="java"
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then JAVA_BIN="$JAVA_HOME/bin/java"; fi
command -v "$JAVA_BIN" >/dev/null 2>&1 || { kafka_err "java not found (JDK 17 needed)"; exit 1; }

mkdir -p "$KAFKA_HOME" "$KAFKA_LOG_DIR"

# One start at a time (two concurrent `kafka:start`s must not race).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$KAFKA_HOME/start.lock"
  if ! flock -w $((KAFKA_START_TIMEOUT + 300)) 9; then
    kafka_err "another kafka:start is still running; giving up"
    exit 1
  fi
fi

KAFKA_CLASSPATH=""
CDS_OPTS=()
BROKER_CDS_OPTS=()
cds_archive=""

# ---------------------------------------------------------------------------
# Readiness: wait for the TCP port, then for a real client round trip.
# ---------------------------------------------------------------------------
fail_start() {
  local pid="$1" why="$2"
  kafka_err "$why"
  kafka_log_tail 40
  if kafka_is_our_pid "$pid"; then
    kafka_err "stopping the half-started broker (pid $pid)"
    "$KAFKA_SCRIPT_DIR/stop.sh" >&2 || true
  fi
  # An archive dumped by a broker that never finished starting would be thin.
  if [ "${BROKER_CDS_OPTS[0]:-}" = "-XX:ArchiveClassesAtExit=${cds_archive:-}" ]; then rm -f "$cds_archive"; fi
  exit 1
}

probe_with_java() {
  # Fallback when node/kafkajs is not installed: Kafka's own AdminClient-based tool
  # (kafka.admin.BrokerApiVersionsCommand in 3.x; org.apache.kafka.tools.* in 4.x, when on the
  # classpath; otherwise only the open port was checked).
  local tool="kafka.admin.BrokerApiVersionsCommand"
  if [ "$KAFKA_MAJOR" -ge 4 ]; then
    tool="org.apache.kafka.tools.BrokerApiVersionsCommand"
    if ! grep -q 'kafka-tools-[0-9]' <<<"$KAFKA_CLASSPATH"; then
      kafka_log "kafka-tools is not on the classpath; the port is open, assuming ready"
      return 0
    fi
  fi
  "$JAVA_BIN" -Xmx128m -XX:TieredStopAtLevel=1 "${CDS_OPTS[@]}" -cp "$KAFKA_CLASSPATH" \
    "$KAFKA_LOG4J_OPT" -Dkafka.logs.dir="$KAFKA_LOG_DIR/tools" \
    "$tool" --bootstrap-server "$KAFKA_HOST:$KAFKA_PORT" \
    >"$KAFKA_LOG_DIR/probe.out" 2>&1
}

wait_ready() {
  local pid="$1" deadline=$((SECONDS + KAFKA_START_TIMEOUT)) remaining rc
  until kafka_port_open "$KAFKA_HOST" "$KAFKA_PORT"; do
    kafka_is_our_pid "$pid" || fail_start "$pid" "broker process $pid exited during startup"
    [ "$SECONDS" -lt "$deadline" ] || fail_start "$pid" "broker did not open $KAFKA_HOST:$KAFKA_PORT within ${KAFKA_START_TIMEOUT}s"
    sleep 0.1
  done
  remaining=$((deadline - SECONDS)); [ "$remaining" -ge 5 ] || remaining=5
  rc=0
  if command -v node >/dev/null 2>&1; then
    node "$KAFKA_SCRIPT_DIR/check.mjs" "$KAFKA_HOST:$KAFKA_PORT" "$remaining" --warm || rc=$?
  else
    rc=3
  fi
  if [ "$rc" -eq 3 ]; then
    kafka_log "probing with kafka.admin.BrokerApiVersionsCommand instead"
    [ -n "$KAFKA_CLASSPATH" ] || KAFKA_CLASSPATH="$(cat "$KAFKA_CLASSPATH_FILE")"
    rc=1
    while [ "$SECONDS" -lt "$deadline" ]; do
      kafka_is_our_pid "$pid" || break
      if probe_with_java; then rc=0; kafka_log "ready (ApiVersions answered)"; break; fi
      sleep 1
    done
  fi
  [ "$rc" -eq 0 ] || fail_start "$pid" "broker is not answering clients on $KAFKA_HOST:$KAFKA_PORT after ${KAFKA_START_TIMEOUT}s"
}

# ---------------------------------------------------------------------------
# Already running?
# ---------------------------------------------------------------------------
if ! pid="$(kafka_running_pid)"; then
  # A broker of this checkout whose pid file got lost: adopt it.
  pid="$(kafka_orphan_pids | head -n 1)"
  if [ -n "$pid" ]; then echo "$pid" >"$KAFKA_PID_FILE"; fi
fi
if [ -n "${pid:-}" ]; then
  if kafka_port_open "$KAFKA_HOST" "$KAFKA_PORT"; then
    kafka_log "Kafka $KAFKA_VERSION already running (pid $pid) on $KAFKA_HOST:$KAFKA_PORT; nothing to do"
    exit 0
  fi
  kafka_log "Kafka (pid $pid) is still starting; waiting for it"
  wait_ready "$pid"
  exit 0
fi
rm -f "$KAFKA_PID_FILE"

for port in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
  if kafka_port_open "$KAFKA_HOST" "$port"; then
    kafka_err "$KAFKA_HOST:$port is already in use by a process this script did not start; not starting"
    exit 1
  fi
done

# ---------------------------------------------------------------------------
# Classpath: resolve once with Maven, then reuse the cached file.
# ---------------------------------------------------------------------------
# The key covers the pom and the version: a change of either re-resolves.
pom_key="$( { cat "$KAFKA_POM"; printf 'kafka.version=%s\n' "$KAFKA_VERSION"; } | sha256sum | cut -d' ' -f1)"
classpath_ok() {
  [ -s "$KAFKA_CLASSPATH_FILE" ] && [ "$(cat "$KAFKA_CLASSPATH_KEY_FILE" 2>/dev/null)" = "$pom_key" ] || return 1
  local jar jars
  IFS=':' read -r -a jars <"$KAFKA_CLASSPATH_FILE"
  for jar in "${jars[@]}"; do [ -f "$jar" ] || return 1; done
}
if ! classpath_ok; then
  command -v mvn >/dev/null 2>&1 || { kafka_err "mvn not found; it is needed once to fetch the Kafka jars"; exit 1; }
  kafka_log "resolving Kafka $KAFKA_VERSION jars with Maven (first run only)..."
  t0=$SECONDS
  if ! mvn -q -B -f "$KAFKA_POM" dependency:build-classpath \
    -Dkafka.version="$KAFKA_VERSION" -Dkafka.major="$KAFKA_MAJOR" \
    -Dmdep.outputFile="$KAFKA_CLASSPATH_FILE.tmp" -Dmdep.includeScope=runtime \
    >"$KAFKA_HOME/maven.log" 2>&1; then
    kafka_err "Maven could not resolve the Kafka jars:"
    tail -n 30 "$KAFKA_HOME/maven.log" >&2
    exit 1
  fi
  mv "$KAFKA_CLASSPATH_FILE.tmp" "$KAFKA_CLASSPATH_FILE"
  echo "$pom_key" >"$KAFKA_CLASSPATH_KEY_FILE"
  kafka_log "resolved in $((SECONDS - t0))s; classpath cached in ${KAFKA_CLASSPATH_FILE#"$REPO_ROOT"/}"
fi
KAFKA_CLASSPATH="$(cat "$KAFKA_CLASSPATH_FILE")"

# ---------------------------------------------------------------------------
# AppCDS: a dynamic class-data archive is only valid for the exact JDK and
# classpath it was dumped with, so both are part of its file name. The first
# broker with a given key dumps it when it exits (kafka:stop); later JVMs map it.
# A stale or broken archive is ignored by the JVM (-Xshare:auto).
# ---------------------------------------------------------------------------
if [ "$KAFKA_CDS" = "1" ]; then
  cds_key="$( { "$JAVA_BIN" -version 2>&1; printf '%s' "$KAFKA_CLASSPATH"; } | sha256sum | cut -c1-16)"
  cds_archive="$KAFKA_CDS_DIR/kafka-$KAFKA_VERSION-$cds_key.jsa"
  mkdir -p "$KAFKA_CDS_DIR"
  if [ -s "$cds_archive" ]; then
    CDS_OPTS=(-XX:SharedArchiveFile="$cds_archive" -Xshare:auto)
    BROKER_CDS_OPTS=("${CDS_OPTS[@]}")
  else
    find "$KAFKA_CDS_DIR" -name '*.jsa' -delete 2>/dev/null || true
    BROKER_CDS_OPTS=(-XX:ArchiveClassesAtExit="$cds_archive" "-Xlog:cds=error,cds+dynamic=error")
  fi
fi

# ---------------------------------------------------------------------------
# Config + fresh KRaft storage.
# ---------------------------------------------------------------------------
cat >"$KAFKA_CONFIG" <<PROPS
# Generated by scripts/kafka/start.sh on every start; edit that script instead.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$KAFKA_HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT,CONTROLLER://$KAFKA_HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_DATA_DIR

# Single node: every topic, internal ones included, has one replica.
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
auto.create.topics.enable=true
delete.topic.enable=true
group.initial.rebalance.delay.ms=0

# Small footprint: 2 cores shared with the test suite.
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
background.threads=2
log.cleaner.threads=1
# No no-op record in the metadata log every 500 ms (halves idle CPU, no idle disk writes).
metadata.max.idle.interval.ms=0
PROPS

rm -rf "$KAFKA_DATA_DIR" "$KAFKA_LOG_DIR"
mkdir -p "$KAFKA_DATA_DIR" "$KAFKA_LOG_DIR"

# Random cluster id in Kafka's Uuid format (22 url-safe base64 chars), not starting with '-'.
cluster_id="-"
while [[ "$cluster_id" == -* ]]; do
  cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
done

COMMON_JVM_OPTS=(
  -Djava.awt.headless=true
  "$KAFKA_LOG4J_OPT"
  -Dkafka.logs.dir="$KAFKA_LOG_DIR"
)

if ! "$JAVA_BIN" -Xmx256m -XX:TieredStopAtLevel=1 "${CDS_OPTS[@]}" -cp "$KAFKA_CLASSPATH" "${COMMON_JVM_OPTS[@]}" \
  kafka.tools.StorageTool format -t "$cluster_id" -c "$KAFKA_CONFIG" >"$KAFKA_LOG_DIR/format.log" 2>&1; then
  kafka_err "formatting KRaft storage failed:"
  cat "$KAFKA_LOG_DIR/format.log" >&2
  exit 1
fi

# ---------------------------------------------------------------------------
# Launch in the background, in its own session, immune to the caller's SIGHUP.
# ---------------------------------------------------------------------------
# shellcheck disable=SC2086 # the *_OPTS variables are lists of flags
(
  cd "$KAFKA_HOME"
  exec 9>&- # do not let the broker inherit (and hold) the start lock
  exec nohup setsid "$JAVA_BIN" -server $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS \
    -XX:+ExitOnOutOfMemoryError "${BROKER_CDS_OPTS[@]}" "${COMMON_JVM_OPTS[@]}" \
    -cp "$KAFKA_CLASSPATH" kafka.Kafka "$KAFKA_CONFIG"
) </dev/null >"$KAFKA_LOG_DIR/kafka.out" 2>&1 &
pid=$!
# $! is the java process itself (nohup and setsid exec into it). Should setsid
# ever have forked instead, find the broker by its exact command line.
for _ in $(seq 1 100); do
  kafka_is_our_pid "$pid" && break
  if [ ! -e "/proc/$pid" ] || grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
    pid="$(kafka_orphan_pids | head -n 1)"; pid="${pid:-$!}"
    kafka_is_our_pid "$pid" && break
  fi
  sleep 0.05
done
echo "$pid" >"$KAFKA_PID_FILE"
kafka_log "starting Kafka $KAFKA_VERSION (pid $pid, cluster $cluster_id); logs in ${KAFKA_LOG_DIR#"$REPO_ROOT"/}/"

wait_ready "$pid"
kafka_log "Kafka $KAFKA_VERSION is up on $KAFKA_HOST:$KAFKA_PORT (pid $pid) after ${SECONDS}s"
