"""Megatron's SentencePiece tokenizers as the reference for test_sentencepiece.cpp and
tests/e2e/preprocess_sentencepiece.sh.

megatron.training is not on PyPI, so the three classes below follow Megatron core_v0.12.0's
megatron/training/tokenizer/tokenizer.py (_SentencePieceTokenizer, _GPTSentencePieceTokenizer,
_Llama2Tokenizer) line by line, calling the PyPI sentencepiece package exactly as they do.

Trains small models with sentencepiece's own trainer on the texts (MODELS: BPE with byte fallback
as Llama 2's, Unigram with the defaults, a pad piece, user-defined and control pieces, no BOS or
EOS), then writes to --out:
  <model>.model  each model
  texts.jsonl    the texts, one {"text": ...} per line (the stress texts first)
  cases.jsonl    per text {"text", "<model>/<type>": ids, "<model>/<type>:decoded": detokenize(ids)
                 (only where that differs from the text)}
  tokenizers.json  per "<model>/<type>": {"vocab_size", "eod", "vocab_extra_ids", "unigram", "scores"
                 (the model's piece scores, by id)}
  done           written last
The key "<model>/SentencePieceTokenizer+3" is SentencePieceTokenizer with vocab_extra_ids=3.
Usage: sentencepiece_reference.py --out DIR [--texts A.jsonl]... [--max-chars N] [--models-only]
"""

import argparse
import json
import os

import sentencepiece


class SentencePieceTokenizer:
    """_SentencePieceTokenizer (core_v0.12.0), without the properties nothing here reads."""

    def __init__(self, model_file, vocab_extra_ids=0):
        self.tokenizer = sentencepiece.SentencePieceProcessor(model_file=model_file)
        self._initalize(vocab_extra_ids)

    def _populate_vocab(self):
        self._vocab = {}
        self._inv_vocab = {}
        for i in range(len(self.tokenizer)):
            t = self.tokenizer.id_to_piece(i)
            self._inv_vocab[i] = t
            self._vocab[t] = i

    def _initalize(self, vocab_extra_ids):
        self._populate_vocab()
        self._special_tokens = {}
        self._inv_special_tokens = {}
        self._t5_tokens = []

        def _add_special_token(t):
            if t not in self._vocab:
                next_id = len(self._vocab)
                self._vocab[t] = next_id
                self._inv_vocab[next_id] = t
            self._special_tokens[t] = self._vocab[t]
            self._inv_special_tokens[self._vocab[t]] = t

        _add_special_token('<CLS>')
        self._cls_id = self._vocab['<CLS>']
        _add_special_token('<SEP>')
        self._sep_id = self._vocab['<SEP>']
        _add_special_token('<EOD>')
        self._eod_id = self._vocab['<EOD>']
        _add_special_token('<MASK>')
        self._mask_id = self._vocab['<MASK>']

        pad_id = self.tokenizer.pad_id()
        try:
            pad_token = self.tokenizer.id_to_piece(pad_id)
        except IndexError:
            pad_token = '<PAD>'
        _add_special_token(pad_token)
        self._pad_id = self._vocab[pad_token]

        bos_id = self.tokenizer.bos_id()
        try:
            bos_token = self.tokenizer.id_to_piece(bos_id)
        except IndexError:
            bos_token = '<BOS>'
        _add_special_token(bos_token)
        self._bos_id = self._vocab[bos_token]

        eos_id = self.tokenizer.eos_id()
        try:
            eos_token = self.tokenizer.id_to_piece(eos_id)
        except IndexError:
            eos_token = '<EOS>'
        _add_special_token(eos_token)
        self._eos_id = self._vocab[eos_token]

        for i in range(vocab_extra_ids):
            t = "<extra_id_{}>".format(i)
            _add_special_token(t)
            self._t5_tokens += [t]

    @property
    def vocab_size(self):
        return len(self._vocab)

    def tokenize(self, text):
        ids = []
        idx = 0

        while 1:
            indices = {}
            for token in self._special_tokens:
                try:
                    indices[token] = text[idx:].index(token)
                except ValueError:
                    continue
            if len(indices) == 0:
                break

            next_token = min(indices, key=indices.get)
            next_idx = idx + indices[next_token]

            ids.extend(self.tokenizer.encode_as_ids(text[idx:next_idx]))
            ids.append(self._special_tokens[next_token])
            idx = next_idx + len(next_token)

        ids.extend(self.tokenizer.encode_as_ids(text[idx:]))
        return ids

    def detokenize(self, ids):
        text = ""
        last_i = 0

        for i, id in enumerate(ids):
            if id in self._inv_special_tokens:
                text += self.tokenizer.decode_ids(ids[last_i:i]) + " "
                text += self._inv_special_tokens[id] + " "
                last_i = i + 1

        text += self.tokenizer.decode_ids(ids[last_i:])
        return text

    @property
    def eod(self):
        return self._eod_id


