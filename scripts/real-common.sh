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
