# The backup and erasure drill (docs/operations.md, "Backups"), sourced by
# scripts/faults with $work, $ONRAMP, $PG_BIN, as_pg, free_port and log:
# a cluster archiving its WAL; a base backup; messages posted through the
# server; a person erased (the erasure's journal in the archive directory);
# more messages; then a point-in-time restore to just before the erasure,
# where the person is back, and `onramp privacy reapply`, after which they
# are gone again and every other message of the restored database is there.
# Sets DRILL_ROW (a line of the fault table) and DRILL_FAILED (0 or 1).
restore_drill() {
  local dir="$work/drill" port url admin db key server config
  DRILL_FAILED=0
  mkdir -p "$dir/wal" "$dir/archive"
  chmod 700 "$dir/archive"
  [ "$(id -u)" -eq 0 ] && chown -R "${ONRAMP_PG_USER:-postgres}" "$dir/wal"
  chmod 755 "$dir"
  [ "$(id -u)" -eq 0 ] && chown "${ONRAMP_PG_USER:-postgres}" "$dir"
  as_pg "$PG_BIN/initdb" -D "$dir/data" -U onramp --auth=trust -E UTF8 --no-locale >/dev/null
  port=$(free_port)
  as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/pg.log" -w -t 60 -o "-p $port -k $dir -c listen_addresses=127.0.0.1 \
    -c wal_level=replica -c archive_mode=on -c archive_command='cp %p $dir/wal/%f' -c archive_timeout=0" start >/dev/null
  admin="postgresql://onramp@127.0.0.1:$port/postgres"
  psql -q "$admin" -c "CREATE DATABASE drill" >/dev/null
  db="postgresql://onramp@127.0.0.1:$port/drill"
  "$ONRAMP" migrate --database-url "$db" >"$dir/migrate.log" 2>&1 || { cat "$dir/migrate.log" >&2; DRILL_FAILED=1; return; }
  key=$("$ONRAMP" keys create --app yoked --database-url "$db" 2>/dev/null)
  config="$dir/onramp.yaml"
  { cat Sources/Funnels/Resources/default-funnels.yaml; printf '\narchive:\n  keep_events: 13 months\n  directory: %s\n' "$dir/archive"; } >"$config"
  local http; http=$(free_port)
  LOG_LEVEL=warning "$ONRAMP" serve --port "$http" --metrics-listen off --database-url "$db" >>"$dir/server.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do curl -fs "http://127.0.0.1:$http/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  # post PREFIX USER COUNT: COUNT messages of USER (on device PREFIX-device), ids PREFIX-n.
  post() {
    local batch="" n
    for n in $(seq "$3"); do
      batch+="${batch:+,}{\"type\":\"track\",\"event\":\"started\",\"messageId\":\"$1-$n\",\"anonymousId\":\"$1-device\",\"userId\":\"$2\",\"timestamp\":\"$(date -u +%FT%T.%3NZ)\"}"
    done
    curl -fs -X POST "http://127.0.0.1:$http/v1/batch" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
      -d "{\"batch\":[$batch]}" >/dev/null
  }
  post alice1 alice 20 && post erin1 erin 5
  as_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$port" -U onramp -D "$dir/base" -X none -c fast >/dev/null 2>>"$dir/basebackup.log"
  post alice2 alice 15 && post erin2 erin 7
  "$ONRAMP" report --config "$config" --database-url "$db" >"$dir/report.log" 2>&1 || true
  local kept_at; kept_at=$(psql -qAt "$db" -c "SELECT count(*) FROM events WHERE user_id IS DISTINCT FROM 'erin'")
  psql -qAt "$db" -c "SELECT pg_switch_wal()" >/dev/null
  sleep 1.2
  local target; target=$(psql -qAt "$db" -c "SELECT now()")
  sleep 1.2
  "$ONRAMP" privacy erase --app yoked --user-id erin --requested-by "drill" --config "$config" --database-url "$db" >"$dir/erase.log" 2>&1 \
    || { cat "$dir/erase.log" >&2; DRILL_FAILED=1; }
  post bob1 bob 10
  psql -qAt "$db" -c "SELECT pg_switch_wal()" >/dev/null
  sleep 1
  kill -TERM "$server" 2>/dev/null; wait "$server" 2>/dev/null || true
  as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
  # Restore: the base backup, the archived WAL replayed up to just before the erasure.
  as_pg cp -a "$dir/base" "$dir/restored"
  as_pg touch "$dir/restored/recovery.signal"
  as_pg "$PG_BIN/pg_ctl" -D "$dir/restored" -l "$dir/restored.log" -w -t 120 -o "-p $port -k $dir -c listen_addresses=127.0.0.1 \
    -c archive_mode=off -c restore_command='cp $dir/wal/%f %p' -c recovery_target_time='$target' -c recovery_target_action=promote" \
    start >/dev/null || { tail -20 "$dir/restored.log" >&2; DRILL_FAILED=1; return; }
  for _ in $(seq 100); do [ "$(psql -qAt "$db" -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ] && break; sleep 0.2; done
  local back; back=$(psql -qAt "$db" -c "SELECT count(*) FROM events WHERE user_id = 'erin' OR anonymous_id LIKE 'erin%'")
  "$ONRAMP" privacy reapply --journal "$dir/archive" --config "$config" --database-url "$db" >"$dir/reapply.log" 2>&1 \
    || { cat "$dir/reapply.log" >&2; DRILL_FAILED=1; }
  local gone others
  gone=$(psql -qAt "$db" -c "SELECT count(*) FROM events WHERE user_id = 'erin' OR anonymous_id LIKE 'erin%'")
  others=$(psql -qAt "$db" -c "SELECT count(*) FROM events")
  as_pg "$PG_BIN/pg_ctl" -D "$dir/restored" -m fast -w stop >/dev/null 2>&1 || true
  log "(10) restore drill: erin back after the restore with $back messages; reapply: $(tail -1 "$dir/reapply.log"); erin's messages left $gone; others $others of $kept_at"
  [ "$back" -gt 0 ] || { log "(10) the restore did not bring the erased person back: the drill proves nothing"; DRILL_FAILED=1; }
  [ "$gone" -eq 0 ] || { log "(10) reapply left $gone of the erased person's messages"; DRILL_FAILED=1; }
  [ "$others" -eq "$kept_at" ] || { log "(10) $others other messages after reapply where $kept_at were there before the erasure"; DRILL_FAILED=1; }
  DRILL_ROW=$(printf '%-34s %-14s %6s %10s   erased back %s, gone after reapply: %s' "(10) backup, erase, restore, reapply" \
    "$([ "$DRILL_FAILED" -eq 0 ] && echo passed || echo FAILED)" 1 "$others" "$back" "$([ "$gone" -eq 0 ] && echo yes || echo no)")
}
