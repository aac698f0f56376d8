#!/usr/bin/env bash
# CI: build the docker image and run the compose scenarios with podman on a machine that
# reaches Debian's mirror and PyPI but no container registry. Follows
# shared/design/containers.md: a Debian base image made with debootstrap, a python3 layer on
# it, the project's Dockerfile built on that, then `podman-compose up` of
# docker/docker-compose.yml (bucketd on SQLite), then of docker/docker-compose.postgres.yml
# (a PostgreSQL image built from Debian's packages, docker/postgres/Dockerfile, and two
# bucketd replicas on it); a scenario's test-runner exit code is this script's (the first
# that fails). Everything it creates is removed on exit.
#
# Environment (optional):
#   BUCKETD_TESTS          what the runner passes to pytest (default: the compose file's)
#   BUCKETD_PG_TESTS       the same for the PostgreSQL scenario
#   BUCKETD_CI_POSTGRES    =0 skips the PostgreSQL scenario
#   BUCKETD_CI_SQLITE      =0 skips the SQLite one (to debug the other)
#   BUCKETD_CI_FORCE_FAIL  =1 runs tests/ci/test_forced_failure.py instead, which fails:
#                          shows that a failing runner fails this script
#   BUCKETD_CI_KEEP        =1 keeps the images and the work directory under /var/tmp
#                          (podman-compose venv, build logs) afterwards, for debugging
set -euo pipefail
cd "$(dirname "$0")/.."

PROJECT=bucketd-ci
PG_PROJECT=bucketd-ci-pg
SUITE=bookworm
BASE_OS_IMAGE=localhost/debian:ci
BASE_IMAGE=localhost/bucketd-base:ci
APP_IMAGE=localhost/bucketd:ci
PG_IMAGE=localhost/bucketd-postgres:ci
COMPOSE_FILE=docker/docker-compose.yml
PG_COMPOSE_FILE=docker/docker-compose.postgres.yml
PODMAN_COMPOSE_SPEC="podman-compose==1.6.0"
CONTAINERS_CONF=/etc/containers/containers.conf

