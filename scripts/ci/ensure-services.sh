#!/usr/bin/env bash
# Checks each service the tests need on loopback and starts the ones the machine normally runs
# (Redis, RabbitMQ, PostgreSQL) if they are down. Exits 1 if any is still unreachable.
set -u
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_up() { local port=$1 secs=$2; for _ in $(seq 1 "$secs"); do up "$port" && return 0; sleep 1; done; return 1; }

status=0
if ! up 6379; then
  echo "redis: not reachable on 6379, starting it"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
fi
wait_up 6379 20 && echo "redis: up on 127.0.0.1:6379" || { echo "redis: DOWN"; status=1; }

if ! up 5672; then
  echo "rabbitmq: not reachable on 5672, starting it"
  rabbitmq-server -detached || true
fi
wait_up 5672 90 && echo "rabbitmq: up on 127.0.0.1:5672" || { echo "rabbitmq: DOWN"; status=1; }

if ! up 5432; then
  echo "postgres: not reachable on 5432, starting it"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
fi
wait_up 5432 30 && echo "postgres: up on 127.0.0.1:5432" || { echo "postgres: DOWN"; status=1; }
exit $status
