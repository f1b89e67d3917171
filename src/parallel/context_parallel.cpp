// Context parallelism (see context_parallel.h): the sequence split and the ring attention.
#include "megatron/parallel/context_parallel.h"

#include <torch/autograd.h>

#include <limits>
#include <tuple>
#include <vector>

#include "autograd_objects.h"
#include "megatron/core/check.h"
#include "megatron/kernels/aten/attention_block_ops.h"

namespace megatron::parallel {
namespace {

using kernels::aten::AttentionBlock;
using kernels::aten::attention_block_backward;
using kernels::aten::attention_block_forward;
using kernels::aten::BlockRng;

constexpr int kTagKeysValues = 7101;
constexpr int kTagGradients = 7102;

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

// Gradients and merged outputs accumulate in fp32 (float64 for float64 inputs).
at::ScalarType accumulation_type(const at::Tensor& t) { return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

// The running output and log-sum-exp that one attention call's blocks are merged into, for q's
// rows, and each block's dropout stream in the order the blocks ran (what their backward redraws).
struct Merged {
  at::Tensor out, lse;  // accumulation type: zeros and -inf before the first block
  std::vector<at::Tensor> rngs;  // (seed, offset) per block

  explicit Merged(const at::Tensor& q)
      : out(at::zeros(q.sizes(), q.options().dtype(accumulation_type(q)))),
        lse(at::full({q.size(0), q.size(1), q.size(2)}, -std::numeric_limits<double>::infinity(),
                     q.options().dtype(accumulation_type(q)))) {}

  // Attends `queries` (the rows from `row`) to one block of keys and values and folds the result in.
  void add(const at::Tensor& queries, const at::Tensor& keys, const at::Tensor& values, bool causal, std::int64_t row,
           double scale, double dropout) {
    const AttentionBlock block =
        attention_block_forward(queries.contiguous(), keys.contiguous(), values.contiguous(), causal, scale, dropout);
    const std::int64_t rows = block.lse.size(2);
    at::Tensor o = out.narrow(2, row, rows);
    at::Tensor l = lse.narrow(2, row, rows);
    const at::Tensor block_lse = block.lse.to(l.scalar_type());
    const at::Tensor merged = at::logaddexp(l, block_lse);
    o.mul_(at::exp(l - merged).unsqueeze(-1)).add_(block.out.to(o.scalar_type()) * at::exp(block_lse - merged).unsqueeze(-1));
    l.copy_(merged);
    rngs.push_back(block.rng.seed);
    rngs.push_back(block.rng.offset);
  }
};

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

// What both attention functions keep for their backward: their tensors, then the blocks' dropout
// streams; the settings and the context they ran in.
struct Settings {
  double scale, dropout;
};
void keep(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list tensors, const Merged& merged,
          Settings settings, std::int64_t pc_address) {
  ctx->saved_data["rng_at"] = static_cast<std::int64_t>(tensors.size());
  tensors.insert(tensors.end(), merged.rngs.begin(), merged.rngs.end());
  ctx->save_for_backward(tensors);
  ctx->saved_data["scale"] = settings.scale;
  ctx->saved_data["dropout"] = settings.dropout;
  ctx->saved_data["pc"] = pc_address;
}
const ParallelContext& context_of(torch::autograd::AutogradContext* ctx) {
  return detail::saved_object<const ParallelContext>(ctx, "pc");
}
Settings settings_of(torch::autograd::AutogradContext* ctx) {
  return {ctx->saved_data["scale"].toDouble(), ctx->saved_data["dropout"].toDouble()};
}

// The saved tensors of a backward, and its blocks' dropout streams handed out in the forward's order.
struct Saved {
  torch::autograd::variable_list tensors;
  std::size_t next_rng;
  explicit Saved(torch::autograd::AutogradContext* ctx)
      : tensors(ctx->get_saved_variables()), next_rng(static_cast<std::size_t>(ctx->saved_data["rng_at"].toInt())) {}
  BlockRng next_block() {
    MEGATRON_ASSERT(next_rng + 1 < tensors.size(), "context-parallel attention: more blocks in the backward than the forward");
    const BlockRng rng{tensors[next_rng], tensors[next_rng + 1]};
    next_rng += 2;
    return rng;
  }
};

// The backward of one block: the rows of dout, q, out and lse from `row` (all when `rows` is
// -1) against keys and values, with the block's dropout stream.
std::tuple<at::Tensor, at::Tensor, at::Tensor> block_backward(const at::Tensor& dout, const at::Tensor& q,
                                                              const at::Tensor& out, const at::Tensor& lse,
                                                              std::int64_t row, std::int64_t rows,
                                                              const at::Tensor& keys, const at::Tensor& values,
                                                              bool causal, Settings settings, Saved& saved) {
  const auto part = [&](const at::Tensor& t) { return (rows < 0 ? t : t.narrow(2, row, rows)).contiguous(); };
  return attention_block_backward(part(dout), part(q), keys.contiguous(), values.contiguous(), part(out),
                                  part(lse), saved.next_block(), causal,
                                  settings.scale, settings.dropout);
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
                            const at::Tensor& v, double scale, double dropout, std::int64_t pc_address) {
    const auto& pc = detail::object_at<const ParallelContext>(pc_address);
    const int cp = pc.cp->size(), rank = pc.cp->rank();
    const std::int64_t heads = q.size(1), half = q.size(2) / 2;
    Merged merged(q);
    at::Tensor kv = at::stack({k, v});
    for (int step = 0; step < cp; ++step) {
      RingExchange next;
      if (step + 1 < cp) next = pass_on(kv, kTagKeysValues, pc);  // the next block travels meanwhile
      const at::Tensor keys = to_query_heads(kv[0], heads), values = to_query_heads(kv[1], heads);
      switch (part_of(step, rank, cp)) {
        case Part::kDiagonal: merged.add(q, keys, values, true, 0, scale, dropout); break;
        case Part::kEarlier:
          merged.add(q, keys.narrow(2, 0, half), values.narrow(2, 0, half), false, 0, scale, dropout);
          break;
        case Part::kLater: merged.add(q.narrow(2, half, half), keys, values, false, half, scale, dropout); break;
      }
      next.finish();
      if (step + 1 < cp) kv = next.incoming;
    }
    const at::Tensor out = merged.out.to(q.scalar_type());
    keep(ctx, {q, k, v, out, merged.lse}, merged, {scale, dropout}, pc_address);
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    Saved saved(ctx);
    const at::Tensor &q = saved.tensors[0], &k = saved.tensors[1], &v = saved.tensors[2], &out = saved.tensors[3],
                     &lse = saved.tensors[4];
    const Settings settings = settings_of(ctx);
    const ParallelContext& pc = context_of(ctx);
    const int cp = pc.cp->size(), rank = pc.cp->rank();
    const std::int64_t heads = q.size(1), groups = k.size(1), half = q.size(2) / 2;
    const at::ScalarType acc = accumulation_type(q);
    const at::Tensor dout = grads[0].contiguous();
    at::Tensor dq = at::zeros(q.sizes(), q.options().dtype(acc));
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
          auto [g_q, g_k, g_v] = block_backward(dout, q, out, lse, 0, -1, keys, values, true, settings, saved);
          dq.add_(g_q);
          dk = g_k, dv = g_v;
          break;
        }
        case Part::kEarlier: {
          auto [g_q, g_k, g_v] = block_backward(dout, q, out, lse, 0, -1, keys.narrow(2, 0, half),
                                                values.narrow(2, 0, half), false, settings, saved);
          dq.add_(g_q);
          dk = g_k, dv = g_v, key_rows = half;
          break;
        }
        case Part::kLater: {
          auto [g_q, g_k, g_v] = block_backward(dout, q, out, lse, half, half, keys, values, false, settings, saved);
          dq.narrow(2, half, half).add_(g_q);
          dk = g_k, dv = g_v;
          break;
        }
      }
      at::Tensor dkv;
      if (step == 0) {
        dkv = at::zeros(kv.sizes(), kv.options().dtype(acc));
      } else {
        gradients.finish();
        dkv = gradients.incoming;
      }
      dkv[0].narrow(2, 0, key_rows).add_(to_groups(dk.to(acc), groups));
      dkv[1].narrow(2, 0, key_rows).add_(to_groups(dv.to(acc), groups));
      // After the last step this exchange brings this rank's own block's gradient, complete.
      gradients = cp > 1 ? pass_on(dkv, kTagGradients, pc) : RingExchange{dkv, dkv, {}, {}};
      next.finish();
      if (step + 1 < cp) kv = next.incoming;
    }
    gradients.finish();
    const at::Tensor& dkv = gradients.incoming;
    return {dq.to(q.scalar_type()), dkv[0].to(k.scalar_type()), dkv[1].to(v.scalar_type()), at::Tensor(), at::Tensor(),
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

// The key blocks local query half h attends to, in order: (first key, keys, causal): the earlier
// chunks unmasked (none for chunk 0), then its own chunk, causal.
std::vector<std::tuple<std::int64_t, std::int64_t, bool>> all_gather_blocks(int h, int rank, int cp, std::int64_t half) {
  const std::int64_t g = global_chunk(h, rank, cp);
  std::vector<std::tuple<std::int64_t, std::int64_t, bool>> blocks;
  if (g > 0) blocks.emplace_back(0, g * half, false);
  blocks.emplace_back(g * half, half, true);
  return blocks;
}

class AllGatherAttention : public torch::autograd::Function<AllGatherAttention> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, double scale, double dropout, std::int64_t pc_address) {
    const auto& pc = detail::object_at<const ParallelContext>(pc_address);
    const int cp = pc.cp->size(), rank = pc.cp->rank();
    const std::int64_t heads = q.size(1), half = q.size(2) / 2;
    const at::Tensor local = at::stack({k, v});
    at::Tensor gathered = at::empty({cp, local.size(0), local.size(1), local.size(2), local.size(3), local.size(4)},
                                    local.options());
    pc.comm->all_gather(gathered, local, *pc.cp).wait();
    const at::Tensor whole = in_sequence_order(gathered, cp);
    const at::Tensor keys = to_query_heads(whole[0], heads), values = to_query_heads(whole[1], heads);
    Merged merged(q);
    for (int h = 0; h < 2; ++h) {
      for (const auto& [first, count, causal] : all_gather_blocks(h, rank, cp, half)) {
        merged.add(q.narrow(2, h * half, half), keys.narrow(2, first, count), values.narrow(2, first, count), causal,
                   h * half, scale, dropout);
      }
    }
    const at::Tensor out = merged.out.to(q.scalar_type());
    keep(ctx, {q, whole, out, merged.lse}, merged, {scale, dropout}, pc_address);
    return out;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    Saved saved(ctx);
    const at::Tensor &q = saved.tensors[0], &whole = saved.tensors[1], &out = saved.tensors[2], &lse = saved.tensors[3];
    const Settings settings = settings_of(ctx);
    const ParallelContext& pc = context_of(ctx);
    const int cp = pc.cp->size(), rank = pc.cp->rank();
    const std::int64_t heads = q.size(1), groups = whole.size(2), half = q.size(2) / 2;
    const at::ScalarType acc = accumulation_type(q);
    const at::Tensor dout = grads[0].contiguous();
    const at::Tensor keys = to_query_heads(whole[0], heads), values = to_query_heads(whole[1], heads);
    at::Tensor dq = at::zeros(q.sizes(), q.options().dtype(acc));
    at::Tensor dwhole = at::zeros(whole.sizes(), whole.options().dtype(acc));
    for (int h = 0; h < 2; ++h) {
      for (const auto& [first, count, causal] : all_gather_blocks(h, rank, cp, half)) {
        auto [g_q, g_k, g_v] = block_backward(dout, q, out, lse, h * half, half, keys.narrow(2, first, count),
                                              values.narrow(2, first, count), causal, settings, saved);
        dq.narrow(2, h * half, half).add_(g_q);
        dwhole[0].narrow(2, first, count).add_(to_groups(g_k.to(acc), groups));
        dwhole[1].narrow(2, first, count).add_(to_groups(g_v.to(acc), groups));
      }
    }
    // Each rank's chunks summed over every rank's queries, back to their owner.
    const at::Tensor slots = in_rank_order(dwhole, cp).contiguous();
    at::Tensor mine = at::empty(slots.sizes().slice(1), slots.options());
    pc.comm->reduce_scatter(mine, slots, *pc.cp).wait();
    return {dq.to(q.scalar_type()), mine[0].to(q.scalar_type()), mine[1].to(q.scalar_type()), at::Tensor(),
            at::Tensor(), at::Tensor()};
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
                                      double dropout_p, CpCommType type, const ParallelContext& pc) {
  MEGATRON_CHECK(pc.cp != nullptr, "context-parallel attention needs the context-parallel group");
  MEGATRON_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && k.sizes() == v.sizes() && q.size(0) == k.size(0) &&
                     q.size(1) == k.size(1) && q.size(3) == k.size(3) && k.size(2) > 0 && q.size(2) % k.size(2) == 0,
                 "context-parallel attention takes q [s, b, np, hn] and k, v [s, b, ng, hn] with np a multiple of ng; "
                 "got q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  MEGATRON_CHECK(q.size(0) % 2 == 0, "context-parallel attention: a rank holds two equal chunks, got ", q.size(0),
                 " positions");
  const auto to_blocks = [](const at::Tensor& t) { return t.permute({1, 2, 0, 3}).contiguous(); };
  const auto address = detail::address_of(pc);
  const at::Tensor out = type == CpCommType::kAllGather
                             ? AllGatherAttention::apply(to_blocks(q), to_blocks(k), to_blocks(v), scale, dropout_p, address)
                             : RingAttention::apply(to_blocks(q), to_blocks(k), to_blocks(v), scale, dropout_p, address);
  return out.permute({2, 0, 1, 3}).reshape({q.size(0), q.size(1), q.size(2) * q.size(3)});
}

}  // namespace megatron::parallel
