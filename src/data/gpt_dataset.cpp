// GPTDataset: description, cache hit / build / save, and sample reads (see gpt_dataset.h).
#include "megatron/data/gpt_dataset.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <limits>

#include "megatron/core/check.h"
#include "megatron/core/log.h"
#include "megatron/data/gpt_indices.h"
#include "megatron/data/md5.h"

namespace megatron::data {
namespace {

const std::vector<std::string> kArrayNames = {"document_index", "sample_index", "shuffle_index"};

void log_info(const DatasetLog& log, const std::string& message) {
  if (log) log(message);
}

// Structural checks of mapped indices; the per-read bounds checks cover the values.
std::string index_problem(const std::vector<IndexArray>& arrays,
                          std::optional<std::int64_t> num_samples) {
  const IndexArray& documents = arrays[0];
  const IndexArray& samples = arrays[1];
  const IndexArray& shuffle = arrays[2];
  if (documents.dtype() != NpyDType::kInt32 || documents.shape().size() != 1 ||
      documents.size() == 0) {
    return "document_index is not a non-empty 1-D int32 array";
  }
  if ((samples.dtype() != NpyDType::kInt32 && samples.dtype() != NpyDType::kInt64) ||
      samples.shape().size() != 2 || samples.shape()[1] != 2 || samples.shape()[0] == 0) {
    return "sample_index is not an [N + 1, 2] int32/int64 array";
  }
  const std::uint64_t rows = samples.shape()[0];
  if ((shuffle.dtype() != NpyDType::kUInt32 && shuffle.dtype() != NpyDType::kInt64) ||
      shuffle.shape().size() != 1 || shuffle.size() != rows - 1) {
    return str_cat("shuffle_index is not a 1-D uint32/int64 array of ", rows - 1, " samples");
  }
  if (samples.at(0) != 0 || samples.at(1) != 0 ||
      samples.at(2 * rows - 2) >= static_cast<std::int64_t>(documents.size())) {
    return "sample_index does not fit document_index";
  }
  if (num_samples.has_value() && static_cast<std::uint64_t>(*num_samples) > shuffle.size()) {
    return str_cat("it holds ", shuffle.size(), " samples, ", *num_samples, " are requested");
  }
  return "";
}

PyJson unique_identifiers_of(const std::string& class_name,
                             const std::optional<std::string>& dataset_path,
                             std::optional<std::int64_t> num_samples, Split split,
                             const GptDatasetConfig& config) {
  PyJson identifiers = PyJson::dict();
  identifiers.set("class", class_name);
  identifiers.set("dataset_path", dataset_path ? PyJson(*dataset_path) : PyJson());
  identifiers.set("num_samples", num_samples ? PyJson(*num_samples) : PyJson());
  identifiers.set("index_split", split_name(split));
  identifiers.set("random_seed", static_cast<std::int64_t>(config.random_seed));
  identifiers.set("sequence_length", config.sequence_length);
  identifiers.set("split", config.split ? PyJson(*config.split) : PyJson());
  identifiers.set("split_matrix",
                  config.split_matrix ? split_matrix_json(*config.split_matrix) : PyJson());
  identifiers.set("tokenizer", config.tokenizer.identifiers);
  return identifiers;
}

std::string cache_base(const std::string& hash, const std::string& class_name, Split split) {
  return hash + "-" + class_name + "-" + split_name(split);
}

}  // namespace

void check_split_has_tokens(const TokenSource& source, IndexRange documents, Split split,
                            const GptDatasetConfig& config) {
  const std::int64_t tokens = source.num_tokens(documents.begin, documents.end);
  if (tokens > 1) return;
  const std::string name = source.prefix().empty() ? std::string("mock data")
                                                   : "dataset " + source.prefix();
  const std::string how =
      config.split ? str_cat("--split \"", *config.split, "\" gives it sequences [",
                             documents.begin, ", ", documents.end, ") of ",
                             source.num_sequences())
                   : str_cat("it has ", source.num_sequences(), " sequences");
  MEGATRON_FAIL("the ", split_name(split), " split of ", name, " holds ", tokens,
                " tokens (", how, "), too few to build even one sample from; ",
                config.split ? "give that split a larger share in --split, or set its "
                               "iterations to 0 (--eval-iters 0 for valid and test)"
                             : "pass a larger dataset for that split");
}

IndexFootprint GptDataset::footprint(const TokenSource& source,
                                     const std::optional<std::string>& dataset_path,
                                     IndexRange documents, std::optional<std::int64_t> num_samples,
                                     Split split, const GptDatasetConfig& config) {
  IndexFootprint out;
  const std::string class_name = config.mock ? "MockGPTDataset" : "GPTDataset";
  out.cache_folder = gpt_cache_folder(config, source.prefix());
  if (!out.cache_folder.empty()) {
    const std::string hash =
        md5_hex(unique_identifiers_of(class_name, dataset_path, num_samples, split, config)
                    .dumps(4));
    out.cached = IndexCache(out.cache_folder, cache_base(hash, class_name, split), kArrayNames)
                     .complete();
  }
  check_split_has_tokens(source, documents, split, config);
  // Spec 4.3-4.6 in 128-bit arithmetic: a huge request must be measured, not overflowed.
  __extension__ using Wide = unsigned __int128;
  const Wide tokens = static_cast<Wide>(source.num_tokens(documents.begin, documents.end));
  const Wide extra = config.add_extra_token_to_sequence ? 1 : 0;
  const auto length = static_cast<Wide>(std::max(config.sequence_length, 1));
  const Wide requested = num_samples ? static_cast<Wide>(std::max<std::int64_t>(*num_samples, 0)) *
                                           length + extra
                                     : tokens;
  const Wide epochs = std::max<Wide>(1, (requested + tokens - 1) / tokens);
  const Wide documents_per_epoch = static_cast<Wide>(documents.end - documents.begin);
  const Wide stream = epochs * tokens - extra;
  const Wide samples = stream / length + 1;  // rows of the sample index, drop_last or not
  const Wide document_entries = epochs * documents_per_epoch;
  const Wide sample_width = document_entries > 0x7fffffff ? 8 : 4;
  const Wide shuffle_width = samples >= 0xfffffffeULL ? 8 : 4;
  const Wide document_bytes = 4 * document_entries;
  const Wide sample_bytes = 2 * sample_width * samples;
  const Wide shuffle_bytes = shuffle_width * samples;
  const Wide cap = std::numeric_limits<std::uint64_t>::max() / 4;
  const auto clamp = [&](Wide v) { return static_cast<std::uint64_t>(std::min(v, cap)); };
  out.epochs = clamp(epochs);
  out.samples = clamp(samples - 1);
  out.disk_bytes = clamp(document_bytes + sample_bytes + shuffle_bytes);
  // At most: the document entries (sequence id and length, 8 bytes each), the sample index and
  // the int32 document index made from them, and the shuffle index.
  out.memory_bytes = clamp(3 * document_bytes + sample_bytes + shuffle_bytes);
  return out;
}

void log_warning(const DatasetLog& log, const std::string& message) {
  if (log) {
    log(message);
  } else {
    Log(std::cerr).warning(message);
  }
}

std::int64_t GptDatasetConfig::pad_id() const {
  if (tokenizer.pad.has_value() && *tokenizer.pad != tokenizer.eod) return *tokenizer.pad;
  return -1;
}

SampleOptions GptDatasetConfig::sample_options() const {
  SampleOptions options;
  options.eod = tokenizer.eod;
  options.pad = pad_id();
  options.reset_position_ids = reset_position_ids;
  options.reset_attention_mask = reset_attention_mask;
  options.eod_mask_loss = eod_mask_loss;
  options.add_extra_token = add_extra_token_to_sequence;
  return options;
}

std::string gpt_cache_folder(const GptDatasetConfig& config, const std::string& prefix) {
  if (!config.data_cache_path.empty()) return config.data_cache_path;
  if (config.mock || prefix.empty()) return "";
  return (std::filesystem::path(prefix) / "cache" / "GPTDataset_indices").string();
}

void SampleDataset::read_sample(std::uint64_t k, const SampleBuffers& out) const {
  thread_local std::vector<std::int64_t> text;
  text.resize(static_cast<std::size_t>(sequence_length()) +
              (sample_options().add_extra_token ? 1 : 0));
  read_text(k, text);
  make_sample(text, sample_options(), out);
}

GptDataset::GptDataset(std::shared_ptr<const TokenSource> source,
                       std::optional<std::string> dataset_path, IndexRange documents,
                       std::optional<std::int64_t> num_samples, Split split,
                       const GptDatasetConfig& config)
    : source_(std::move(source)),
      config_(config),
      options_(config.sample_options()),
      dataset_path_(std::move(dataset_path)),
      documents_(documents),
      num_samples_(num_samples),
      split_(split),
      class_name_(config.mock ? "MockGPTDataset" : "GPTDataset") {
  // The log callbacks may capture the caller's streams: they are used while building only.
  struct DropCallbacks {
    GptDatasetConfig& config;
    ~DropCallbacks() {
      config.info = nullptr;
      config.warning = nullptr;
    }
  } drop_callbacks{config_};
  MEGATRON_CHECK(config_.sequence_length > 1, "--seq-length must be at least 2, got ",
                 config_.sequence_length);
  MEGATRON_CHECK(documents_.begin >= 0 && documents_.begin <= documents_.end &&
                     documents_.end <= source_->num_sequences(),
                 "split range [", documents_.begin, ", ", documents_.end, ") outside the ",
                 source_->num_sequences(), " sequences of ", source_->prefix());
  check_split_has_tokens(*source_, documents_, split_, config_);
  identifiers_ = unique_identifiers_of(class_name_, dataset_path_, num_samples_, split_, config_);
  description_ = identifiers_.dumps(4);
  hash_ = md5_hex(description_);

  cache_folder_ = gpt_cache_folder(config_, source_->prefix());
  const std::string what = class_name_ + " " + split_name(split_) + " indices";
  if (cache_folder_.empty()) {
    log_info(config_.info, "Build and save the " + what);
    build_indices();
    log_info(config_.info, "Unable to save " + class_name_ + " indexes: no --data-cache-path");
    return;
  }
  const IndexCache cache(cache_folder_, cache_base(hash_, class_name_, split_), kArrayNames);
  const bool complete = cache.complete();
  if (complete && load_indices(cache)) {
    log_info(config_.info, "Load the " + what + " from " + cache_folder_);
    return;
  }
  MEGATRON_CHECK(config_.build_policy != IndexBuildPolicy::kLoadOnly, "the ", what, " of ",
                 source_->prefix(), " are not in ", cache_folder_, " (expected ",
                 cache.description_path(),
                 " and its .npy files); rank 0 builds them: check that every rank sees the same "
                 "--data-cache-path on a shared file system");
  log_info(config_.info, "Build and save the " + what);
  build_indices();
  cache.save(description_, {document_index_, sample_index_, shuffle_index_});
}

// The cache is named by its description (path, split, seed, sizes), not by the data: a dataset
// rewritten under the same prefix would map indices of the old data. The sizes the current data
// implies (epochs, document-index length, sample count, the last sample's offset) must match.
std::string GptDataset::stale_problem(const std::vector<IndexArray>& arrays) const {
  const UnalignedArray<std::int32_t> lengths = source_->sequence_lengths();
  const std::int64_t tokens_per_epoch = source_->num_tokens(documents_.begin, documents_.end);
  const std::int32_t extra = config_.add_extra_token_to_sequence ? 1 : 0;
  const EpochPlan plan = plan_epochs(tokens_per_epoch, num_samples_, config_.sequence_length, extra);
  const std::uint64_t expected_documents =
      static_cast<std::uint64_t>(plan.num_epochs) * static_cast<std::uint64_t>(documents_.end - documents_.begin);
  const bool drop_last = split_ != Split::kValid || config_.drop_last_partial_validation_sequence;
  const std::int64_t stream = plan.num_epochs * tokens_per_epoch - extra;
  const std::int64_t expected_samples =
      drop_last ? stream / config_.sequence_length : (stream + config_.sequence_length - 1) / config_.sequence_length;
  const IndexArray& documents = arrays[0];
  const IndexArray& samples = arrays[1];
  const std::uint64_t rows = samples.shape()[0];
  const auto last_doc = static_cast<std::uint64_t>(samples.at(2 * rows - 2));
  const std::int64_t last_offset = samples.at(2 * rows - 1);
  const std::int64_t last_sequence = documents.at(last_doc);
  if (documents.size() != expected_documents || static_cast<std::int64_t>(rows - 1) != expected_samples ||
      last_sequence < documents_.begin || last_sequence >= documents_.end ||
      last_offset > lengths[static_cast<std::size_t>(last_sequence)]) {
    return str_cat("they were built for other data than ", source_->prefix(), " holds now: ", documents.size(),
                   " document-index entries and ", rows - 1, " samples cached, the data gives ", expected_documents,
                   " and ", expected_samples);
  }
  return "";
}

bool GptDataset::load_indices(const IndexCache& cache) {
  std::string problem;
  std::optional<std::vector<IndexArray>> arrays = cache.load(description_, problem);
  if (arrays.has_value()) problem = index_problem(*arrays, num_samples_);
  if (problem.empty()) problem = stale_problem(*arrays);
  if (!problem.empty()) {
    const std::string message = "the cached " + class_name_ + " " + split_name(split_) +
                                " indices in " + cache_folder_ + " are unusable (" + problem + ")";
    MEGATRON_CHECK(config_.build_policy != IndexBuildPolicy::kLoadOnly, message,
                   "; delete them and start again so rank 0 rebuilds them");
    log_warning(config_.warning, message + "; rebuilding them");
    return false;
  }
  document_index_ = (*arrays)[0];
  sample_index_ = (*arrays)[1];
  shuffle_index_ = (*arrays)[2];
  return true;
}

void GptDataset::build_indices() {
  const std::int64_t tokens_per_epoch = source_->num_tokens(documents_.begin, documents_.end);
  const std::int32_t extra = config_.add_extra_token_to_sequence ? 1 : 0;
  const EpochPlan plan =
      plan_epochs(tokens_per_epoch, num_samples_, config_.sequence_length, extra);

  RandomState random(config_.random_seed);
  std::vector<DocumentEntry> entries =
      build_document_index(source_->sequence_lengths(), documents_.begin, documents_.end,
                           plan.num_epochs, random, plan.separate_final_epoch);
  const bool drop_last = split_ != Split::kValid || config_.drop_last_partial_validation_sequence;
  sample_index_ = build_sample_index(entries, config_.sequence_length, plan.num_epochs,
                                     tokens_per_epoch, drop_last, extra);
  document_index_ = document_index_of(entries);
  std::vector<DocumentEntry>().swap(entries);
  const std::uint64_t total = sample_index_.shape()[0] - 1;
  shuffle_index_ = build_shuffle_index(
      plan.separate_final_epoch ? static_cast<std::uint64_t>(plan.num_samples_sans_final_epoch)
                                : total,
      total, random);
  built_anew_ = true;
  log_info(config_.info, str_cat("> total number of samples: ", total));
  log_info(config_.info, str_cat("> total number of epochs: ", plan.num_epochs));
}

void GptDataset::read_text(std::uint64_t k, std::span<std::int64_t> text) const {
  MEGATRON_CHECK(k < size(), class_name_, " ", split_name(split_), ": sample ", k,
                 " requested, the dataset has ", size());
  const auto sample = static_cast<std::uint64_t>(shuffle_index_.at(k));
  MEGATRON_CHECK(sample + 1 < sample_index_.shape()[0], cache_folder_, ": shuffle index entry ",
                 sample, " is outside the sample index");
  const std::int64_t d0 = sample_index_.at(2 * sample), o0 = sample_index_.at(2 * sample + 1);
  const std::int64_t d1 = sample_index_.at(2 * sample + 2), o1 = sample_index_.at(2 * sample + 3);
  const std::int64_t extra = options_.add_extra_token ? 1 : 0;
  const UnalignedArray<std::int32_t> lengths = source_->sequence_lengths();
  std::size_t filled = 0;
  const auto take = [&](std::int64_t position, std::int64_t offset, std::int64_t length) {
    MEGATRON_CHECK(position >= 0 && static_cast<std::uint64_t>(position) < document_index_.size(),
                   cache_folder_, ": sample index position ", position, " is outside the ",
                   "document index");
    MEGATRON_CHECK(filled + static_cast<std::size_t>(length) <= text.size(), cache_folder_,
                   ": sample ", sample, " spans more than ", text.size(), " tokens");
    source_->read(document_index_.at(static_cast<std::uint64_t>(position)), offset, length,
                  text.data() + filled);
    filled += static_cast<std::size_t>(length);
  };
  if (d0 == d1) {
    take(d0, o0, o1 - o0 + extra);
  } else {
    for (std::int64_t i = d0; i <= d1; ++i) {
      const std::int64_t offset = i > d0 ? 0 : o0;
      std::int64_t length = o1 + extra;
      if (i < d1) {
        const std::int64_t sequence = document_index_.at(static_cast<std::uint64_t>(i));
        MEGATRON_CHECK(sequence >= 0 && sequence < source_->num_sequences(), cache_folder_,
                       ": document index entry ", sequence, " is not a sequence of ",
                       source_->prefix());
        length = lengths[static_cast<std::size_t>(sequence)] - offset;
      }
      take(i, offset, length);
    }
  }
  for (std::size_t i = filled; i < text.size(); ++i) text[i] = options_.pad;
}

}  // namespace megatron::data