class GPTSentencePieceTokenizer(SentencePieceTokenizer):
    """_GPTSentencePieceTokenizer (core_v0.12.0)."""

    def __init__(self, model_file):
        super().__init__(model_file, vocab_extra_ids=0)

    def _initalize(self, vocab_extra_ids):
        self._populate_vocab()
        self._pad_id = self.tokenizer.pad_id()
        self._bos_id = self.tokenizer.bos_id()
        self._eos_id = self.tokenizer.eos_id()

    def tokenize(self, text):
        return self.tokenizer.encode_as_ids(text)

    def detokenize(self, ids):
        return self.tokenizer.decode_ids(ids)

    @property
    def eod(self):
        return self._eos_id


class Llama2Tokenizer(SentencePieceTokenizer):
    """_Llama2Tokenizer (core_v0.12.0)."""

    def __init__(self, model_file):
        super().__init__(model_file, vocab_extra_ids=0)

    def _initalize(self, vocab_extra_ids):
        self._populate_vocab()
        self.n_words: int = self.tokenizer.vocab_size()
        self.bos_id: int = self.tokenizer.bos_id()
        self.eos_id: int = self.tokenizer.eos_id()
        self.pad_id: int = self.tokenizer.pad_id()
        assert self.tokenizer.vocab_size() == self.tokenizer.get_piece_size()

    def tokenize(self, s: str, bos=True, eos=False):
        assert type(s) is str
        t = self.tokenizer.encode(s)
        if bos:
            t = [self.bos_id] + t
        if eos:
            t = t + [self.eos_id]
        return t

    def detokenize(self, ids):
        return self.tokenizer.decode_ids(ids)

    @property
    def eod(self):
        return self.eos_id


TYPES = {
    "SentencePieceTokenizer": SentencePieceTokenizer,
    "GPTSentencePieceTokenizer": GPTSentencePieceTokenizer,
    "Llama2Tokenizer": Llama2Tokenizer,
}

# The models: sentencepiece trainer options beside input, model_prefix and the quiet log.
MODELS = {
    # Llama 2's trainer options: BPE, digits split, byte fallback for characters outside the
    # coverage, no normalization, spaces kept as they are.
    "llama_bpe": dict(model_type="bpe", vocab_size=3000, byte_fallback=True, split_digits=True,
                      normalization_rule_name="identity", remove_extra_whitespaces=False,
                      allow_whitespace_only_pieces=True, character_coverage=0.995),
    # The defaults: Unigram, NFKC, extra whitespace removed, unk 0 bos 1 eos 2, no pad.
    "unigram": dict(model_type="unigram", vocab_size=3000),
    # A pad piece (<pad>, id 3): Megatron's special tokens then include it; low coverage: unknowns.
    "unigram_pad": dict(model_type="unigram", vocab_size=2000, pad_id=3, character_coverage=0.98),
    # User-defined pieces (SentencePiece matches them in text) named like Megatron's special
    # tokens, and a control piece (<MASK>) that only Megatron's splitting finds.
    "bpe_user": dict(model_type="bpe", vocab_size=2000, user_defined_symbols=["<EOD>", "<CLS>", "foo", "🙂", "12"],
                     control_symbols=["<MASK>"], character_coverage=0.999),
    # No BOS and no EOS: SentencePieceTokenizer adds <BOS> and <EOS>, GPTSentencePieceTokenizer's
    # eod is -1, and Llama2Tokenizer would write -1 (refused by ours, not computed here).
    "no_bos_eos": dict(model_type="unigram", vocab_size=1500, bos_id=-1, eos_id=-1, character_coverage=0.99),
}

TRAIN_CHARS = 400_000  # the models learn from the first 400,000 characters of the texts

