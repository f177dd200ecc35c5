#include "store/api_key_store.hpp"

namespace agentbox {

ApiKeyStore::ApiKeyStore(Db db) : db_(std::move(db)) {}

void ApiKeyStore::add(const ApiKeyRecord& key) {
  std::lock_guard lock(mu_);
  auto st = db_.prepare_cached("INSERT INTO api_keys (id, digest, user, name, created) VALUES (?1, ?2, ?3, ?4, ?5)");
  st->bind(1, key.id).bind(2, key.digest_hex).bind(3, key.user).bind(4, key.name).bind(5, key.created);
  st->step();
}

std::vector<ApiKeyRecord> ApiKeyStore::list() {
  std::lock_guard lock(mu_);
  auto st = db_.prepare_cached("SELECT id, digest, user, name, created FROM api_keys ORDER BY created, id");
  std::vector<ApiKeyRecord> out;
  while (st->step())
    out.push_back(
        {st->column_text(0), st->column_text(1), st->column_text(2), st->column_text(3), st->column_int64(4)});
  return out;
}

bool ApiKeyStore::remove(std::string_view id) {
  std::lock_guard lock(mu_);
  auto st = db_.prepare_cached("DELETE FROM api_keys WHERE id = ?1");
  st->bind(1, id);
  st->step();
  return db_.changes() > 0;
}

}  // namespace agentbox
