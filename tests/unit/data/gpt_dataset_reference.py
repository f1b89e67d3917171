#!/usr/bin/env python3
"""Independent numpy implementation of Megatron's GPT dataset construction (spec section 4).

Written from the spec, not from Megatron's code, and formulated differently from the C++ where
that is possible (the sample index from cumulative lengths and searchsorted, sample texts from
the flattened token stream). The random streams are numpy's own: RandomState for the document
and shuffle indices, default_rng for mock data. Writes, into --out:

  cases.json            every case: its inputs and the files holding the expected outputs
  <case>/...            expected arrays (.npy), description texts, synthetic datasets
  random/, npy/, json/  numpy's own outputs for the primitives (numpy_primitives_reference.py)

Usage: gpt_dataset_reference.py --golden PREFIX --out DIR   (numpy only)
"""
import argparse
import hashlib
import json
import math
import os
import re
import struct
from collections import OrderedDict

import numpy as np

from numpy_primitives_reference import json_cases, npy_files, random_streams

DTYPE_CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64,
               7: np.float32, 8: np.uint16}
SPLITS = ["train", "valid", "test"]
TOKENIZER = OrderedDict([
    ("class", "megatron.core.tokenizers.text.text_tokenizer.MegatronTokenizerText"),
    ("tokenizer_path", ["gpt2/vocab.json", "gpt2/merges.txt"]),
    ("library", "megatron"),
    ("vocab_extra_ids", 0),
    ("additional_special_tokens", None),
])
VOCAB_SIZE = 50257
EOD = 50256


# ----------------------------------------------------------------------------- low level data

class IndexedData:
    """A Megatron .bin/.idx pair read with struct and numpy (spec 1.1)."""

    def __init__(self, prefix):
        self.prefix = prefix
        with open(prefix + ".idx", "rb") as f:
            raw = f.read()
        assert raw[:9] == b"MMIDIDX\x00\x00"
        _version, code, count, _docs = struct.unpack("<QBQQ", raw[9:34])
        self.dtype = DTYPE_CODES[code]
        self.sequence_lengths = np.frombuffer(raw, np.int32, count, 34)
        self.pointers = np.frombuffer(raw, np.int64, count, 34 + 4 * count)
        self.bin = np.fromfile(prefix + ".bin", dtype=self.dtype)
        self.starts = self.pointers // np.dtype(self.dtype).itemsize

    def tokens(self, sequence):
        start = int(self.starts[sequence])
        return self.bin[start:start + int(self.sequence_lengths[sequence])].astype(np.int64)


class MockData:
    """MockGPTLowLevelDataset (spec 4.10)."""

    def __init__(self, eod, vocab_size):
        self.prefix = None
        rng = np.random.default_rng(seed=0)
        self.sequence_lengths = rng.integers(low=1, high=4096, size=100000, dtype=np.int32)
        self.eod = eod
        self.vocab_size = vocab_size

    def tokens(self, sequence):
        length = int(self.sequence_lengths[sequence])
        body = (np.arange(1, length, dtype=np.int64)) % self.vocab_size
        return np.concatenate([body, np.array([self.eod], dtype=np.int64)])


def write_indexed(prefix, documents, dtype, code):
    """A .bin/.idx pair, one sequence per document (spec 1.1, 1.4)."""
    lengths = np.array([len(d) for d in documents], dtype=np.int32)
    itemsize = np.dtype(dtype).itemsize
    pointers = np.zeros(len(documents), dtype=np.int64)
    if len(documents) > 1:
        pointers[1:] = np.cumsum(lengths[:-1].astype(np.int64)) * itemsize
    with open(prefix + ".bin", "wb") as f:
        for d in documents:
            f.write(np.asarray(d, dtype=dtype).tobytes())
    doc_index = np.arange(len(documents) + 1, dtype=np.int64)
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, code, len(documents), len(doc_index)))
        f.write(lengths.tobytes() + pointers.tobytes() + doc_index.tobytes())


# ----------------------------------------------------------------------------- spec 4.2, 4.9

def normalize(values):
    w = np.array(values, dtype=np.float64)
    return (w / np.sum(w)).tolist()


