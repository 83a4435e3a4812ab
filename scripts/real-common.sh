# Sourced by scripts/real-vllm.sh, real-vlm.sh and real-audio.sh, after they set URL and PIDFILE:
# what they do alike with the vLLM server each starts on 127.0.0.1.

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

up() { curl -sf --max-time 2 "$URL/v1/models" >/dev/null 2>&1; }

# Stop the server this script started (its process group, as `setsid` started it).
stop() {
  if [[ -s "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    log "stopping vllm pid $(cat "$PIDFILE")"
    kill -- "-$(cat "$PIDFILE")" 2>/dev/null || kill "$(cat "$PIDFILE")"
    rm -f "$PIDFILE"
  fi
}

# Wait up to $2 minutes for the server just started (its pid in $PIDFILE) to answer; if it dies
# first, the end of its log $1.
wait_up() {
  local logfile=$1 minutes=$2
  for _ in $(seq $((minutes * 60))); do
    up && return
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { tail -n 40 "$logfile"; log "server died"; exit 1; }
    sleep 1
  done
  up && return
  log "server did not come up in $minutes min; see $logfile"; exit 1
}
