# shellcheck shell=bash
# shellcheck disable=SC2034 # the variables are used by the scripts that source this file
# Shared settings and helpers for scripts/kafka/{start,stop}.sh. Sourced, not run.
#
# Everything lives under $KAFKA_HOME (default <repo>/.kafka/, gitignored); the default is derived
# from the location of this file, never from the caller's working directory.

KAFKA_SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$KAFKA_SCRIPT_DIR/../.." && pwd)"

# Overridable by env, so a second broker (another version, another port, another home) can run
# beside the default one, e.g. KAFKA_VERSION=3.9.2 KAFKA_PORT=19092 KAFKA_HOME=/tmp/kafka39.
# The version is passed to Maven (scripts/kafka/pom.xml); the major version picks the log binding:
# 4.x brokers log through log4j2, 3.x through reload4j (log4j 1.x API).
: "${KAFKA_VERSION:=4.4.0}"
KAFKA_MAJOR="${KAFKA_VERSION%%.*}"
if ! [[ "$KAFKA_VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || [ "$KAFKA_MAJOR" -lt 3 ]; then
  printf '[kafka] KAFKA_VERSION must be a 3.x or 4.x release such as 4.4.0, got "%s"\n' "$KAFKA_VERSION" >&2
  exit 1
fi

KAFKA_HOST="127.0.0.1"
kafka_valid_port() { [[ "$1" =~ ^[0-9]{1,5}$ ]] && [ "$1" -ge 1 ] && [ "$1" -le 65535 ]; }
: "${KAFKA_PORT:=9092}"
kafka_valid_port "$KAFKA_PORT" || { printf '[kafka] KAFKA_PORT must be a TCP port, got "%s"\n' "$KAFKA_PORT" >&2; exit 1; }
: "${KAFKA_CONTROLLER_PORT:=$((KAFKA_PORT + 1))}"
kafka_valid_port "$KAFKA_CONTROLLER_PORT" || { printf '[kafka] KAFKA_CONTROLLER_PORT must be a TCP port, got "%s"\n' "$KAFKA_CONTROLLER_PORT" >&2; exit 1; }

: "${KAFKA_HOME:=$REPO_ROOT/.kafka}"
KAFKA_DATA_DIR="$KAFKA_HOME/data"
KAFKA_LOG_DIR="$KAFKA_HOME/logs"
KAFKA_PID_FILE="$KAFKA_HOME/kafka.pid"
KAFKA_CONFIG="$KAFKA_HOME/server.properties"
KAFKA_CLASSPATH_FILE="$KAFKA_HOME/classpath-$KAFKA_VERSION.txt"
KAFKA_CLASSPATH_KEY_FILE="$KAFKA_HOME/classpath-$KAFKA_VERSION.key"
KAFKA_POM="$KAFKA_SCRIPT_DIR/pom.xml"
if [ "$KAFKA_MAJOR" -ge 4 ]; then
  KAFKA_LOG4J_CONFIG="$KAFKA_SCRIPT_DIR/log4j2.properties"
  KAFKA_LOG4J_OPT="-Dlog4j2.configurationFile=file:$KAFKA_LOG4J_CONFIG"
else
  KAFKA_LOG4J_CONFIG="$KAFKA_SCRIPT_DIR/log4j.properties"
  KAFKA_LOG4J_OPT="-Dlog4j.configuration=file:$KAFKA_LOG4J_CONFIG"
fi
KAFKA_CDS_DIR="$KAFKA_HOME/cds"

# Small footprint: the machine has 2 cores shared with the test suite.
: "${KAFKA_HEAP_OPTS:=-Xms128m -Xmx512m}"
# Serial GC + C1-only JIT: half the startup CPU of Kafka's default G1/C2 flags and
# less idle CPU/RSS; plenty for a dev/test broker.
: "${KAFKA_JVM_PERFORMANCE_OPTS:=-XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
# 1 = keep an AppCDS archive of the broker's classes in .kafka/ (written when the
# first broker exits, used by later starts: ~1 s and ~1 CPU-s less per start).
: "${KAFKA_CDS:=1}"
: "${KAFKA_START_TIMEOUT:=120}"
: "${KAFKA_STOP_TIMEOUT:=30}"

kafka_log() { printf '[kafka] %s\n' "$*"; }
kafka_err() { printf '[kafka] %s\n' "$*" >&2; }

# True if $1 is a live process that is the broker started from this checkout
# (its command line names kafka.Kafka and our own server.properties).
kafka_is_our_pid() {
  local pid="$1" cmdline
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *" kafka.Kafka $KAFKA_CONFIG"* ]]
}

# Prints the pid from the pid file if that process is our broker.
kafka_running_pid() {
  local pid
  [ -f "$KAFKA_PID_FILE" ] || return 1
  pid="$(tr -dc '0-9' <"$KAFKA_PID_FILE")"
  kafka_is_our_pid "$pid" || return 1
  printf '%s\n' "$pid"
}

# Pids of brokers of this checkout that lost their pid file (found by exact
# command line match on our server.properties path, not by a broad name).
kafka_orphan_pids() {
  local d pid
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    if kafka_is_our_pid "$pid"; then printf '%s\n' "$pid"; fi
  done
}

# True if something accepts TCP connections on host:port.
kafka_port_open() {
  local host="$1" port="$2"
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

kafka_log_tail() {
  local f
  for f in "$KAFKA_LOG_DIR/kafka.out" "$KAFKA_LOG_DIR/server.log"; do
    if [ -s "$f" ]; then
      kafka_err "----- last lines of ${f#"$REPO_ROOT"/} -----"
      tail -n "${1:-40}" "$f" >&2
    fi
  done
}
