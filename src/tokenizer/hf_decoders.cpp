// tokenizer.json post-processors (TemplateProcessing, BertProcessing, RobertaProcessing,
// ByteLevel, Sequence) for single sequences, and decoders (ByteLevel, Metaspace, ByteFallback,
// Fuse, Strip, Replace, BPEDecoder, Sequence), as the `tokenizers` library applies them.
#include <cctype>

#include "hf_components.h"
#include "hf_regex.h"
#include "megatron/core/check.h"
#include "megatron/tokenizer/gpt2_bpe_tokenizer.h"
#include "megatron/tokenizer/unicode.h"

namespace megatron::tokenizer::hf {
namespace {

// Special ids before and after the sequence.
class Wrap final : public PostProcessor {
 public:
  Wrap(std::vector<std::int32_t> before, std::vector<std::int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<std::int32_t>& ids, std::size_t begin) const override {
    ids.insert(ids.begin() + static_cast<std::ptrdiff_t>(begin), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<std::int32_t> before_, after_;
};

class PostSequence final : public PostProcessor {
 public:
  explicit PostSequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<std::int32_t>& ids, std::size_t begin) const override {
    for (const auto& p : parts_) {
      if (p) p->process(ids, begin);
    }
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

std::unique_ptr<PostProcessor> parse_template(const json& j, const std::string& where) {
  const json& single = j.at("single");
  const json& specials = j.value("special_tokens", json::object());
  std::vector<std::int32_t> before, after;
  bool seen_sequence = false;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const json& item = single[i];
    if (item.contains("Sequence")) {
      const std::string id = item.at("Sequence").at("id").get<std::string>();
      MEGATRON_CHECK(id == "A" && !seen_sequence, where, ".single[", i, "]: a single-sequence template has one $A");
      seen_sequence = true;
      continue;
    }
    MEGATRON_CHECK(item.contains("SpecialToken"), where, ".single[", i, "] is neither Sequence nor SpecialToken");
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    MEGATRON_CHECK(specials.contains(name), where, ".single[", i, "]: special token ", name,
                   " is not in special_tokens");
    for (const json& id : specials.at(name).at("ids")) (seen_sequence ? after : before).push_back(id.get<std::int32_t>());
  }
  MEGATRON_CHECK(seen_sequence, where, ".single has no $A");
  return std::make_unique<Wrap>(std::move(before), std::move(after));
}

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes, token_bytes;
    for (const std::string& t : tokens) bytes += gpt2_alphabet_to_bytes(t, token_bytes) ? token_bytes : t;
    tokens.assign(1, utf8_replace_invalid(bytes));
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (std::size_t at = 0; at < t.size();) {
        if (!replacement_.empty() && t.compare(at, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && strip_first_)) out += ' ';
          at += replacement_.size();
        } else {
          out += t[at++];
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

// <0xXX> tokens: each run of them becomes its bytes when those are valid UTF-8, else one U+FFFD
// per byte.
class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string run;
    std::size_t run_count = 0;
    const auto flush = [&] {
      if (run_count == 0) return;
      if (find_invalid_utf8(run) == std::string::npos) {
        out.push_back(run);
      } else {
        for (std::size_t i = 0; i < run_count; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_count = 0;
    };
    for (std::string& t : tokens) {
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && std::isxdigit(static_cast<unsigned char>(t[3])) &&
          std::isxdigit(static_cast<unsigned char>(t[4]))) {
        run += static_cast<char>(std::stoul(t.substr(3, 2), nullptr, 16));
        ++run_count;
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Up to `start` leading and `stop` trailing copies of one character removed from each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(std::string content, std::size_t start, std::size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (content_.empty()) return;
    for (std::string& t : tokens) {
      std::size_t begin = 0, end = t.size();
      for (std::size_t i = 0; i < start_ && t.compare(begin, content_.size(), content_) == 0; ++i) begin += content_.size();
      for (std::size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                              t.compare(end - content_.size(), content_.size(), content_) == 0; ++i) {
        end -= content_.size();
      }
      t = t.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  std::size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(const std::string& regex, std::string content, const std::string& where)
      : regex_(regex, where), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::string out;
      std::size_t last = 0;
      regex_.for_each_match(t, [&](std::size_t begin, std::size_t end) {
        out.append(t, last, begin - last);
        out += content_;
        last = end;
      });
      out.append(t, last, std::string::npos);
      t = std::move(out);
    }
  }

 private:
  Regex regex_;
  std::string content_;
};

class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (suffix_.empty()) return;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const std::string with = i + 1 == tokens.size() ? "" : " ";
      std::string& t = tokens[i];
      for (std::size_t at = t.find(suffix_); at != std::string::npos; at = t.find(suffix_, at + with.size())) {
        t.replace(at, suffix_.size(), with);
      }
    }
  }

 private:
  std::string suffix_;
};

class DecoderSequence final : public Decoder {
 public:
  explicit DecoderSequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts_) {
      if (p) p->decode_chain(tokens);
    }
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<PostProcessor> parse_post_processor(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  MEGATRON_CHECK(j.is_object() && j.contains("type"), where, " is not a post-processor object");
  const std::string type = j.at("type").get<std::string>();
  if (type == "TemplateProcessing") return parse_template(j, where);
  if (type == "ByteLevel") return nullptr;  // offsets only
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    return std::make_unique<Wrap>(std::vector<std::int32_t>{j.at("cls").at(1).get<std::int32_t>()},
                                  std::vector<std::int32_t>{j.at("sep").at(1).get<std::int32_t>()});
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    const json& list = j.at("processors");
    for (std::size_t i = 0; i < list.size(); ++i) {
      parts.push_back(parse_post_processor(list[i], where + ".processors[" + std::to_string(i) + "]"));
    }
    return std::make_unique<PostSequence>(std::move(parts));
  }
  MEGATRON_FAIL(where, " is a ", type, " post-processor, which this build does not implement (implemented: "
                "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence)");
}

std::unique_ptr<Decoder> parse_decoder(const json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  MEGATRON_CHECK(j.is_object() && j.contains("type"), where, " is not a decoder object");
  const std::string type = j.at("type").get<std::string>();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    const MetaspaceSettings m = parse_metaspace(j, where);
    return std::make_unique<MetaspaceDecoder>(m.replacement, m.prepend_scheme != "never");
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(j.at("content").get<std::string>(), j.value("start", std::size_t{0}),
                                          j.value("stop", std::size_t{0}));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(pattern_regex(j.at("pattern"), where), j.at("content").get<std::string>(),
                                            where);
  }
  if (type == "BPEDecoder") return std::make_unique<BpeSuffixDecoder>(j.value("suffix", std::string("</w>")));
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    const json& list = j.at("decoders");
    for (std::size_t i = 0; i < list.size(); ++i) {
      parts.push_back(parse_decoder(list[i], where + ".decoders[" + std::to_string(i) + "]"));
    }
    return std::make_unique<DecoderSequence>(std::move(parts));
  }
  MEGATRON_FAIL(where, " is a ", type, " decoder, which this build does not implement (implemented: ByteLevel, "
                "Metaspace, ByteFallback, Fuse, Strip, Replace, BPEDecoder, Sequence)");
}

}  // namespace megatron::tokenizer::hf
