#!/bin/sh
# Entry point of docker/postgres/Dockerfile, after the official postgres image's: as root,
# give $PGDATA to the postgres user and start again as that user; on an empty $PGDATA,
# initdb with superuser $POSTGRES_USER (default postgres) and password $POSTGRES_PASSWORD
# (required: password authentication from other hosts), create $POSTGRES_DB (default: the
# user's name); then run the command (default `postgres`) listening on every address.
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA"
  chown postgres:postgres "$PGDATA"
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ "${1:-postgres}" != postgres ]; then
  exec "$@"
fi
[ $# -gt 0 ] && shift

user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set (password authentication)}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    postgres --single -D "$PGDATA" -c unix_socket_directories="" postgres >/dev/null <<SQL
CREATE DATABASE "$db" OWNER "$user";
SQL
  fi
  echo "postgres-entrypoint: initialised $PGDATA (user $user, database $db)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp "$@"
