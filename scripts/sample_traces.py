#!/usr/bin/env python3
"""Generates the small sample traces shipped in profiles/traces/ (made up
here, seeded; no public trace is copied):

- sample-mooncake.jsonl: Mooncake's JSONL shape (timestamp in ms,
  input_length, output_length, hash_ids of 512-token blocks); three kinds of
  request share leading blocks (a system prompt, a long document), the rest
  of each prompt is its own.
- sample-azure.csv: the Azure LLM inference trace's CSV shape (TIMESTAMP,
  ContextTokens, GeneratedTokens).

Both: 80 requests over about 40 s, Poisson arrivals at 2 req/s with a burst
in the middle. Run from the repository root: python3 scripts/sample_traces.py
"""
import datetime
import random

rng = random.Random(24)
N = 80


def arrivals():
    t, out = 0.0, []
    for i in range(N):
        rate = 6.0 if 30 <= i < 45 else 2.0
        t += rng.expovariate(rate)
        out.append(t)
    return out


# Mooncake: shared prefixes by kind.
kinds = [
    ([0], 0.5),  # one shared block: a system prompt
    ([1, 2, 3], 0.2),  # a long shared document
    ([], 0.3),  # nothing shared
]
next_id = 100
with open("profiles/traces/sample-mooncake.jsonl", "w") as f:
    for t in arrivals():
        shared = rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
        own_blocks = rng.randint(0, 2)
        ids = list(shared) + list(range(next_id, next_id + own_blocks + 1))
        next_id += own_blocks + 1
        input_length = (len(ids) - 1) * 512 + rng.randint(40, 512)
        output_length = max(8, min(400, int(rng.lognormvariate(4.3, 0.7))))
        f.write(
            '{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%s]}\n'
            % (round(t * 1000), input_length, output_length, ", ".join(map(str, ids)))
        )

start = datetime.datetime(2024, 5, 14, 9, 0, 0)
with open("profiles/traces/sample-azure.csv", "w") as f:
    f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    for t in arrivals():
        when = start + datetime.timedelta(seconds=t)
        ctx = max(8, min(3000, int(rng.lognormvariate(6.5, 0.8))))
        gen = max(1, min(400, int(rng.lognormvariate(4.0, 0.8))))
        f.write("%s,%d,%d\n" % (when.strftime("%Y-%m-%d %H:%M:%S.%f") + "0", ctx, gen))
