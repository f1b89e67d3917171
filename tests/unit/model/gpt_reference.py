"""Independent plain-PyTorch GPT (Megatron's semantics, spec section 10) for the parity tests.

Reads DIR/config.json, DIR/index.json ({"params": {name: shape}, ...}) and raw little-endian
arrays DIR/<name>.bin (parameters fp32; tokens, labels int64; loss_mask fp32); computes the loss
sum(loss * mask) / sum(mask) and its gradients; writes DIR/out/loss.bin and DIR/out/<name>.bin.
Usage: python gpt_reference.py DIR
"""
import json
import math
import pathlib
import sys

import numpy as np
import torch


def load(d, name, dtype, shape):
    return torch.from_numpy(np.fromfile(d / f"{name}.bin", dtype=dtype).reshape(shape).copy())


def norm(cfg, x, w, b):
    if cfg["normalization"] == "LayerNorm":
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + cfg["norm_epsilon"]) * w + b
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + cfg["norm_epsilon"]) * w


def rope(cfg, t):
    # t: [b, heads, s, hn]; rotate the first dim channels, pairs split in halves or interleaved.
    s, hn = t.shape[2], t.shape[3]
    dim = int(hn * cfg["rotary_percent"])
    inv = 1.0 / (cfg["rotary_base"] ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    ang = torch.arange(s, dtype=torch.float32)[:, None] * inv[None, :]  # [s, dim/2]
    x, rest = t[..., :dim], t[..., dim:]
    if cfg["rotary_interleaved"]:
        a, b = x[..., 0::2], x[..., 1::2]
        c, sn = torch.cos(ang), torch.sin(ang)
        out = torch.stack((a * c - b * sn, b * c + a * sn), dim=-1).reshape(x.shape)
    else:
        half = dim // 2
        a, b = x[..., :half], x[..., half:]
        c, sn = torch.cos(ang), torch.sin(ang)
        out = torch.cat((a * c - b * sn, b * c + a * sn), dim=-1)
    return torch.cat((out, rest), dim=-1)


def attention(cfg, p, pre, x):
    s, bsz, h = x.shape
    heads, groups, hn = cfg["num_attention_heads"], cfg["num_query_groups"], cfg["kv_channels"]
    per = heads // groups
    w = p[pre + "linear_qkv.weight"]
    bias = p.get(pre + "linear_qkv.bias")
    # Rows of the fused weight, group by group: per query heads, one key head, one value head.
    q_rows, k_rows, v_rows = [], [], []
    for g in range(groups):
        base = g * (per + 2) * hn
        q_rows += list(range(base, base + per * hn))
        k_rows += list(range(base + per * hn, base + (per + 1) * hn))
        v_rows += list(range(base + (per + 1) * hn, base + (per + 2) * hn))
    def proj(rows):
        y = x @ w[rows].T
        return y + bias[rows] if bias is not None else y
    q = proj(q_rows).reshape(s, bsz, heads, hn).permute(1, 2, 0, 3)
    k = proj(k_rows).reshape(s, bsz, groups, hn).permute(1, 2, 0, 3)
    v = proj(v_rows).reshape(s, bsz, groups, hn).permute(1, 2, 0, 3)
    if cfg.get("qk_layernorm"):  # per head, over hn, before the rotation
        q = norm(cfg, q, p[pre + "q_layernorm.weight"], p.get(pre + "q_layernorm.bias"))
        k = norm(cfg, k, p[pre + "k_layernorm.weight"], p.get(pre + "k_layernorm.bias"))
    if cfg["position_embedding_type"] == "rope":
        q, k = rope(cfg, q), rope(cfg, k)
    k = torch.stack([k[:, i // per] for i in range(heads)], dim=1)
    v = torch.stack([v[:, i // per] for i in range(heads)], dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(hn)
    causal = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
    scores = scores.masked_fill(causal, -10000.0)
    ctx = torch.softmax(scores, -1) @ v  # [b, heads, s, hn]
    ctx = ctx.permute(2, 0, 1, 3).reshape(s, bsz, heads * hn)
    out = ctx @ p[pre + "linear_proj.weight"].T
    if pre + "linear_proj.bias" in p:
        out = out + p[pre + "linear_proj.bias"]
    return out


def mlp(cfg, p, pre, x):
    y = x @ p[pre + "linear_fc1.weight"].T
    if pre + "linear_fc1.bias" in p:
        y = y + p[pre + "linear_fc1.bias"]
    if cfg["swiglu"]:
        gate, up = y.chunk(2, dim=-1)
        y = gate * torch.sigmoid(gate) * up
    else:
        y = 0.5 * y * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * y ** 3)))
    out = y @ p[pre + "linear_fc2.weight"].T
    if pre + "linear_fc2.bias" in p:
        out = out + p[pre + "linear_fc2.bias"]
    return out


def main():
    d = pathlib.Path(sys.argv[1])
    cfg = json.loads((d / "config.json").read_text())
    index = json.loads((d / "index.json").read_text())
    p = {n: load(d, n, np.float32, shape).requires_grad_(True) for n, shape in index["params"].items()}
    b, s = index["batch"]
    tokens = load(d, "tokens", np.int64, (b, s))
    labels = load(d, "labels", np.int64, (b, s))
    mask = load(d, "loss_mask", np.float32, (b, s))

    x = p["embedding.word_embeddings.weight"][tokens]
    if cfg["position_embedding_type"] == "learned_absolute":
        x = x + p["embedding.position_embeddings.weight"][torch.arange(s)][None, :, :]
    x = x.transpose(0, 1)  # [s, b, h]
    for i in range(cfg["num_layers"]):
        pre = f"decoder.layers.{i}."
        ln = lambda name, t: norm(cfg, t, p[pre + name + ".weight"], p.get(pre + name + ".bias"))
        x = x + attention(cfg, p, pre + "self_attention.", ln("input_layernorm", x))
        x = x + mlp(cfg, p, pre + "mlp.", ln("pre_mlp_layernorm", x))
    x = norm(cfg, x, p["decoder.final_layernorm.weight"], p.get("decoder.final_layernorm.bias"))
    out_w = p.get("output_layer.weight", p["embedding.word_embeddings.weight"])
    logits = (x @ out_w.T).transpose(0, 1)  # [b, s, V]
    token_loss = torch.logsumexp(logits, -1) - logits.gather(-1, labels[..., None])[..., 0]
    loss = (token_loss * mask).sum() / mask.sum().clamp(min=1)
    loss.backward()

    out = d / "out"
    out.mkdir(exist_ok=True)
    np.array([loss.item()], dtype=np.float64).tofile(out / "loss.bin")
    for n, t in p.items():
        t.grad.numpy().astype(np.float32).tofile(out / f"{n}.bin")


if __name__ == "__main__":
    main()
