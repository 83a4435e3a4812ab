#!/usr/bin/env python3
"""Write a tiny random-weight llama-architecture GGUF that llama-server loads.

Usage: random_gguf.py OUT.gguf [--words-from src/tokenizer.rs] [--layers 4] [--hidden 256]

The weights are noise (the text it writes is gibberish); the point is a real
server doing real forward passes with a real tokenizer. The tokenizer is
SentencePiece-style ("llama"): specials, 256 byte-fallback tokens, printable
ASCII, and every prefix of "▁word" for each word of llmsweep's synthetic
vocabulary (read from tokenizer.rs's VOCAB), so each synthetic word is one
server token too and the server's prompt counts match llmsweep's.
Needs: pip install gguf numpy.
"""
import argparse
import re

import numpy as np
import gguf

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--words-from", help="a Rust file holding `VOCAB: &[&str] = &[...]`")
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--hidden", type=int, default=256)
ap.add_argument("--heads", type=int, default=4)
ap.add_argument("--ctx", type=int, default=4096)
ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()

# --- vocabulary -------------------------------------------------------------
words = "the of and to in is that for it as was with be by on not".split()
if a.words_from:
    src = open(a.words_from, encoding="utf-8").read()
    body = re.search(r"VOCAB: &\[&str\] = &\[(.*?)\];", src, re.S).group(1)
    words = re.findall(r'"([^"]+)"', body)

# (piece, score, type). Types: 1 normal, 2 unknown, 3 control, 6 byte.
T = gguf.TokenType
vocab = [("<unk>", 0.0, T.UNKNOWN), ("<s>", 0.0, T.CONTROL), ("</s>", 0.0, T.CONTROL),
         ("<|im_start|>", 0.0, T.CONTROL), ("<|im_end|>", 0.0, T.CONTROL)]
vocab += [(f"<0x{b:02X}>", 0.0, T.BYTE) for b in range(256)]  # byte fallback
seen = {p for p, _, _ in vocab}


def add(piece):
    # SPM merges the adjacent pair with the highest score: longer = better.
    if piece not in seen:
        seen.add(piece)
        vocab.append((piece, float(len(piece)), T.NORMAL))


add("\u2581")  # "▁", SentencePiece's space
for c in map(chr, range(33, 127)):
    add(c)
    add("\u2581" + c)
for w in words:  # every prefix of "▁word", so merges can always reach the word
    for i in range(2, len(w) + 2):
        add(("\u2581" + w)[:i])

# --- model ------------------------------------------------------------------
n_vocab, d, L, H = len(vocab), a.hidden, a.layers, a.heads
ff = 3 * d
w = gguf.GGUFWriter(a.out, "llama")
w.add_name("llmsweep-random-tiny")
w.add_context_length(a.ctx)
w.add_embedding_length(d)
w.add_block_count(L)
w.add_feed_forward_length(ff)
w.add_head_count(H)
w.add_head_count_kv(H)
w.add_rope_dimension_count(d // H)
w.add_layer_norm_rms_eps(1e-5)
w.add_file_type(gguf.LlamaFileType.ALL_F32)
w.add_vocab_size(n_vocab)

w.add_tokenizer_model("llama")
w.add_token_list([p for p, _, _ in vocab])
w.add_token_scores([s for _, s, _ in vocab])
w.add_token_types([int(t) for _, _, t in vocab])
w.add_unk_token_id(0)
w.add_bos_token_id(1)
w.add_eos_token_id(2)
w.add_add_bos_token(True)
w.add_chat_template(  # ChatML, so /v1/chat/completions has a template
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

rng = np.random.default_rng(a.seed)


def rand(*shape):
    # numpy shape is (out, in); GGUF stores it reversed, as llama.cpp expects.
    return (rng.standard_normal(shape) * 0.02).astype(np.float32)


ones = lambda n: np.ones(n, dtype=np.float32)
w.add_tensor("token_embd.weight", rand(n_vocab, d))
w.add_tensor("output_norm.weight", ones(d))
w.add_tensor("output.weight", rand(n_vocab, d))
for i in range(L):
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", ones(d))
    for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
        w.add_tensor(p + t + ".weight", rand(d, d))
    w.add_tensor(p + "ffn_norm.weight", ones(d))
    w.add_tensor(p + "ffn_gate.weight", rand(ff, d))
    w.add_tensor(p + "ffn_up.weight", rand(ff, d))
    w.add_tensor(p + "ffn_down.weight", rand(d, ff))

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(f"{a.out}: llama, {L} layers, hidden {d}, {H} heads, ffn {ff}, vocab {n_vocab}")
