// Optimizer state piece names (see optimizer_state_piece.h).
#include "megatron/optim/optimizer_state_piece.h"

#include <charconv>

namespace megatron::optim {

std::string_view optimizer_state_name(OptimizerState state) {
  switch (state) {
    case OptimizerState::kParam:
      return "param";
    case OptimizerState::kExpAvg:
      return "exp_avg";
    case OptimizerState::kExpAvgSq:
      break;
  }
  return "exp_avg_sq";
}

std::string OptimizerStatePiece::name() const {
  return param + "/" + std::string(optimizer_state_name(state)) + "/" + std::to_string(offset);
}

std::optional<OptimizerStatePiece> parse_optimizer_state_piece(std::string_view name, std::string* why) {
  const auto fail = [why](const char* reason) -> std::optional<OptimizerStatePiece> {
    if (why != nullptr) *why = reason;
    return std::nullopt;
  };
  // Parameter names hold dots, never slashes: the last two slashes delimit the state.
  const auto last = name.rfind('/');
  const auto mid = last == std::string_view::npos || last == 0 ? std::string_view::npos : name.rfind('/', last - 1);
  if (mid == std::string_view::npos || mid == 0) return fail("is not named <param>/<state>/<offset>");
  OptimizerStatePiece piece;
  const char* first = name.data() + last + 1;
  const char* end = name.data() + name.size();
  const auto [ptr, ec] = std::from_chars(first, end, piece.offset);
  if (first == end || ec != std::errc() || ptr != end || piece.offset < 0) {
    return fail("is not named <param>/<state>/<offset>");
  }
  const std::string_view state = name.substr(mid + 1, last - mid - 1);
  bool known = false;
  for (const OptimizerState s : kOptimizerStates) {
    if (optimizer_state_name(s) == state) {
      piece.state = s;
      known = true;
    }
  }
  if (!known) return fail("names an unknown state (states: param, exp_avg, exp_avg_sq)");
  piece.param = std::string(name.substr(0, mid));
  return piece;
}

}  // namespace megatron::optim
