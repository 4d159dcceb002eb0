// Bounded YAML loading for every YAML input (run configs, `--set` values, the config saved in a checkpoint):
// a document nested deeper than kMaxNestingDepth (core/json_depth.h) mappings and sequences is refused with one
// line naming its origin, whether yaml-cpp's own recursion guard or the walk after loading finds it.
// Invariant: every node handed back nests at most kMaxNestingDepth levels; the walk is iterative.
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>

namespace mt {

// YAML::Load(text), then the depth check; syntax errors propagate as YAML::ParserException.
YAML::Node load_yaml_bounded(const std::string& text, const std::string& origin);

}  // namespace mt
