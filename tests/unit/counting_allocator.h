// A CPU allocator for tests that counts the bytes LibTorch holds while it is installed, and their
// high-water mark: how much memory an operation needs, measured rather than estimated.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdint>

namespace megatron::testing {

// Counts the bytes LibTorch holds on the CPU while installed (the high-water mark since reset()).
class CountingAllocator final : public c10::Allocator {
 public:
  CountingAllocator() : inner_(c10::GetCPUAllocator()) { c10::SetCPUAllocator(this, kPriority); }
  ~CountingAllocator() override { c10::SetCPUAllocator(inner_, kPriority); }
  CountingAllocator(const CountingAllocator&) = delete;
  CountingAllocator& operator=(const CountingAllocator&) = delete;

  c10::DataPtr allocate(std::size_t n) override {
    auto* block = new Block{inner_->allocate(n), n, this};
    const std::int64_t now = current_ += static_cast<std::int64_t>(n);
    std::int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {block->inner.get(), block, &release, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

  void reset() { peak_ = current_.load(); }
  std::int64_t peak_above(std::int64_t base) const { return peak_.load() - base; }
  std::int64_t current() const { return current_.load(); }

 private:
  static constexpr std::uint8_t kPriority = 200;
  struct Block {
    c10::DataPtr inner;
    std::size_t bytes;
    CountingAllocator* owner;
  };
  static void release(void* ctx) {
    auto* block = static_cast<Block*>(ctx);
    block->owner->current_ -= static_cast<std::int64_t>(block->bytes);
    delete block;
  }

  c10::Allocator* inner_;
  std::atomic<std::int64_t> current_{0}, peak_{0};
};

}  // namespace megatron::testing
