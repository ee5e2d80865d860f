#!/bin/sh
# Run the web server and one worker together until Ctrl-C; stop both on exit.
set -u
cd "$(dirname "$0")/.."
PY=.venv/bin/python
ADDR=${RELAY_ADDR:-127.0.0.1:8000}
$PY manage.py runworker &
worker=$!
$PY manage.py runserver "$ADDR" --noreload &
web=$!
stop() { kill -TERM "$worker" "$web" 2>/dev/null; wait "$worker" "$web" 2>/dev/null; exit 0; }
trap stop INT TERM
echo "Relay is running: http://$ADDR/admin/  (Ctrl-C stops the web server and the worker)"
# If either process ends on its own, stop the other and exit.
while kill -0 "$worker" 2>/dev/null && kill -0 "$web" 2>/dev/null; do sleep 1; done
stop
