// UserKeys: a minted key names its user; a key with one character changed, another key's id, a
// removed key, or a token of another shape names no one. Keys are unguessable and distinct.
#include "http/user_keys.hpp"

#include <gtest/gtest.h>

#include <set>

namespace agentbox::http {
namespace {

TEST(UserKeys, AMintedKeyNamesItsUserUntilRemoved) {
  UserKeys keys;
  const UserKeys::Minted alice = UserKeys::mint();
  const UserKeys::Minted bob = UserKeys::mint();
  keys.add(alice.id, "alice", alice.digest);
  keys.add(bob.id, "bob", bob.digest);
  EXPECT_EQ(keys.user_of(alice.key), "alice");
  EXPECT_EQ(keys.user_of(bob.key), "bob");
  EXPECT_TRUE(UserKeys::looks_like(alice.key));
  EXPECT_EQ(alice.key.size(), 4u + 16 + 1 + 64);
  EXPECT_TRUE(alice.key.starts_with("abk_" + alice.id + "_"));

  EXPECT_TRUE(keys.remove(alice.id));
  EXPECT_FALSE(keys.remove(alice.id));
  EXPECT_EQ(keys.user_of(alice.key), std::nullopt);  // revoked: at once
  EXPECT_EQ(keys.user_of(bob.key), "bob");
  EXPECT_EQ(keys.size(), 1u);
}

TEST(UserKeys, AnythingButTheWholeKeyNamesNoOne) {
  UserKeys keys;
  const UserKeys::Minted alice = UserKeys::mint();
  keys.add(alice.id, "alice", alice.digest);
  std::string changed = alice.key;
  changed.back() = changed.back() == '0' ? '1' : '0';
  // bob's secret under alice's id: the id finds alice's entry, the digest refuses it.
  const UserKeys::Minted other = UserKeys::mint();
  const std::string spliced = "abk_" + alice.id + other.key.substr(4 + 16);
  for (const std::string& bad :
       {changed, spliced, alice.key.substr(0, alice.key.size() - 1), alice.key + "0", std::string("abk_"),
        "abk_" + alice.id, "abk_" + alice.id + "_", alice.id, std::string(), std::string("Bearer ") + alice.key})
    EXPECT_EQ(keys.user_of(bad), std::nullopt) << bad;
}

TEST(UserKeys, DigestsRoundTripThroughHexAndKeysAreDistinct) {
  const UserKeys::Minted m = UserKeys::mint();
  EXPECT_EQ(UserKeys::digest_from_hex(UserKeys::hex_of(m.digest)), m.digest);
  EXPECT_EQ(UserKeys::digest_of(m.key), m.digest);
  EXPECT_EQ(UserKeys::digest_from_hex("zz"), std::nullopt);
  EXPECT_EQ(UserKeys::digest_from_hex(std::string(64, 'g')), std::nullopt);
  std::set<std::string> ids, all;
  for (int i = 0; i < 200; ++i) {
    const UserKeys::Minted k = UserKeys::mint();
    ids.insert(k.id);
    all.insert(k.key);
  }
  EXPECT_EQ(ids.size(), 200u);
  EXPECT_EQ(all.size(), 200u);
}

}  // namespace
}  // namespace agentbox::http
