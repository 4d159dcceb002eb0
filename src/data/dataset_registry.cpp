// Reads dataset_info.json into DatasetEntries; each entry is validated on its own.
// Invariant: messages name the registry file and the entry (and key) at fault.
#include "data/dataset_registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_depth.h"
#include "data/json_message.h"

namespace mt {
namespace {

using nlohmann::json;

const std::vector<std::string> kFormattings = {"alpaca", "sharegpt", "tokenized"};

// LLaMA-Factory's hub keys and the command that downloads such a dataset ({0}: its id, {1}: a folder for it).
const std::vector<std::pair<std::string, std::string>> kHubDownloads = {
    {"hf_hub_url", "huggingface-cli download --repo-type dataset {0} --local-dir {1}"},
    {"ms_hub_url", "modelscope download --dataset {0} --local_dir {1}"},
    {"om_hub_url", "openmind-cli pull {0} --local_dir {1}"},
};

std::map<std::string, std::string> string_map(const json& value, const std::string& where) {
  MT_REQUIRE(value.is_object(), "{} must be an object of strings", where);
  std::map<std::string, std::string> out;
  for (const auto& [key, item] : value.items()) {
    MT_REQUIRE(item.is_string(), "{}.{} must be a string", where, key);
    out[key] = item.get<std::string>();
  }
  return out;
}

DatasetEntry parse_entry(const std::filesystem::path& dataset_dir, const std::string& name, const json& value) {
  MT_REQUIRE(value.is_object(), "entry '{}' must be an object", name);
  DatasetEntry entry;
  entry.name = name;
  const auto file_name = value.find("file_name");
  if (file_name == value.end()) {
    for (const auto& [key, command] : kHubDownloads) {
      const auto hub = value.find(key);
      if (hub == value.end() || !hub->is_string()) continue;
      const std::string id = hub->get<std::string>();
      const std::string dir = (dataset_dir / id.substr(id.rfind('/') + 1)).string();
      throw Error(fmt::format("entry '{}' is the hub dataset {} \"{}\" and MegaTrain reads local files only (no "
                              "network): download it with `{}`, then set \"file_name\" to the downloaded file",
                              name, key, id, fmt::format(fmt::runtime(command), id, dir)));
    }
    throw Error(fmt::format("entry '{}' has no file_name", name));
  }
  for (const char* key : {"num_samples", "subset", "folder", "script_url", "cloud_file_name"})
    MT_REQUIRE(!value.contains(key), "entry '{}': \"{}\" is not supported (a local file is read whole{}); remove it",
               name, key, std::string_view(key) == "num_samples" ? "; dataset.max_samples keeps the first N" : "");
  if (value.contains("split"))
    MT_REQUIRE(value["split"] == "train", "entry '{}': split {} is not supported: a local file is read whole as the "
               "train split", name, value["split"].dump());
  MT_REQUIRE(file_name->is_string() && !file_name->get<std::string>().empty(),
             "entry '{}': file_name must be a non-empty string", name);
  entry.file = dataset_dir / file_name->get<std::string>();
  const json formatting = value.value("formatting", json("alpaca"));
  MT_REQUIRE(formatting.is_string() && std::find(kFormattings.begin(), kFormattings.end(),
                                                 formatting.get<std::string>()) != kFormattings.end(),
             "entry '{}': formatting {} is not one of {}", name, formatting.dump(), fmt::join(kFormattings, ", "));
  entry.formatting = formatting.get<std::string>();
  if (value.contains("columns")) entry.columns = string_map(value["columns"], fmt::format("entry '{}': columns", name));
  if (value.contains("tags")) entry.tags = string_map(value["tags"], fmt::format("entry '{}': tags", name));
  if (value.contains("ranking")) {
    MT_REQUIRE(value["ranking"].is_boolean(), "entry '{}': ranking {} is not true or false", name,
               value["ranking"].dump());
    entry.ranking = value["ranking"].get<bool>();
  }
  return entry;
}

}  // namespace

std::string DatasetEntry::column(const std::string& role) const {
  const auto it = columns.find(role);
  return it == columns.end() ? role : it->second;
}

DatasetRegistry::DatasetRegistry(const std::filesystem::path& dataset_dir)
    : info_file_(dataset_dir / "dataset_info.json") {
  std::ifstream in(info_file_);
  MT_REQUIRE(in.good(), "{}: dataset registry not found (set dataset.dataset_dir to the folder that holds it)",
             info_file_.string());
  const std::string text(std::istreambuf_iterator<char>(in), {});
  require_json_depth(text, info_file_.string());
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(fmt::format("{}: malformed JSON: {}", info_file_.string(), json_message(e)));
  }
  MT_REQUIRE(root.is_object(), "{}: expected an object of dataset entries", info_file_.string());
  for (const auto& [name, value] : root.items()) {
    try {
      entries_.emplace(name, parse_entry(dataset_dir, name, value));
    } catch (const Error& e) {
      problems_.emplace(name, e.what());
    }
  }
}

const DatasetEntry& DatasetRegistry::entry(const std::string& name) const {
  const auto problem = problems_.find(name);
  MT_REQUIRE(problem == problems_.end(), "{}: {}", info_file_.string(), problem->second);
  const auto it = entries_.find(name);
  MT_REQUIRE(it != entries_.end(), "{}: no dataset named '{}'; available: {}", info_file_.string(), name,
             names().empty() ? "(none)" : fmt::format("{}", fmt::join(names(), ", ")));
  return it->second;
}

std::vector<std::string> DatasetRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : entries_) out.push_back(name);
  for (const auto& [name, problem] : problems_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace mt
