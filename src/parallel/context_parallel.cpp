// Context parallelism (see context_parallel.h): the sequence split and the ring attention.
#include "megatron/parallel/context_parallel.h"

#include <torch/autograd.h>

#include <limits>
#include <tuple>
#include <vector>

#include "megatron/core/check.h"

namespace megatron::parallel {
namespace {

constexpr int kTagKeysValues = 7101;
constexpr int kTagGradients = 7102;

// Attention of one block, [b, heads, s, d] each, with its log-sum-exp ([b, heads, s_q], fp32).
struct Block {
  at::Tensor out;
  at::Tensor lse;
};

Block attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale) {
  MEGATRON_CHECK(q.device().is_cpu(), "context-parallel attention runs on CPU tensors in this build (got ",
                 q.device().str(), ")");
  auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, {}, scale);
  return {out, lse};
}

// (dq, dk, dv) of one block, given the whole attention's output and log-sum-exp for its rows.
std::tuple<at::Tensor, at::Tensor, at::Tensor> attend_backward(const at::Tensor& dout, const at::Tensor& q,
                                                               const at::Tensor& k, const at::Tensor& v,
                                                               const at::Tensor& out, const at::Tensor& lse,
                                                               bool causal, double scale) {
  return at::_scaled_dot_product_flash_attention_for_cpu_backward(dout, q, k, v, out, lse, 0.0, causal, {}, scale);
}

// Grouped keys or values [b, ng, s, d] as the [b, np, s, d] the queries attend to (a copy when
// ng < np).
at::Tensor to_query_heads(const at::Tensor& kv, std::int64_t heads) {
  const std::int64_t groups = kv.size(1);
  if (groups == heads) return kv;
  return kv.unsqueeze(2)
      .expand({kv.size(0), groups, heads / groups, kv.size(2), kv.size(3)})
      .reshape({kv.size(0), heads, kv.size(2), kv.size(3)});
}

// A gradient over the query heads summed back to the ng groups.
at::Tensor to_groups(const at::Tensor& grad, std::int64_t groups) {
  const std::int64_t heads = grad.size(1);
  if (groups == heads) return grad;
  return grad.view({grad.size(0), groups, heads / groups, grad.size(2), grad.size(3)}).sum(2);
}

// Folds one block into the running output (fp32) and log-sum-exp, for the rows from `row`.
void merge(at::Tensor& out, at::Tensor& lse, const Block& block, std::int64_t row) {
  const std::int64_t rows = block.lse.size(2);
  at::Tensor o = out.narrow(2, row, rows);
  at::Tensor l = lse.narrow(2, row, rows);
  const at::Tensor merged = at::logaddexp(l, block.lse);
  o.mul_(at::exp(l - merged).unsqueeze(-1)).add_(block.out.to(at::kFloat) * at::exp(block.lse - merged).unsqueeze(-1));
  l.copy_(merged);
}

// The running output (fp32 zeros) and log-sum-exp (-inf) that blocks are merged into, for q's rows.
std::pair<at::Tensor, at::Tensor> empty_merge(const at::Tensor& q) {
  return {at::zeros(q.sizes(), q.options().dtype(at::kFloat)),
          at::full({q.size(0), q.size(1), q.size(2)}, -std::numeric_limits<float>::infinity(),
                   q.options().dtype(at::kFloat))};
}

// One exchange of the ring: `outgoing` goes to the next CP rank while the previous rank's arrives in
// `incoming`; both stay alive here until finish().
struct RingExchange {
  at::Tensor outgoing, incoming;
  Work sent, received;
  void finish() {
    sent.wait();
    received.wait();
  }
};
RingExchange pass_on(const at::Tensor& t, int tag, const ParallelContext& pc) {
  const ProcessGroup& group = *pc.cp;
  const int cp = group.size(), rank = group.rank();
  RingExchange x{t, at::empty_like(t), {}, {}};
  x.sent = pc.comm->send(x.outgoing, (rank + 1) % cp, group, tag);
  x.received = pc.comm->recv(x.incoming, (rank + cp - 1) % cp, group, tag);
  return x;
}

// What both attention functions keep for their backward, and the context they ran in.
void keep(torch::autograd::AutogradContext* ctx, const torch::autograd::variable_list& tensors, double scale,
          std::int64_t pc_address) {
  ctx->save_for_backward(tensors);
  ctx->saved_data["scale"] = scale;
  ctx->saved_data["pc"] = pc_address;
}
const ParallelContext& context_of(torch::autograd::AutogradContext* ctx) {
  return *reinterpret_cast<const ParallelContext*>(ctx->saved_data["pc"].toInt());
}

