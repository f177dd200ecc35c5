#pragma once
// Whose a mirrored home is: MIRROR/NAME/account.json (backup/mirror_layout.hpp), written by every
// pass beside the home, so that the mirror alone is enough to rebuild a node's accounts after
// its state directory is lost (`agentbox backup restore --all`, moves/restore_all.hpp). The
// account's name alone cannot say it: it is a hash of the user id (store/account_name.hpp).
//
//   {"user": "alice@example.org", "name": "alice-3f2a9c", "uid": 1000001, "created": 1767225600}
//
// `uid` is the uid on the node that wrote it (informative: a restore gives a uid of its own).
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace agentbox::backup {

inline constexpr std::string_view kRecordFile = "account.json";

struct MirrorRecord {
  std::string user;  // the external user id, as the front end sends it
  std::string name;  // the account's name: its directory in the mirror
  uid_t uid = 0;
  int64_t created = 0;  // unix seconds

  bool operator==(const MirrorRecord&) const = default;
};

std::string record_text(const MirrorRecord& record);
// nullopt for text that is not a record (damaged, or fields missing or of the wrong type).
std::optional<MirrorRecord> parse_record(std::string_view text);

// Makes account_dir_fd/account.json hold `record`, all or nothing (a temporary file beside it,
// flushed, renamed over it); nothing is written when it holds that already. Throws Error.
void write_record(int account_dir_fd, const MirrorRecord& record);
// The record in account_dir_fd; nullopt when missing or damaged.
std::optional<MirrorRecord> read_record(int account_dir_fd);

// What the mirror holds under one of its directories.
struct MirroredAccount {
  std::string dir;                     // its name in the mirror
  std::optional<MirrorRecord> record;  // nullopt: no (readable) account.json
  bool has_home = false;               // DIR/home is there
  std::string deleted_on;              // the last day whose .deleted holds the put-away home; "" if none
};

// Every directory of the mirror root (names starting with '.' aside), by name. Throws Error
// when the root cannot be read.
std::vector<MirroredAccount> mirrored_accounts(int mirror_root_fd);

}  // namespace agentbox::backup
