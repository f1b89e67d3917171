// MoE configuration checks and the layer pattern (see moe_config.h).
#include "megatron/model/moe_config.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "megatron/core/check.h"

namespace megatron::model {

bool MoeConfig::is_moe_layer(int layer) const {
  if (!enabled()) return false;
  if (!layer_pattern.empty()) {
    return layer >= 0 && layer < static_cast<int>(layer_pattern.size()) && layer_pattern[static_cast<std::size_t>(layer)] == 1;
  }
  return layer_freq > 0 && layer % layer_freq == 0;
}

int MoeConfig::num_moe_layers(int num_layers) const {
  int n = 0;
  for (int i = 0; i < num_layers; ++i) n += is_moe_layer(i) ? 1 : 0;
  return n;
}

std::vector<std::string> MoeConfig::validate(int num_layers) const {
  std::vector<std::string> problems;
  auto need = [&](bool ok, auto&&... parts) {
    if (!ok) problems.push_back(str_cat(parts...));
  };
  if (layer_pattern.empty()) {
    need(layer_freq > 0, "--moe-layer-freq must be positive, got ", layer_freq);
  } else {
    need(num_layers <= 0 || static_cast<int>(layer_pattern.size()) == num_layers,
         "Invalid length of moe_layer_pattern: ", layer_pattern.size(), ", expected ", num_layers,
         ", current moe layer pattern: ", moe_layer_freq_text({1, layer_pattern}));
    need(std::all_of(layer_pattern.begin(), layer_pattern.end(), [](int v) { return v == 0 || v == 1; }),
         "Invalid layer pattern: ", moe_layer_freq_text({1, layer_pattern}), " (each layer 0, dense, or 1, MoE)");
  }
  need(router_topk > 0 && router_topk <= num_experts, "--moe-router-topk (", router_topk,
       ") must be between 1 and --num-experts (", num_experts, ")");
  need(!(router_topk == 1 && score_function == RouterScore::kSoftmax && !router_pre_softmax),
       "Please use --moe-router-pre-softmax when topk is 1.");
  if (router_group_topk > 0) {
    need(router_num_groups > 0, "When using group limited routing, moe_router_num_groups must be specified.");
    need(router_num_groups <= 0 || num_experts % router_num_groups == 0, "--num-experts (", num_experts,
         ") must be a multiple of --moe-router-num-groups (", router_num_groups, ")");
    need(router_group_topk <= router_num_groups, "--moe-router-group-topk (", router_group_topk,
         ") must not exceed --moe-router-num-groups (", router_num_groups, ")");
    need(router_topk % router_group_topk == 0, "--moe-router-topk (", router_topk,
         ") must be a multiple of --moe-router-group-topk (", router_group_topk, ")");
  }
  need(!router_enable_expert_bias || score_function == RouterScore::kSigmoid,
       "Expert bias for aux-loss-free routing only supports sigmoid score function. Please set "
       "--moe-router-score-function sigmoid for sigmoid score function.");
  need(aux_loss_coeff >= 0, "--moe-aux-loss-coeff must not be negative, got ", aux_loss_coeff);
  need(z_loss_coeff >= 0, "--moe-z-loss-coeff must not be negative, got ", z_loss_coeff);
  need(!pad_expert_input_to_capacity || expert_capacity_factor > 0,
       "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor");
  need(ffn_hidden_size >= 0 && shared_expert_intermediate_size >= 0,
       "--moe-ffn-hidden-size and --moe-shared-expert-intermediate-size must be positive");
  return problems;
}

namespace {

// A recursive-descent reader of the list expressions moe_freq_type evaluates.
class PatternReader {
 public:
  explicit PatternReader(std::string_view text) : text_(text) {}

  std::vector<int> read() {
    std::vector<int> out = sum();
    skip_space();
    if (at_ < text_.size()) fail("unexpected '" + std::string(1, text_[at_]) + "'");
    return out;
  }

 private:
  // sum := product ('+' product)*
  std::vector<int> sum() {
    std::vector<int> out = product();
    while (accept('+')) {
      const std::vector<int> more = product();
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  }
  // product := [count '*'] factor ('*' count)*
  std::vector<int> product() {
    skip_space();
    long long times = 1;
    if (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
      times = number();
      if (!accept('*')) fail("a number must multiply a list");
    }
    std::vector<int> list = factor();
    while (accept('*')) times *= number();
    if (times < 0 || static_cast<long long>(list.size()) * times > 1'000'000) fail("the pattern is too long");
    std::vector<int> out;
    for (long long i = 0; i < times; ++i) out.insert(out.end(), list.begin(), list.end());
    return out;
  }
  // factor := '[' [number (',' number)*] [','] ']' | '(' sum ')'
  std::vector<int> factor() {
    if (accept('(')) {
      std::vector<int> out = sum();
      if (!accept(')')) fail("')' expected");
      return out;
    }
    if (!accept('[')) fail("'[' or '(' expected");
    std::vector<int> out;
    if (accept(']')) return out;
    do {
      skip_space();
      if (at_ < text_.size() && text_[at_] == ']') break;  // a trailing comma
      out.push_back(static_cast<int>(number()));
    } while (accept(','));
    if (!accept(']')) fail("']' expected");
    return out;
  }
  long long number() {
    skip_space();
    const std::size_t start = at_;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) ++at_;
    if (at_ == start || at_ - start > 9) fail("a number expected");
    return std::stoll(std::string(text_.substr(start, at_ - start)));
  }
  bool accept(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  [[noreturn]] void fail(const std::string& why) const {
    MEGATRON_FAIL("--moe-layer-freq '", text_, "': ", why, " at character ", at_ + 1,
                  " (an integer, or a list expression such as \"([0]*3+[1]*29)\")");
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

}  // namespace

MoeLayerFreq parse_moe_layer_freq(std::string_view text) {
  MoeLayerFreq out;
  if (text.find('[') != std::string_view::npos) {
    out.pattern = PatternReader(text).read();
    MEGATRON_CHECK(!out.pattern.empty(), "--moe-layer-freq '", text, "': the pattern has no layers");
    return out;
  }
  const std::string s(text);
  std::size_t used = 0;
  try {
    out.every = std::stoi(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  MEGATRON_CHECK(used > 0 && used == s.size(), "--moe-layer-freq '", text,
                 "': not an integer or a list expression such as \"([0]*3+[1]*29)\"");
  return out;
}

std::string moe_layer_freq_text(const MoeLayerFreq& freq) {
  if (freq.pattern.empty()) return std::to_string(freq.every);
  std::string out = "[";
  for (std::size_t i = 0; i < freq.pattern.size(); ++i) out += (i ? ", " : "") + std::to_string(freq.pattern[i]);
  return out + "]";
}

}  // namespace megatron::model
