# Installs what a fresh Debian machine with only the Swift toolchain lacks.
# Sourced by scripts/test and scripts/demo.

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "need root to install packages: $*" >&2; return 1; fi
}

# ensure_packages PKG... : apt-get install those not yet installed.
ensure_packages() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
}

ensure_database_prerequisites() {
  ensure_packages postgresql libpq-dev pkg-config zlib1g-dev
  ensure_funnel_extension
}

# The native funnel aggregate (extensions/onramp_funnel, docs/operations.md),
# built with PostgreSQL's extension build and installed into the server's
# directories, where `onramp migrate` finds it. Installed only when it
# changed: a running server may have the old library loaded.
ensure_funnel_extension() {
  ensure_packages postgresql-server-dev-15 gcc make
  local pg_config=/usr/lib/postgresql/15/bin/pg_config dir=extensions/onramp_funnel
  make -s -C "$dir" PG_CONFIG="$pg_config" >&2
  if ! cmp -s "$dir/onramp_funnel.so" "$("$pg_config" --pkglibdir)/onramp_funnel.so" \
     || ! cmp -s "$dir/onramp_funnel--1.0.sql" "$("$pg_config" --sharedir)/extension/onramp_funnel--1.0.sql" \
     || ! cmp -s "$dir/onramp_funnel.control" "$("$pg_config" --sharedir)/extension/onramp_funnel.control"; then
    as_root make -s -C "$dir" PG_CONFIG="$pg_config" install >&2
  fi
}

# The HTML dashboard test renders pages in Debian's headless Chromium; the
# explorer's browser test drives it through chromedriver with Selenium (from
# PyPI, in its own virtual environment, made once and reused).
ensure_browser() {
  ensure_packages chromium chromium-driver python3-venv
  local venv=${ONRAMP_TOOLS:-$HOME/.cache/onramp}/selenium
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import selenium' 2>/dev/null; then
    echo "installing selenium into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check 'selenium>=4.20,<5' >&2
  fi
}

# The alias and group test sends with Segment's own analytics-python (from
# PyPI, in its own virtual environment, made once and reused).
ensure_segment_python() {
  ensure_packages python3-venv
  local venv=${ONRAMP_TOOLS:-$HOME/.cache/onramp}/segment
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import segment.analytics' 2>/dev/null; then
    echo "installing segment-analytics-python into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check 'segment-analytics-python>=2.3,<3' >&2
  fi
}

# The proxy tests put real nginx (terminating TLS with a certificate openssl
# makes) in front of the server.
ensure_proxy() {
  ensure_packages nginx openssl
}

# The alerting rules are checked and unit-tested with Prometheus's promtool;
# Prometheus scrapes a running server and node_exporter's textfile collector.
ensure_monitoring() {
  ensure_packages prometheus prometheus-node-exporter
}