def parse_split(text):
    numbers = [float(x) for x in re.findall(r"[.0-9]+", text)]
    numbers = numbers + [0.0] * (3 - len(numbers))
    w = normalize(numbers)
    ends = [0]
    for x in w:
        ends.append(ends[-1] + x)
    return [None if b <= a else (a, b) for a, b in zip(ends[:-1], ends[1:])]


def index_range(bookends, n):
    return int(round(bookends[0] * float(n))), int(round(bookends[1] * float(n)))


def parse_blend(items):
    if len(items) % 2 == 1:
        return [p.strip() for p in items], None
    try:
        weights = [float(items[i]) for i in range(0, len(items), 2)]
    except ValueError:
        return [p.strip() for p in items], None
    return [items[i].strip() for i in range(1, len(items), 2)], weights


# ----------------------------------------------------------------------------- spec 4.3-4.8

class GPT:
    def __init__(self, low, path, beg, end, num_samples, split, cfg):
        self.low, self.num_samples, self.split, self.cfg = low, num_samples, split, cfg
        self.S = cfg["seq_length"]
        ident = OrderedDict()
        ident["class"] = "MockGPTDataset" if cfg["mock"] else "GPTDataset"
        ident["dataset_path"] = path
        ident["num_samples"] = num_samples
        ident["index_split"] = split
        ident["random_seed"] = cfg["seed"]
        ident["sequence_length"] = self.S
        ident["split"] = cfg["split"]
        ident["split_matrix"] = cfg["split_matrix"]
        ident["tokenizer"] = TOKENIZER
        self.identifiers = ident
        self.description = json.dumps(ident, indent=4)
        self.md5 = hashlib.md5(self.description.encode("utf-8")).hexdigest()
        self.class_name = ident["class"]
        self._build(np.arange(beg, end, dtype=np.int32))

    def _build(self, ids):
        S, X = self.S, 1
        lengths = self.low.sequence_lengths
        T = int(lengths[ids].astype(np.int64).sum())
        E = 1
        if self.num_samples is not None:
            while E * T < self.num_samples * S + X:
                E += 1
        separate = False
        if E > 1:
            sans = ((E - 1) * T - X) // S
            per_epoch = (T - X) // S
            separate = (self.num_samples - sans) < int(0.8 * per_epoch)
        self.epochs, self.separate = E, separate
        rs = np.random.RandomState(self.cfg["seed"])

        def shuffled_docs(epochs):
            a = np.tile(ids, epochs).astype(np.int32)
            rs.shuffle(a)
            return a

        if separate:
            doc = np.concatenate([shuffled_docs(E - 1), shuffled_docs(1)])
        else:
            doc = shuffled_docs(E)
        self.document_index = doc

        drop_last = self.split != "valid" or self.cfg.get("drop_last_valid", True)
        if drop_last:
            n = (E * T - X) // S
        else:
            n = int(math.ceil(np.float32(E * T - X) / np.float32(S)))
        lens = lengths[doc].astype(np.int64)
        ends = np.cumsum(lens)
        starts = np.arange(n + 1, dtype=np.int64) * S
        pos = np.searchsorted(ends, starts, side="right")
        past_end = pos >= len(doc)
        pos = np.minimum(pos, len(doc) - 1)
        before = np.where(pos > 0, ends[pos - 1], 0)
        off = starts - before
        off[past_end] = lens[-1] - X
        pos[0], off[0] = 0, 0
        big = max(len(doc), int(lengths.max())) > np.iinfo(np.int32).max
        self.sample_index = np.stack([pos, off], axis=1).astype(np.int64 if big else np.int32)
        self.doc_ends = ends

        dtype = np.int64 if n >= np.iinfo(np.uint32).max - 1 else np.uint32
        first_count = ((E - 1) * T - X) // S if separate else n
        first = np.arange(0, first_count, dtype=dtype)
        rs.shuffle(first)
        if first_count != n:
            last = np.arange(first_count, n, dtype=dtype)
            rs.shuffle(last)
            first = np.concatenate([first, last])
        self.shuffle_index = first

    def __len__(self):
        return len(self.shuffle_index)

    def text(self, k):
        """Tokens [j*S, j*S + S + 1) of the flattened stream, j = shuffle[k]; padded with -1."""
        j = int(self.shuffle_index[k])
        a, b = j * self.S, j * self.S + self.S + 1
        first = int(np.searchsorted(self.doc_ends, a, side="right"))
        parts, cursor = [], a
        for p in range(first, len(self.document_index)):
            if cursor >= b:
                break
            start = int(self.doc_ends[p - 1]) if p > 0 else 0
            toks = self.low.tokens(int(self.document_index[p]))
            take = toks[cursor - start:min(b - start, len(toks))]
            parts.append(take)
            cursor += len(take)
        out = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return np.concatenate([out, np.full(self.S + 1 - len(out), -1, np.int64)])

    def files(self, folder, name):
        os.makedirs(folder, exist_ok=True)
        out = {}
        for key in ["document_index", "sample_index", "shuffle_index"]:
            fname = f"{name}-{key}.npy"
            np.save(os.path.join(folder, fname), getattr(self, key))
            out[key] = fname
        fname = f"{name}-description.txt"
        with open(os.path.join(folder, fname), "w") as f:
            f.write(self.description)
        out.update(description=fname, md5=self.md5, class_name=self.class_name,
                   epochs=self.epochs, separate_final_epoch=bool(self.separate))
        return out


