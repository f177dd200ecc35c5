#pragma once
// Which users a cluster node must not serve because of a move (api/moves.hpp), asked
// before anything else for every request that names a user (AccountDirectory's account gate):
//   being moved away from here, or here and not activated yet  503 "being moved to n3" + Retry-After
//   moved away (the tombstone)                                 421 "user U moved to node n3 (ADDR)"
// It mirrors the moves tables (store/move_store.hpp), read again after every change of state,
// so a restarted node refuses exactly what it refused before.
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "store/move_store.hpp"

namespace agentbox::accounts {


class MoveGate {
 public:
  MoveGate(MoveStore& moves, std::string self_node);

  // Throws BoxUnavailable (503) or HttpError (421) when the user is not to be served here.
  void check(std::string_view external_id) const;
  // Reads the moves tables again (after a move changed state).
  void reload();

 private:
  struct Entry {
    bool moved = false;  // the tombstone; else being moved
    std::string node;    // where to
    std::string server;  // its nginx server string (tombstones)
  };
  MoveStore& moves_;
  std::string self_;
  mutable std::mutex mu_;  // guards refused_
  std::map<std::string, Entry, std::less<>> refused_;  // by external id
};

}  // namespace agentbox::accounts
