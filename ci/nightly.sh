#!/usr/bin/env bash
# Nightly: the full gate on both runtimes, then ci/determinism (every scripted
# scenario five times against its snapshot). The store (every run's history,
# nodes' data directories, logs and results, and the JUnit files) is left in
# $EPOCHAL_STORE (default ./store) for the workflow to keep as an artifact.
# Runs by hand the same way: bash ci/nightly.sh
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
bash ci/gate.sh process docker || status=1
bash ci/determinism 5 || status=1
exit $status
