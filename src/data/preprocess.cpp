// The preprocess_data pipeline (see preprocess.h): reader thread -> worker threads (parse JSON,
// tokenize) -> the caller's thread, which writes batches strictly in input order.
#include "megatron/data/preprocess.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <thread>

#include "megatron/core/check.h"
#include "megatron/core/file_io.h"
#include "megatron/core/log.h"
#include "megatron/core/strings.h"
#include "megatron/data/indexed_dataset.h"
#include "megatron/data/json_document.h"
#include "megatron/data/jsonl_reader.h"

namespace megatron::data {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kBatchBytes = 1 << 20;
constexpr std::size_t kBatchLines = 1024;

enum class LineStatus : std::uint8_t { kDocument, kBlank, kInvalid };

// A run of consecutive lines of one file, and what the workers made of them.
struct Batch {
  std::uint64_t seq = 0;
  std::size_t file_index = 0;
  std::uint64_t first_line = 1;
  bool last_line_without_newline = false;
  std::string text;                   // the lines, terminators removed
  std::vector<std::size_t> line_ends;  // end offset of each line in `text`

  // Filled by a worker.
  std::vector<LineStatus> status;
  std::vector<std::uint32_t> chars;                  // Python len() of the line incl. newline
  std::vector<std::pair<std::size_t, std::string>> errors;  // (line index, reason)
  struct KeyOutput {
    std::vector<std::int32_t> tokens;
    std::vector<std::int32_t> sequence_lengths;
    std::vector<std::uint32_t> sequences_per_document;
  };
  std::vector<KeyOutput> keys;

  std::size_t num_lines() const { return line_ends.size(); }
  std::string_view line(std::size_t i) const {
    const std::size_t begin = i == 0 ? 0 : line_ends[i - 1];
    return std::string_view(text).substr(begin, line_ends[i] - begin);
  }
};

bool is_blank(std::string_view line) {
  for (const char c : line) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  }
  return true;
}

