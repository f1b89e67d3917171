"""tiktoken's own encoder as the reference for the TikTokenizer (test_tiktoken.cpp), and the
`regex` module (a second regex engine with the same semantics for these patterns: possessive
quantifiers, look-ahead, Unicode properties, \s as White_Space) for the pieces themselves, which
the ids alone do not always show (two pieces can encode as their concatenation would).

Builds a TikTokenizer vocabulary in Megatron's JSON format from GPT-2's merges (ranks 0-255 the
single bytes in order, then one token per merge, in merge order), then encodes a set of texts with
tiktoken.Encoding(pat_str=<Megatron's v1 or v2 pattern>).encode_ordinary, exactly as Megatron's
TikTokenizer does (its ranks shifted up by the special tokens). Writes to --out:
  vocab.json   the vocabulary
  cases.jsonl  one {"text", "v1", "v2", "v2_cut", "v1_pieces", "v2_pieces"} per text, ids already
               shifted by NUM_SPECIAL
  done         written last
Usage: tiktoken_reference.py --gpt2 DIR --texts A.jsonl [--texts B.jsonl] --out DIR
"""

import argparse
import base64
import json
import os

import regex
import tiktoken

NUM_SPECIAL = 1000
CUT = 20000  # "v2_cut": the vocabulary cut to its first CUT tokens (--vocab-size CUT + NUM_SPECIAL)
# Megatron's patterns (megatron/training/tokenizer/tokenizer.py, core_v0.12.0), verbatim.
PATTERNS = {
    "v1": r"[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
    "v2": "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
}

# Texts that stress the patterns beyond the files given: case changes inside words, title-case and
# modifier letters, combining marks, digits of other scripts, every kind of line break and space,
# punctuation runs with slashes and line breaks, special-token text, long words and numbers.
EXTRA = [
    "HTTPServer iPhone McDonald's XMLHttpRequest ABCdef abcDEF aB Ab",
    "ǅemal ǈubljana ʰello ʰ ǅ ᾈ",
    "e\u0301te\u0301 cafe\u0301 \u0301\u0301x \u0301 a\u0308\u0304b",
    "١٢٣ ٤٥ ١٢٣٤٥٦ ０１２ 12345678901234567890 3.14159 1,000,000",
    "a\r\nb\rc\nd\r\r\n\ne \n \r\n\t\n  \n",
    "x\u0085y\u00a0z\u2028w\u2029v\u3000u\u1680t\u200bs\u202f",
    "path/to/file//name/ http://example.com/a?b=c&d=e#f ///\n// /\r\n/",
    "!!!\n\n??? ... --- ***\r\n",
    "</s> <s> <unk> <|endoftext|> <SPECIAL_17> <mask>",
    "\x00 \x00\x00 a\x00b \x01\x02",
    "supercalifragilisticexpialidocious" * 4,
    "9" * 300,
    "中文文本和English混合 日本語のテキスト 한국어 텍스트",
    "🙂🙃 👨‍👩‍👧‍👦 🇺🇸 ❤️ x🙂y",
    "Ἀθῆναι Москва ΑΒΓ αβγ Ωmega",
    "   leading  and trailing   ",
    " ",
    "",
    "\n",
    "end with space ",
    "tabs\tand\t\ttabs\t",
]


def gpt2_byte_decoder():
    """GPT-2's printable stand-ins for the 256 bytes, inverted (bytes_to_unicode)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def build_vocab(gpt2_dir):
    decoder = gpt2_byte_decoder()
    ranks = {bytes([b]): b for b in range(256)}
    with open(os.path.join(gpt2_dir, "gpt2-merges.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#version") or not line.strip():
                continue
            a, b = line.rstrip("\n").split(" ")
            token = bytes(decoder[c] for c in a + b)
            if token not in ranks:
                ranks[token] = len(ranks)
    return ranks


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpt2", required=True)
    parser.add_argument("--texts", action="append", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if os.path.exists(os.path.join(args.out, "done")):  # a failed rerun must not leave a stale reference
        os.remove(os.path.join(args.out, "done"))

    ranks = build_vocab(args.gpt2)
    entries = [
        {"rank": r, "token_bytes": base64.b64encode(t).decode("ascii"), "token_str": t.decode("utf-8", errors="replace")}
        for t, r in sorted(ranks.items(), key=lambda kv: kv[1])
    ]
    with open(os.path.join(args.out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(entries, f)

    shifted = {t: r + NUM_SPECIAL for t, r in ranks.items()}
    specials = {t: i for i, t in enumerate(["<unk>", "<s>", "</s>"] + [f"<SPECIAL_{i}>" for i in range(3, NUM_SPECIAL)])}
    encodings = {
        name: tiktoken.Encoding(name=f"test-{name}", pat_str=pattern, mergeable_ranks=shifted, special_tokens=specials)
        for name, pattern in PATTERNS.items()
    }
    cut = {t: r for t, r in shifted.items() if r < CUT + NUM_SPECIAL}
    encodings["v2_cut"] = tiktoken.Encoding(
        name="test-v2-cut", pat_str=PATTERNS["v2"], mergeable_ranks=cut, special_tokens=specials)
    texts = list(EXTRA)
    for path in args.texts:
        with open(path, encoding="utf-8") as f:
            for line in f:
                value = json.loads(line)["text"]
                texts.extend(value if isinstance(value, list) else [value])
    with open(os.path.join(args.out, "cases.jsonl"), "w", encoding="utf-8") as f:
        for text in texts:
            case = {"text": text}
            for name, encoding in encodings.items():
                case[name] = encoding.encode_ordinary(text)
            for name, pattern in PATTERNS.items():
                pieces = regex.findall(pattern, text)
                assert "".join(pieces) == text, (name, text)
                case[name + "_pieces"] = pieces
            f.write(json.dumps(case) + "\n")
    with open(os.path.join(args.out, "done"), "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    main()
