// HuggingFaceTokenizer (see hf_tokenizer.h): the files read and the pipeline of hf_components.h
// run in the `tokenizers` library's order, plus what transformers' AutoTokenizer adds on top (the
// named special tokens of special_tokens_map.json and tokenizer_config.json). As transformers 5
// does, ids come from tokenizer.json alone: add_bos_token / add_eos_token change nothing.
#include "megatron/tokenizer/hf_tokenizer.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>

#include "flat_hash.h"
#include "hf_components.h"
#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/tokenizer/pretokenizer.h"
#include "megatron/tokenizer/unicode.h"

namespace megatron::tokenizer {
namespace {

namespace fs = std::filesystem;
using hf::json;

constexpr const char* kFlag = "--tokenizer-model";

json read_json(const fs::path& path) {
  const std::string text = read_text_file(path.string(), kFlag);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    MEGATRON_FAIL(path.string(), " (", kFlag, ") is not valid JSON: ", e.what());
  }
}

// A special token of tokenizer_config.json: a string or an AddedToken object.
std::optional<hf::AddedToken> config_token(const json& j) {
  hf::AddedToken token;
  token.special = true;
  if (j.is_string()) {
    token.content = j.get<std::string>();
  } else if (j.is_object() && j.contains("content")) {
    token.content = j.at("content").get<std::string>();
    token.single_word = j.value("single_word", false);
    token.lstrip = j.value("lstrip", false);
    token.rstrip = j.value("rstrip", false);
    token.normalized = j.value("normalized", false);
  } else {
    return std::nullopt;
  }
  return token;
}

class HfTokenizer;

class HfEncoder final : public Encoder {
 public:
  explicit HfEncoder(const HfTokenizer& tokenizer) : tokenizer_(tokenizer) {}
  void encode(std::string_view text, std::vector<std::int32_t>& out) override;

 private:
  const HfTokenizer& tokenizer_;
  PieceCache cache_;
  std::vector<std::pair<std::int32_t, std::string_view>> raw_, normalized_;
  std::vector<hf::Piece> pieces_;
};

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(const fs::path& tokenizer_json, const fs::path& folder);
  std::string type() const override { return "HuggingFaceTokenizer"; }
  std::size_t vocab_size() const override { return vocab_size_; }
  std::int32_t eod() const override { return eos_; }  // -1: no eos_token (Megatron's None)
  std::optional<std::int32_t> bos() const override {
    return bos_ >= 0 ? std::optional<std::int32_t>(bos_) : std::nullopt;
  }
  std::unique_ptr<Encoder> make_encoder() const override { return std::make_unique<HfEncoder>(*this); }
  std::string decode(std::span<const std::int32_t> ids) const override;

 private:
  friend class HfEncoder;
  std::int32_t token_id(const std::string& content) const;
  void add_token(hf::AddedToken token);

  std::string where_;
  std::unique_ptr<hf::Normalizer> normalizer_;
  std::unique_ptr<hf::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<hf::BpeModel> model_;
  std::unique_ptr<hf::PostProcessor> post_processor_;
  std::unique_ptr<hf::Decoder> decoder_;
  std::vector<hf::AddedToken> added_;
  StringMap<bool> added_contents_;  // the contents of added_, for the duplicate check
  std::unique_ptr<hf::AddedTokenMatcher> raw_matcher_, normalized_matcher_;
  std::vector<std::string> id_to_token_;
  std::size_t vocab_size_ = 0;
  std::int32_t eos_ = -1;
  std::int32_t bos_ = -1;
};

// Runs `read`; a JSON value of the wrong type or shape inside it becomes an error naming the file
// and the part being read (nlohmann's own message names neither).
template <typename F>
void in_section(const std::string& where, F&& read) {
  try {
    read();
  } catch (const json::exception& e) {
    const std::string what = e.what();
    const auto bracket = what.find("] ");
    MEGATRON_FAIL(where, ": a value of the wrong JSON type or shape (",
                  bracket == std::string::npos ? what : what.substr(bracket + 2), ")");
  }
}

