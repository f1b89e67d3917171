// The typed saved-run record (see saved_run.h) and its JSON round trip, with the one reader of the
// Megatron argument names that checkpoints written before the record carry.
#include "megatron/checkpoint/saved_run.h"

#include "megatron/core/check.h"

namespace megatron::checkpoint {
namespace {

using nlohmann::json;

constexpr const char* kModelKey = "model";
constexpr const char* kRecordKey = "saved_run";

std::optional<int> optional_int(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int>();
}

void read_tokenizer(const json& j, SavedRun& run) {
  try {
    run.tokenizer = tokenizer::TokenizerOptions::from_json(j);
  } catch (const Error& e) {
    run.tokenizer_problem = e.what();
  }
}

// Checkpoints written before the typed record: the layer split, the tokenizer and the padding
// from the saved arguments (Megatron's names), and the model from them when there was no "model"
// object yet (its resolved vocabulary then under padded_vocab_size_resolved).
void read_legacy(const json& arguments, SavedRun& run) {
  if (!run.model && arguments.contains("num_layers") && arguments.contains("padded_vocab_size_resolved")) {
    run.model = model::ModelConfig::from_arguments(arguments);
  }
  run.pipeline = {optional_int(arguments, "num_layers").value_or(run.model ? run.model->num_layers : 0),
                  optional_int(arguments, "num_virtual_stages_per_pipeline_rank"),
                  optional_int(arguments, "num_layers_per_virtual_pipeline_stage"),
                  optional_int(arguments, "decoder_first_pipeline_num_layers"),
                  optional_int(arguments, "decoder_last_pipeline_num_layers")};
  read_tokenizer(arguments, run);
  const auto divisible_by = optional_int(arguments, "make_vocab_size_divisible_by");
  const auto tp = optional_int(arguments, "tensor_model_parallel_size");
  if (divisible_by && tp && *divisible_by > 0 && *tp > 0 && !optional_int(arguments, "padded_vocab_size")) {
    run.vocab_padding = VocabPadding{*divisible_by, *tp};
  }
}

}  // namespace

const model::ModelConfig& SavedRun::model_config(const std::string& where) const {
  MEGATRON_CHECK(model.has_value(), where, ": the saved run configuration describes no model");
  return *model;
}

json SavedRun::to_json() const {
  json j = arguments.is_object() ? arguments : json::object();
  if (model) j[kModelKey] = model->to_json();
  json record = {{"pipeline",
                  {{"layers", pipeline.num_layers},
                   {"chunks", pipeline.chunks ? json(*pipeline.chunks) : json()},
                   {"layers_per_chunk", pipeline.layers_per_chunk ? json(*pipeline.layers_per_chunk) : json()},
                   {"first_stage_layers", pipeline.first_stage_layers ? json(*pipeline.first_stage_layers) : json()},
                   {"last_stage_layers", pipeline.last_stage_layers ? json(*pipeline.last_stage_layers) : json()}}},
                 {"tokenizer", tokenizer.to_json()},
                 {"vocab_padding", json()},
                 {"model_vocab_rows", model_vocab_rows ? json(*model_vocab_rows) : json()}};
  if (vocab_padding) record["vocab_padding"] = {{"divisible_by", vocab_padding->divisible_by}, {"tp", vocab_padding->tp}};
  j[kRecordKey] = std::move(record);
  return j;
}

SavedRun SavedRun::from_json(const json& config, const std::string& where) {
  MEGATRON_CHECK(config.is_object(), where, ": the checkpoint records no run configuration");
  SavedRun run;
  for (const auto& [key, value] : config.items()) {
    if (key != kModelKey && key != kRecordKey) run.arguments[key] = value;
  }
  try {
    if (config.contains(kModelKey)) run.model = model::ModelConfig::from_json(config.at(kModelKey));
    const auto record = config.find(kRecordKey);
    if (record == config.end() || !record->is_object()) {
      read_legacy(run.arguments, run);
      return run;
    }
    const json pipeline = record->value("pipeline", json::object());
    run.pipeline = {optional_int(pipeline, "layers").value_or(run.model ? run.model->num_layers : 0),
                    optional_int(pipeline, "chunks"), optional_int(pipeline, "layers_per_chunk"),
                    optional_int(pipeline, "first_stage_layers"),
                    optional_int(pipeline, "last_stage_layers")};
    read_tokenizer(record->value("tokenizer", json::object()), run);
    const json padding = record->value("vocab_padding", json());
    if (padding.is_object()) {
      run.vocab_padding = VocabPadding{optional_int(padding, "divisible_by").value_or(128), optional_int(padding, "tp").value_or(1)};
    }
    run.model_vocab_rows = optional_int(*record, "model_vocab_rows");
  } catch (const Error& e) {
    MEGATRON_FAIL(where, ": ", e.what());
  }
  return run;
}

SavedRun SavedRun::from_megatron_args(const json& args, const std::string& where) {
  MEGATRON_CHECK(args.is_object(), where, ": the checkpoint's args are not a Namespace of settings");
  MEGATRON_CHECK(args.contains("num_layers") && args.value("padded_vocab_size", json()).is_number_integer(), where,
                 ": the checkpoint's args lack num_layers or padded_vocab_size; they describe no GPT model");
  SavedRun run;
  run.arguments = args;
  json resolved = args;
  resolved["padded_vocab_size_resolved"] = args.at("padded_vocab_size");
  resolved.erase("padded_vocab_size");  // the resolved size, not a --padded-vocab-size of ours
  try {
    read_legacy(resolved, run);
  } catch (const Error& e) {
    MEGATRON_FAIL(where, ": ", e.what());
  }
  return run;
}

}  // namespace megatron::checkpoint