step() { printf '[compose.sh %4ss] %s\n' "$SECONDS" "$*"; }
fail() { step "FAILED: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "must run as root (apt-get, debootstrap, rootful podman)"

if [ "${BUCKETD_CI_FORCE_FAIL:-}" = 1 ]; then
  export BUCKETD_CI_FORCE_FAIL
  export BUCKETD_TESTS=tests/ci/test_forced_failure.py
  step "BUCKETD_CI_FORCE_FAIL=1: the runner runs $BUCKETD_TESTS, which must fail"
fi

work=""
conf_backup=""
conf_created=0
compose=()

remove_podman_objects() {
  # Whatever these projects left in podman: containers, their networks and volumes, our
  # images.
  local ids project
  for project in "$PROJECT" "$PG_PROJECT"; do
    ids=$(podman ps -aq --filter "label=io.podman.compose.project=$project" 2>/dev/null || true)
    [ -z "$ids" ] || timeout 60 podman rm -f -v $ids >/dev/null 2>&1 || true
    ids=$(podman volume ls -q --filter "label=io.podman.compose.project=$project" 2>/dev/null || true)
    [ -z "$ids" ] || timeout 60 podman volume rm -f $ids >/dev/null 2>&1 || true
    timeout 60 podman network rm -f "${project}_default" >/dev/null 2>&1 || true
  done
  timeout 60 podman rm -f -v "$PROJECT-healthcheck" >/dev/null 2>&1 || true
  if [ "${BUCKETD_CI_KEEP:-}" != 1 ]; then
    timeout 120 podman rmi -f "$APP_IMAGE" "$PG_IMAGE" "$BASE_IMAGE" "$BASE_OS_IMAGE" \
      >/dev/null 2>&1 || true
  fi
}

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  step "cleaning up"
  if [ ${#compose[@]} -gt 0 ]; then
    step "podman-compose down -v"
    timeout 120 "${compose[@]}" down -v >/dev/null 2>&1
  fi
  if command -v podman >/dev/null; then
    remove_podman_objects
  fi
  if [ -n "$conf_backup" ]; then
    cp -p "$conf_backup" "$CONTAINERS_CONF"
  elif [ "$conf_created" = 1 ]; then
    rm -f "$CONTAINERS_CONF"
  fi
  if [ -n "$work" ] && [ "${BUCKETD_CI_KEEP:-}" != 1 ]; then
    rm -rf "$work"
  fi
  step "done: exit code $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The main archive from the machine's apt sources (deb822 or one-line format): the first URI
# of a `deb` entry whose suite is a bare codename (not -security, -updates, ...).
apt_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
      {
        types = ""; uris = ""; suites = ""; enabled = "yes"
        for (i = 1; i <= NF; i++) {
          line = $i
          if (line ~ /^[ \t]*#/) continue
          key = tolower(line); sub(/:.*/, "", key)
          val = line; sub(/^[^:]*:[ \t]*/, "", val)
          if (key == "types") types = val
          else if (key == "uris") uris = val
          else if (key == "suites") suites = val
          else if (key == "enabled") enabled = tolower(val)
        }
        if (enabled == "no" || (" " types " ") !~ / deb /) next
        n = split(suites, s, /[ \t]+/)
        for (j = 1; j <= n; j++) if (s[j] ~ /^[a-z]+$/) { split(uris, u, /[ \t]+/); print u[1]; exit }
      }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && $3 ~ /^[a-z]+$/ { print $2 }'
  done
}

# --- 1. packages -------------------------------------------------------------------------
step "1/9 packages: podman runc debootstrap (apt), podman-compose (PyPI, throwaway venv)"
if ! command -v podman >/dev/null || ! command -v runc >/dev/null \
   || ! command -v debootstrap >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  if ! timeout 300 apt-get install -y -q podman runc debootstrap >/dev/null; then
    step "apt-get install failed; apt-get update and retry"
    timeout 300 apt-get update -q >/dev/null
    timeout 300 apt-get install -y -q podman runc debootstrap >/dev/null
  fi
fi
work=$(mktemp -d /var/tmp/bucketd-ci.XXXXXX)
python3 -m venv "$work/venv"
timeout 300 "$work/venv/bin/pip" install -q "$PODMAN_COMPOSE_SPEC" 2>&1 | grep -v "^WARNING: Location" || true
[ -x "$work/venv/bin/podman-compose" ] || fail "podman-compose did not install"
step "$(podman --version), $("$work/venv/bin/podman-compose" --version 2>/dev/null | head -1)"

# --- 2. engine settings ------------------------------------------------------------------
step "2/9 engine settings in $CONTAINERS_CONF (runc, cgroupfs, fixed ulimits)"
conf_text='[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"'
if [ -f "$CONTAINERS_CONF" ]; then
  if [ "$(cat "$CONTAINERS_CONF")" != "$conf_text" ]; then
    conf_backup="$work/containers.conf.orig"
    cp -p "$CONTAINERS_CONF" "$conf_backup"
  fi
else
  mkdir -p "$(dirname "$CONTAINERS_CONF")"
  conf_created=1
fi
printf '%s\n' "$conf_text" >"$CONTAINERS_CONF"
remove_podman_objects  # leftovers of an earlier run that was killed before its cleanup

# --- 3. Debian base image ----------------------------------------------------------------
mirror=$(apt_mirror | head -n 1 || true)
[ -n "$mirror" ] || fail "no Debian mirror found in /etc/apt/sources.list{,.d}"
step "3/9 debootstrap --variant=minbase $SUITE from $mirror"
rootfs="$work/rootfs"
if ! timeout 600 debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -20 "$work/debootstrap.log" >&2
  fail "debootstrap"
fi
# This network's HTTPS may go through a proxy with its own CA: make the container trust what
# the host trusts (added to the bundle when ca-certificates is installed in the next step).
mkdir -p "$rootfs/usr/local/share/ca-certificates"
for crt in /usr/local/share/ca-certificates/*.crt; do
  if [ -f "$crt" ]; then cp "$crt" "$rootfs/usr/local/share/ca-certificates/"; fi
done
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/*
step "podman import -> $BASE_OS_IMAGE"
tar -C "$rootfs" -c . | timeout 300 podman import -q - "$BASE_OS_IMAGE" >/dev/null
rm -rf "$rootfs"

# --- 4. python layer ---------------------------------------------------------------------
step "4/9 build $BASE_IMAGE (python3 python3-venv ca-certificates)"
mkdir -p "$work/base"
cat >"$work/base/Containerfile" <<EOF
FROM $BASE_OS_IMAGE
RUN apt-get update -q \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \\
       python3 python3-venv ca-certificates \\
    && rm -rf /var/lib/apt/lists/*
EOF
timeout 600 podman build -q --pull=never --layers=false -t "$BASE_IMAGE" \
  -f "$work/base/Containerfile" "$work/base" >/dev/null 2>"$work/base.log" \
  || { tail -20 "$work/base.log" >&2; fail "podman build $BASE_IMAGE"; }

# --- 5. the project's image --------------------------------------------------------------
# docker format, not OCI: OCI images drop the Dockerfile's HEALTHCHECK.
step "5/9 build $APP_IMAGE from docker/Dockerfile (BASE_IMAGE=$BASE_IMAGE, EXTRAS=test)"
if ! timeout 900 podman build --pull=never --layers=false --format docker \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg EXTRAS=test \
    -t "$APP_IMAGE" -f docker/Dockerfile . >"$work/build.log" 2>&1; then
  tail -40 "$work/build.log" >&2
  fail "podman build"
fi

# --- 6. the image's HEALTHCHECK ---------------------------------------------------------
# podman here has no systemd to schedule health checks (podman-compose also ignores
# `service_healthy` on podman < 4.6, so the runner waits for ping itself): run the image's
# HEALTHCHECK by hand on a throwaway server until it reports healthy.
step "6/9 the image's HEALTHCHECK on a standalone server"
health_ctr="$PROJECT-healthcheck"
timeout 60 podman run -d --init --name "$health_ctr" "$APP_IMAGE" >/dev/null 2>"$work/health.log" \
  || { cat "$work/health.log" >&2; fail "podman run $APP_IMAGE"; }
healthy=0
for _ in $(seq 30); do
  if timeout 20 podman healthcheck run "$health_ctr" >/dev/null 2>&1; then healthy=1; break; fi
  sleep 1
done
if [ "$healthy" != 1 ]; then
  timeout 20 podman logs "$health_ctr" 2>&1 | tail -20 >&2
  fail "the image's HEALTHCHECK never passed"
fi
timeout 60 podman rm -f -v "$health_ctr" >/dev/null 2>&1
step "healthy"

# --- 7. compose scenarios ---------------------------------------------------------------
# run_scenario NAME PROJECT FILE TIMEOUT: `up` until the runner exits, then `down -v`;
# returns the runner's exit code.
run_scenario() {
  local name=$1 rc
  compose=("$work/venv/bin/podman-compose" -p "$2" -f "$3")
  # Hidden from the live output: the server's per-connection log lines (hundreds in the
  # connection tests) and podman's complaints about scheduling health checks without systemd.
  set +e
  timeout -k 20 "$4" "${compose[@]}" up --no-build --abort-on-container-exit --exit-code-from tests 2>&1 \
    | grep --line-buffered -v -E '"id":(22943|22944|51800),|unable to get systemd connection'
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" = 0 ]; then
    step "$name scenario passed"
  else
    [ "$rc" = 124 ] && step "$name scenario timed out"
    step "$name scenario FAILED (exit code $rc)"
  fi
  timeout 120 "${compose[@]}" down -v >/dev/null 2>&1 || true
  compose=()
  return "$rc"
}

step "7/9 podman-compose up (runner tests: ${BUCKETD_TESTS:-default of $COMPOSE_FILE})"
export BUCKETD_IMAGE="$APP_IMAGE" BASE_IMAGE
if [ "${BUCKETD_CI_SQLITE:-1}" = 0 ]; then
  step "the SQLite scenario is skipped"
else
  run_scenario SQLite "$PROJECT" "$COMPOSE_FILE" 900 || exit $?
fi

if [ "${BUCKETD_CI_POSTGRES:-1}" = 0 ] || [ "${BUCKETD_CI_FORCE_FAIL:-}" = 1 ]; then
  step "the PostgreSQL scenario is skipped"
  exit 0
fi

# --- 8. PostgreSQL image -----------------------------------------------------------------
step "8/9 build $PG_IMAGE from docker/postgres/Dockerfile (Debian's postgresql)"
timeout 600 podman build -q --pull=never --layers=false --build-arg "BASE_IMAGE=$BASE_OS_IMAGE" \
  -t "$PG_IMAGE" -f docker/postgres/Dockerfile docker/postgres >/dev/null 2>"$work/pg.log" \
  || { tail -20 "$work/pg.log" >&2; fail "podman build $PG_IMAGE"; }

# --- 9. PostgreSQL scenario --------------------------------------------------------------
step "9/9 podman-compose up $PG_COMPOSE_FILE: postgres, two bucketd replicas (runner tests: ${BUCKETD_PG_TESTS:-its default})"
export POSTGRES_IMAGE="$PG_IMAGE"
run_scenario PostgreSQL "$PG_PROJECT" "$PG_COMPOSE_FILE" 600
