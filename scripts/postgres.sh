#!/usr/bin/env bash
# A PostgreSQL server for rltune's shared-study tests (and a local try-out of docs/scaling.md):
# Debian's packages, a cluster of its own ("rltune", port 5433, 127.0.0.1 only), a role and a database.
# Prints the database URL on its last line. Run as root (CI); idempotent.
#
#   url=$(bash scripts/postgres.sh | tail -1)
#   pg_ctlcluster <version> rltune restart      # what the restart test does
set -euo pipefail
PORT=${RLTUNE_PG_PORT:-5433}
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
VERSION=$(ls /usr/lib/postgresql | sort -V | tail -1)
if ! pg_lsclusters -h | awk '{print $2}' | grep -qx rltune; then
  pg_createcluster "$VERSION" rltune --port "$PORT" -- --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  echo "listen_addresses = '127.0.0.1'" >> "/etc/postgresql/$VERSION/rltune/postgresql.conf"
  echo "max_connections = 200" >> "/etc/postgresql/$VERSION/rltune/postgresql.conf"
fi
pg_ctlcluster "$VERSION" rltune start 2>/dev/null || true
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 -p "$PORT" && break
  sleep 1
done
su postgres -c "psql -q -p $PORT -tc \"SELECT 1 FROM pg_roles WHERE rolname = 'rltune'\"" | grep -q 1 \
  || su postgres -c "psql -q -p $PORT -c \"CREATE ROLE rltune LOGIN CREATEDB PASSWORD 'rltune'\""
su postgres -c "psql -q -p $PORT -tc \"SELECT 1 FROM pg_database WHERE datname = 'rltune'\"" | grep -q 1 \
  || su postgres -c "createdb -p $PORT -O rltune rltune"
echo "cluster: $VERSION rltune"
echo "postgresql://rltune:rltune@127.0.0.1:$PORT/rltune"
