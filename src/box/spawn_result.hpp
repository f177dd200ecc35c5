#pragma once
// What starting a command in a box gives back, whoever owns the box (Box or BoxOwner).
#include <sys/types.h>

#include <cstdint>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {

struct SpawnResult {
  uint64_t id = 0;      // the Spawn's id: what its exit and signals are tagged with
  pid_t pid = 0;        // pid inside the box (its process group id too)
  UniqueFd pty_master;  // tty mode: the master side of the box's pty
};

// The spawn failed before the command ran (exec or cwd error); errno says which.
class SpawnError : public Error {
 public:
  using Error::Error;
};

}  // namespace agentbox
