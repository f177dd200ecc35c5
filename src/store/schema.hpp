#pragma once
// The state database (STATE/agentbox.db): its schema, versioned by PRAGMA user_version, and
// the one way to open it.
#include <string>

#include "store/sqlite.hpp"

namespace agentbox {

// The schema version this build writes.
int latest_schema_version();

// Brings db to latest_schema_version(), applying each missing step in one transaction, so
// two processes opening a fresh database at once do not both migrate. A database newer than
// this build is refused rather than guessed at.
void migrate(Db& db);

// Opens STATE/agentbox.db (creating it, mode 0600) and migrates it. Each store owns one such
// connection; WAL lets them read concurrently.
Db open_state_db(const std::string& state_dir);

}  // namespace agentbox
