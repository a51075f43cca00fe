# A private PostgreSQL cluster and `onramp serve` on 127.0.0.1, for the scripts
# that test the built binary (scripts/faults, scripts/contract). Sourced after
# prerequisites.sh, with $work set to the script's temporary folder and
# $ONRAMP to the binary.

PG_BIN=$(pg_config --bindir 2>/dev/null || true)
[ -x "$PG_BIN/pg_ctl" ] || PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
SERVER_PID=""

# PostgreSQL refuses to run as root.
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u "${ONRAMP_PG_USER:-postgres}" -- "$@"; else "$@"; fi; }

free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
  echo "no free port" >&2; return 1
}

# start_cluster: a durable cluster (fsync on) in $work/data on a free port;
# sets PGPORT and ADMIN (a URL of its postgres database, user onramp).
start_cluster() {
  chmod 755 "$work"
  [ "$(id -u)" -eq 0 ] && chown "${ONRAMP_PG_USER:-postgres}" "$work"
  as_pg "$PG_BIN/initdb" -D "$work/data" -U onramp --auth=trust -E UTF8 --no-locale >/dev/null
  PGPORT=$(free_port)
  as_pg "$PG_BIN/pg_ctl" -D "$work/data" -l "$work/data/server.log" -w -t 60 \
    -o "-p $PGPORT -k $work -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
  ADMIN="postgresql://onramp@127.0.0.1:$PGPORT/postgres"
}

# create_database NAME: created and migrated; prints its URL.
create_database() {
  psql -q "$ADMIN" -c "CREATE DATABASE $1" >/dev/null
  "$ONRAMP" migrate --database-url "postgresql://onramp@127.0.0.1:$PGPORT/$1" >"$work/migrate-$1.log" 2>&1 ||
    { cat "$work/migrate-$1.log" >&2; return 1; }
  echo "postgresql://onramp@127.0.0.1:$PGPORT/$1"
}

# start_server URL DB [ARGS…]: `onramp serve` on URL's port against DB, logging
# to $work/server.log; returns once /healthz answers. Sets SERVER_PID.
start_server() {
  local url=$1 db=$2; shift 2
  LOG_LEVEL=warning "$ONRAMP" serve --port "${url##*:}" --metrics-listen off --database-url "$db" "$@" >>"$work/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 300); do
    curl -fs "$url/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -20 "$work/server.log" >&2; return 1; }
    sleep 0.1
  done
  echo "server did not come up" >&2; return 1
}

# stop_everything: the server (kill -9) and the cluster (immediate); for a trap.
stop_everything() {
  [ -n "$SERVER_PID" ] && kill -9 "$SERVER_PID" 2>/dev/null || true
  as_pg "$PG_BIN/pg_ctl" -D "$work/data" -m immediate -w stop >/dev/null 2>&1 || true
}
