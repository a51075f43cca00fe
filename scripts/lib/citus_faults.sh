# `scripts/citus faults`: faults on the Citus cluster, with the fault suite's
# summary table (scripts/faults --long runs it and adds its rows). Sourced by
# scripts/citus, after scripts/lib/citus_check.sh (own_cluster, serve_on).
#
# (c1) The nightly job's cursor: the server appends simulated traffic, each
#      group commit a two-phase commit over the workers, while nights run
#      back to back, every third killed (kill -9) at a random point of its
#      length; then one more night once the load is over, and a rebuild.
#      Every committed row must be read by exactly one night that finished:
#      the nights' new events add up to the log's, and the tables the nights
#      left equal the rebuild's (scripts/lib/projection_md5.sql).
# (c2)–(c4) Under load from the fault suite's retrying clients: a worker
#      killed (kill -9) and restarted, the coordinator restarted, a shard group
#      moved between the workers. Every acknowledged message must be stored
#      exactly once, once every transaction left prepared on a worker is
#      resolved.
#
# With ONRAMP_CITUS_FAULTS_ON=single, (c1) runs on one PostgreSQL, as a
# control, and (c2)–(c4) are left out. Environment: ONRAMP, ONRAMP_FAULT (the
# binary with `fault-client`, default onramp-bench beside ONRAMP),
# ONRAMP_FAULT_ROWS (a file the table's rows are appended to),
# ONRAMP_CITUS_FAULT_DEVICES (c1's devices), ONRAMP_CITUS_FAULT_PHASE (the
# seconds of load before and after each fault), ONRAMP_CITUS_FAULTS_ONLY
# (the scenarios to run, as "c2 c4"; all by default).

faults() {
  ONRAMP=${ONRAMP:-$(swift build --show-bin-path)/onramp}
  FAULT=${ONRAMP_FAULT:-$(dirname "$ONRAMP")/onramp-bench}
  [ -x "$ONRAMP" ] || { echo "no onramp binary at $ONRAMP (swift build first)" >&2; exit 1; }
  ensure_packages curl jq
  own_cluster onramp_faults
  local on=${ONRAMP_CITUS_FAULTS_ON:-cluster}
  # The control: the same on one PostgreSQL, where every night must pass.
  if [ "$on" = single ]; then
    start_cluster
    psql -q "$ADMIN" -c "CREATE DATABASE single"
    cluster_db="postgresql://onramp@127.0.0.1:$PGPORT/single"
  fi
  "$ONRAMP" migrate --database-url "$cluster_db" >"$work/migrate.log" 2>&1 || { cat "$work/migrate.log" >&2; return 1; }
  serve_on cluster "$cluster_db" || return 1
  rows_file=${ONRAMP_FAULT_ROWS:-$work/rows}
  local status=0
  local only=${ONRAMP_CITUS_FAULTS_ONLY:-c1 c2 c3 c4}
  wanted() { [[ " $only " == *" $1 "* ]]; }
  if wanted c1; then cursor_under_load "$on" || status=1; fi
  if [ "$on" = cluster ]; then
    [ -x "$FAULT" ] || { echo "no fault-client at $FAULT (swift build --product onramp-bench)" >&2; return 1; }
    if wanted c2; then cluster_fault "(c2) kill -9 a worker, restart" ckill kill_worker || status=1; fi
    if wanted c3; then cluster_fault "(c3) restart the coordinator" crestart restart_coordinator || status=1; fi
    if wanted c4; then cluster_fault "(c4) move a shard group" cmove move_shard || status=1; fi
  fi
  if [ -z "${ONRAMP_FAULT_ROWS:-}" ]; then
    echo
    fault_table_header
    cat "$rows_file"
  fi
  [ "$status" -eq 0 ] && echo "citus faults: passed" >&2
  return "$status"
}

