// Where a model comes from (a local HF dir, a hub id in the local HF cache, or a bare config.json file),
// filling host regions from its safetensors or by random init, and writing a HF directory back out.
// Invariant: every slot of the layout is filled exactly once, or an mt::Error names the missing or
// mis-shaped tensor and its file; export writes a complete directory or nothing.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/owned_directory.h"
#include "model/param_layout.h"

namespace mt {

struct ModelSource {
  std::filesystem::path dir;          // the HF directory ("" for a bare config file)
  std::filesystem::path config_json;  // its config.json
};

// The files besides config.json and the weights that a model directory's users load (tokenizer, chat template,
// generation defaults): what an export copies.
const std::vector<std::string>& tokenizer_file_names();

// `name`: a directory with config.json; a *.json shape file; or a hub id "org/name" found under
// $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub (models--org--name/snapshots/<rev>, via refs/main), else
// the shape we ship as configs/models/<name, lowercase>.json (a bare config: Qwen/Qwen2.5-7B -> qwen2.5-7b.json).
ModelSource resolve_model_source(const std::string& name);

// Fills dst[region.numel] from the model's safetensors (converted to fp32; F8_E4M3 tensors dequantised with their
// block scales where fp8_block_weights, the spec's, says the config is quant_method fp8: model/fp8_blocks.h). Tied
// heads have no lm_head tensor.
class SafetensorsModel;
struct StTensor;
void load_region(const Region& region, const SafetensorsModel& weights, float* dst, bool fp8_block_weights = false);

// A tensor no slot holds, carried through export: byte for byte, or (an F8_E4M3 tensor with its block scales)
// dequantised into the export's dtype.
struct CarriedTensor {
  const StTensor* tensor = nullptr;
  const StTensor* scale_inv = nullptr;  // an F8_E4M3 tensor's block scales
};
// The tensors of `weights` that no slot of `layout` holds, in name order (an F8_E4M3 tensor's scales with it, not
// on their own): what a spec with carries_other_tensors leaves frozen and exports (empty for other specs).
std::vector<CarriedTensor> carried_tensors(const ModelSpec& spec, const ParamLayout& layout,
                                           const SafetensorsModel& weights);

// Deterministic random init as transformers does it (normal(0, initializer_range) for matrices,
// zeros for biases, ones for norms): element e of tensor `hf_name` depends only on (seed, hf_name, e).
void init_region_random(const Region& region, double initializer_range, uint64_t seed, float* dst);

// A Hugging Face directory: config.json (spec.config_json, torch_dtype/dtype set to `dtype`),
// model.safetensors with the original tensor names — or, when the tensors exceed max_shard_bytes, shards
// model-0000k-of-0000n.safetensors of at most that size (a larger single tensor alone) and
// model.safetensors.index.json — and tokenizer files copied from `tokenizer_from` if present.
// region_data[i] points at region i's fp32 values; `carried` tensors follow them (CarriedTensor). Written whole
// by io/owned_directory.h: an existing `out` is replaced only as `replace` allows. `add_files`, when given, writes
// further files (the chat files of data/templates/inference_files.h) into the directory before it is renamed.
inline constexpr int64_t kMaxShardBytes = 5'000'000'000;
void export_hf_directory(const std::filesystem::path& out, const ModelSpec& spec, const ParamLayout& layout,
                         const std::vector<const float*>& region_data, DType dtype,
                         const std::filesystem::path& tokenizer_from,
                         const std::vector<CarriedTensor>& carried = {}, int64_t max_shard_bytes = kMaxShardBytes,
                         Replace replace = Replace::ours,
                         const std::function<void(const std::filesystem::path& dir)>& add_files = {});

// The same, with region i's fp32 values from region(i): it is asked for the regions in increasing order (each
// possibly several times in a row), and its pointer need only stay valid until it is asked for another region, so a
// store whose master lives on the state tier exports through one region's buffer.
using RegionSource = std::function<const float*(size_t region)>;
void export_hf_directory(const std::filesystem::path& out, const ModelSpec& spec, const ParamLayout& layout,
                         const RegionSource& region, DType dtype, const std::filesystem::path& tokenizer_from,
                         const std::vector<CarriedTensor>& carried, int64_t max_shard_bytes, Replace replace,
                         const std::function<void(const std::filesystem::path& dir)>& add_files = {});

}  // namespace mt
