"""Tunes all-MiniLM-L6-v2 on the pairs of pairs.py and writes the tuned model directory.

Contrastive training with in-batch negatives: each summary is pulled towards its own
operation's text and away from the other 31 operations of its batch (random APIs), both ways
(a symmetric cross-entropy over cosines scaled by 20). The word embeddings stay frozen, so only
the six encoder layers change: they are what export.py ships. One epoch, AdamW at 1e-5, 10 %
linear warm-up then linear decay, gradients clipped at 1. On a 2-core machine: 14 to 25 minutes.

    python train.py BASE_MODEL_DIR pairs.jsonl OUT_DIR

BASE_MODEL_DIR is `scripts/search-model.sh --base`. Versions used: requirements.txt.
"""
import json
import math
import os
import random
import shutil
import sys
import time

import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoTokenizer

base, pairs_path, out = sys.argv[1:4]
LR, BATCH, EPOCHS, SCALE = 1e-5, 32, 1, 20.0
QUERY_TOKENS, TEXT_TOKENS = 64, 128

torch.manual_seed(0)
random.seed(0)
tokenizer = AutoTokenizer.from_pretrained(base)
model = AutoModel.from_pretrained(base)
model.train()
for p in model.embeddings.parameters():
    p.requires_grad = False
with open(pairs_path) as f:
    pairs = [json.loads(line) for line in f]


def embed(texts, max_tokens):
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_tokens, return_tensors="pt")
    states = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return F.normalize((states * mask).sum(1) / mask.sum(1), dim=-1)


steps = math.ceil(len(pairs) / BATCH) * EPOCHS
warm = max(1, steps // 10)
optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
schedule = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm)))
)
start, step = time.time(), 0
while step < steps:
    random.shuffle(pairs)
    for i in range(0, len(pairs) - BATCH + 1, BATCH):
        if step >= steps:
            break
        batch = pairs[i : i + BATCH]
        queries = embed([p["q"] for p in batch], QUERY_TOKENS)
        texts = embed([p["d"] for p in batch], TEXT_TOKENS)
        logits = queries @ texts.T * SCALE
        labels = torch.arange(len(batch))
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        step += 1
        if step % 20 == 0:
            print(f"step {step}/{steps} loss {loss.item():.3f} {time.time() - start:.0f}s", flush=True)
os.makedirs(out, exist_ok=True)
model.save_pretrained(out, safe_serialization=True)
for name in os.listdir(base):
    if name not in ("model.safetensors", "config.json") and not os.path.exists(os.path.join(out, name)):
        src = os.path.join(base, name)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(out, name))
print(f"saved {out} in {time.time() - start:.0f}s")
