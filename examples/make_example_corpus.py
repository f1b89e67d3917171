#!/usr/bin/env python3
"""Writes the built-in example corpus: every text file of this repository (documentation,
sources, scripts) as one jsonl document {"text": ..., "path": ...}, in sorted path order, so the
example needs nothing from outside the repository. Usage: make_example_corpus.py OUT.jsonl"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SUFFIXES = {".md", ".cpp", ".h", ".cu", ".cuh", ".py", ".sh", ".txt", ".cmake"}
SKIP_DIRS = {".git", ".venv", "build", "output"}


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = pathlib.Path(sys.argv[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    tmp = out.with_suffix(out.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for path in sorted(ROOT.rglob("*")):
            rel = path.relative_to(ROOT)
            if any(part in SKIP_DIRS or part.startswith("build") for part in rel.parts):
                continue
            if path.is_file() and (path.suffix in SUFFIXES or path.name == "CMakeLists.txt"):
                text = path.read_text(encoding="utf-8", errors="replace")
                f.write(json.dumps({"text": text, "path": str(rel)}, ensure_ascii=False) + "\n")
                count += 1
    tmp.replace(out)
    print(f"wrote {out}: {count} documents, {out.stat().st_size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
