# `scripts/citus faults`: the nightly job's cursor on the Citus cluster.
# Sourced by scripts/citus, after scripts/lib/citus_check.sh (own_cluster,
# serve_on).
#
# The server appends simulated traffic, each group commit a two-phase commit
# over the workers, while nights run back to back; then one more night once
# the load is over, and a rebuild. Every committed row must be read by
# exactly one night: the nights' new events add up to the log's events, and
# the tables the nights left equal the rebuild's (scripts/lib/projection_md5.sql).
# With ONRAMP_CITUS_FAULTS_ON=single the same runs on one PostgreSQL.

faults() {
  ONRAMP=${ONRAMP:-$(swift build --show-bin-path)/onramp}
  [ -x "$ONRAMP" ] || { echo "no onramp binary at $ONRAMP (swift build first)" >&2; exit 1; }
  ensure_packages curl
  own_cluster onramp_faults
  # The control: the same on one PostgreSQL, where every night must pass.
  if [ "${ONRAMP_CITUS_FAULTS_ON:-cluster}" = single ]; then
    start_cluster
    psql -q "$ADMIN" -c "CREATE DATABASE single"
    cluster_db="postgresql://onramp@127.0.0.1:$PGPORT/single"
  fi
  "$ONRAMP" migrate --database-url "$cluster_db" >"$work/migrate.log" 2>&1 || { cat "$work/migrate.log" >&2; return 1; }
  serve_on cluster "$cluster_db" || return 1

  local devices=${ONRAMP_CITUS_FAULT_DEVICES:-1500} sim nights=0 read=0 n
  "$ONRAMP" simulate --server "http://127.0.0.1:$(cat "$work/port-cluster")" --keys-file "$work/keys-cluster" \
    --seed 9 --devices "$devices" --days 3 --concurrency 32 >"$work/simulate.log" 2>&1 &
  sim=$!
  # night: one `onramp report`; adds its new events to $read.
  night() {
    "$ONRAMP" report --database-url "$cluster_db" --quiet --format json >/dev/null 2>"$work/night.log" ||
      { cat "$work/night.log" >&2; return 1; }
    n=$(grep -oE '^[a-z]+: [0-9]+ new events' "$work/night.log" | grep -oE '[0-9]+' | head -1)
    [ -n "$n" ] || { echo "citus faults: no summary from the night:" >&2; cat "$work/night.log" >&2; return 1; }
    read=$((read + n)) nights=$((nights + 1))
  }
  while kill -0 "$sim" 2>/dev/null; do night || return 1; done
  wait "$sim" || { tail -5 "$work/simulate.log" >&2; return 1; }
  night || return 1
  local events
  events=$(psql -qAt "$cluster_db" -c "SELECT count(*) FROM events")
  psql -qAt "$cluster_db" -f scripts/lib/projection_md5.sql >"$work/nights.md5"
  "$ONRAMP" rebuild --database-url "$cluster_db" --quiet --format json >/dev/null 2>"$work/rebuild.log" ||
    { cat "$work/rebuild.log" >&2; return 1; }
  psql -qAt "$cluster_db" -f scripts/lib/projection_md5.sql >"$work/rebuild.md5"
  echo "citus faults: $nights nights during and after the load read $read events; the log holds $events" >&2
  local status=0
  [ "$read" -eq "$events" ] || { echo "citus faults: the nights read $((read - events)) events more than the log holds" >&2; status=1; }
  if ! diff "$work/nights.md5" "$work/rebuild.md5" >"$work/diff"; then
    echo "citus faults: the nights' tables differ from a rebuild's (nights <, rebuild >):" >&2
    cat "$work/diff" >&2
    status=1
  fi
  [ "$status" -eq 0 ] && echo "citus faults: passed; every committed row read by exactly one night" >&2
  return "$status"
}
