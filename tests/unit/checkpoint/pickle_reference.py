"""Python's own pickle as the reference for the checkpoint module's pickle reader (test_python_formats.cpp).

Writes each value pickled at protocols 2 to 5 and the text the reader must render for it: what
pickle.dumps reduces the value to, by __reduce_ex__ (a class's name and arguments, its state, its
appended and set items), rendered as PickleValue::repr renders it:
  <name>.p<N>.pkl   pickle.dumps(value, protocol=N)
  cases.json        [{"file", "repr"}]
  tensors.pt        torch.save of a dict of tensors (dtypes, a transposed view, two views of one
                    storage, a 0-d tensor, an empty one, a Parameter), beside
  tensors.json      each tensor's dtype, shape and values (as floats)
  dcp_plain/        torch.distributed.checkpoint.save of tensors and an io.BytesIO (one chunk each)
  dcp_chunks/       a DCP folder whose tensors are in two chunks each, in two .distcp files, as
                    sharded ranks write them (torch's own dcp.load checks it reads back whole)
  dcp.json          the tensors' values (as floats) and the bytes item
  done              written last
Values: the scalars and containers torch.save and DCP use, an OrderedDict, argparse.Namespace (a
Megatron checkpoint's args), torch.Size and a torch.distributed.checkpoint Metadata object.
Usage: pickle_reference.py --out DIR
"""

import argparse
import collections
import copyreg
import io
import json
import math
import os
import pickle

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (ChunkStorageMetadata, Metadata, MetadataIndex, TensorProperties,
                                                   TensorStorageMetadata)


def bytes_repr(b):
    out = "b'"
    for c in b:
        if c in (0x5C, 0x27):
            out += "\\" + chr(c)
        elif 0x20 <= c < 0x7F:
            out += chr(c)
        else:
            out += "\\x%02x" % c
    return out + "'"


def str_repr(s):
    quote = '"' if "'" in s and '"' not in s else "'"
    out = quote
    for ch in s:
        if ch == "\\" or ch == quote:
            out += "\\" + ch
        elif ch == "\n":
            out += "\\n"
        elif ch == "\r":
            out += "\\r"
        elif ch == "\t":
            out += "\\t"
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out += "\\x%02x" % ord(ch)
        else:
            out += ch
    return out + quote


def name_of(obj):
    return obj.__module__ + "." + obj.__qualname__


def render(v, protocol):
    r = lambda x: render(x, protocol)  # noqa: E731
    if v is None or isinstance(v, bool):
        return repr(v)
    if type(v) is int:
        return str(v)
    if type(v) is float:
        return "inf" if v == math.inf else "-inf" if v == -math.inf else repr(v)
    if type(v) is str:
        return str_repr(v)
    if type(v) in (bytes, bytearray):
        return bytes_repr(v)
    if type(v) is list:
        return "[" + ", ".join(map(r, v)) + "]"
    if type(v) is tuple:
        return "(" + ", ".join(map(r, v)) + ("," if len(v) == 1 else "") + ")"
    if type(v) is dict:
        return "{" + ", ".join(r(k) + ": " + r(x) for k, x in v.items()) + "}"
    if type(v) is set:
        return "set([" + ", ".join(map(r, v)) + "])"
    if type(v) is frozenset:
        return "frozenset([" + ", ".join(map(r, v)) + "])"
    if isinstance(v, type) or callable(v) and hasattr(v, "__qualname__"):
        return name_of(v)
    # Anything else as pickle reduces it.
    reducer = copyreg.dispatch_table.get(type(v))  # as pickle looks it up first
    reduced = reducer(v) if reducer else v.__reduce_ex__(protocol)
    if isinstance(reduced, str):  # a module-level singleton saved by name (torch.float32)
        return pickle.whichmodule(v, reduced) + "." + reduced
    func, args = reduced[0], reduced[1]
    state = reduced[2] if len(reduced) > 2 else None
    items = list(reduced[3]) if len(reduced) > 3 and reduced[3] is not None else []
    dict_items = list(reduced[4]) if len(reduced) > 4 and reduced[4] is not None else []
    if func is copyreg.__newobj__:
        func, args = args[0], args[1:]
    out = name_of(func) + "(" + ", ".join(map(r, args)) + ")"
    if items:
        out += "[" + ", ".join(map(r, items)) + "]"
    if dict_items:
        out += "{" + ", ".join(r(k) + ": " + r(x) for k, x in dict_items) + "}"
    if state is not None:
        out += ".__setstate__(" + r(state) + ")"
    return out


