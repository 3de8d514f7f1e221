#!/usr/bin/env bash
# A throwaway Postgres server for the store's tests, in a folder of its own:
#   scripts/test-postgres.sh start DIR   initdb + pg_ctl start; prints the server's URL
#   scripts/test-postgres.sh stop DIR    stops it and removes DIR
# It listens on 127.0.0.1 only, on a free port, with trust authentication for its own user. Postgres
# refuses to run as root, so as root the cluster belongs to the `postgres` user that Debian's
# `postgresql` package creates (scripts/install-deps.sh installs it).
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|stop DIR" >&2
  exit 2
fi
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "error: no Postgres server found under /usr/lib/postgresql; run scripts/install-deps.sh" >&2
  exit 1
fi
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

case "$cmd" in
  start)
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
    user="$(as_owner id -un)"
    as_owner "$bin/initdb" -D "$dir/data" -U "$user" -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 || {
      cat "$dir/initdb.log" >&2
      exit 1
    }
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null || {
      cat "$dir/server.log" >&2
      exit 1
    }
    echo "postgres://$user@127.0.0.1:$port/postgres"
    ;;
  stop)
    if [ -d "$dir/data" ]; then
      as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start|stop DIR" >&2
    exit 2
    ;;
esac
