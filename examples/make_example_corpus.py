#!/usr/bin/env python3
"""Writes the built-in example corpus: every text file of this repository (documentation,
sources, scripts) as one jsonl document {"text": ..., "path": ...}, in sorted path order, so the
example needs nothing from outside the repository. Usage: make_example_corpus.py OUT.jsonl"""
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUFFIXES = {".md", ".cpp", ".h", ".cu", ".cuh", ".py", ".sh", ".txt", ".cmake"}
SKIP_DIRS = {".git", ".venv", "build", "output", "tokenizers", "data"}  # data: tests/data


def text_files():
    """The repository's text files in sorted path order, without walking the skipped folders."""
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for name in files:
            path = pathlib.Path(folder, name)
            if path.suffix in SUFFIXES or name == "CMakeLists.txt":
                found.append(path)
    return sorted(found)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = pathlib.Path(sys.argv[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    tmp = out.with_suffix(out.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for path in text_files():
            text = path.read_text(encoding="utf-8", errors="replace")
            f.write(json.dumps({"text": text, "path": str(path.relative_to(ROOT))}, ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(out)
    print(f"wrote {out}: {count} documents, {out.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