// Which part of a ring step's block the local queries see. Step i holds the keys and values of CP
// rank (r - i) mod cp: its own (causal), an earlier rank's (all queries, its first chunk), or a later
// rank's (the second query chunk, all of it).
enum class Part { kDiagonal, kEarlier, kLater };
Part part_of(int step, int rank, int cp) {
  if (step == 0) return Part::kDiagonal;
  return (rank - step + cp) % cp < rank ? Part::kEarlier : Part::kLater;
}

class RingAttention : public torch::autograd::Function<RingAttention> {
 public:
  // q [b, np, s, d], k and v [b, ng, s, d], contiguous; s = this rank's two chunks.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, double scale, std::int64_t pc_address) {
    const auto& pc = *reinterpret_cast<const ParallelContext*>(pc_address);
    const int cp = pc.cp->size(), rank = pc.cp->rank();
    const std::int64_t heads = q.size(1), half = q.size(2) / 2;
    auto [out, lse] = empty_merge(q);
    at::Tensor kv = at::stack({k, v});
    for (int step = 0; step < cp; ++step) {
      RingExchange next;
      if (step + 1 < cp) next = pass_on(kv, kTagKeysValues, pc);  // the next block travels meanwhile
      const at::Tensor keys = to_query_heads(kv[0], heads), values = to_query_heads(kv[1], heads);
      switch (part_of(step, rank, cp)) {
        case Part::kDiagonal:
          merge(out, lse, attend(q, keys, values, true, scale), 0);
          break;
        case Part::kEarlier:
          merge(out, lse, attend(q, keys.narrow(2, 0, half), values.narrow(2, 0, half), false, scale), 0);
          break;
        case Part::kLater:
          merge(out, lse, attend(q.narrow(2, half, half), keys, values, false, scale), half);
          break;
      }
      next.finish();
      if (step + 1 < cp) kv = next.incoming;
    }
    out = out.to(q.scalar_type());
    keep(ctx, {q, k, v, out, lse}, scale, pc_address);
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const ParallelContext& pc = context_of(ctx);
    const int cp = pc.cp->size(), rank = pc.cp->rank();
    const std::int64_t heads = q.size(1), groups = k.size(1), half = q.size(2) / 2;
    const at::Tensor dout = grads[0].contiguous();
    at::Tensor dq = at::zeros(q.sizes(), q.options().dtype(at::kFloat));
    at::Tensor kv = at::stack({k, v});
    // The key/value gradient of the block held, summed over the ranks it has visited; it travels
    // one step behind the block and reaches the block's owner after the last step.
    RingExchange gradients;
    for (int step = 0; step < cp; ++step) {
      RingExchange next;
      if (step + 1 < cp) next = pass_on(kv, kTagKeysValues, pc);
      const at::Tensor keys = to_query_heads(kv[0], heads), values = to_query_heads(kv[1], heads);
      at::Tensor dk, dv;
      std::int64_t key_rows = 2 * half;
      switch (part_of(step, rank, cp)) {
        case Part::kDiagonal: {
          auto [g_q, g_k, g_v] = attend_backward(dout, q, keys, values, out, lse, true, scale);
          dq.add_(g_q);
          dk = g_k, dv = g_v;
          break;
        }
        case Part::kEarlier: {
          auto [g_q, g_k, g_v] = attend_backward(dout, q, keys.narrow(2, 0, half).contiguous(),
                                                 values.narrow(2, 0, half).contiguous(), out, lse, false, scale);
          dq.add_(g_q);
          dk = g_k, dv = g_v, key_rows = half;
          break;
        }
        case Part::kLater: {
          auto [g_q, g_k, g_v] =
              attend_backward(dout.narrow(2, half, half).contiguous(), q.narrow(2, half, half).contiguous(), keys,
                              values, out.narrow(2, half, half).contiguous(), lse.narrow(2, half, half).contiguous(),
                              false, scale);
          dq.narrow(2, half, half).add_(g_q);
          dk = g_k, dv = g_v;
          break;
        }
      }
      at::Tensor dkv;
      if (step == 0) {
        dkv = at::zeros(kv.sizes(), kv.options().dtype(at::kFloat));
      } else {
        gradients.finish();
        dkv = gradients.incoming;
      }
      dkv[0].narrow(2, 0, key_rows).add_(to_groups(dk.to(at::kFloat), groups));
      dkv[1].narrow(2, 0, key_rows).add_(to_groups(dv.to(at::kFloat), groups));
      // After the last step this exchange brings this rank's own block's gradient, complete.
      gradients = cp > 1 ? pass_on(dkv, kTagGradients, pc) : RingExchange{dkv, dkv, {}, {}};
      next.finish();
      if (step + 1 < cp) kv = next.incoming;
    }
    gradients.finish();
    const at::Tensor& dkv = gradients.incoming;
    return {dq.to(q.scalar_type()), dkv[0].to(k.scalar_type()), dkv[1].to(v.scalar_type()), at::Tensor(),
            at::Tensor()};
  }
};

