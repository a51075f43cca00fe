# `scripts/citus bench`: what the cluster costs against one PostgreSQL on the
# same machine and traffic. Sourced by scripts/citus, after
# scripts/lib/citus_check.sh (own_cluster, serve_on, side_db).
#
# On one machine the coordinator, both workers and the one PostgreSQL share
# its cores, so the figures are Citus's overhead, not a cluster's speed
# (docs/scaling.md says what they mean for real machines).
#
# The nightly job: simulated traffic posted to the one PostgreSQL, its log
# copied to the cluster (each row with its shard key), then on each: a raw
# scan of the log, the first night, a rebuild; more traffic copied the same
# way, and an incremental night (`scripts/citus check` proves the tables
# equal, at one frozen clock). Then ingest: the
# fault suite's closed-loop clients against each server in turn, twice,
# alternating. Environment:
# ONRAMP, ONRAMP_FAULT, ONRAMP_CITUS_BENCH_DEVICES (default 6000),
# ONRAMP_CITUS_BENCH_SECONDS (each ingest run, default 20),
# ONRAMP_CITUS_BENCH_SHARDS (the log's shard count, default Citus's own, 32).
#
# Last, where the dedupe ledger should live (`ledger_placement`).

bench() {
  ONRAMP=${ONRAMP:-$(swift build --show-bin-path)/onramp}
  FAULT=${ONRAMP_FAULT:-$(dirname "$ONRAMP")/onramp-bench}
  [ -x "$ONRAMP" ] && [ -x "$FAULT" ] || { echo "no onramp and onramp-bench at $ONRAMP (swift build first)" >&2; exit 1; }
  ensure_packages curl jq
  own_cluster onramp_bench
  start_cluster
  psql -q "$ADMIN" -c "CREATE DATABASE single"
  [ -n "${ONRAMP_CITUS_BENCH_SHARDS:-}" ] &&
    psql -q "$cluster_db" -c "ALTER DATABASE $cluster_name SET citus.shard_count = $ONRAMP_CITUS_BENCH_SHARDS"
  local single_db="postgresql://onramp@127.0.0.1:$PGPORT/single" side db
  for side in single cluster; do
    db=$(side_db "$side")
    "$ONRAMP" migrate --database-url "$db" >"$work/migrate-$side.log" 2>&1 || { cat "$work/migrate-$side.log" >&2; return 1; }
    serve_on "$side" "$db" || return 1
  done

  local devices=${ONRAMP_CITUS_BENCH_DEVICES:-6000}
  "$ONRAMP" simulate --server "http://127.0.0.1:$(cat "$work/port-single")" --keys-file "$work/keys-single" \
    --seed 3 --devices "$devices" --days 14 --concurrency 32 >"$work/simulate-1.log" 2>&1 || { tail -5 "$work/simulate-1.log" >&2; return 1; }
  copy_log "$single_db" 0
  local events; events=$(psql -qAt "$cluster_db" -c "SELECT count(*) FROM events")
  declare -A scan first rebuild incremental
  for side in single cluster; do
    db=$(side_db "$side")
    scan[$side]=$(timed psql -qAt "$db" -c "COPY (SELECT * FROM events) TO STDOUT" -o /dev/null)
    first[$side]=$(timed "$ONRAMP" report --database-url "$db" --quiet --format json)
    rebuild[$side]=$(timed "$ONRAMP" rebuild --database-url "$db" --quiet --format json)
  done
  local seen; seen=$(psql -qAt "$single_db" -c "SELECT max(seq) FROM events")
  "$ONRAMP" simulate --server "http://127.0.0.1:$(cat "$work/port-single")" --keys-file "$work/keys-single" \
    --seed 4 --devices $((devices / 14)) --days 1 --concurrency 32 >"$work/simulate-2.log" 2>&1 || { tail -5 "$work/simulate-2.log" >&2; return 1; }
  copy_log "$single_db" "$seen"
  local day; day=$(psql -qAt "$single_db" -c "SELECT count(*) FROM events WHERE seq > $seen")
  for side in single cluster; do
    db=$(side_db "$side")
    incremental[$side]=$(timed "$ONRAMP" report --database-url "$db" --quiet --format json)
  done
  local spanning
  spanning=$(spanning_persons)
  echo "citus bench: the job on $events events (then $day more), seconds, one PostgreSQL / Citus cluster (× overhead):" >&2
  for what in scan first rebuild incremental; do
    local -n times=$what
    printf '  %-12s %8s %8s   × %s\n' "$what" "${times[single]}" "${times[cluster]}" \
      "$(awk -v a="${times[single]}" -v b="${times[cluster]}" 'BEGIN { printf "%.1f", b / a }')" >&2
  done
  echo "citus bench: identified persons whose devices span shards: $spanning" >&2

  local seconds=${ONRAMP_CITUS_BENCH_SECONDS:-20} round keys line
  declare -A rate p99
  for round in 1 2; do
    for side in single cluster; do
      keys=()
      while read -r line; do keys+=(--key "$line"); done <"$work/keys-$side"
      "$FAULT" fault-client load --url "http://127.0.0.1:$(cat "$work/port-$side")" "${keys[@]}" --clients 32 --batch 50 \
        --id-prefix "b$round$side" --ledger "$work/ledger" --max-seconds "$seconds" --drain-seconds 10 \
        >"$work/load-$round-$side.json" 2>>"$work/load.log"
      rate[$side]="${rate[$side]:-} $(jq -r '.acknowledgedPerSecond | floor' "$work/load-$round-$side.json")"
      p99[$side]="${p99[$side]:-} $(jq -r '.p99Milliseconds | floor' "$work/load-$round-$side.json")"
    done
  done
  echo "citus bench: ingest, 32 clients × 50 messages, ${seconds} s a run, acknowledged/s (p99 ms) by round:" >&2
  echo "  one PostgreSQL:${rate[single]} (${p99[single]# })" >&2
  echo "  Citus cluster: ${rate[cluster]} (${p99[cluster]# })" >&2
  ledger_placement
}

