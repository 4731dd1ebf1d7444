#!/usr/bin/python3
"""Trains TinyAI's default model: a small LLaMA (grouped-query attention, SwiGLU,
RoPE, RMSNorm, tied classifier) on the English fortune cookies of Debian's
`fortunes` package, with its own SentencePiece BPE tokenizer.

Writes, into OUT_DIR:
  tok.bin      the tokenizer in llama2.c's format (tinyai-convert --tokenizer)
  model.bin    the weights as a llama2.c checkpoint (tinyai-convert --from llama2c)
  reference.bin torch's logits and token ids for tests/model/recipe_parity.cc
  metrics.json losses, the unigram baseline, corpus and timing figures
  train.log    the same lines this script prints

Deterministic given --seed on one machine and library build: the data split,
the tokenizer, the initial weights, the batches and dropout all derive from it,
and torch runs with deterministic algorithms on a fixed thread count.
Run it through models/recipe/train.sh, which installs what it needs.
"""

import argparse
import json
import math
import os
import random
import re
import struct
import sys
import time

# OpenBLAS (Debian's torch does its matrix products there) starts its threads
# when it loads: fix their number before torch is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import sentencepiece as spm  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

# ---------------------------------------------------------------- corpus


def read_fortunes(corpus_dir, names):
    """Every fortune of the listed files, whitespace-normalised, in file order."""
    fortunes, skipped = [], 0
    for name in names:
        with open(os.path.join(corpus_dir, name), "rb") as f:
            raw = f.read()
        for chunk in re.split(rb"\n%\n", raw):
            try:
                text = chunk.decode("utf-8")
            except UnicodeDecodeError:
                skipped += 1
                continue
            lines = [re.sub(r"[ \t]+", " ", line).strip() for line in text.split("\n")]
            text = "\n".join(lines).strip("\n% ")
            text = re.sub(r"\n{3,}", "\n\n", text)
            if text:
                fortunes.append(text)
    return fortunes, skipped


def split_fortunes(fortunes, val_fraction, seed):
    order = list(range(len(fortunes)))
    random.Random(seed).shuffle(order)
    n_val = int(round(len(order) * val_fraction))
    val = [fortunes[i] for i in sorted(order[:n_val])]
    train = [fortunes[i] for i in sorted(order[n_val:])]
    return train, val


# ---------------------------------------------------------------- tokenizer


def train_tokenizer(train, vocab_size, prefix):
    text_path = prefix + ".corpus.txt"
    with open(text_path, "w", encoding="utf-8") as f:
        for fortune in train:
            f.write(fortune + "\n")
    # llama2.c's recipe: BPE with byte fallback, identity normalisation, so
    # every byte sequence round-trips; one thread keeps the merges in order.
    spm.SentencePieceTrainer.train(
        input=text_path, model_prefix=prefix, model_type="bpe", vocab_size=vocab_size,
        self_test_sample_size=0, input_format="text", character_coverage=1.0, num_threads=1,
        split_digits=True, allow_whitespace_only_pieces=True, byte_fallback=True,
        unk_surface=r" \342\201\207 ", normalization_rule_name="identity", minloglevel=2)
    os.remove(text_path)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def export_tokenizer(sp, path):
    """llama2.c's tokenizer.bin: max piece length, then (score, length, bytes) per id."""
    pieces = []
    for i in range(sp.get_piece_size()):
        t = sp.id_to_piece(i)
        if i == sp.bos_id():
            t = "\n<s>\n"
        elif i == sp.eos_id():
            t = "\n</s>\n"
        pieces.append((t.replace("\u2581", " ").encode("utf-8"), sp.get_score(i)))
    with open(path, "wb") as f:
        f.write(struct.pack("I", max(len(b) for b, _ in pieces)))
        for b, score in pieces:
            f.write(struct.pack("fI", score, len(b)))
            f.write(b)


