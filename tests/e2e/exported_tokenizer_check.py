"""AutoTokenizer on an exported folder encodes every text to the ids preprocess_data wrote for that
document, and config.json / generation_config.json name the tokenizer's BOS.
Usage: exported_tokenizer_check.py JOBS_FILE, one check per line:
  HF_FOLDER DATASET_PREFIX TEXTS.jsonl EXPECTED_BOS EXTRA_IDS
(all in one process: importing transformers and megatron-core takes seconds). Exits 1 at the
first failed check."""
import json
import sys

import transformers
from megatron.core.datasets.indexed_dataset import IndexedDataset


def check(folder, prefix, texts_path, bos, extra_ids):
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    texts = [json.loads(line)["text"] for line in open(texts_path, encoding="utf-8")]
    data = IndexedDataset(prefix)
    assert len(data.document_indices) - 1 == len(texts), (len(data.document_indices) - 1, len(texts))
    config = json.load(open(f"{folder}/config.json"))
    # Megatron's preprocess_data makes no <extra_id_i> tokens (it sets --vocab-extra-ids to 0), training
    # does: the last ids of the exported vocabulary, found in text like the other special tokens.
    extra_ids = int(extra_ids)
    for i in range(extra_ids):
        assert tokenizer(f"<extra_id_{i}>")["input_ids"] == [config["vocab_size"] - extra_ids + i]
    bad = []
    compared = 0
    for i, text in enumerate(texts):
        if extra_ids and "<extra_id_" in text:
            continue
        compared += 1
        begin, end = data.document_indices[i], data.document_indices[i + 1]
        ours = [int(t) for s in range(begin, end) for t in data[s]]
        theirs = tokenizer(text)["input_ids"]
        if ours != theirs:
            bad.append((text[:60], ours[:16], theirs[:16]))
    assert not bad, f"{len(bad)} of {len(texts)} texts encode differently, e.g. {bad[:3]}"
    generation = json.load(open(f"{folder}/generation_config.json"))
    assert config["bos_token_id"] == int(bos) == generation["bos_token_id"], (config["bos_token_id"], bos)
    print(f"{folder.rsplit('/', 1)[-1]}: {type(tokenizer).__name__}: {compared} texts equal")


def main() -> int:
    for line in open(sys.argv[1], encoding="utf-8"):
        if line.strip():
            try:
                check(*line.split())
            except AssertionError as e:
                print(f"FAIL: {line.split()[0]}: {e}")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
