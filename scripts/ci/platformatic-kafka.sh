#!/usr/bin/env bash
# CI: the Kafka suites parametrised over the clients table (test/integration/kafka/support/clients.ts)
# under Node 24, which @platformatic/kafka needs (>= 22.22 or >= 24.6). Node comes from the npm
# registry's `node` package, installed into a temporary directory; the machine's node is not
# changed. With CI set, a row that cannot run fails (never skips).
#
#   bash scripts/ci/platformatic-kafka.sh     (NODE_LTS_MAJOR overrides the major, default 24)
set -euo pipefail
cd "$(dirname "$0")/../.."

major="${NODE_LTS_MAJOR:-24}"
[[ "$major" =~ ^[0-9]+$ ]] || { echo "platformatic-kafka: NODE_LTS_MAJOR must be a major version, got \"$major\"" >&2; exit 1; }

SUITES=(
  test/integration/kafka/kafka-clients.test.ts
  test/integration/kafka/kafka-consumer.test.ts
  test/integration/kafka/kafka-keys.test.ts
  test/integration/kafka/kafka-batched-commit.test.ts
  test/integration/kafka/kafka-group.test.ts
  test/conformance/kafka-source.test.ts
  test/integration/otel/kafka-otel.test.ts
  test/unit/platformatic-client.test.ts
)
# Suites whose kafkajs rows the Node 20 step already ran: only their @platformatic/kafka rows here.
PLATFORMATIC_ROWS_ONLY=(
  test/integration/kafka/kafka-session.test.ts
  test/integration/kafka/kafka-crash.test.ts
  test/integration/kafka/kafka-outage.test.ts
  test/integration/kafka/kafka-start-errors.test.ts
  test/integration/kafka/kafka-replay-operations.test.ts
  test/fuzz/kafka-adapter.fuzz.test.ts
)

dir="$(mktemp -d "${TMPDIR:-/tmp}/twophase-node$major.XXXXXX")"
trap 'rm -rf "$dir"' EXIT
echo "-- installing node@$major from the npm registry into $dir"
npm install --prefix "$dir" --no-save --no-audit --no-fund --no-package-lock "node@$major" >/dev/null
node_bin="$dir/node_modules/.bin/node"
[ -x "$node_bin" ] || { echo "platformatic-kafka: $node_bin was not installed" >&2; exit 1; }
version="$("$node_bin" --version)"
[[ "$version" == "v$major."* ]] || { echo "platformatic-kafka: expected Node $major, got $version" >&2; exit 1; }
echo "-- $version (machine: $(node --version))"

PATH="$dir/node_modules/.bin:$PATH" "$node_bin" node_modules/jest/bin/jest.js --runInBand "${SUITES[@]}"
PATH="$dir/node_modules/.bin:$PATH" "$node_bin" node_modules/jest/bin/jest.js --runInBand --testNamePattern '\[platformatic-' "${PLATFORMATIC_ROWS_ONLY[@]}"