std::uint32_t python_char_count(std::string_view line, bool with_newline) {
  std::uint32_t n = with_newline ? 1 : 0;
  for (const char c : line) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Encodes every line of a batch (one worker thread's state: a parser and a cached encoder).
class BatchEncoder {
 public:
  BatchEncoder(const tokenizer::Tokenizer& tokenizer, const PreprocessOptions& options)
      : parser_(options.json_keys),
        encoder_(tokenizer.make_encoder()),
        eod_(tokenizer.eod()),
        append_eod_(options.append_eod) {}

  void encode(Batch& batch) {
    const std::size_t n = batch.num_lines();
    batch.status.assign(n, LineStatus::kDocument);
    batch.chars.assign(n, 0);
    batch.keys.assign(parser_.num_keys(), {});
    std::string error;
    for (std::size_t i = 0; i < n; ++i) {
      const std::string_view line = batch.line(i);
      const bool newline = !(i + 1 == n && batch.last_line_without_newline);
      batch.chars[i] = python_char_count(line, newline);
      if (is_blank(line)) {
        batch.status[i] = LineStatus::kBlank;
      } else if (!parser_.parse(line, error)) {
        batch.status[i] = LineStatus::kInvalid;
        batch.errors.emplace_back(i, error);
      } else {
        encode_document(batch);
      }
    }
  }

 private:
  void encode_document(Batch& batch) {
    for (std::size_t k = 0; k < parser_.num_keys(); ++k) {
      auto& out = batch.keys[k];
      const std::size_t doc_start = out.tokens.size();
      std::uint32_t sequences = 0;
      for (const std::string_view sentence : parser_.sentences(k)) {
        const std::size_t before = out.tokens.size();
        encoder_->encode(sentence, out.tokens);
        if (out.tokens.size() > before) {
          out.sequence_lengths.push_back(static_cast<std::int32_t>(out.tokens.size() - before));
          ++sequences;
        }
      }
      if (append_eod_ && out.tokens.size() > doc_start) {
        out.tokens.push_back(eod_);
        ++out.sequence_lengths.back();
      }
      out.sequences_per_document.push_back(sequences);
    }
  }

  JsonDocumentParser parser_;
  std::unique_ptr<tokenizer::Encoder> encoder_;
  std::int32_t eod_;
  bool append_eod_;
};

// Threads and the two queues between them. The destructor stops and joins everything, so an
// exception on the writer's side never leaves threads running.
class Pipeline {
 public:
  // A thread that cannot start (a process limit: ulimit -u, a container's pids limit) stops and
  // joins the threads already started, then throws naming the limit and --workers.
  Pipeline(const tokenizer::Tokenizer& tokenizer, const PreprocessOptions& options)
      : options_(options), max_in_flight_(static_cast<std::size_t>(4 * options.workers + 4)) {
    workers_.reserve(static_cast<std::size_t>(options.workers));
    try {
      reader_ = std::thread([this] { guarded([this] { read_all(); }); });
      for (int w = 0; w < options.workers; ++w) {
        workers_.emplace_back([this, &tokenizer] {
          guarded([this, &tokenizer] {
            BatchEncoder encoder(tokenizer, options_);
            while (auto batch = take_work()) {
              encoder.encode(*batch);
              finish(std::move(batch));
            }
          });
        });
      }
    } catch (const std::exception& e) {
      const std::size_t started = workers_.size();
      const bool reader_started = reader_.joinable();
      shutdown();
      MEGATRON_FAIL("cannot start ", reader_started ? str_cat("worker thread ", started + 1, " of ", options.workers)
                                                    : std::string("the reader thread"),
                    " (", e.what(), "): the process or thread limit is reached (see ulimit -u, or the "
                    "container's pids limit); use fewer --workers (",
                    started, " worker threads started)");
    }
  }

  ~Pipeline() { shutdown(); }

  // The next batch in input order; nullptr after the last one. Rethrows a reader/worker failure.
  std::unique_ptr<Batch> next_in_order() {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [this] {
      return failure_ || done_.count(next_out_) > 0 || (reader_finished_ && next_out_ == total_batches_);
    });
    if (failure_) std::rethrow_exception(failure_);
    if (done_.count(next_out_) == 0) return nullptr;
    auto batch = std::move(done_[next_out_]);
    done_.erase(next_out_++);
    --in_flight_;
    space_cv_.notify_one();
    return batch;
  }

  std::uint64_t file_bytes() const { return file_bytes_; }

 private:
  template <typename Fn>
  void guarded(Fn&& fn) {
    try {
      fn();
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
      stopping_ = true;
      work_cv_.notify_all();
      space_cv_.notify_all();
      done_cv_.notify_all();
    }
  }

  void stop() {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    work_cv_.notify_all();
    space_cv_.notify_all();
  }

  void shutdown() {
    stop();
    if (reader_.joinable()) reader_.join();
    for (auto& w : workers_) {
      if (w.joinable()) w.join();
    }
  }

  void read_all() {
    for (std::size_t f = 0; f < options_.inputs.size(); ++f) {
      LineReader reader(options_.inputs[f]);
      auto batch = std::make_unique<Batch>();
      batch->file_index = f;
      std::string_view line;
      while (reader.next(line)) {
        if (batch->num_lines() == kBatchLines || batch->text.size() + line.size() > kBatchBytes) {
          if (batch->num_lines() > 0) {
            if (!submit(std::move(batch))) return;
            batch = std::make_unique<Batch>();
            batch->file_index = f;
          }
        }
        if (batch->num_lines() == 0) batch->first_line = reader.line_number();
        batch->text.append(line);
        batch->line_ends.push_back(batch->text.size());
      }
      batch->last_line_without_newline = !reader.last_line_had_newline();
      if (!submit(std::move(batch))) return;
      file_bytes_ += reader.file_bytes_read();
    }
    std::lock_guard lock(mutex_);
    reader_finished_ = true;
    done_cv_.notify_all();
  }

  bool submit(std::unique_ptr<Batch> batch) {
    std::unique_lock lock(mutex_);
    space_cv_.wait(lock, [this] { return stopping_ || in_flight_ < max_in_flight_; });
    if (stopping_) return false;
    batch->seq = total_batches_++;
    ++in_flight_;
    work_.push_back(std::move(batch));
    work_cv_.notify_one();
    return true;
  }

  std::unique_ptr<Batch> take_work() {
    std::unique_lock lock(mutex_);
    work_cv_.wait(lock, [this] { return stopping_ || !work_.empty() || reader_finished_; });
    if (stopping_ || work_.empty()) return nullptr;
    auto batch = std::move(work_.front());
    work_.pop_front();
    return batch;
  }

  void finish(std::unique_ptr<Batch> batch) {
    std::lock_guard lock(mutex_);
    const std::uint64_t seq = batch->seq;
    done_[seq] = std::move(batch);
    if (seq == next_out_) done_cv_.notify_all();
  }

  const PreprocessOptions& options_;
  const std::size_t max_in_flight_;
  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_, space_cv_;
  std::deque<std::unique_ptr<Batch>> work_;
  std::map<std::uint64_t, std::unique_ptr<Batch>> done_;
  std::uint64_t total_batches_ = 0;
  std::uint64_t next_out_ = 0;
  std::size_t in_flight_ = 0;
  bool reader_finished_ = false;
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::atomic<std::uint64_t> file_bytes_{0};
  std::thread reader_;
  std::vector<std::thread> workers_;
};

// Where each key's next document starts in a batch's arrays.
struct Cursor {
  std::size_t token = 0, sequence = 0, document = 0;
};

// The next line's document of every key (its sentences' lengths and tokens) to the key's writer.
void append_documents(const Batch& batch, std::vector<Cursor>& cursors,
                      std::vector<std::unique_ptr<IndexedDatasetWriter>>& writers, PreprocessStats& stats) {
  for (std::size_t k = 0; k < writers.size(); ++k) {
    const auto& key_out = batch.keys[k];
    Cursor& at = cursors[k];
    const std::uint32_t sequences = key_out.sequences_per_document[at.document++];
    const std::span<const std::int32_t> lengths(key_out.sequence_lengths.data() + at.sequence, sequences);
    std::size_t doc_tokens = 0;
    for (const std::int32_t len : lengths) doc_tokens += static_cast<std::size_t>(len);
    writers[k]->add_document(std::span<const std::int32_t>(key_out.tokens.data() + at.token, doc_tokens), lengths);
    if (k == 0 && doc_tokens == 0) ++stats.empty_documents;
    stats.tokens += doc_tokens;
    at.sequence += sequences;
    at.token += doc_tokens;
  }
}

}  // namespace

