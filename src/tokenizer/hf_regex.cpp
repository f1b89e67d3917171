// PCRE2 behind hf::Regex (see hf_regex.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "hf_regex.h"

#include <pcre2.h>

#include "megatron/core/check.h"

namespace megatron::tokenizer::hf {
namespace {

constexpr std::string_view kSpaceClass = "\\s\\x{85}";
constexpr std::string_view kWordClass = "\\p{L}\\p{M}\\p{N}\\p{Pc}";

// Per-thread match data (one pair is all find() reads) and a JIT stack larger than PCRE2's 32 KiB
// default, so long pieces under backtracking patterns do not run out.
struct ThreadState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  ThreadState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~ThreadState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

std::string Regex::rewrite_for_pcre2(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  bool in_class = false;
  std::size_t class_start = 0;  // where the class's members begin (after '[' or '[^')
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      const auto add_class = [&](std::string_view members, bool negated) {
        if (!in_class) out += negated ? "[^" : "[";
        out += members;
        if (!in_class) out += ']';
      };
      if (e == 's' || (e == 'S' && !in_class)) {
        add_class(kSpaceClass, e == 'S');
      } else if (e == 'w' || (e == 'W' && !in_class)) {
        add_class(kWordClass, e == 'W');
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      class_start = out.size();
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') {
        out += '^';
        ++i;
        class_start = out.size();
      }
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const std::size_t close = pattern.find(":]", i + 2);
      if (close != std::string_view::npos) {  // a POSIX class such as [:alpha:]
        out.append(pattern.substr(i + 1, close + 2 - (i + 1)));
        i = close + 1;
      }
    } else if (in_class && c == ']' && out.size() - 1 > class_start) {
      in_class = false;  // a ']' right after '[' or '[^' is a member, not the end
    }
  }
  return out;
}

Regex::Regex(std::string_view pattern, const std::string& where) : compiled_(std::make_unique<Compiled>()) {
  const std::string rewritten = rewrite_for_pcre2(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NO_UTF_CHECK, &error,
                                  &offset, nullptr);
  if (compiled_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    MEGATRON_FAIL(where, ": the regex ", std::string(pattern), " does not compile (PCRE2, at offset ", offset,
                  " of ", rewritten, "): ", reinterpret_cast<const char*>(message));
  }
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

bool Regex::find(std::string_view text, std::size_t from, std::size_t& begin, std::size_t& end) const {
  ThreadState& state = thread_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = compiled_->jit
                     ? pcre2_jit_match(compiled_->code, subject, text.size(), from, 0, state.data, state.context)
                     : pcre2_match(compiled_->code, subject, text.size(), from, PCRE2_NO_UTF_CHECK, state.data,
                                   state.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    MEGATRON_FAIL("regex match failed (PCRE2): ", reinterpret_cast<const char*>(message));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
  begin = ovector[0];
  end = ovector[1];
  return true;
}

std::string escape_regex(std::string_view literal) {
  std::string out;
  for (const char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-#&~ \t\n\r\v\f").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace megatron::tokenizer::hf
