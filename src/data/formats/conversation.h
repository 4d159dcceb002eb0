// Conversation: the common form every text format (alpaca, sharegpt) becomes before a chat template renders it.
// Invariant: a converted Conversation has at least one turn pair; turns alternate a prompt side (user | observation)
// and an answer side (assistant | function), starting on the prompt side and ending on the answer side.
#pragma once
#include <string>
#include <vector>

namespace mt {

enum class Role { user, assistant, observation, function };

struct Turn {
  Role role = Role::user;
  std::string content;
};

struct Conversation {
  std::string system;          // "" = the template's default system
  std::string tools;           // JSON text of the tool list ("" = none)
  std::vector<Turn> turns;
};

}  // namespace mt
