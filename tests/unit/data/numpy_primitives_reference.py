"""numpy's own outputs for the primitives under Megatron's dataset code, for the C++ tests:
RandomState streams (raw draws, bounded draws incl. the 64-bit path, shuffles), SeedSequence,
PCG64 and default_rng integers; files written by numpy.save; json.dumps(indent=4) texts and
their MD5. Imported by gpt_dataset_reference.py, which writes them next to the spec-4 cases.
"""
import hashlib
import json
import os
from collections import OrderedDict

import numpy as np


def random_streams(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    info = {"mt_seeds": [0, 1, 1234, 4294967295], "shuffle_seed": 1234}
    for seed in info["mt_seeds"]:
        rs = np.random.RandomState(seed)
        np.save(os.path.join(out_dir, f"mt_raw_{seed}.npy"),
                rs.randint(0, 2**32, size=2000, dtype=np.uint64).astype(np.uint32))
        rs = np.random.RandomState(seed)
        np.save(os.path.join(out_dir, f"mt_interval_{seed}.npy"), np.array(
            [rs.randint(0, m + 1, dtype=np.int64) for m in [1, 2, 3, 7, 1000, 2**31, 2**32 - 2]] +
            list(rs.randint(0, 2**40, size=500, dtype=np.int64)) +
            list(rs.randint(0, 2**32 + 1, size=500, dtype=np.int64)) +
            list(rs.randint(0, 2**33 + 5, size=500, dtype=np.int64)), dtype=np.int64))
    rs = np.random.RandomState(info["shuffle_seed"])
    parts = []
    for n in range(1, 1001):
        a = np.arange(n, dtype=np.int32)
        rs.shuffle(a)
        parts.append(a)
    np.save(os.path.join(out_dir, "shuffles_int32.npy"), np.concatenate(parts))
    for dtype, name in [(np.uint32, "uint32"), (np.int64, "int64")]:
        a = np.arange(100000, dtype=dtype)
        np.random.RandomState(5).shuffle(a)
        np.save(os.path.join(out_dir, f"shuffle_{name}.npy"), a)
    rng_cases = []
    for seed in [0, 1, 42, 4294967295, 2**40 + 3]:
        for low, high in [(1, 4096), (0, 1), (-5, 5), (0, 2**31 - 1), (-2**31, 2**31 - 1)]:
            name = f"rng_{seed}_{low}_{high}.npy"
            values = np.random.default_rng(seed).integers(low, high, size=1000, dtype=np.int32)
            np.save(os.path.join(out_dir, name), values)
            rng_cases.append({"seed": seed, "low": low, "high": high, "file": name})
        pcg = np.random.PCG64(seed)
        np.save(os.path.join(out_dir, f"pcg64_{seed}.npy"), pcg.random_raw(100))
        np.save(os.path.join(out_dir, f"seedseq_{seed}.npy"),
                np.random.SeedSequence(seed).generate_state(8, np.uint32))
    info["default_rng"] = rng_cases
    info["pcg_seeds"] = [0, 1, 42, 4294967295, 2**40 + 3]
    return info


def npy_files(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    cases = []
    for dtype in ["int16", "int32", "int64", "uint32", "uint16", "uint8", "float32", "float64"]:
        for shape in [(0,), (1,), (10,), (123457,), (5, 2), (0, 2), (1000, 2)]:
            count = int(np.prod(shape))
            values = ((np.arange(count, dtype=np.int64) * 7919 - 3) % 30011).astype(dtype)
            name = f"{dtype}_{'x'.join(map(str, shape))}.npy"
            np.save(os.path.join(out_dir, name), values.reshape(shape))
            cases.append({"file": name, "dtype": dtype, "shape": list(shape)})
    return cases


def json_cases(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    values = [
        OrderedDict([("class", "GPTDataset"), ("path", "/data/\u00e9t\u00e9 \"q\"\\x\n\t\x01\x7f"),
                     ("emoji", "\U0001F600"), ("n", -12), ("big", 2**62), ("t", True),
                     ("f", False), ("none", None), ("floats", [0.1 + 0.2, 1e-05, 1e16, 123456789.0,
                                                              1.5e-300, -0.0, 0.969, 1.0]),
                     ("empty_list", []), ("empty_dict", {}),
                     ("nested", [[0, 0.949], None, [[], [1, [2]]]])]),
        [],
        OrderedDict(),
    ]
    out = []
    for i, v in enumerate(values):
        text = json.dumps(v, indent=4)
        with open(os.path.join(out_dir, f"value_{i}.json"), "w") as f:
            json.dump(v, f)
        with open(os.path.join(out_dir, f"dumps_{i}.txt"), "w", encoding="utf-8") as f:
            f.write(text)
        out.append({"value": f"value_{i}.json", "dumps": f"dumps_{i}.txt",
                    "md5": hashlib.md5(text.encode("utf-8")).hexdigest()})
    return out