def values():
    shared = [1, 2]
    props = TensorProperties(dtype=torch.float32)
    meta = Metadata(state_dict_metadata={
        "decoder.layers.mlp.linear_fc1.weight": TensorStorageMetadata(
            properties=props, size=torch.Size([2, 96, 32]),
            chunks=[ChunkStorageMetadata(offsets=torch.Size([0, 0, 0]), sizes=torch.Size([2, 48, 32]))])})
    return {
        "scalars": [None, True, False, 0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, -2**31, 2**31, 2**63 - 1, -2**63,
                    1.5, -0.0, 1e300, 5e-324, math.inf],
        "big_ints": [2**64, -2**64, 2**70 + 12345, -(2**100)],
        "text": ["", "a", "héllo wörld", "quote's", 'both \' and "', "tab\tnew\nline", "a" * 300],
        "bytes": [b"", b"\x00\x01\xff", b"abc'\\", bytearray(b"xyz"), b"x" * 300],
        "containers": {"list": [1, [2, [3]]], "tuple0": (), "tuple1": (1,), "tuple2": (1, 2), "tuple3": (1, 2, 3),
                       "tuple4": (1, 2, 3, 4), "set": {7}, "frozen": frozenset([8]), (1, "k"): "tuple key",
                       "shared": (shared, shared), 3: "int key"},
        "ordered_dict": collections.OrderedDict([("b", 1), ("a", torch.Size([4, 5]))]),
        "namespace": argparse.Namespace(num_layers=2, lr=3e-3, tokenizer_type="GPT2BPETokenizer", fp16=False,
                                        data_path=["1.0", "prefix"], rampup_batch_size=None),
        "dcp_metadata": meta,
        "globals": [collections.OrderedDict, torch.float32, os.path.join],
    }


def write_tensors(out):
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    tensors = {
        "float32": torch.linspace(-1, 1, 7),
        "bfloat16": torch.tensor([1.5, -2.25, 3e38, 1e-3], dtype=torch.bfloat16),
        "float16": torch.tensor([0.5, -65504.0], dtype=torch.float16),
        "int64": torch.tensor([[1, -2], [2**40, 7]]),
        "int32": torch.tensor([3, -4], dtype=torch.int32),
        "uint8": torch.tensor([0, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "transposed": base.t(),
        "row": base[1],
        "column": base[:, 2],
        "scalar": torch.tensor(4.25),
        "empty": torch.empty(0, 3),
        "parameter": torch.nn.Parameter(torch.ones(2, 2) * 3),
    }
    torch.save(tensors, os.path.join(out, "tensors.pt"))
    with open(os.path.join(out, "tensors.json"), "w") as f:
        json.dump({k: {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                       "values": t.detach().double().flatten().tolist()} for k, t in tensors.items()}, f)


def write_dcp(out):
    w = torch.arange(24, dtype=torch.float32).reshape(6, 4) / 8
    v = (torch.arange(15, dtype=torch.float32).reshape(3, 5) - 7).to(torch.bfloat16)
    dcp.save({"w": w, "v": v, "blob": io.BytesIO(b"common state \x00\xff")}, checkpoint_id=os.path.join(out, "dcp_plain"))
    # Two chunks of each tensor in two files: w by rows [0, 4) and [4, 6), v by columns [0, 2) and [2, 5).
    folder = os.path.join(out, "dcp_chunks")
    os.makedirs(folder, exist_ok=True)
    pieces = {"w": [((0, 0), w[0:4]), ((4, 0), w[4:6])], "v": [((0, 0), v[:, 0:2]), ((0, 2), v[:, 2:5])]}
    files = [bytearray(), bytearray()]
    state, storage = {}, {}
    for name, chunks in pieces.items():
        full = w if name == "w" else v
        state[name] = TensorStorageMetadata(TensorProperties(dtype=full.dtype), full.size(), [
            ChunkStorageMetadata(offsets=torch.Size(o), sizes=c.size()) for o, c in chunks])
        for rank, (o, c) in enumerate(chunks):
            buf = io.BytesIO()
            torch.save(c.clone(), buf)
            storage[MetadataIndex(name, torch.Size(o), 0)] = _StorageInfo(f"__{rank}_0.distcp", len(files[rank]),
                                                                          len(buf.getvalue()))
            files[rank] += buf.getvalue()
    for rank, data in enumerate(files):
        with open(os.path.join(folder, f"__{rank}_0.distcp"), "wb") as f:
            f.write(data)
    with open(os.path.join(folder, ".metadata"), "wb") as f:
        pickle.dump(Metadata(state_dict_metadata=state, storage_data=storage), f)
    back = {"w": torch.zeros_like(w), "v": torch.zeros_like(v)}
    dcp.load(back, checkpoint_id=folder)
    assert torch.equal(back["w"], w) and torch.equal(back["v"], v), "torch's dcp.load reads the chunks otherwise"
    with open(os.path.join(out, "dcp.json"), "w") as f:
        json.dump({"w": w.double().flatten().tolist(), "v": v.double().flatten().tolist(),
                   "blob": list(b"common state \x00\xff")}, f)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    os.makedirs(out, exist_ok=True)
    if os.path.exists(os.path.join(out, "done")):
        os.remove(os.path.join(out, "done"))
    cases = []
    for name, value in values().items():
        for protocol in (2, 3, 4, 5):
            file = f"{name}.p{protocol}.pkl"
            with open(os.path.join(out, file), "wb") as f:
                f.write(pickle.dumps(value, protocol=protocol))
            cases.append({"file": file, "repr": render(value, protocol)})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1, ensure_ascii=False)
    write_tensors(out)
    write_dcp(out)
    with open(os.path.join(out, "done"), "w") as f:
        f.write("ok\n")
    print(f"{len(cases)} pickles in {out}")


if __name__ == "__main__":
    main()
