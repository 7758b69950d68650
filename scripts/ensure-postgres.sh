#!/bin/sh
# Installs Debian's PostgreSQL server binaries for the proxy's PostgreSQL tests
# (packages/proxy-server/src/testing/postgres.ts) when none are under /usr/lib/postgresql.
# Needs root (CI runs as root); without it, says how and fails (the tests then skip, saying why).
# Only the binaries are used: the tests run their own cluster with initdb and pg_ctl.
set -eu
for d in /usr/lib/postgresql/*/bin; do
  if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
    exit 0
  fi
done
if [ "$(id -u)" != "0" ]; then
  echo "ensure-postgres: no PostgreSQL server binaries and we are not root; install them with: apt-get install -y postgresql" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends postgresql
