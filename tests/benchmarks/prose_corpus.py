"""English prose for the tokenizer benchmarks: the quotations, stories and jokes of Debian's
`fortunes` package (apt-get install fortunes), one document per fortune, as jsonl.
The test corpus (tests/data/corpus.jsonl) is mostly synthetic multi-script Unicode and code; this
is the ordinary English text most pretraining data is.
Usage: python prose_corpus.py OUT.jsonl [FORTUNES_DIR]   (prints the documents and megabytes)"""
import json
import os
import sys

out = sys.argv[1]
folder = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/games/fortunes"
if not os.path.isdir(folder):
    sys.exit(f"{folder} is missing: apt-get install fortunes")
docs = []
for name in sorted(os.listdir(folder)):
    path = os.path.join(folder, name)
    # The collections themselves: not their .dat indexes, not the .u8 links, not the drawings.
    if "." in name or os.path.islink(path) or not os.path.isfile(path) or name in ("art", "ascii-art"):
        continue
    with open(path, encoding="utf-8", errors="replace") as f:
        docs.extend(d.strip("\n") for d in f.read().split("\n%\n") if d.strip())
with open(out, "w", encoding="utf-8") as f:
    for d in docs:
        f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
print(f"{len(docs)} documents, {sum(len(d.encode()) for d in docs) / 1e6:.2f} MB -> {out}")
