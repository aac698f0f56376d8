#!/bin/sh
# The compose test-runner: wait until the server at $BUCKETD_URI answers ping, then run
# pytest on $BUCKETD_TESTS (word-split: several paths or node ids). Its exit code is the run's.
#
# The wait is here as well as in compose's `depends_on: service_healthy` because podman-compose
# ignores health conditions on podman < 4.6.
set -eu
: "${BUCKETD_URI:?BUCKETD_URI must name the server, e.g. mongodb://bucketd:27017}"
: "${BUCKETD_TESTS:=tests/e2e}"
: "${BUCKETD_WAIT_SECONDS:=60}"
export BUCKETD_WAIT_SECONDS

echo "bucketd-run-tests: waiting up to ${BUCKETD_WAIT_SECONDS}s for $BUCKETD_URI"
python - <<'PY'
import os
import sys
import time

import pymongo

uri = os.environ["BUCKETD_URI"]
deadline = time.monotonic() + float(os.environ["BUCKETD_WAIT_SECONDS"])
while True:
    try:
        with pymongo.MongoClient(uri, serverSelectionTimeoutMS=1000) as client:
            client.admin.command("ping")
        break
    except pymongo.errors.PyMongoError as exc:
        if time.monotonic() > deadline:
            sys.exit(f"bucketd-run-tests: {uri} did not answer ping: {exc}")
        time.sleep(0.5)
print(f"bucketd-run-tests: {uri} answers ping", flush=True)
PY

markers="${BUCKETD_TEST_MARKERS:-not mongosh and not slow}"
echo "bucketd-run-tests: python -m pytest -q -p no:cacheprovider -m \"$markers\" $BUCKETD_TESTS"
# shellcheck disable=SC2086  # word splitting of the test list is wanted
exec python -m pytest -q -p no:cacheprovider -m "$markers" $BUCKETD_TESTS
