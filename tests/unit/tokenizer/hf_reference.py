"""transformers' AutoTokenizer as the reference for the HuggingFaceTokenizer (test_hf_tokenizer.cpp).

Megatron's HuggingFaceTokenizer encodes with `AutoTokenizer.from_pretrained(DIR)(text).input_ids`,
its end of document is `eos_token_id` and its vocabulary size `len(tokenizer)`. This script makes
tokenizer folders the way model authors do (BPE models trained with the `tokenizers` library on
the test texts, in the configurations of today's model families; a SentencePiece model converted
by transformers), and writes what AutoTokenizer gives for each text:
  <name>/          the tokenizer folder (tokenizer.json, tokenizer_config.json)
  <name>.jsonl     one {"text", "ids", "lib_ids", "decoded"} per text: AutoTokenizer's ids, the
                   `tokenizers` library's own encode(text).ids, and AutoTokenizer's decode(ids)
  <name>.meta.json {"vocab_size": len(tokenizer), "eod": eos_token_id}
  unicode.json     the library's own Unicode data, each code point alone: Punctuation's split
                   points, what StripAccents removes, and NFKC / NFD where they change it
  done             written last
Usage: hf_reference.py --texts A.jsonl [--texts B.jsonl] --out DIR
"""

import argparse
import json
import os
import shutil
import sys

import sentencepiece as spm
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiktoken_reference import EXTRA  # noqa: E402  (the texts that stress pre-tokenizers)

# The Split patterns of released tokenizer.json files, verbatim.
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
          r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
         r"\s*[\r\n]+|\s+(?!\S)|\s+")
LONGEST = 20_000  # characters kept of each --texts text: the corpus's longest add time, not cases
RESERVED = 63500  # Llama-3-style reserved special tokens: the vocabulary passes 65,500 (int32 data)

MORE = [
    "<|begin_of_text|>Hello<|end_of_text|> <|eot_id|>x<|reserved_special_token_7|>",
    "<|endoftext|><|im_start|>user\nhi<|im_end|>\n", "</s><s> <s>x</s>y <unk>",
    "a<sep>b <sep> c [mask] d  [mask]  e[mask]f", "hello world helloworld Hello World xhello world",
    "HELLO WORLD, hello   world!", "x\x1cy\x1dz\x1ew\x1fv", "\u0085\u0085 \u0085x",
    "ﬁ ﬂ ㎏ ① Ⅻ ｶﾀｶﾅ ＡＢＣ", "İstanbul ΣΑΣ ΌΣΟΣ ß ẞ", "\r\n\r\n", "a" * 5000, "1234567" * 200,
    "mixed123numbers456and789 3.14 2024-11-26", "¿Qué? ¡Sí! «quotes» „low” ‘single’", "\t\t\tindented\n\t",
    "a<|mytok|>b<|other|> c hello<|third|>",
]


def texts_from(paths):
    texts = list(EXTRA) + MORE
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                value = json.loads(line)["text"]
                texts.extend(t[:LONGEST] for t in (value if isinstance(value, list) else [value]))
    return texts


def byte_level_bpe(texts, vocab_size, pre_tokenizer, specials, normalizer=None, ignore_merges=False):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return tok


def save(tok, folder, **config):
    PreTrainedTokenizerFast(tokenizer_object=tok, **config).save_pretrained(folder)


def make_gpt2(texts, out):
    tok = byte_level_bpe(texts, 3000, pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>"])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    save(tok, out, bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>")


def make_llama3(texts, out):
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), "isolated"),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = byte_level_bpe(texts, 4000, pre, specials, ignore_merges=True)
    tok.add_special_tokens([f"<|reserved_special_token_{i}|>" for i in range(RESERVED)])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    save(tok, out, bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>")


def make_qwen2(texts, out):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2), "isolated"),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = byte_level_bpe(texts, 3500, pre, specials, normalizer=normalizers.NFC())
    save(tok, out, eos_token="<|endoftext|>", pad_token="<|endoftext|>")


def make_llama2(texts, out, work):
    """A SentencePiece BPE model with byte fallback (as Llama-2 and Mistral have), converted by
    transformers from tokenizer.model alone, then saved: what a user gets from a .model today."""
    os.makedirs(work, exist_ok=True)
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(t.replace("\x00", "") for t in texts if t.strip()))
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(work, "sp"), vocab_size=3000,
                                   model_type="bpe", byte_fallback=True, character_coverage=0.98, minloglevel=2)
    src = os.path.join(work, "llama2-slow")
    os.makedirs(src, exist_ok=True)
    os.replace(os.path.join(work, "sp.model"), os.path.join(src, "tokenizer.model"))
    with open(os.path.join(src, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                   "add_bos_token": True, "add_eos_token": False}, f)
    AutoTokenizer.from_pretrained(src).save_pretrained(out)


