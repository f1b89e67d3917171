// Micro-batches from a sample dataset, read ahead on a thread (see batch_reader.h).
#include "megatron/train/batch_reader.h"

#include <span>

#include "megatron/core/check.h"
#include "megatron/parallel/context_parallel.h"

namespace megatron::train {

BatchReader::BatchReader(const data::SampleDataset& dataset, std::uint64_t consumed_samples,
                         const BatchReaderOptions& options)
    : dataset_(&dataset),
      sampler_(dataset.size(), consumed_samples, options.micro_batch_size, options.dp_rank, options.dp_size),
      options_(options),
      pinned_(options.device.is_cuda()) {
  MEGATRON_ASSERT(options.prefetch >= 0);
  if (options_.prefetch > 0) thread_ = std::thread([this] { prefetch_loop(); });
}

BatchReader::~BatchReader() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

std::optional<MicroBatch> BatchReader::read() {
  if (!sampler_.next(indices_)) return std::nullopt;
  const std::int64_t b = options_.micro_batch_size, s = dataset_->sequence_length();
  const auto host = [&](at::ScalarType type) { return at::TensorOptions().dtype(type).pinned_memory(pinned_); };
  MicroBatch batch;
  batch.tokens = at::empty({b, s}, host(at::kLong));
  batch.labels = at::empty({b, s}, host(at::kLong));
  batch.loss_mask = at::empty({b, s}, host(at::kFloat));
  batch.position_ids = at::empty({b, s}, host(at::kLong));
  const bool reset_mask = dataset_->sample_options().reset_attention_mask;
  if (reset_mask) batch.attention_mask = at::empty({b, 1, s, s}, host(at::kBool)).fill_(true).triu_(1);
  std::vector<std::int32_t> starts;
  for (std::int64_t i = 0; i < b; ++i) {
    const auto row = [&]<typename T>(const at::Tensor& t, T*) {
      return std::span<T>(t.data_ptr<T>() + i * s, static_cast<std::size_t>(s));
    };
    const data::SampleBuffers out{row(batch.tokens, static_cast<std::int64_t*>(nullptr)),
                                  row(batch.labels, static_cast<std::int64_t*>(nullptr)),
                                  row(batch.loss_mask, static_cast<float*>(nullptr)),
                                  row(batch.position_ids, static_cast<std::int64_t*>(nullptr)),
                                  reset_mask ? &starts : nullptr};
    dataset_->read_sample(indices_[static_cast<std::size_t>(i)], out);
    if (reset_mask) {
      // A query at or after a document start never sees keys before it.
      at::Tensor m = batch.attention_mask[i][0];
      for (const std::int32_t start : starts) m.slice(0, start).slice(1, 0, start).fill_(true);
    }
  }
  batch.loss_tokens = batch.loss_mask.sum().item<double>();  // a host tensor: no device synchronisation
  batch.local_loss_tokens = batch.loss_tokens;
  if (options_.cp > 1) {
    for (at::Tensor* t : {&batch.tokens, &batch.labels, &batch.loss_mask, &batch.position_ids}) {
      *t = parallel::cp_local_chunks(*t, 1, options_.cp, options_.cp_rank);
      if (pinned_) *t = t->pin_memory();
    }
    batch.local_loss_tokens = batch.loss_mask.sum().item<double>();
  }
  return batch;
}

void BatchReader::prefetch_loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || ready_.size() < static_cast<std::size_t>(options_.prefetch); });
      if (stop_) return;
    }
    std::optional<MicroBatch> batch;
    try {
      batch = read();
    } catch (...) {
      const std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    const bool end = !batch.has_value();
    {
      const std::lock_guard lock(mutex_);
      ready_.push_back(std::move(batch));
    }
    changed_.notify_all();
    if (end) return;
  }
}

std::optional<MicroBatch> BatchReader::next() {
  std::optional<MicroBatch> batch;
  if (!thread_.joinable()) {
    batch = read();
  } else {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !ready_.empty() || error_; });
    if (ready_.empty()) std::rethrow_exception(error_);
    batch = std::move(ready_.front());
    if (batch.has_value()) ready_.pop_front();  // the end marker stays: every later call sees it
    lock.unlock();
    changed_.notify_all();
  }
  if (!batch || options_.device.is_cpu()) return batch;
  for (at::Tensor* t : {&batch->tokens, &batch->labels, &batch->loss_mask, &batch->position_ids, &batch->attention_mask}) {
    if (t->defined()) *t = t->to(options_.device, /*non_blocking=*/pinned_);
  }
  return batch;
}

}  // namespace megatron::train