# ledger_placement: the append's two inserts, the ledger's then the log's, by
# pgbench on the cluster with the ledger distributed by message id (as
# migrate does) and colocated with the log by device, in scratch tables of
# their own. Groups of 800 messages (what two writers form under the fault
# clients' load) and of 5 (a quiet hour), two clients, alternating, twice.
ledger_placement() {
  local seconds=${ONRAMP_CITUS_BENCH_SECONDS:-20} placement n round key
  psql -q "$cluster_db" -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE TABLE placement_log (person_key text NOT NULL, app text NOT NULL, message_id text NOT NULL, seq bigint NOT NULL, properties jsonb);
CREATE TABLE placement_by_message (app text, message_id text, seq bigint NOT NULL, PRIMARY KEY (app, message_id));
CREATE TABLE placement_by_device (person_key text, app text, message_id text, seq bigint NOT NULL, PRIMARY KEY (person_key, app, message_id));
CREATE SEQUENCE placement_seq;
SELECT create_distributed_table('placement_log', 'person_key', colocate_with => 'none');
SELECT create_distributed_table('placement_by_message', 'message_id', colocate_with => 'none');
SELECT create_distributed_table('placement_by_device', 'person_key', colocate_with => 'placement_log');
SQL
  for placement in message device; do
    key="app, message_id"
    [ "$placement" = device ] && key="person_key, app, message_id"
    cat >"$work/by_$placement.sql" <<SQL
WITH input AS (
    SELECT 'device-' || (random() * 1e9)::bigint AS person_key, 'app' AS app, md5(random()::text || g) AS message_id, g AS ord
    FROM generate_series(1, :n) g
), accepted AS (
    INSERT INTO placement_by_$placement ($key, seq)
    SELECT $key, nextval('placement_seq') FROM input ORDER BY ord
    ON CONFLICT DO NOTHING
    RETURNING $key, seq
)
INSERT INTO placement_log (person_key, app, message_id, seq, properties)
SELECT i.person_key, i.app, i.message_id, a.seq, '{"step": 1}'::jsonb
FROM accepted a JOIN input i USING ($key);
SQL
  done
  declare -A placed
  for n in 800 5; do
    for round in 1 2; do
      for placement in message device; do
        placed[$n$placement]="${placed[$n$placement]:-} $("$PG_BIN/pgbench" -n -M prepared -c 2 -j 2 -T "$((seconds / 2))" -D n=$n \
          -f "$work/by_$placement.sql" "$cluster_db" 2>>"$work/pgbench.log" | awk -v n=$n '/^tps/ { printf "%.0f", $3 * n }')"
      done
    done
  done
  psql -q "$cluster_db" -c "DROP TABLE placement_log, placement_by_message, placement_by_device" -c "DROP SEQUENCE placement_seq"
  echo "citus bench: the ledger's placement, messages/s of the append's two inserts (2 clients, by round):" >&2
  for n in 800 5; do
    echo "  groups of $n: by message id${placed[${n}message]}; colocated by device${placed[${n}device]}" >&2
  done
}

# timed COMMAND…: runs it, prints its wall seconds; fails with it.
timed() {
  local started; started=$(date +%s.%N)
  "$@" >/dev/null 2>>"$work/timed.log" || { tail -5 "$work/timed.log" >&2; return 1; }
  awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'
}

# copy_log FROM_DB AFTER_SEQ: the rows of FROM_DB's log past AFTER_SEQ copied
# into the cluster's, each with its shard key, as the server would append them.
copy_log() {
  local columns
  columns=$(psql -qAt "$1" -c "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
    WHERE attrelid = 'events'::regclass AND attnum > 0 AND NOT attisdropped AND attname NOT IN ('txid', 'person_key')")
  psql -qAt "$1" -c "COPY (SELECT $columns, coalesce(NULLIF(anonymous_id, ''), NULLIF(user_id, '')) FROM events
    WHERE seq > $2 ORDER BY seq) TO STDOUT" |
    psql -q "$cluster_db" -c "COPY events ($columns, person_key) FROM STDIN"
}
