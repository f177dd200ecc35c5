// Per-user API keys as stored: added, listed oldest first, removed once, and still there after
// the store is reopened (a daemon restart).
#include "store/api_key_store.hpp"

#include <gtest/gtest.h>

#include "store/schema.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

class ApiKeyStoreTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_{"agentbox-api-keys"};
};

TEST_F(ApiKeyStoreTest, KeepsKeysAcrossReopeningAndRemovesThemOnce) {
  const std::string digest(64, 'a');
  {
    ApiKeyStore keys(open_state_db(scratch_.path()));
    EXPECT_TRUE(keys.list().empty());
    keys.add({"00000000000000b1", digest, "bob", "", 200});
    keys.add({"00000000000000a1", digest, "alice", "laptop", 100});
  }
  ApiKeyStore keys(open_state_db(scratch_.path()));
  auto listed = keys.list();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].id, "00000000000000a1");  // oldest first
  EXPECT_EQ(listed[0].user, "alice");
  EXPECT_EQ(listed[0].name, "laptop");
  EXPECT_EQ(listed[0].digest_hex, digest);
  EXPECT_EQ(listed[0].created, 100);
  EXPECT_EQ(listed[1].user, "bob");

  EXPECT_TRUE(keys.remove("00000000000000a1"));
  EXPECT_FALSE(keys.remove("00000000000000a1"));
  EXPECT_FALSE(keys.remove("no-such-id"));
  ASSERT_EQ(keys.list().size(), 1u);
  EXPECT_EQ(keys.list()[0].user, "bob");
}

TEST_F(ApiKeyStoreTest, AnIdIsNeverTwoKeys) {
  ApiKeyStore keys(open_state_db(scratch_.path()));
  keys.add({"00000000000000a1", std::string(64, 'a'), "alice", "", 100});
  EXPECT_THROW(keys.add({"00000000000000a1", std::string(64, 'b'), "mallory", "", 101}), DbError);
  EXPECT_EQ(keys.list().at(0).user, "alice");
}

}  // namespace
}  // namespace agentbox