class Blended:
    def __init__(self, datasets, weights, size):
        self.datasets, self.size = datasets, size
        self.weights = normalize(weights) if size is not None else weights
        ident = OrderedDict()
        ident["class"] = "BlendedDataset"
        ident["datasets"] = [d.identifiers for d in datasets]
        ident["split"] = datasets[0].split
        ident["weights"] = self.weights
        ident["size"] = size
        self.description = json.dumps(ident, indent=4)
        self.md5 = hashlib.md5(self.description.encode("utf-8")).hexdigest()
        w = np.array(self.weights, dtype=np.float64)
        if size is None:
            sizes = np.array(weights, dtype=np.int64)
            w = sizes / float(sizes.sum())
            total = int(sizes.sum())
        else:
            total = size
        counts = np.zeros(len(datasets), dtype=np.int64)
        self.dataset_index = np.zeros(total, dtype=np.int16)
        self.dataset_sample_index = np.zeros(total, dtype=np.int64)
        for k in range(total):
            errors = w * max(float(k), 1.0) - counts.astype(np.float64)
            if size is None:
                errors[counts >= sizes] = -np.inf
            i = int(np.argmax(errors))
            self.dataset_index[k] = i
            self.dataset_sample_index[k] = counts[i]
            counts[i] += 1
        for i, d in enumerate(datasets):
            assert counts[i] <= len(d), "blend oversamples dataset %d" % i

    def __len__(self):
        return len(self.dataset_index)

    def text(self, k):
        return self.datasets[self.dataset_index[k]].text(int(self.dataset_sample_index[k]))

    def files(self, folder, name):
        os.makedirs(folder, exist_ok=True)
        np.save(os.path.join(folder, f"{name}-dataset_index.npy"), self.dataset_index)
        np.save(os.path.join(folder, f"{name}-dataset_sample_index.npy"), self.dataset_sample_index)
        with open(os.path.join(folder, f"{name}-description.txt"), "w") as f:
            f.write(self.description)
        return {"dataset_index": f"{name}-dataset_index.npy",
                "dataset_sample_index": f"{name}-dataset_sample_index.npy",
                "description": f"{name}-description.txt", "md5": self.md5,
                "datasets": [d.files(folder, f"{name}-mid{i}") for i, d in enumerate(self.datasets)]}


# ----------------------------------------------------------------------------- builder (4.9)