// The whole sequence's keys and values [b, ng, S, d] from every rank's two chunks, gathered as
// [cp, 2 (k, v), b, ng, s, d]: rank j's first half is chunk j, its second chunk 2 cp - 1 - j.
at::Tensor in_sequence_order(const at::Tensor& gathered, int cp) {
  const std::int64_t half = gathered.size(4) / 2;
  std::vector<at::Tensor> chunks(static_cast<std::size_t>(2 * cp));
  for (int j = 0; j < cp; ++j) {
    chunks[static_cast<std::size_t>(j)] = gathered[j].narrow(3, 0, half);
    chunks[static_cast<std::size_t>(2 * cp - 1 - j)] = gathered[j].narrow(3, half, half);
  }
  return at::cat(chunks, 3);  // [2, b, ng, S, d]
}

// The inverse: [2, b, ng, S, d] in sequence order as [cp, 2, b, ng, s, d], rank j's chunks in its slot.
at::Tensor in_rank_order(const at::Tensor& whole, int cp) {
  const std::int64_t chunk = whole.size(3) / (2 * cp);
  std::vector<at::Tensor> slots;
  for (int j = 0; j < cp; ++j) {
    slots.push_back(at::cat({whole.narrow(3, j * chunk, chunk), whole.narrow(3, (2 * cp - 1 - j) * chunk, chunk)}, 3));
  }
  return at::stack(slots);
}

// The global chunk of local query half h (0 or 1).
std::int64_t global_chunk(int half, int rank, int cp) { return half == 0 ? rank : 2 * cp - 1 - rank; }

