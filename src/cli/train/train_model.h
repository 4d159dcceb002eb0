// The model of a `train` run, in and out: where it comes from (a Hugging Face directory, a config.json alone with
// model.init random, or a checkpoint file that model.name names), its spec with the tensor names its source goes by,
// the starting weights the node's rank 0 fills the store's master with, the frozen tensors carried to the export,
// and the export of the master weights as a Hugging Face directory.
// Invariant: the spec's tensor names are those of the source the weights are read from (the safetensors, or the
// checkpoint's params), so every slot of the layout finds its tensor.
#pragma once
#include <filesystem>
#include <optional>
#include <vector>

#include "checkpoint/checkpoint_reader.h"
#include "cli/train/model_files.h"
#include "config/config.h"
#include "core/dtype.h"
#include "io/safetensors.h"
#include "model/model_source.h"
#include "model/model_spec.h"
#include "store/host_store.h"

namespace mt {

struct TrainModel {
  std::optional<CheckpointFile> init_from;  // model.name names a checkpoint (*.h5): its /meta and /params
  ModelSource source;
  ModelSpec spec;
  // The model's safetensors, mapped where they give the starting weights or carry frozen tensors (vision tower,
  // projector) to the export.
  std::optional<SafetensorsModel> weights;
};

// Throws mt::Error naming model.name where it has no weights to start from, or frozen tensors whose directory is gone.
TrainModel read_train_model(const Config& c);

// The starting weights into the store's master and its streaming copy (the node's rank 0): the checkpoint's params,
// random ones from training.seed (model.init random), or `weights`. Where the master is on the state tier, each
// region goes through one region-sized buffer.
void fill_master_weights(const Config& c, const ModelSpec& spec, const std::optional<CheckpointFile>& init_from,
                         const SafetensorsModel* weights, HostStore& store);

// World rank 0's lines about the run's configuration and model, and the frozen tensors the export carries.
void log_train_model(const Config& c, const ModelSpec& spec, const ParamLayout& layout,
                     const std::vector<CarriedTensor>& carried);

// The master weights as a Hugging Face directory (final/, checkpoint-N/) with the run's model files. The master in RAM
// is read in place (GPU-resident regions' written back first); on the state tier (optimizer+master) one region at a
// time is read into one region's buffer, so the export adds no more than that to the run's RAM.
void export_master_weights(const std::filesystem::path& target, HostStore& store, const ModelSpec& spec, DType dtype,
                           const std::vector<CarriedTensor>& carried, const ModelFiles& model_files);

}  // namespace mt
