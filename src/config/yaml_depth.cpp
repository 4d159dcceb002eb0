// Loading YAML within the nesting bound (see yaml_depth.h).
#include "config/yaml_depth.h"

#include <yaml-cpp/depthguard.h>

#include <utility>
#include <vector>

#include "core/error.h"
#include "core/json_depth.h"

namespace mt {

YAML::Node load_yaml_bounded(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    throw Error(fmt::format("{}:{}: YAML nested deeper than {} levels", origin, e.mark.line + 1, kMaxNestingDepth));
  }
  std::vector<std::pair<YAML::Node, int>> pending{{root, 0}};  // (node, its depth)
  while (!pending.empty()) {
    const auto [node, depth] = pending.back();
    pending.pop_back();
    if (!node.IsMap() && !node.IsSequence()) continue;
    MT_REQUIRE(depth < kMaxNestingDepth, "{}: YAML nested deeper than {} levels", origin, kMaxNestingDepth);
    for (const auto& child : node) {
      if (node.IsMap()) {
        pending.emplace_back(child.first, depth + 1);
        pending.emplace_back(child.second, depth + 1);
      } else {
        pending.emplace_back(child, depth + 1);
      }
    }
  }
  return root;
}

}  // namespace mt