# Texts that stress the tokenizers beyond the files given: many scripts, emoji with joiners and
# modifiers, combining marks, every kind of line break and space, NUL and control characters,
# long words and numbers, SentencePiece's own space mark, and the special tokens' text, alone,
# adjacent, overlapping and nested.
EXTRA = [
    "",
    " ",
    "  ",
    "\n",
    "Hello world",
    " Hello world ",
    "   leading and trailing   ",
    "multiple    spaces  between   words",
    "中文文本和English混合 日本語のテキスト、カタカナ 한국어 텍스트",
    "مرحبا بالعالم العربي ١٢٣ ٤٥",
    "नमस्ते दुनिया हिन्दी क्षत्रिय",
    "Ἀθῆναι Москва ΑΒΓ αβγ Ωmega ไทย ภาษา עברית",
    "🙂🙃 👨‍👩‍👧‍👦 🇺🇸 ❤️ x🙂y 👍🏽 🏳️‍🌈 🧑🏾‍🚀",
    "e\u0301te\u0301 cafe\u0301 \u0301\u0301x \u0301 a\u0308\u0304b Z̤̈͂ ḑ",
    "a\r\nb\rc\nd\r\r\n\ne \n \r\n\t\n  \n",
    "line\rwith\rlone\rCRs\r",
    "tabs\tand\t\ttabs\t",
    "\x00 \x00\x00 a\x00b \x01\x02\x7f\x0b\x0c",
    "x\u0085y\u00a0z\u2028w\u2029v\u3000u\u1680t\u200bs\u202f\ufeff",
    "supercalifragilisticexpialidocious" * 8,
    "9" * 500,
    "12345678901234567890 3.14159 1,000,000 0x1F 1e-9",
    "pneumonoultramicroscopicsilicovolcanoconiosis" * 3 + " Donaudampfschifffahrtsgesellschaftskapitän",
    "▁ ▁▁x▁y ▁",
    "<s> </s> <unk> <pad> <EOD> <CLS> <SEP> <MASK> <PAD> <BOS> <EOS> <extra_id_0> <extra_id_1> <extra_id_2>",
    "<s>hello</s>",
    "<EOD><EOD>x<EOD>",
    "a<CLS>b<SEP>c<MASK>d<PAD>e<pad>f<extra_id_0>g<extra_id_2>h",
    "<<s>> </s</s>> <EO<EOD>D> <s<s>> <<EOD>> <extra_id_<extra_id_0>1>",
    "<s></s><s></s>",
    "  <s>  two spaces around  </s>  ",
    "\n<EOD>\n",
    "<extra_id_0>",
    "<extra_id_10> <extra_id_3> <extra_id_-1>",
    "foo🙂12 foofoo 1212 f<EOD>oo 🙂<CLS>🙂",
    "<0x41> <0xFF> <unk>",
    "end with space ",
    "Ünïcödé ÀÉÎÕÜ ß ẞ ﬁ ﬀ Ⅻ ① ㎏ ＦＵＬＬＷＩＤＴＨ",
]


def train_models(out, texts):
    """Trains MODELS on `texts` (one sentence per line of each text) into out/<name>.model."""
    corpus = os.path.join(out, "train.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        written = 0
        for line in (line for text in texts for line in text.splitlines() if line.strip()):
            f.write(line + "\n")
            written += len(line)
            if written > TRAIN_CHARS:
                break
    for name, options in MODELS.items():
        sentencepiece.SentencePieceTrainer.train(
            input=corpus, model_prefix=os.path.join(out, name), minloglevel=2, num_threads=2,
            **options)
        os.remove(os.path.join(out, name + ".vocab"))
    os.remove(corpus)


def tokenizers(out):
    """Every (key, Megatron tokenizer, vocab_extra_ids) this reference computes."""
    result = []
    for name in MODELS:
        model = os.path.join(out, name + ".model")
        for type_name, cls in TYPES.items():
            if name == "no_bos_eos" and type_name == "Llama2Tokenizer":
                continue
            result.append((f"{name}/{type_name}", cls(model), 0))
    result.append(("llama_bpe/SentencePieceTokenizer+3",
                   SentencePieceTokenizer(os.path.join(out, "llama_bpe.model"), vocab_extra_ids=3), 3))
    return result


def read_texts(paths, max_chars):
    """The "text" values of jsonl files (a list's items each), up to about max_chars characters."""
    texts = []
    chars = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                value = json.loads(line)["text"]
                for text in value if isinstance(value, list) else [value]:
                    if max_chars and chars >= max_chars:
                        return texts
                    texts.append(text)
                    chars += len(text)
    return texts


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--texts", action="append", default=[])
    parser.add_argument("--max-chars", type=int, default=0, help="read the --texts up to this many characters")
    parser.add_argument("--models-only", action="store_true", help="train the models and write texts.jsonl only")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if os.path.exists(os.path.join(args.out, "done")):  # a failed rerun must not leave a stale reference
        os.remove(os.path.join(args.out, "done"))

    texts = EXTRA + read_texts(args.texts, args.max_chars)
    train_models(args.out, texts)
    with open(os.path.join(args.out, "texts.jsonl"), "w", encoding="utf-8") as f:
        for text in texts:
            f.write(json.dumps({"text": text}) + "\n")
    if not args.models_only:
        all_tokenizers = tokenizers(args.out)
        with open(os.path.join(args.out, "tokenizers.json"), "w", encoding="utf-8") as f:
            json.dump({key: {"vocab_size": t.vocab_size, "eod": t.eod, "vocab_extra_ids": extra,
                             "unigram": MODELS[key.split("/")[0]]["model_type"] == "unigram",
                             "scores": [t.tokenizer.get_score(i) for i in range(len(t.tokenizer))]}
                       for key, t, extra in all_tokenizers}, f)
        with open(os.path.join(args.out, "cases.jsonl"), "w", encoding="utf-8") as f:
            for text in texts:
                case = {"text": text}
                for key, t, _ in all_tokenizers:
                    ids = t.tokenize(text)
                    case[key] = ids
                    decoded = t.detokenize(ids)
                    if decoded != text:
                        case[key + ":decoded"] = decoded
                f.write(json.dumps(case) + "\n")
    with open(os.path.join(args.out, "done"), "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    main()
