#!/usr/bin/env bash
# CI: the unit, conformance and in-process (memory adapter) suites under the current Node LTS,
# taken from the npm registry's `node` package and installed into a temporary directory. The
# machine's own node (the one every other CI step uses) is not changed.
#
#   bash scripts/ci/node-lts.sh            Node 24 (NODE_LTS_MAJOR overrides the major)
set -euo pipefail
cd "$(dirname "$0")/../.."

SUITES=(
  test/unit
  test/conformance
  test/model/in-memory-claimer.model.test.ts
  test/model/pipeline.model.test.ts
  test/fuzz/memory-adapter.fuzz.test.ts
  test/fuzz/s18-memory-fake-timers.test.ts
)

name=node-lts source scripts/ci/node-from-npm.sh

# jest's workers and anything a suite spawns by name run on the same node: put it first on PATH.
PATH="$node_dir:$PATH" "$node_bin" node_modules/jest/bin/jest.js "${SUITES[@]}"