PreprocessStats preprocess(const tokenizer::Tokenizer& tokenizer, const PreprocessOptions& options,
                           std::ostream& out, std::ostream& err) {
  const auto problems = options.validate();
  throw_if_problems("invalid preprocessing options", problems, ProblemHeading::kList);
  const auto startup_start = Clock::now();
  PreprocessStats stats;
  out << "Opening " << options.inputs.front() << std::endl;

  const DType dtype = optimal_token_dtype(tokenizer.vocab_size());
  std::vector<std::unique_ptr<IndexedDatasetWriter>> writers;
  for (const auto& key : options.json_keys) {
    stats.output_prefixes.push_back(output_prefix_for_key(options.output_prefix, key));
    check_writable_parent(stats.output_prefixes.back() + ".bin", "--output-prefix");
    writers.push_back(std::make_unique<IndexedDatasetWriter>(stats.output_prefixes.back(), dtype));
  }

  Pipeline pipeline(tokenizer, options);
  out << "Time to startup: " << python_float_repr(std::chrono::duration<double>(Clock::now() - startup_start).count())
      << "\nProcessing data with " << options.workers << " workers." << std::endl;
  const auto proc_start = Clock::now();

  std::uint64_t chars = 0;
  std::size_t current_file = 0;
  while (auto batch = pipeline.next_in_order()) {
    if (batch->file_index != current_file) {
      current_file = batch->file_index;
      out << "Opening " << options.inputs[current_file] << std::endl;
    }
    std::vector<Cursor> cursors(writers.size());
    std::size_t next_error = 0;
    for (std::size_t i = 0; i < batch->num_lines(); ++i) {
      stats.input_bytes += batch->line(i).size() + 1;
      if (batch->status[i] == LineStatus::kBlank) {
        ++stats.blank_lines;
        continue;
      }
      if (batch->status[i] == LineStatus::kInvalid) {
        const std::string& reason = batch->errors[next_error++].second;
        const std::string where = str_cat(options.inputs[batch->file_index], ":", batch->first_line + i);
        MEGATRON_CHECK(options.skip_invalid_lines, where, ": ", reason,
                       "; use --skip-invalid-lines to skip such lines");
        if (++stats.lines_skipped <= options.max_warnings) {
          const Log log(err);
          log.warning(where + ": " + reason + "; line skipped");
          if (stats.lines_skipped == options.max_warnings) {
            log.warning("further invalid lines are skipped without a warning; the count follows at the end");
          }
        }
        continue;
      }
      append_documents(*batch, cursors, writers, stats);
      chars += batch->chars[i];
      if (++stats.documents % options.log_interval == 0) {
        const double elapsed = std::chrono::duration<double>(Clock::now() - proc_start).count();
        err << "Processed " << stats.documents << " documents ("
            << python_float_repr(static_cast<double>(stats.documents) / elapsed) << " docs/s, "
            << python_float_repr(static_cast<double>(chars) / elapsed / 1024 / 1024) << " MB/s)." << std::endl;
      }
    }
    if (batch->last_line_without_newline && batch->num_lines() > 0) --stats.input_bytes;
  }
  for (auto& writer : writers) writer->finalize();
  stats.seconds = std::chrono::duration<double>(Clock::now() - proc_start).count();
  stats.file_bytes = pipeline.file_bytes();
  return stats;
}

}  // namespace megatron::data
