// LLaMA-Factory's flat training YAML (`model_name_or_path: ...`, `stage: sft`, `cutoff_len: ...`) turned into our
// sectioned configuration. Each key it understands maps onto ours (values checked here, so a bad one is named by its
// LLaMA-Factory key); keys that change nothing in our training are listed as ignored, each with why; keys that would
// change the training in a way we do not reproduce (LoRA, a stage we lack, fp16, a DeepSpeed optimizer) are refused.
// Invariant: conversion is a pure function of the text (and of the DeepSpeed JSON it names, where that exists); every
// top-level key is either mapped, ignored with its reason, or refused — none is dropped silently.
#pragma once
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace mt {

// True when `root` is a LLaMA-Factory training YAML (a map with model_name_or_path) rather than ours.
bool is_llamafactory_config(const YAML::Node& root);

struct ConvertedConfig {
  std::string yaml_text;              // our configuration, sectioned, only the keys the file set
  std::vector<std::string> ignored;   // "key (why)" for each key that changes nothing here
};

// Throws mt::Error "<origin>: <key>: <value> ..." for a bad value or a refused key.
ConvertedConfig convert_llamafactory_config(const YAML::Node& root, const std::string& origin);

}  // namespace mt
