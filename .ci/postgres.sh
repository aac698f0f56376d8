#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests that run bucketd on PostgreSQL.
#
#   bash .ci/postgres.sh start [port]   # initdb in a temporary directory, start it on a
#                                       # private port (default 55432), print its URI
#   bash .ci/postgres.sh stop [port]    # stop it and remove the directory
#
# PostgreSQL comes from Debian's packages (installed when no initdb is found and we are
# root). initdb refuses root, so as root the cluster runs as the `postgres` user the
# package creates. Trust authentication, listening on 127.0.0.1 only: for tests only.
set -euo pipefail

cmd=${1:-start}
port=${2:-55432}
state="${TMPDIR:-/tmp}/bucketd-postgres-${port}.dir"

find_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  done
  command -v initdb >/dev/null 2>&1 && dirname "$(command -v initdb)" && return 0
  return 1
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
  start)
    if ! bin=$(find_bin); then
      if [ "$(id -u)" != 0 ]; then
        echo ".ci/postgres.sh: PostgreSQL is not installed (need root to apt-get it)" >&2
        exit 1
      fi
      echo ".ci/postgres.sh: installing PostgreSQL from Debian's packages" >&2
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >&2
      apt-get install -y -qq postgresql >&2
      bin=$(find_bin)
    fi
    if [ -f "$state" ] && [ -d "$(cat "$state")" ]; then
      as_owner "$bin/pg_ctl" -D "$(cat "$state")/data" -m immediate stop >/dev/null 2>&1 || true
      rm -rf "$(cat "$state")"
    fi
    dir=$(mktemp -d "${TMPDIR:-/tmp}/bucketd-pg.XXXXXX")
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U bucketd --auth=trust -E UTF8 --locale=C.UTF-8 \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=200" \
      start >&2 || { cat "$dir/postgres.log" >&2; exit 1; }
    echo "$dir" >"$state"
    echo "postgresql://bucketd@127.0.0.1:${port}/postgres"
    ;;
  stop)
    [ -f "$state" ] || exit 0
    dir=$(cat "$state")
    bin=$(find_bin)
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir" "$state"
    ;;
  *)
    echo "usage: .ci/postgres.sh start|stop [port]" >&2
    exit 2
    ;;
esac
