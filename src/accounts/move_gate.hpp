#pragma once
// Which users a cluster node keeps a move on record for (api/moves.hpp): being moved away from
// here, here and not activated yet, or moved away (the tombstone). Admission
// (accounts/admission.hpp) asks it for every request that names a user and answers 503 while a
// move is under way, 421 naming the new node after it. It mirrors the moves tables
// (store/move_store.hpp), read again after every change of state, so a restarted node refuses
// exactly what it refused before.
//
// Runs on: any thread (refused_ is locked briefly); reload() from the moves' own threads.
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "store/move_store.hpp"

namespace agentbox::accounts {

class MoveGate {
 public:
  MoveGate(MoveStore& moves, std::string self_node);

  struct Entry {
    bool moved = false;  // the tombstone; else being moved
    std::string node;    // where to
    std::string server;  // its nginx server string (tombstones)
  };
  // The user's move, if one is on record here.
  std::optional<Entry> find(std::string_view external_id) const;
  // Reads the moves tables again (after a move changed state).
  void reload();

 private:
  MoveStore& moves_;
  std::string self_;
  mutable std::mutex mu_;                              // guards refused_
  std::map<std::string, Entry, std::less<>> refused_;  // by external id
};

}  // namespace agentbox::accounts
