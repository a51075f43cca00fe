# The fault suite's table, shared by scripts/faults and scripts/citus faults:
# its header, a row from a `fault-client verify` verdict, and how many of a
# scenario's messages the clients have had acknowledged so far. Sourced with
# $work set (the clients' ledgers are in $work/ledger).

fault_table_header() {
  printf '%-34s %-14s %6s %10s %9s %7s %6s %6s %6s\n' "fault" "load held" "faults" "acked" "stored" "lost" "dup" "phantom" "unacked"
}

# fault_row NAME HELD VERDICT [NOTE]: the row of a fault injected once under
# load, from the verdict's JSON, NOTE after it when given (no newline).
fault_row() {
  printf '%-34s %-14s %6s %10s %9s %7s %6s %6s %6s%s' "$1" "$2" 1 \
    "$(jq -r .acknowledged <<<"$3")" "$(jq -r .stored <<<"$3")" "$(jq -r .lost <<<"$3")" \
    "$(jq -r .duplicated <<<"$3")" "$(jq -r .phantom <<<"$3")" "$(jq -r .sentNeverAcknowledged <<<"$3")" "${4:+   $4}"
}

# acked_so_far PREFIX: the messages of scenario PREFIX acknowledged so far.
acked_so_far() { cat "$work/ledger/acked-$1-"*.tsv 2>/dev/null | wc -l; }
