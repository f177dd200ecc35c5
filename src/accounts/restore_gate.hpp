#pragma once
// The users a node is restoring from the mirror (`backup restore --all`, moves/restore_all.hpp):
// from before their account is made until their home is in place, every request naming them
// gets 503 "being restored" with Retry-After (accounts/admission.hpp), so nobody sees a
// half-restored home (nor gets a fresh empty account in the meantime). Each restore is a marker
// file STATE/restoring/NAME.json ({"user": ID}, NAME the account's directory in the mirror),
// written before the account is made and removed once its home is in place: a node killed
// mid-restore keeps refusing the user after its restart, and the next `restore --all` finds the
// marker and finishes that restore.
//
// Runs on: any thread (the maps are locked briefly; a marker is written outside the lock).
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace agentbox::accounts {

class RestoreGate {
 public:
  // dir is made (0700) when missing; the markers in it are read.
  explicit RestoreGate(std::string dir);

  // Whether external_id is being restored: refused meanwhile (accounts/admission.hpp), and the
  // mirror must not copy its home (empty, or not complete) over the copy it is being restored
  // from, e.g. in the pass at a restart.
  bool restoring(std::string_view external_id) const;
  // The marker is written (flushed) before this returns: refused from here on.
  void begin(const std::string& name, const std::string& external_id);
  // The restore of `name` is over (done, or found not to be needed): served again.
  void end(const std::string& name);
  // Restores begun and not ended (by an earlier run too): mirror name → user id.
  std::map<std::string, std::string> pending() const;

 private:
  std::string dir_;
  mutable std::mutex mu_;                          // guards the maps
  std::map<std::string, std::string> by_name_;     // name → user id
  std::map<std::string, int, std::less<>> users_;  // user id → restores pending
};

}  // namespace agentbox::accounts
