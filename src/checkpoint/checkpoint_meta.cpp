// CheckpointMeta serialisation and file naming (see checkpoint_meta.h).
#include "checkpoint/checkpoint_meta.h"

#include <fmt/format.h>

namespace mt {

nlohmann::json to_json(const CheckpointMeta& m) {
  return {{"format_version", m.format_version}, {"step", m.step},
          {"tokens_seen", m.tokens_seen},       {"updates_applied", m.updates_applied},
          {"data_epoch", m.data_epoch},         {"data_index", m.data_index},
          {"seed", m.seed},                     {"shuffle", m.shuffle},
          {"model_name", m.model_name},         {"config_yaml", m.config_yaml},
          {"model_config_json", m.model_config_json}, {"versions", m.versions}};
}

CheckpointMeta meta_from_json(const nlohmann::json& j) {
  CheckpointMeta m;
  m.format_version = j.at("format_version").get<int64_t>();
  m.step = j.at("step").get<int64_t>();
  m.tokens_seen = j.at("tokens_seen").get<int64_t>();
  m.updates_applied = j.at("updates_applied").get<int64_t>();
  m.data_epoch = j.at("data_epoch").get<int64_t>();
  m.data_index = j.at("data_index").get<int64_t>();
  m.seed = j.at("seed").get<int64_t>();
  m.shuffle = j.at("shuffle").get<int64_t>();
  m.model_name = j.at("model_name").get<std::string>();
  m.config_yaml = j.at("config_yaml").get<std::string>();
  m.model_config_json = j.at("model_config_json").get<std::string>();
  m.versions = j.at("versions").get<std::string>();
  return m;
}

std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int64_t step) {
  return dir / fmt::format("step-{:06d}.h5", step);
}

}  // namespace mt