# (c1); adds its row.
cursor_under_load() {
  local on=$1 devices=${ONRAMP_CITUS_FAULT_DEVICES:-1500} sim nights=0 read=0 killed=0 committed=0 n last=5
  "$ONRAMP" simulate --server "http://127.0.0.1:$(cat "$work/port-cluster")" --keys-file "$work/keys-cluster" \
    --seed 9 --devices "$devices" --days 3 --concurrency 32 >"$work/simulate.log" 2>&1 &
  sim=$!
  # night: one `onramp report` to its end; adds its new events to $read. A
  # killed run's backend may hold the job's lock until PostgreSQL sees its
  # client gone: a run that finds another going is tried again.
  night() {
    local started tries
    started=$(date +%s.%N)
    for tries in $(seq 60); do
      "$ONRAMP" report --database-url "$cluster_db" --quiet --format json >/dev/null 2>"$work/night.log" && break
      grep -q "another .onramp report" "$work/night.log" && [ "$tries" -lt 60 ] || { cat "$work/night.log" >&2; return 1; }
      sleep 1
    done
    last=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
    count_night
  }
  count_night() {
    n=$(grep -oE '^[a-z]+: [0-9]+ new events' "$work/night.log" | grep -oE '[0-9]+' | head -1)
    [ -n "$n" ] || { echo "citus faults: no summary from the night:" >&2; cat "$work/night.log" >&2; return 1; }
    read=$((read + n)) nights=$((nights + 1))
  }
  # killed_night: a run killed at a random point of the last night's length;
  # one that ended first is counted as a night. A kill can land after the
  # run sent its commit, which then holds: its new events, untold, are
  # counted from its window in plain SQL (the checkpoint it replaced, and
  # the one it left).
  killed_night() {
    local before
    before=$(psql -qAt "$cluster_db" -c "SELECT horizon_txid || ' ' || pending_txids::text FROM projection_checkpoint")
    "$ONRAMP" report --database-url "$cluster_db" --quiet --format json >/dev/null 2>"$work/night.log" &
    local job=$!
    sleep "$(awk -v s="$RANDOM" -v t="$last" 'BEGIN { srand(s); printf "%.3f", (0.05 + 0.9 * rand()) * t }')"
    if kill -9 "$job" 2>/dev/null; then
      wait "$job" 2>/dev/null || true
      killed=$((killed + 1))
      # Its backend may still be finishing: wait until the job's lock
      # (ProjectionJob.lockKey) is free.
      until psql -qAt "$cluster_db" -c "SELECT pg_try_advisory_lock(31365159954771970) AND pg_advisory_unlock(31365159954771970)" |
        grep -q t; do sleep 0.2; done
      if [ "$(psql -qAt "$cluster_db" -c "SELECT horizon_txid || ' ' || pending_txids::text FROM projection_checkpoint")" != "$before" ]; then
        n=$(psql -qAt "$cluster_db" -c "SELECT count(*) FROM events e, projection_checkpoint c
          WHERE (e.txid >= ${before%% *} OR e.txid = ANY('${before#* }'::int8[]))
            AND e.txid < c.horizon_txid AND NOT e.txid = ANY(c.pending_txids)")
        read=$((read + n)) nights=$((nights + 1)) committed=$((committed + 1))
      fi
    else
      wait "$job" 2>/dev/null || { cat "$work/night.log" >&2; return 1; }
      count_night
    fi
  }
  local round=0
  while kill -0 "$sim" 2>/dev/null; do
    round=$((round + 1))
    if [ $((round % 3)) -eq 0 ]; then killed_night || return 1; else night || return 1; fi
  done
  wait "$sim" || { tail -5 "$work/simulate.log" >&2; return 1; }
  night || return 1
  local events
  events=$(psql -qAt "$cluster_db" -c "SELECT count(*) FROM events")
  psql -qAt "$cluster_db" -f scripts/lib/projection_md5.sql >"$work/nights.md5"
  "$ONRAMP" rebuild --database-url "$cluster_db" --quiet --format json >/dev/null 2>"$work/rebuild.log" ||
    { cat "$work/rebuild.log" >&2; return 1; }
  psql -qAt "$cluster_db" -f scripts/lib/projection_md5.sql >"$work/rebuild.md5"
  echo "citus faults: (c1) on $on: $nights nights during and after the load read $read events; the log holds $events; $killed runs killed, $committed of them after their commit" >&2
  local status=0 same=yes
  [ "$read" -eq "$events" ] || { echo "citus faults: the nights read $((read - events)) events more than the log holds" >&2; status=1; }
  [ "$killed" -gt 0 ] || { echo "citus faults: no run was killed while it ran" >&2; status=1; }
  if ! diff "$work/nights.md5" "$work/rebuild.md5" >"$work/diff"; then
    echo "citus faults: the nights' tables differ from a rebuild's (nights <, rebuild >):" >&2
    cat "$work/diff" >&2
    status=1 same=no
  fi
  printf '%-34s %-14s %6s %10s   %s %s of the log'"'"'s %s events\n' "(c1) job cursor, kill -9 the job" \
    "equal: $same" "$killed" "" "$on: $nights nights read" "$read" "$events" >>"$rows_file"
  return "$status"
}

# cluster_fault NAME PREFIX COMMAND…: the fault suite's clients load the
# cluster's server for PHASE s, COMMAND injects, PHASE s more, drained; once
# no transaction is left prepared on a worker, the ledger is checked against
# the log. Adds its row.
cluster_fault() {
  local name=$1 prefix=$2 phase=${ONRAMP_CITUS_FAULT_PHASE:-8} keys=() line
  shift 2
  while read -r line; do keys+=(--key "$line"); done <"$work/keys-cluster"
  echo "citus faults: $name: load from 16 clients" >&2
  rm -f "$work/stop"
  "$FAULT" fault-client load --url "http://127.0.0.1:$(cat "$work/port-cluster")" "${keys[@]}" --clients 16 --batch 20 \
    --id-prefix "$prefix" --ledger "$work/ledger" --stop-file "$work/stop" --max-seconds $((phase * 6 + 120)) --drain-seconds 90 \
    >"$work/load-$prefix.json" 2>>"$work/load.log" &
  local load=$! before after
  sleep "$phase"
  before=$(acked_so_far "$prefix")
  fault_note=""
  "$@" || { echo "citus faults: $name: the fault itself failed" >&2; touch "$work/stop"; wait "$load"; return 1; }
  sleep "$phase"
  after=$(acked_so_far "$prefix")
  touch "$work/stop"
  wait "$load" || true
  local held=no stall settled verdict status=0
  [ "$after" -gt "$before" ] && held=yes
  stall=$(jq -r '.longestStallSeconds | . * 10 | floor / 10' "$work/load-$prefix.json" 2>/dev/null || echo "?")
  settled=$(prepared_settled) || status=1
  verdict=$("$FAULT" fault-client verify --database-url "$cluster_db" --ledger "$work/ledger" --id-prefix "$prefix") || status=1
  [ "$held" = yes ] || status=1
  echo "citus faults: $name: $verdict; $fault_note; $settled" >&2
  echo "$(fault_row "$name" "$held (${stall}s)" "$verdict" "$fault_note; $settled")" >>"$rows_file"
  return "$status"
}

# prepared_settled: waits (up to 150 s; the coordinator recovers transactions
# in doubt every minute) until no worker holds a prepared transaction;
# prints how many there were and how long they took.
prepared_settled() {
  local first="" count i
  for i in $(seq 0 150); do
    count=$(psql -qAt "$cluster_db" -c "SELECT coalesce(sum(result::int), 0) FROM run_command_on_workers(
      \$\$SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()\$\$) WHERE success")
    [ -n "$first" ] || first=$count
    [ "$count" -eq 0 ] && { echo "$first prepared after the load, resolved in ${i} s"; return 0; }
    sleep 1
  done
  echo "$count transactions still prepared on the workers after 150 s"
  return 1
}

# The faults. Each may set fault_note, said in its row.
kill_worker() {
  local pid worker1_db
  pid=$(head -1 "$dir/worker1/postmaster.pid")
  worker1_db="postgresql://onramp@127.0.0.1:$(port_of worker1)/$cluster_name"
  # The moment it holds a prepared transaction, seen and acted on by the
  # worker itself: its postmaster and every process of it killed at once, as
  # a machine's crash would (a backend left running finishes what the
  # coordinator asks of it). The coordinator's commits are slowed to 100 ms
  # meanwhile (a slow disk's flush), between the workers' prepare and their
  # commit, so that the kill lands there: what it had prepared is then in
  # doubt, committed on the coordinator and not on it. When no prepared
  # transaction is seen within 10 s, it is killed all the same.
  local coordinator_db="postgresql://onramp@127.0.0.1:$(port_of coordinator)/$cluster_name" seen=yes
  psql -q "$coordinator_db" -c "ALTER SYSTEM SET commit_delay = 100000" -c "ALTER SYSTEM SET commit_siblings = 0" \
    -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  psql -qAt "$worker1_db" -c "SET statement_timeout = '10s'" -c "DO \$\$ BEGIN
      LOOP EXIT WHEN EXISTS (SELECT 1 FROM pg_prepared_xacts WHERE database = current_database()); END LOOP;
      COPY (SELECT 1) TO PROGRAM 'kill -9 $pid \$(pgrep -P $pid)';
    END \$\$" >/dev/null 2>&1 || true
  if kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)" != Z ]; then
    seen=no
    kill -9 "$pid" $(pgrep -P "$pid") 2>/dev/null || true
  fi
  psql -q "$coordinator_db" -c "ALTER SYSTEM RESET commit_delay" -c "ALTER SYSTEM RESET commit_siblings" \
    -c "SELECT pg_reload_conf()" >/dev/null
  sleep 3
  as_pg rm -f "$dir/worker1/postmaster.pid"
  start_node worker1
  # Transactions it had prepared survive the crash, in doubt until the
  # coordinator commits or aborts them.
  local doubt
  doubt=$(psql -qAt "$worker1_db" -c "SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()")
  fault_note="worker1 killed (holding a prepared transaction: $seen), down 3 s, $doubt in doubt at its restart"
}
restart_coordinator() {
  as_pg "$PG_BIN/pg_ctl" -D "$dir/coordinator" -m fast -w -t 60 restart >/dev/null
  fault_note="coordinator restarted (fast)"
}
# Moves the largest shard of the log on worker1, with the shards colocated
# with it, to worker2 by logical replication while the appends go on. The
# log is append-only, so it needs no replica identity ("force_logical": only
# an update or delete of a row would fail during the move).
move_shard() {
  local shard from to started
  from=$(port_of worker1) to=$(port_of worker2)
  shard=$(psql -qAt "$cluster_db" -c "SELECT shardid FROM citus_shards WHERE table_name::text LIKE 'events_%'
    AND nodeport = $from ORDER BY shard_size DESC, shardid LIMIT 1")
  [ -n "$shard" ] || return 1
  started=$(date +%s.%N)
  psql -q "$cluster_db" -c "SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to,
    shard_transfer_mode := 'force_logical')" >/dev/null || return 1
  fault_note="shard $shard (and its colocated shards) moved to worker2 in $(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
}