def build(paths, sizes, cfg, lows):
    """BlendedMegatronDatasetBuilder for the three data flag forms."""
    def low(prefix):
        if prefix not in lows:
            lows[prefix] = IndexedData(prefix)
        return lows[prefix]

    def splits_of(lowdata, path, matrix, samples):
        out = [None] * 3
        for s in range(3):
            if matrix[s] is not None:
                beg, end = index_range(matrix[s], len(lowdata.sequence_lengths))
                out[s] = GPT(lowdata, path, beg, end, samples[s], SPLITS[s], cfg)
        return out

    def blend(prefixes, weights, matrix, samples):
        if weights is not None:
            weights = normalize(weights)
            targets = [[int(math.ceil(n * w)) if n is not None else None for n in samples]
                       for w in weights]
            buffers = [[int(math.ceil(math.ceil(n * w) * (1 + cfg["surplus"])))
                        if n is not None else None for n in samples] for w in weights]
        else:
            buffers = [[None] * 3 for _ in prefixes]
        mids = [splits_of(low(p), p, matrix, buffers[i]) for i, p in enumerate(prefixes)]
        out = [None] * 3
        for s in range(3):
            if matrix[s] is None:
                continue
            ds = [m[s] for m in mids]
            if weights is not None:
                out[s] = Blended(ds, weights, sum(t[s] for t in targets))
            else:
                lengths = [len(d) for d in ds]
                size = min(samples[s], sum(lengths)) if samples[s] is not None else None
                out[s] = Blended(ds, lengths, size)
        return out

    if paths.get("mock"):
        cfg.update(mock=True, split="1,1,1", split_matrix=parse_split("1,1,1"))
        return splits_of(MockData(EOD, VOCAB_SIZE), None, cfg["split_matrix"], sizes)
    if paths.get("data_path"):
        cfg.update(split=paths.get("split") or "969, 30, 1")
        cfg.update(split_matrix=parse_split(cfg["split"]))
        prefixes, weights = parse_blend(paths["data_path"])
        if len(prefixes) == 1 and weights is None:
            return splits_of(low(prefixes[0]), prefixes[0], cfg["split_matrix"], sizes)
        return blend(prefixes, weights, cfg["split_matrix"], sizes)
    cfg.update(split=None, split_matrix=None)
    out = [None] * 3
    for s, key in enumerate(["train_data_path", "valid_data_path", "test_data_path"]):
        if not paths.get(key):
            continue
        matrix = [None] * 3
        matrix[s] = (0.0, 1.0)
        spoof = [0, 0, 0]
        spoof[s] = sizes[s]
        prefixes, weights = parse_blend(paths[key])
        if len(prefixes) == 1:
            out[s] = splits_of(low(prefixes[0]), prefixes[0], matrix, spoof)[s]
        else:
            out[s] = blend(prefixes, weights, matrix, spoof)[s]
    return out


def ltor_outputs(text, flags, eod=EOD, pad=-1):
    """GPTDataset.__getitem__ for one sample's S + 1 ids (spec 4.7)."""
    tokens, labels = text[:-1].copy(), text[1:].copy()
    loss_mask = np.ones(len(tokens), dtype=np.float32)
    if flags.get("eod_mask_loss"):
        loss_mask[tokens == eod] = 0.0
    position_ids = np.arange(len(tokens), dtype=np.int64)
    if flags.get("reset_position_ids"):
        for i in np.nonzero(tokens == eod)[0]:
            position_ids[i + 1:] -= position_ids[i] + 1
    loss_mask[labels == pad] = 0.0
    tokens[tokens == pad] = 0
    labels[labels == pad] = 0
    return tokens, labels, loss_mask, position_ids