HfTokenizer::HfTokenizer(const fs::path& tokenizer_json, const fs::path& folder) : where_(tokenizer_json.string()) {
  const json j = read_json(tokenizer_json);
  const std::string w = where_ + ": ";
  MEGATRON_CHECK(j.is_object() && j.contains("model"), where_, " (", kFlag, ") has no \"model\": not a tokenizer.json");
  in_section(w + "normalizer", [&] { normalizer_ = hf::parse_normalizer(j.value("normalizer", json()), w + "normalizer"); });
  in_section(w + "pre_tokenizer",
             [&] { pre_tokenizer_ = hf::parse_pre_tokenizer(j.value("pre_tokenizer", json()), w + "pre_tokenizer"); });
  in_section(w + "model", [&] {
    const json& model = j.at("model");
    const std::string model_type = model.value("type", std::string("BPE"));
    MEGATRON_CHECK(model_type == "BPE", w, "model is a ", model_type,
                   " model, which this build does not implement (implemented: BPE)");
    const bool byte_level = pre_tokenizer_ && pre_tokenizer_->byte_level();
    model_ = std::make_unique<hf::BpeModel>(model, byte_level, w + "model");
  });
  in_section(w + "post_processor", [&] {
    post_processor_ = hf::parse_post_processor(j.value("post_processor", json()), w + "post_processor");
  });
  in_section(w + "decoder", [&] { decoder_ = hf::parse_decoder(j.value("decoder", json()), w + "decoder"); });
  id_to_token_ = model_->tokens();
  vocab_size_ = model_->size();
  json added;
  in_section(w + "added_tokens", [&] { added = j.value("added_tokens", json::array()); });
  for (std::size_t i = 0; i < added.size(); ++i) {
    const std::string where = w + "added_tokens[" + std::to_string(i) + "]";
    in_section(where, [&] {
      const json& a = added[i];
      hf::AddedToken token;
      MEGATRON_CHECK(a.contains("id") && a.contains("content"), where, " needs an id and a content");
      token.id = a.at("id").get<std::int32_t>();  // as declared; add_token gives the library's id
      token.content = a.at("content").get<std::string>();
      token.single_word = a.value("single_word", false);
      token.lstrip = a.value("lstrip", false);
      token.rstrip = a.value("rstrip", false);
      token.normalized = a.value("normalized", false);
      token.special = a.value("special", false);
      add_token(std::move(token));
    });
  }

  // What AutoTokenizer adds: the named special tokens (special_tokens_map.json's before
  // tokenizer_config.json's), added when the vocabulary lacks them.
  json config = json::object();
  if (fs::exists(folder / "tokenizer_config.json")) config = read_json(folder / "tokenizer_config.json");
  json special_map = json::object();
  if (fs::exists(folder / "special_tokens_map.json")) special_map = read_json(folder / "special_tokens_map.json");
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    const bool mapped = special_map.is_object() && special_map.contains(name);
    const fs::path file = folder / (mapped ? "special_tokens_map.json" : "tokenizer_config.json");
    in_section(file.string() + ": " + name, [&] {
      const json& entry = mapped ? special_map.at(name) : config.is_object() ? config.value(name, json()) : json();
      std::optional<hf::AddedToken> token = config_token(entry);
      if (!token) return;
      if (token_id(token->content) < 0) add_token(*token);
      const std::int32_t id = token_id(token->content);
      if (std::string_view(name) == "eos_token") eos_ = id;
      if (std::string_view(name) == "bos_token") bos_ = id;
    });
  }

  // split_special_tokens (transformers sets the library's encode_special_tokens from it): special
  // tokens written in a document are text like any other; the other added tokens are still found.
  bool split_special = false;
  in_section((folder / "tokenizer_config.json").string() + ": split_special_tokens",
             [&] { split_special = config.is_object() && config.value("split_special_tokens", false); });
  std::vector<hf::AddedToken> raw, normalized;
  std::vector<std::string> raw_contents, normalized_contents;
  for (const hf::AddedToken& token : added_) {
    if (split_special && token.special) continue;
    if (token.normalized) {
      std::string content = token.content;
      if (normalizer_) normalizer_->normalize(content);
      normalized.push_back(token);
      normalized_contents.push_back(std::move(content));
    } else {
      raw.push_back(token);
      raw_contents.push_back(token.content);
    }
  }
  raw_matcher_ = std::make_unique<hf::AddedTokenMatcher>(std::move(raw), std::move(raw_contents));
  normalized_matcher_ = std::make_unique<hf::AddedTokenMatcher>(std::move(normalized), std::move(normalized_contents));
}

std::int32_t HfTokenizer::token_id(const std::string& content) const {
  for (const hf::AddedToken& token : added_) {
    if (token.content == content) return token.id;
  }
  return model_->id(content);
}

// An added token takes the model's id for its content when the model has it; otherwise the next
// free id, whatever id the file declares: the `tokenizers` library's rule (the largest added id
// plus one once past the model's vocabulary, else the model's size).
void HfTokenizer::add_token(hf::AddedToken token) {
  if (!added_contents_.emplace(token.content, true).second) return;  // the first of a content wins
  const std::int32_t model_id = model_->id(token.content);
  if (model_id >= 0) {
    token.id = model_id;
  } else {
    const auto model_size = static_cast<std::int32_t>(model_->size());
    std::int32_t largest = -1;
    for (const hf::AddedToken& added : added_) largest = std::max(largest, added.id);
    token.id = largest >= model_size ? largest + 1 : model_size;
    ++vocab_size_;
  }
  if (static_cast<std::size_t>(token.id) >= id_to_token_.size()) id_to_token_.resize(token.id + 1);
  id_to_token_[token.id] = token.content;
  added_.push_back(std::move(token));
}