class AllGatherAttention : public torch::autograd::Function<AllGatherAttention> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, double scale, std::int64_t pc_address) {
    const auto& pc = *reinterpret_cast<const ParallelContext*>(pc_address);
    const int cp = pc.cp->size(), rank = pc.cp->rank();
    const std::int64_t heads = q.size(1), half = q.size(2) / 2;
    const at::Tensor local = at::stack({k, v});
    at::Tensor gathered = at::empty({cp, local.size(0), local.size(1), local.size(2), local.size(3), local.size(4)},
                                    local.options());
    pc.comm->all_gather(gathered, local, *pc.cp).wait();
    const at::Tensor whole = in_sequence_order(gathered, cp);
    const at::Tensor keys = to_query_heads(whole[0], heads), values = to_query_heads(whole[1], heads);
    auto [out, lse] = empty_merge(q);
    for (int h = 0; h < 2; ++h) {
      const std::int64_t g = global_chunk(h, rank, cp);
      const at::Tensor queries = q.narrow(2, h * half, half);
      if (g > 0) {
        merge(out, lse, attend(queries, keys.narrow(2, 0, g * half), values.narrow(2, 0, g * half), false, scale),
              h * half);
      }
      merge(out, lse, attend(queries, keys.narrow(2, g * half, half), values.narrow(2, g * half, half), true, scale),
            h * half);
    }
    out = out.to(q.scalar_type());
    keep(ctx, {q, whole, out, lse}, scale, pc_address);
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &whole = saved[1], &out = saved[2], &lse = saved[3];
    const double scale = ctx->saved_data["scale"].toDouble();
    const ParallelContext& pc = context_of(ctx);
    const int cp = pc.cp->size(), rank = pc.cp->rank();
    const std::int64_t heads = q.size(1), groups = whole.size(2), half = q.size(2) / 2;
    const at::Tensor dout = grads[0].contiguous();
    const at::Tensor keys = to_query_heads(whole[0], heads), values = to_query_heads(whole[1], heads);
    at::Tensor dq = at::zeros(q.sizes(), q.options().dtype(at::kFloat));
    at::Tensor dwhole = at::zeros(whole.sizes(), whole.options().dtype(at::kFloat));
    for (int h = 0; h < 2; ++h) {
      const std::int64_t g = global_chunk(h, rank, cp);
      const auto rows = [&](const at::Tensor& t) { return t.narrow(2, h * half, half).contiguous(); };
      // (first key, keys, causal): the earlier chunks unmasked, then chunk g itself.
      for (const auto& [first, count, causal] : {std::tuple<std::int64_t, std::int64_t, bool>{0, g * half, false},
                                                 std::tuple<std::int64_t, std::int64_t, bool>{g * half, half, true}}) {
        if (count == 0) continue;
        auto [g_q, g_k, g_v] = attend_backward(rows(dout), rows(q), keys.narrow(2, first, count).contiguous(),
                                               values.narrow(2, first, count).contiguous(), rows(out), rows(lse),
                                               causal, scale);
        dq.narrow(2, h * half, half).add_(g_q);
        dwhole[0].narrow(2, first, count).add_(to_groups(g_k.to(at::kFloat), groups));
        dwhole[1].narrow(2, first, count).add_(to_groups(g_v.to(at::kFloat), groups));
      }
    }
    // Each rank's chunks summed over every rank's queries, back to their owner.
    const at::Tensor slots = in_rank_order(dwhole, cp).contiguous();
    at::Tensor mine = at::empty(slots.sizes().slice(1), slots.options());
    pc.comm->reduce_scatter(mine, slots, *pc.cp).wait();
    return {dq.to(q.scalar_type()), mine[0].to(q.scalar_type()), mine[1].to(q.scalar_type()), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

CpCommType parse_cp_comm_type(std::string_view name) {
  if (name == "p2p") return CpCommType::kP2P;
  MEGATRON_CHECK(name == "all_gather", "--cp-comm-type ", name, " is not implemented in this build (p2p and all_gather are)");
  return CpCommType::kAllGather;
}

at::Tensor cp_local_chunks(const at::Tensor& t, std::int64_t dim, int cp, int cp_rank) {
  MEGATRON_CHECK(cp >= 1 && cp_rank >= 0 && cp_rank < cp, "context-parallel rank ", cp_rank, " of ", cp);
  if (cp == 1) return t;
  const std::int64_t length = t.size(dim);
  MEGATRON_CHECK(length % (2 * cp) == 0, "a sequence of ", length, " positions does not split into 2 x ", cp,
                 " equal chunks (--seq-length must be a multiple of 2 x --context-parallel-size)");
  const std::int64_t chunk = length / (2 * cp);
  return at::cat({t.narrow(dim, cp_rank * chunk, chunk), t.narrow(dim, (2 * cp - 1 - cp_rank) * chunk, chunk)}, dim);
}

at::Tensor cp_local_positions(std::int64_t seq_length, int cp, int cp_rank, const at::TensorOptions& options) {
  return cp_local_chunks(at::arange(seq_length, options.dtype(at::kLong)), 0, cp, cp_rank);
}

at::Tensor context_parallel_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                      CpCommType type, const ParallelContext& pc) {
  MEGATRON_CHECK(pc.cp != nullptr, "context-parallel attention needs the context-parallel group");
  MEGATRON_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && k.sizes() == v.sizes() && q.size(0) == k.size(0) &&
                     q.size(1) == k.size(1) && q.size(3) == k.size(3) && k.size(2) > 0 && q.size(2) % k.size(2) == 0,
                 "context-parallel attention takes q [s, b, np, hn] and k, v [s, b, ng, hn] with np a multiple of ng; "
                 "got q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  MEGATRON_CHECK(q.size(0) % 2 == 0, "context-parallel attention: a rank holds two equal chunks, got ", q.size(0),
                 " positions");
  const auto to_blocks = [](const at::Tensor& t) { return t.permute({1, 2, 0, 3}).contiguous(); };
  const auto address = reinterpret_cast<std::int64_t>(&pc);
  const at::Tensor out = type == CpCommType::kAllGather
                             ? AllGatherAttention::apply(to_blocks(q), to_blocks(k), to_blocks(v), scale, address)
                             : RingAttention::apply(to_blocks(q), to_blocks(k), to_blocks(v), scale, address);
  return out.permute({2, 0, 1, 3}).reshape({q.size(0), q.size(1), q.size(2) * q.size(3)});
}

}  // namespace megatron::parallel
