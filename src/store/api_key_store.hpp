#pragma once
// Per-user API keys as stored (schema step 7): the id, the SHA-256 digest of the key (never the
// key: http/user_keys.hpp mints it and shows it once), the user it acts as, a label and when it
// was made. The daemon loads every row into http::UserKeys at start; the admin routes
// (api/keys.hpp) write here first, then change the map.
//
// Runs on: any thread (a mutex around its connection); the admin routes call it on the file pool.
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "store/sqlite.hpp"

namespace agentbox {

struct ApiKeyRecord {
  std::string id;
  std::string digest_hex;  // 64 lower-case hex digits
  std::string user;        // external user id
  std::string name;        // label, may be empty
  int64_t created = 0;     // unix seconds
};

class ApiKeyStore {
 public:
  explicit ApiKeyStore(Db db);  // its own connection (open_state_db)

  void add(const ApiKeyRecord& key);
  std::vector<ApiKeyRecord> list();  // oldest first
  bool remove(std::string_view id);  // false when there is no such key

 private:
  std::mutex mu_;  // guards db_
  Db db_;
};

}  // namespace agentbox