std::string HfTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const std::int32_t id : ids) {
    MEGATRON_CHECK(id >= 0 && static_cast<std::size_t>(id) < id_to_token_.size() && !id_to_token_[id].empty(),
                   "token id ", id, " is not in the vocabulary of ", where_);
    tokens.push_back(id_to_token_[id]);
  }
  if (!decoder_) {
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  decoder_->decode_chain(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return utf8_replace_invalid(out);
}

void HfEncoder::encode(std::string_view text, std::vector<std::int32_t>& out) {
  if (const std::size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) throw_invalid_utf8(text, bad);
  const HfTokenizer& t = tokenizer_;
  const std::size_t begin = out.size();
  const auto encode_piece = [&](std::string_view piece, std::vector<std::int32_t>& ids) { t.model_->encode(piece, ids); };
  t.raw_matcher_->split(text, raw_);
  for (const auto& [raw_id, raw_text] : raw_) {
    if (raw_id >= 0) {
      out.push_back(raw_id);
      continue;
    }
    if (raw_text.empty()) continue;
    std::string normalized(raw_text);
    std::size_t origin = 0;  // the bytes of the text's first character (see hf::Piece)
    if (raw_text.data() == text.data()) {
      char32_t cp = 0;
      origin = decode_utf8(text, 0, cp);
    }
    if (t.normalizer_) t.normalizer_->normalize(normalized, origin);
    t.normalized_matcher_->split(normalized, normalized_);
    for (const auto& [id, piece] : normalized_) {
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      if (piece.empty()) continue;
      const auto begin_at = static_cast<std::size_t>(piece.data() - normalized.data());
      const std::size_t piece_origin = begin_at < origin ? std::min(origin, begin_at + piece.size()) - begin_at : 0;
      pieces_.assign(1, hf::Piece{std::string(piece), piece_origin});
      if (t.pre_tokenizer_) t.pre_tokenizer_->split(pieces_);
      for (const hf::Piece& p : pieces_) cache_.encode_through(p.text, out, encode_piece);
    }
  }
  if (t.post_processor_) t.post_processor_->process(out, begin);
}

// Whether `path` could be a Hugging Face Hub repository id as huggingface_hub validates one:
// "name" or "org/name", each part of letters, digits, '-', '_' and '.', starting and ending with
// a letter, digit or '_', without "--" or "..". A path that is not one is a missing local file.
bool is_hub_name(std::string_view path) {
  if (path.empty() || path.size() > 96 || path.find("--") != std::string_view::npos ||
      path.find("..") != std::string_view::npos) {
    return false;
  }
  const auto slash = path.find('/');
  if (slash != std::string_view::npos && path.find('/', slash + 1) != std::string_view::npos) return false;
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  for (const std::string_view part : {path.substr(0, slash), slash == std::string_view::npos ? path : path.substr(slash + 1)}) {
    if (part.empty() || !word(part.front()) || !word(part.back())) return false;
    for (const char c : part) {
      if (!word(c) && c != '-' && c != '.') return false;
    }
  }
  return true;
}

// A SentencePiece .model is a binary protobuf (its first field's tag 0x0A); a tokenizer.json is
// text starting with '{'.
bool looks_like_sentencepiece(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char first = 0;
  return in.get(first) && first == '\x0a' && path.extension() != ".json";
}

}  // namespace

std::unique_ptr<Tokenizer> make_hf_tokenizer(const std::string& path) {
  const fs::path p(path);
  if (fs::is_directory(p)) {
    if (!fs::exists(p / "tokenizer.json")) {
      MEGATRON_FAIL(kFlag, " ", path, " has no tokenizer.json",
                    fs::exists(p / "tokenizer.model")
                        ? " (only a SentencePiece tokenizer.model: take --tokenizer-type Llama2Tokenizer, "
                          "GPTSentencePieceTokenizer or SentencePieceTokenizer with --tokenizer-model "
                          "DIR/tokenizer.model, or save the tokenizer with transformers to write tokenizer.json)"
                        : "");
    }
    return std::make_unique<HfTokenizer>(p / "tokenizer.json", p);
  }
  if (fs::is_regular_file(p)) {
    MEGATRON_CHECK(!looks_like_sentencepiece(p), kFlag, " ", path, " is a SentencePiece model, not a tokenizer.json: take "
                   "--tokenizer-type Llama2Tokenizer, GPTSentencePieceTokenizer or SentencePieceTokenizer for it");
    return std::make_unique<HfTokenizer>(p, p.parent_path());
  }
  MEGATRON_CHECK(is_hub_name(path), kFlag, " ", path, " does not exist (neither a folder with tokenizer.json nor the file)");
  MEGATRON_FAIL(kFlag, " ", path, " is not a local folder or tokenizer.json. Megatron would download a hub name such "
                "as this from huggingface.co; this tool reads local files only: download it first (e.g. `hf download ",
                path, " --local-dir DIR`, or save_pretrained(DIR) on a machine with access) and pass ", kFlag, " DIR");
}

}  // namespace megatron::tokenizer
