// The start-up check that all ranks run the same resolved arguments (see rank_agreement.h).
#include "megatron/train/rank_agreement.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "argument_fields.h"
#include "megatron/core/check.h"

namespace megatron::train {
namespace {

// Fields that legitimately differ from rank to rank.
constexpr std::string_view kRankSpecific[] = {"rank", "local_rank"};
bool rank_specific(std::string_view dest) {
  return std::find(std::begin(kRankSpecific), std::end(kRankSpecific), dest) != std::end(kRankSpecific);
}

nlohmann::json comparable(const nlohmann::json& arguments) {
  nlohmann::json out = arguments;
  for (const auto key : kRankSpecific) out.erase(std::string(key));
  return out;
}

// 64-bit FNV-1a: equal texts, equal hashes (a collision only skips the naming, never a real check
// of equal configurations).
std::int64_t fnv1a(const std::string& text) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  std::int64_t out;
  std::memcpy(&out, &h, sizeof out);
  return out;
}

}  // namespace

std::vector<std::string> argument_differences(const nlohmann::json& mine, const nlohmann::json& reference,
                                              int reference_rank) {
  std::vector<std::string> out;
  const Arguments fields;
  detail::for_each_field(fields, [&](const detail::FieldSpec& spec, const auto&) {
    const std::string key(spec.dest);
    if (rank_specific(spec.dest)) return;
    const nlohmann::json a = mine.value(key, nlohmann::json()), b = reference.value(key, nlohmann::json());
    if (a == b) return;
    const std::string flag = spec.flags.empty() ? key : detail::primary_flag(spec.flags);
    out.push_back(str_cat(flag, " ", a.dump(), " (rank ", reference_rank, ": ", b.dump(), ")"));
  });
  return out;
}

void check_ranks_agree(const nlohmann::json& arguments, parallel::Communicator& comm) {
  const int world = comm.world_size();
  if (world == 1) return;
  const parallel::ProcessGroup& group = *comm.world();
  const std::string text = comparable(arguments).dump();
  const at::Tensor hash = at::tensor({fnv1a(text)}, at::kLong);
  at::Tensor hashes = at::empty({world}, at::kLong);
  comm.all_gather(hashes, hash, group).wait();
  const auto* h = hashes.data_ptr<std::int64_t>();
  if (std::all_of(h, h + world, [&](std::int64_t x) { return x == h[0]; })) return;

  // They differ: every rank gets every configuration, and all report the same message.
  const at::Tensor length = at::tensor({static_cast<std::int64_t>(text.size())}, at::kLong);
  at::Tensor lengths = at::empty({world}, at::kLong);
  comm.all_gather(lengths, length, group).wait();
  const std::int64_t longest = lengths.max().item<std::int64_t>();
  at::Tensor mine = at::zeros({longest}, at::kByte);
  std::memcpy(mine.data_ptr(), text.data(), text.size());
  at::Tensor all = at::empty({world * longest}, at::kByte);
  comm.all_gather(all, mine, group).wait();
  auto config_of = [&](int r) {
    const auto* bytes = reinterpret_cast<const char*>(all.data_ptr<std::uint8_t>()) + r * longest;
    return nlohmann::json::parse(std::string(bytes, static_cast<std::size_t>(lengths[r].item<std::int64_t>())));
  };
  const nlohmann::json reference = config_of(0);
  std::string message = "the ranks were started with different flags (every rank must run the same command line):";
  int named = 0, others = 0;
  for (int r = 1; r < world; ++r) {
    if (h[r] == h[0]) continue;
    if (named == 4) {
      ++others;
      continue;
    }
    auto differences = argument_differences(config_of(r), reference, 0);
    if (differences.empty()) differences.push_back("its resolved configuration");  // outside the known fields
    if (differences.size() > 3) differences.resize(3);
    message += str_cat("\n  rank ", r, ": ");
    for (std::size_t i = 0; i < differences.size(); ++i) message += (i ? ", " : "") + differences[i];
    ++named;
  }
  if (others > 0) message += str_cat("\n  and ", others, " more rank", others == 1 ? "" : "s");
  throw_error(message);
}

}  // namespace megatron::train
