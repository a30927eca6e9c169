#!/usr/bin/env bash
# `npm run setup`: installs and starts what the tests need on Debian or Ubuntu, and does nothing
# for what is already there (a prepared machine pays nothing). `.ci/run` calls this same script,
# so CI and a developer's machine cannot drift. Needs root or sudo for apt-get and the services.
# The project's own Node 22 comes from `npm ci` (devDependency "node"), not from here.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
# Runs a command as the postgres system user (the cluster's superuser by peer authentication).
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi; }

# Debian packages the tests drive:
# - bubblewrap: stdio upstreams run confined by default (docs/sandbox.md), and socat, which
#   carries a confined server's connections to the egress proxy;
# - chromium: the admin console's browser tests (test/e2e/admin-console.test.ts) drive it with
#   playwright-core; no browser is ever downloaded;
# - haproxy: the fleet test (test/e2e/fleet.test.ts) puts three replicas behind it, round-robin;
# - postgresql and redis-server: the backend and fleet tests (127.0.0.1:5432 and :6379);
# - python3-venv: the real-server suite's Python SDK server runs from a virtualenv (below);
# - git, g++ and make: the real-server suite's git server runs `git`, and its native-module case
#   builds sqlite3 with node-gyp (the headers come with the pinned Node).
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v socat >/dev/null 2>&1 || missing+=(socat)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v pg_isready >/dev/null 2>&1 || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
/usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
command -v git >/dev/null 2>&1 || missing+=(git)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "== installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
  else
    echo "missing ${missing[*]} and apt-get is not available: install them" >&2
    exit 1
  fi
fi
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
echo "== sandbox: $(bwrap --version); browser: $(chromium --version 2>/dev/null || echo chromium);" \
  "load balancer: $("$HAPROXY" -v | head -1)"

# PostgreSQL at 127.0.0.1:5432 with a database `test` that user postgres reaches without a
# password from this machine (test/support/backends.ts; BARBICAN_TEST_POSTGRES_URL for another).
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  $SUDO pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -1)" main start || true
  for _ in $(seq 20); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.5; done
fi
if ! psql -h 127.0.0.1 -U postgres -d test -Atc 'select 1' >/dev/null 2>&1; then
  echo "== postgres: database test, trusted from 127.0.0.1 for user postgres"
  HBA=$(as_postgres psql -Atc 'show hba_file')
  RULE='host test postgres 127.0.0.1/32 trust'
  $SUDO grep -qxF "$RULE" "$HBA" || $SUDO sed -i "1i $RULE" "$HBA"
  as_postgres psql -qAtc 'select pg_reload_conf()' >/dev/null
  as_postgres psql -Atc "select 1 from pg_database where datname='test'" | grep -q 1 ||
    as_postgres createdb test
fi

# Redis at 127.0.0.1:6379 (BARBICAN_TEST_REDIS_URL for another), memory only.
if ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  $SUDO mkdir -p /var/lib/redis /var/log/redis
  $SUDO redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  for _ in $(seq 20); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && break; sleep 0.5; done
fi
echo "== services: postgres $(pg_isready -h 127.0.0.1 -p 5432 2>&1 | sed 's/.*- //'), redis $(redis-cli -h 127.0.0.1 ping 2>&1)"

# The real-server suite (test/e2e/real-servers-python.test.ts) runs a server of the official MCP
# Python SDK from a virtualenv, as its README does; made once, beside the checkout, from the
# system's python3 (test/support/real-servers.ts makes it too when it is missing).
VENV=.cache/python-mcp
if ! "$VENV/bin/python" -c 'import mcp.server' >/dev/null 2>&1; then
  echo "== python venv with mcp==2.3.0 in $VENV"
  PY=$([ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
  "$PY" -m venv --clear "$VENV" && "$VENV/bin/pip" install -q --retries 0 mcp==2.3.0
fi