def encode_stream(sp, fortunes):
    """Each fortune as BOS + its tokens, concatenated (llama2.c's layout: the
    model learns to end a fortune by predicting the next BOS)."""
    ids = []
    for text in fortunes:
        ids.append(sp.bos_id())
        ids.extend(sp.encode(text))
    return torch.tensor(ids, dtype=torch.long)


def unigram_cross_entropy(train_ids, val_ids, vocab_size):
    """Nats per token on val of the train set's unigram distribution (add-one)."""
    counts = torch.bincount(train_ids, minlength=vocab_size).double() + 1.0
    logp = torch.log(counts / counts.sum())
    return float(-logp[val_ids].mean())


# ---------------------------------------------------------------- model


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_size, seq_len, theta):
    freqs = 1.0 / (theta ** (torch.arange(0, head_size, 2).float() / head_size))
    angles = torch.outer(torch.arange(seq_len).float(), freqs)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x, cos, sin):
    # x: (batch, seq, heads, head_size); rotates the pairs (2i, 2i+1) as run.c does.
    xr, xi = x.float().reshape(*x.shape[:-1], -1, 2).unbind(-1)
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((xr * cos - xi * sin, xr * sin + xi * cos), dim=-1).flatten(3)


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.heads, self.kv_heads, self.head_size = a.heads, a.kv_heads, a.dim // a.heads
        self.attention_norm = RMSNorm(a.dim, a.norm_eps)
        self.wq = nn.Linear(a.dim, a.dim, bias=False)
        self.wk = nn.Linear(a.dim, a.kv_heads * self.head_size, bias=False)
        self.wv = nn.Linear(a.dim, a.kv_heads * self.head_size, bias=False)
        self.wo = nn.Linear(a.dim, a.dim, bias=False)
        self.ffn_norm = RMSNorm(a.dim, a.norm_eps)
        self.w1 = nn.Linear(a.dim, a.hidden, bias=False)  # gate
        self.w2 = nn.Linear(a.hidden, a.dim, bias=False)  # down
        self.w3 = nn.Linear(a.dim, a.hidden, bias=False)  # up
        self.dropout = nn.Dropout(a.dropout)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        h = self.attention_norm(x)
        q = apply_rope(self.wq(h).view(b, t, self.heads, self.head_size), cos, sin)
        k = apply_rope(self.wk(h).view(b, t, self.kv_heads, self.head_size), cos, sin)
        v = self.wv(h).view(b, t, self.kv_heads, self.head_size)
        rep = self.heads // self.kv_heads  # query head j reads kv head j // rep
        k = k.repeat_interleave(rep, dim=2)
        v = v.repeat_interleave(rep, dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_size) + mask[:t, :t]
        att = self.dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, -1)
        x = x + self.dropout(self.wo(y))
        h = self.ffn_norm(x)
        return x + self.dropout(self.w2(F.silu(self.w1(h)) * self.w3(h)))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.tok_embeddings = nn.Embedding(a.vocab, a.dim)
        self.dropout = nn.Dropout(a.dropout)
        self.layers = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = RMSNorm(a.dim, a.norm_eps)
        self.output = nn.Linear(a.dim, a.vocab, bias=False)
        self.output.weight = self.tok_embeddings.weight  # tied classifier
        cos, sin = rope_tables(a.dim // a.heads, a.seq_len, a.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.full((a.seq_len, a.seq_len), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2's scaled residual projections
            if name.endswith("wo.weight") or name.endswith("w2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * a.layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.dropout(self.tok_embeddings(ids))
        for layer in self.layers:
            x = layer(x, self.cos[:t], self.sin[:t], self.mask)
        return self.output(self.norm(x))


def export_llama2c(model, path):
    """llama2.c's legacy checkpoint (version 0): 7 int32, then the float32
    tensors stacked by kind; a positive vocab means a shared classifier."""
    a = model.a
    with open(path, "wb") as f:
        f.write(struct.pack("7i", a.dim, a.hidden, a.layers, a.heads, a.kv_heads, a.vocab, a.seq_len))

        def put(t):
            f.write(t.detach().contiguous().to(torch.float32).numpy().tobytes())

        put(model.tok_embeddings.weight)
        for kind in ("attention_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w2", "w3"):
            for layer in model.layers:
                put(getattr(layer, kind).weight)
        put(model.norm.weight)
        put(model.cos)  # freq_cis real and imaginary halves: the reader skips them
        put(model.sin)


def export_reference(model, sp, stream, texts, path, positions):
    """What TinyAI must reproduce (tests/model/recipe_parity.cc): torch's
    logits at every position of the first tokens of the held-out stream, and
    the tokenizer's ids for some held-out texts. Little-endian:
      "TREF", int32 positions, int32 vocab, int32 tokens[positions],
      float32 logits[positions][vocab], int32 texts, then per text
      int32 bytes, the UTF-8 bytes, int32 ids, int32 ids[] (BOS first)."""
    tokens = stream[:positions]
    model.eval()
    with torch.no_grad():
        logits = model(tokens[None])[0].to(torch.float32)
    model.train()
    with open(path, "wb") as f:
        f.write(b"TREF" + struct.pack("<2i", len(tokens), logits.shape[1]))
        f.write(struct.pack(f"<{len(tokens)}i", *tokens.tolist()))
        f.write(logits.contiguous().numpy().astype("<f4").tobytes())
        f.write(struct.pack("<i", len(texts)))
        for text in texts:
            b = text.encode("utf-8")
            ids = [sp.bos_id()] + sp.encode(text)
            f.write(struct.pack("<i", len(b)) + b + struct.pack(f"<{len(ids) + 1}i", len(ids), *ids))


# ---------------------------------------------------------------- training


@torch.no_grad()
def evaluate(model, stream, seq_len, batch):
    """Mean next-token loss over the whole stream in non-overlapping windows."""
    model.eval()
    n = (len(stream) - 1) // seq_len
    total, count = 0.0, 0
    for start in range(0, n, batch):
        rows = range(start, min(n, start + batch))
        x = torch.stack([stream[r * seq_len:(r + 1) * seq_len] for r in rows])
        y = torch.stack([stream[r * seq_len + 1:(r + 1) * seq_len + 1] for r in rows])
        logits = model(x)
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum"))
        count += y.numel()
    model.train()
    return total / count


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    progress = (step - a.warmup) / max(1, a.steps - a.warmup)
    return a.min_lr + 0.5 * (a.lr - a.min_lr) * (1.0 + math.cos(math.pi * progress))


@torch.no_grad()
def greedy(model, ids, steps):
    model.eval()
    ids = list(ids)
    while len(ids) <= steps:  # llama2.c's count: the token sampled at the last position is kept
        nxt = int(model(torch.tensor([ids]))[0, -1].argmax())
        if nxt == 1:
            break
        ids.append(nxt)
    model.train()
    return ids


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    p.add_argument("--corpus-dir", default="/usr/share/games/fortunes")
    p.add_argument("--corpus-list", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus.list"))
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--val-fraction", type=float, default=0.05)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--hidden", type=int, default=384)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=1800)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--threads", type=int, default=1,
                   help="torch's own threads; OpenBLAS runs OPENBLAS_NUM_THREADS (2)")
    a = p.parse_args()

    os.makedirs(a.out_dir, exist_ok=True)
    log_file = open(os.path.join(a.out_dir, "train.log"), "w")

    def log(msg):
        print(msg, flush=True)
        log_file.write(msg + "\n")
        log_file.flush()

    started = time.time()
    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)

    with open(a.corpus_list) as f:
        names = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    fortunes, skipped = read_fortunes(a.corpus_dir, names)
    train, val = split_fortunes(fortunes, a.val_fraction, a.seed)
    log(f"corpus: {len(names)} files of {a.corpus_dir}, {len(fortunes)} fortunes "
        f"({skipped} not UTF-8, skipped); train {len(train)} ({sum(map(len, train))} chars), "
        f"held-out val {len(val)} ({sum(map(len, val))} chars)")

    prefix = os.path.join(a.out_dir, "tok")
    sp = train_tokenizer(train, a.vocab, prefix)
    export_tokenizer(sp, os.path.join(a.out_dir, "tok.bin"))
    train_ids, val_ids = encode_stream(sp, train), encode_stream(sp, val)
    unigram = unigram_cross_entropy(train_ids, val_ids, a.vocab)
    log(f"tokenizer: BPE, {a.vocab} pieces; train {len(train_ids)} tokens, val {len(val_ids)} tokens; "
        f"unigram baseline on val {unigram:.4f} nats/token")

    model = Llama(a)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: dim {a.dim}, hidden {a.hidden}, layers {a.layers}, heads {a.heads}, kv_heads {a.kv_heads}, "
        f"vocab {a.vocab}, seq_len {a.seq_len}: {n_params} parameters ({n_params * 4} bytes in float32)")

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(a.seed)
    history = []
    train_started = time.time()
    running = None
    for step in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        starts = torch.randint(0, len(train_ids) - a.seq_len - 1, (a.batch,), generator=gen)
        x = torch.stack([train_ids[s:s + a.seq_len] for s in starts.tolist()])
        y = torch.stack([train_ids[s + 1:s + a.seq_len + 1] for s in starts.tolist()])
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        running = float(loss) if running is None else 0.98 * running + 0.02 * float(loss)
        last = step + 1 == a.steps
        if (step + 1) % a.eval_every == 0 or last:
            v = evaluate(model, val_ids, a.seq_len, a.batch)
            elapsed = time.time() - train_started
            history.append({"step": step + 1, "train_loss_running": running, "val_loss": v, "seconds": elapsed})
            log(f"step {step + 1}/{a.steps}: train {running:.4f} (running), val {v:.4f}, lr {lr_at(step, a):.2e}, "
                f"{elapsed:.0f} s, {(step + 1) * a.batch * a.seq_len / elapsed:.0f} tokens/s")
    train_seconds = time.time() - train_started
    final_train = evaluate(model, train_ids, a.seq_len, a.batch)
    final_val = history[-1]["val_loss"]
    log(f"final: train {final_train:.4f}, held-out val {final_val:.4f} (perplexity {math.exp(final_val):.2f}), "
        f"unigram baseline {unigram:.4f} nats/token; training {train_seconds:.0f} s")

    export_llama2c(model, os.path.join(a.out_dir, "model.bin"))
    export_reference(model, sp, val_ids, val[:200], os.path.join(a.out_dir, "reference.bin"), a.seq_len)
    samples = []
    for prompt in ("", "A", "The"):
        ids = [sp.bos_id()] + (sp.encode(prompt) if prompt else [])
        samples.append({"prompt": prompt, "steps": 64, "greedy_ids": greedy(model, ids, 64)})
    metrics = {
        "seed": a.seed, "hyper_parameters": {k: v for k, v in vars(a).items() if k not in ("out_dir",)},
        "corpus": {"files": names, "fortunes": len(fortunes), "skipped_not_utf8": skipped,
                   "train_fortunes": len(train), "val_fortunes": len(val),
                   "train_tokens": len(train_ids), "val_tokens": len(val_ids)},
        "parameters": n_params, "unigram_val_loss": unigram, "final_train_loss": final_train,
        "final_val_loss": final_val, "history": history, "train_seconds": train_seconds,
        "total_seconds": time.time() - started, "torch": torch.__version__, "sentencepiece": spm.__version__,
        "torch_greedy": samples,
    }
    with open(os.path.join(a.out_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    log(f"wrote {a.out_dir}/model.bin, tok.bin, metrics.json in {time.time() - started:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
