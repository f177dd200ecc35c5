// Box keys: the default profile's box keeps the account's name; a profile's splits back into
// account and profile.
#include "store/box_key.hpp"

#include <gtest/gtest.h>

#include "store/account_name.hpp"

namespace agentbox {
namespace {

TEST(BoxKey, TheDefaultProfileKeepsTheAccountsName) {
  EXPECT_EQ(box_key("alice-3f2a9c", ""), "alice-3f2a9c");
  EXPECT_EQ(account_of_box("alice-3f2a9c"), "alice-3f2a9c");
  EXPECT_EQ(profile_of_box("alice-3f2a9c"), "");
}

TEST(BoxKey, AProfilesKeySplitsBackIntoAccountAndProfile) {
  const std::string key = box_key("alice-3f2a9c", "Build_2");
  EXPECT_EQ(key, "alice-3f2a9c~Build_2");
  EXPECT_EQ(account_of_box(key), "alice-3f2a9c");
  EXPECT_EQ(profile_of_box(key), "Build_2");
}

TEST(BoxKey, AContextsKeyNamesItsProfileAndAHashOfTheContext) {
  const std::string a = box_key("alice-3f2a9c", "chat", "chat:abc");
  const std::string b = box_key("alice-3f2a9c", "chat", "chat:abd");
  EXPECT_EQ(a, "alice-3f2a9c~chat~" + context_hash("chat:abc"));
  EXPECT_EQ(context_hash("chat:abc").size(), 16u);
  EXPECT_NE(a, b);
  EXPECT_EQ(account_of_box(a), "alice-3f2a9c");
  EXPECT_EQ(profile_of_box(a), "chat");
  // A workspace records the hash, not the id: its box's key is the same from either.
  EXPECT_EQ(box_key_of_hash("alice-3f2a9c", "chat", context_hash("chat:abc")), a);
}

TEST(BoxKey, NoAccountNameHoldsTheSeparator) {
  for (const char* id : {"~", "a~b", "~~~", "alice~build", "ÄÖÜ~"})
    EXPECT_EQ(account_name(id).find(kBoxKeySeparator), std::string::npos) << id;
}

}  // namespace
}  // namespace agentbox