def write_case(out_dir, name, paths, sizes, cfg, flags, lows):
    folder = os.path.join(out_dir, name)
    datasets = build(paths, sizes, cfg, lows)
    case = {"name": name, "paths": paths, "samples": sizes, "seed": cfg["seed"],
            "seq_length": cfg["seq_length"], "flags": flags,
            "drop_last_valid": cfg.get("drop_last_valid", True), "splits": []}
    rng = np.random.RandomState(99)
    for s, ds in enumerate(datasets):
        if ds is None:
            case["splits"].append(None)
            continue
        entry = ds.files(folder, SPLITS[s])
        entry["kind"] = "blend" if isinstance(ds, Blended) else "gpt"
        entry["size"] = len(ds)
        n = len(ds)
        ks = sorted(set([0, 1, n // 2, n - 1] + [int(x) for x in rng.randint(0, n, size=12)]))
        texts = np.stack([ds.text(k) for k in ks])
        outs = [ltor_outputs(t, flags) for t in texts]
        np.save(os.path.join(folder, f"{SPLITS[s]}-texts.npy"), texts)
        for i, key in enumerate(["tokens", "labels", "loss_mask", "position_ids"]):
            np.save(os.path.join(folder, f"{SPLITS[s]}-{key}.npy"), np.stack([o[i] for o in outs]))
        entry["sample_ks"] = ks
        case["splits"].append(entry)
    return case


def synthetic_datasets(out_dir):
    rs = np.random.RandomState(2024)
    a_docs = [rs.randint(0, 50257, size=n) for n in rs.randint(0, 600, size=300)]
    a_docs[5] = np.zeros(0, dtype=np.int64)  # an empty document
    write_indexed(os.path.join(out_dir, "synth_a"), a_docs, np.uint16, 8)
    b_docs = [np.append(rs.randint(0, 50256, size=n), EOD) for n in rs.randint(1, 900, size=150)]
    write_indexed(os.path.join(out_dir, "synth_b"), b_docs, np.int32, 4)
    return os.path.join(out_dir, "synth_a"), os.path.join(out_dir, "synth_b")


def gpt_cases(out_dir, golden):
    lows = {}
    g = IndexedData(golden)
    lows[golden] = g
    a, b = synthetic_datasets(out_dir)
    n = len(g.sequence_lengths)
    beg, end = index_range(parse_split("969, 30, 1")[0], n)
    T = int(g.sequence_lengths[beg:end].astype(np.int64).sum())
    per_epoch = (T - 1) // 128
    base = {"seed": 1234, "seq_length": 128, "surplus": 0.005, "mock": False}
    cases = []

    def add(name, paths, sizes, flags=None, **cfg):
        c = dict(base)
        c.update(cfg)
        cases.append(write_case(out_dir, name, paths, sizes, c, flags or {}, lows))

    one = {"data_path": [golden], "split": "969, 30, 1"}
    add("single_one_epoch", one, [1000, 200, 50])
    add("single_separate_final_epoch", one, [2 * per_epoch + per_epoch // 4, 300, 40],
        {"eod_mask_loss": True, "reset_position_ids": True})
    add("single_two_epochs_joined", one, [per_epoch + (9 * per_epoch) // 10, 100, 10], seed=7)
    add("single_default_split_seq64", {"data_path": [golden]}, [5000, None, 10], seq_length=64)
    add("single_valid_partial", {"data_path": [golden], "split": "90,10"}, [3000, None, 0],
        seq_length=256, drop_last_valid=False, seed=0)
    add("single_seq8_one_epoch", {"data_path": [golden], "split": "1"}, [None, None, None],
        seq_length=8, seed=31337)
    add("blend_weighted", {"data_path": ["0.5", golden, "0.3", a, "0.2", b], "split": "90,8,2"},
        [3000, 400, 100], seq_length=64)
    add("blend_unweighted", {"data_path": [golden, a], "split": "80,15,5"}, [2000, 300, 50],
        seq_length=64, seed=5)
    add("blend_single_weighted", {"data_path": ["2", a], "split": "80,20"}, [700, 90, 5],
        seq_length=32)
    add("per_split_paths", {"train_data_path": ["1", a, "3", b], "valid_data_path": [golden, a],
                            "test_data_path": [b]}, [500, None, 20], seq_length=64)
    add("mock", {"mock": True}, [1000, 100, 10], {"reset_position_ids": True}, seq_length=256)
    np.save(os.path.join(out_dir, "mock_lengths.npy"), MockData(EOD, VOCAB_SIZE).sequence_lengths)
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", required=True, help="prefix of the Megatron-made dataset")
    parser.add_argument("--out", required=True, help="folder for the expected outputs")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    manifest = {
        "numpy_version": np.__version__,
        "vocab_size": VOCAB_SIZE,
        "eod": EOD,
        "tokenizer": TOKENIZER,
        "random": random_streams(os.path.join(args.out, "random")),
        "npy": npy_files(os.path.join(args.out, "npy")),
        "json": json_cases(os.path.join(args.out, "json")),
        "cases": gpt_cases(args.out, args.golden),
    }
    with open(os.path.join(args.out, "cases.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