def make_llama2_legacy(llama2_folder, out):
    """The same vocabulary as the tokenizer.json files of Llama-2's release: a Prepend / Replace
    normalizer instead of the Metaspace pre-tokenizer."""
    with open(os.path.join(llama2_folder, "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    j["pre_tokenizer"] = None
    tok = Tokenizer.from_str(json.dumps(j))
    save(tok, out, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def make_metaspace(texts, out):
    """Components the model families above do not use: NFKC and lower-casing, digits and
    punctuation split off, Metaspace splitting (prepend "first"), unknown characters fused into
    <unk>, added tokens with lstrip / rstrip / single_word / normalized, a BERT-style template."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.Punctuation(),
        pre_tokenizers.Metaspace(prepend_scheme="first", split=True)])
    tok.decoder = decoders.Metaspace(prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<unk>", "<cls>", "<sep>"], show_progress=False,
                                  limit_alphabet=300)
    tok.train_from_iterator([t for t in texts if len(t) < 2000], trainer)
    tok.add_tokens([AddedToken("[mask]", lstrip=True, rstrip=True, normalized=False),
                    AddedToken("hello world", single_word=True, normalized=True)])
    tok.post_processor = processors.BertProcessing(("<sep>", tok.token_to_id("<sep>")),
                                                   ("<cls>", tok.token_to_id("<cls>")))
    save(tok, out, eos_token="<sep>", unk_token="<unk>")


def make_whitespace(texts, out):
    """Accents stripped after NFD, Whitespace pre-tokenizer, end-of-word suffixes, EOS template."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
                                           normalizers.Replace(Regex(r"\d+"), "0")])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<unk>", "</s>"], show_progress=False,
                                  end_of_word_suffix="</w>", limit_alphabet=300)
    tok.train_from_iterator([t for t in texts if len(t) < 2000], trainer)
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))])
    save(tok, out, eos_token="</s>", unk_token="<unk>")


def derived(folder, out, config=None, special_tokens_map=None, added=()):
    """A copy of `folder` with tokenizer_config.json keys changed, a special_tokens_map.json, or
    added_tokens appended to tokenizer.json as written (ids as declared, not as the library gives them)."""
    shutil.copytree(folder, out, dirs_exist_ok=True)
    with open(os.path.join(out, "tokenizer_config.json")) as f:
        tokenizer_config = json.load(f)
    tokenizer_config.update(config or {})
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config, f)
    if special_tokens_map:
        with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
            json.dump(special_tokens_map, f)
    with open(os.path.join(out, "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    for token_id, content in added:
        j["added_tokens"].append({"id": token_id, "content": content, "single_word": False, "lstrip": False,
                                  "rstrip": False, "normalized": False, "special": True})
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)


def make_derived(folders, out):
    """Folders whose configuration transformers reads in a way that is easy to get wrong: add_bos_token
    / add_eos_token (transformers leaves ids to tokenizer.json's post-processor), an eos_token in
    special_tokens_map.json that differs from tokenizer_config.json's (the map's wins), and added
    tokens declared at ids that are not the next free ones (the library renumbers them)."""
    qwen2 = folders["qwen2"]
    made = {
        "config_flags": dict(config={"add_bos_token": True, "add_eos_token": True, "bos_token": "<|im_start|>"}),
        "eos_map": dict(config={"eos_token": "<|im_end|>"}, special_tokens_map={"eos_token": "<|endoftext|>"}),
        "renumbered": dict(added=[(2100, "<|mytok|>"), (5, "<|other|>"), (9999, "hello"), (3502, "<|third|>")]),
    }
    for name, change in made.items():
        folders[name] = os.path.join(out, name)
        derived(qwen2, folders[name], **change)


def write_unicode(out):
    """Every code point through the library's Punctuation pre-tokenizer, StripAccents, NFKC and NFD
    (its crates' Unicode versions, older than ICU's)."""
    punctuation, strip, nfkc, nfd = (pre_tokenizers.Punctuation(), normalizers.StripAccents(), normalizers.NFKC(),
                                     normalizers.NFD())
    data = {"punctuation": [], "marks": [], "nfkc": {}, "nfd": {}}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        if len(punctuation.pre_tokenize_str("a" + c + "a")) == 3:
            data["punctuation"].append(cp)
        if strip.normalize_str("a" + c) == "a":
            data["marks"].append(cp)
        for form, normalizer in (("nfkc", nfkc), ("nfd", nfd)):
            changed = normalizer.normalize_str(c)
            if changed != c:
                data[form][str(cp)] = changed
    with open(os.path.join(out, "unicode.json"), "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)


def write_cases(folder, name, texts, out):
    tok = AutoTokenizer.from_pretrained(folder)
    lib = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    all_ids = tok(texts).input_ids  # batched: the per-call overhead would dominate
    lib_ids = [e.ids for e in lib.encode_batch(texts)]
    decoded = tok.batch_decode(all_ids)
    with open(os.path.join(out, name + ".jsonl"), "w", encoding="utf-8") as f:
        for text, ids, lib_one, dec in zip(texts, all_ids, lib_ids, decoded):
            f.write(json.dumps({"text": text, "ids": ids, "lib_ids": lib_one, "decoded": dec}) + "\n")
    with open(os.path.join(out, name + ".meta.json"), "w") as f:
        json.dump({"vocab_size": len(tok), "eod": tok.eos_token_id}, f)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", action="append", default=[])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if os.path.exists(os.path.join(args.out, "done")):  # a failed rerun must not leave a stale reference
        os.remove(os.path.join(args.out, "done"))
    texts = texts_from(args.texts)
    training = [t for t in texts if t]
    folders = {}
    for name, make in [("gpt2", make_gpt2), ("llama3", make_llama3), ("qwen2", make_qwen2),
                       ("metaspace", make_metaspace), ("whitespace", make_whitespace)]:
        folders[name] = os.path.join(args.out, name)
        make(training, folders[name])
    folders["llama2"] = os.path.join(args.out, "llama2")
    make_llama2(training, folders["llama2"], os.path.join(args.out, "work"))
    folders["llama2_legacy"] = os.path.join(args.out, "llama2_legacy")
    make_llama2_legacy(folders["llama2"], folders["llama2_legacy"])
    make_derived(folders, args.out)
    for name, folder in folders.items():
        write_cases(folder, name, texts, args.out)
    write_unicode(args.out)
    with open(os.path.join(args.out, "done"), "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    main()
