#!/usr/bin/env bash
# CI: the lowest and the highest published version of each optional peer dependency range in
# package.json (amqplib, ioredis, kafkajs, @platformatic/kafka, @opentelemetry/api), each against
# that adapter's suites.
#
# For every peer: ask the npm registry which releases the declared range matches, take the lowest
# and the highest; a version equal to the devDependency is skipped (the main `npm test` already
# ran on it). Each other version is installed with `npm install --no-save` (package.json and
# package-lock.json stay untouched), the project is type-checked against it, and the adapter's
# suites run. On exit the locked tree is restored with `npm ci`.
#
#   bash scripts/ci/peer-matrix.sh            every peer
#   bash scripts/ci/peer-matrix.sh ioredis    one peer
#
# Needs the services the suites need (Redis; Kafka for kafkajs) and CI=true to require them.
set -euo pipefail
cd "$(dirname "$0")/../.."

# peer -> the suites that exercise its adapter.
declare -A SUITES=(
  [amqplib]="test/integration/rabbitmq test/fuzz/rabbitmq-adapter.fuzz.test.ts test/integration/otel/rabbitmq-otel.test.ts"
  [ioredis]="test/integration/redis test/model/redis-claimer.model.test.ts test/model/concurrent-claims.model.test.ts"
  [kafkajs]="test/integration/kafka test/fuzz/kafka-adapter.fuzz.test.ts test/integration/otel/kafka-otel.test.ts"
  [@opentelemetry/api]="test/unit/otel test/integration/otel"
  [@platformatic/kafka]="the Kafka suites of scripts/ci/platformatic-kafka.sh"
)
# Peers whose suites run through a script of their own instead of `npx jest` on this node:
# @platformatic/kafka needs Node >= 22.22, so its suites run under Node 24 (its rows of the Kafka
# suites, with the kafkajs rows beside them).
declare -A RUNNERS=(
  [@platformatic/kafka]="bash scripts/ci/platformatic-kafka.sh"
)
# Extra `npm install` flags per peer. The OpenTelemetry SDK 2.x the repository tests with declares
# `@opentelemetry/api <1.10` as its peer (SDK 3.x, which takes 1.10, needs 1.10 exactly), so the
# other end of twophase's api range is installed over that declaration with --force; twophase/otel
# itself uses only the API.
declare -A INSTALL_FLAGS=(
  [@opentelemetry/api]="--force"
)

peers=("$@")
[ "${#peers[@]}" -gt 0 ] || peers=(amqplib ioredis kafkajs @platformatic/kafka @opentelemetry/api)

# "<lowest> <highest>" of the published, non-prerelease versions matching the peer's range.
range_ends() {
  local peer="$1" range
  range="$(node -p "require('./package.json').peerDependencies['$peer'] ?? ''")"
  [ -n "$range" ] || { echo "peer-matrix: $peer is not a peer dependency in package.json" >&2; return 1; }
  npm view "$peer@$range" version --json 2>/dev/null | node -e '
    let text = ""; process.stdin.on("data", (d) => (text += d)).on("end", () => {
      const list = [].concat(JSON.parse(text)).filter((v) => /^\d+\.\d+\.\d+$/.test(v));
      const key = (v) => v.split(".").map(Number);
      list.sort((a, b) => { const x = key(a), y = key(b); return x[0] - y[0] || x[1] - y[1] || x[2] - y[2]; });
      if (list.length === 0) process.exit(1);
      console.log(list[0], list[list.length - 1]);
    });'
}

# The version in node_modules (read as a file: some packages' exports maps hide package.json).
installed() { node -p "JSON.parse(require('fs').readFileSync('node_modules/$1/package.json', 'utf8')).version"; }

changed=0
restore() {
  if [ "$changed" -eq 1 ]; then
    echo "== peer matrix: restoring the locked dependency tree (npm ci)"
    npm ci --no-audit --no-fund >/dev/null
  fi
}
trap restore EXIT

summary=()
for peer in "${peers[@]}"; do
  [ -n "${SUITES[$peer]:-}" ] || { echo "peer-matrix: no suites listed for $peer" >&2; exit 1; }
  locked="$(installed "$peer")"
  read -r lowest highest < <(range_ends "$peer")
  echo "== peer matrix: $peer $(node -p "require('./package.json').peerDependencies['$peer']") -> lowest $lowest, highest $highest (devDependency $locked)"
  for version in $(printf '%s\n' "$lowest" "$highest" | sort -u); do
    if [ "$version" = "$locked" ]; then
      echo "-- $peer@$version is the devDependency: covered by the main test run"
      summary+=("$peer@$version: main run")
      continue
    fi
    t0=$SECONDS
    echo "-- $peer@$version: install (no save)"
    # shellcheck disable=SC2086 # INSTALL_FLAGS holds a list of flags
    npm install --no-save --no-audit --no-fund ${INSTALL_FLAGS[$peer]:-} "$peer@$version" >/dev/null
    changed=1
    [ "$(installed "$peer")" = "$version" ] || { echo "peer-matrix: $peer@$version did not install" >&2; exit 1; }
    echo "-- $peer@$version: typecheck"
    npm run --silent typecheck
    echo "-- $peer@$version: ${SUITES[$peer]}"
    if [ -n "${RUNNERS[$peer]:-}" ]; then
      # shellcheck disable=SC2086 # RUNNERS holds a command line
      ${RUNNERS[$peer]}
    else
      # shellcheck disable=SC2086 # SUITES holds a list of paths
      npx jest ${SUITES[$peer]}
    fi
    summary+=("$peer@$version: passed in $((SECONDS - t0)) s")
  done
done
printf '== peer matrix summary\n'
printf '   %s\n' "${summary[@]}"
