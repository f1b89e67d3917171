// How checkpoints name the optimizer's fp32 state: one 1-D piece per (parameter, state, range of
// its flattened elements), named "<param>/<state>/<offset>", e.g. "decoder.layers.0.mlp.linear_fc1.weight/exp_avg/4096".
// A data-parallel rank of the distributed optimizer saves the pieces it owns; a plain optimizer
// saves whole parameters (offset 0). The optimizer writes and reads these names, and the
// resharder reassembles them across layouts: this is their one definition.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace megatron::optim {

// The fp32 state AdamW keeps per parameter element, in the order the optimizer stores it.
enum class OptimizerState { kParam, kExpAvg, kExpAvgSq };
inline constexpr std::array<OptimizerState, 3> kOptimizerStates = {OptimizerState::kParam, OptimizerState::kExpAvg,
                                                                   OptimizerState::kExpAvgSq};

// "param", "exp_avg", "exp_avg_sq".
std::string_view optimizer_state_name(OptimizerState state);

struct OptimizerStatePiece {
  std::string param;  // the parameter's name in the model state
  OptimizerState state = OptimizerState::kParam;
  std::int64_t offset = 0;  // the piece's first element in the flattened parameter

  std::string name() const;  // "<param>/<state>/<offset>"
  bool operator==(const OptimizerStatePiece&) const = default;
};

// The piece `name` stands for; nullopt, with the reason in `why` when given ("is not named
// <param>/<state>/<offset>" or "names an unknown state (states: param, exp_avg, exp_avg_sq)"),
// when it is not one.
std::optional<OptimizerStatePiece> parse_optimizer_state_piece(std::string_view name, std::string* why = nullptr);

}  // namespace megatron::optim
