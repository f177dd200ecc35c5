// Accounts: collision-free names from any external id, uids from the range, and one account
// per id however many threads ask at once.
#include "store/account_store.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "store/account_name.hpp"
#include "store/schema.hpp"
#include "support/scratch_dir.hpp"

namespace agentbox {
namespace {

using ::testing::HasSubstr;

// What `useradd` accepts and what is safe in paths and /etc/passwd inside a box.
// ([a-z][a-z0-9_-]*, at most 32; std::regex trips a GCC 12 -O2 false warning, hence a loop.)
bool is_valid_user_name(const std::string& name) {
  if (name.empty() || name.size() > 32 || name[0] < 'a' || name[0] > 'z') return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

const std::vector<std::string>& awkward_ids() {
  static const std::vector<std::string> ids = {
      "3fa85f64-5717-4562-b3fc-2c963f66afa6",
      "alice@example.com",
      "Alice@Example.com",
      "",
      "../../etc",
      "ÄÖÜ",
      std::string(10000, 'x'),
      std::string(10000, 'x') + "y",
      "root",
      "-rf",
      "a b\tc\nd",
      std::string("nul\0byte", 8),
      "1234567890",
      "UPPER_case-Mixed.123",
  };
  return ids;
}

TEST(AccountName, PrefixesAreReadableAndSafe) {
  EXPECT_EQ(account_name_prefix("alice@example.com"), "aliceexample");
  EXPECT_EQ(account_name_prefix("3fa85f64-5717-4562-b3fc-2c963f66afa6"), "fa85f64-5717");
  EXPECT_EQ(account_name_prefix("../../etc"), "etc");
  EXPECT_EQ(account_name_prefix("ÄÖÜ"), "u");
  EXPECT_EQ(account_name_prefix(""), "u");
  EXPECT_EQ(account_name_prefix("1234"), "u");
  EXPECT_EQ(account_name_prefix("Bob_"), "bob");
  EXPECT_EQ(account_name_prefix("a-very-long-user-name"), "a-very-long");  // 12 chars, trailing '-' dropped
}

TEST(AccountName, NameIsPrefixDashAndSixHexOfSha256) {
  // sha256("alice@example.com") = ff8d9819fc0e12bf0d24892e45987e249a28dce836a85cad60e28eaaa8c6d976
  EXPECT_EQ(account_name("alice@example.com"), "aliceexample-ff8d98");
  EXPECT_EQ(account_name("alice@example.com", 10), "aliceexample-ff8d9819fc");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(AccountName, AwkwardIdsGiveValidDistinctNames) {
  std::set<std::string> names;
  for (const std::string& id : awkward_ids()) {
    std::string name = account_name(id);
    EXPECT_TRUE(is_valid_user_name(name)) << name;
    EXPECT_TRUE(is_valid_user_name(account_name(id, kAccountNameHashMax))) << id.size();
    names.insert(name);
  }
  EXPECT_EQ(names.size(), awkward_ids().size());
}

class AccountStoreTest : public ::testing::Test {
 protected:
  testing::ScratchDir scratch_{"agentbox-accounts"};
  const std::string dir_ = scratch_.path();
};

TEST_F(AccountStoreTest, FirstSightCreatesThenTheSameAccountComesBack) {
  AccountStore accounts(open_state_db(dir_), UidRange{2000000, 100});
  Account a = accounts.get_or_create("alice@example.com");
  EXPECT_EQ(a.external_id, "alice@example.com");
  EXPECT_EQ(a.name, "aliceexample-ff8d98");
  EXPECT_EQ(a.uid, 2000001u);  // slot 0 is agentbox run's
  EXPECT_EQ(a.gid, a.uid);
  EXPECT_EQ(a.home_dir, "volumes/aliceexample-ff8d98/home");
  EXPECT_GT(a.created, 0);
  EXPECT_EQ(a.last_seen, a.created);

  Account b = accounts.get_or_create("bob");
  EXPECT_EQ(b.uid, 2000002u);

  Account again = accounts.get_or_create("alice@example.com");
  EXPECT_EQ(again.name, a.name);
  EXPECT_EQ(again.uid, a.uid);
  EXPECT_EQ(accounts.list().size(), 2u);
  EXPECT_EQ(accounts.count(), 2u);
  ASSERT_TRUE(accounts.remove(b.name, 1));
  EXPECT_EQ(accounts.count(), 1u);  // a deleted account is no longer counted
}

TEST_F(AccountStoreTest, AccountsSurviveReopening) {
  Account a;
  {
    AccountStore accounts(open_state_db(dir_), UidRange{});
    a = accounts.get_or_create("3fa85f64-5717-4562-b3fc-2c963f66afa6");
  }
  AccountStore reopened(open_state_db(dir_), UidRange{});
  std::optional<Account> found = reopened.find("3fa85f64-5717-4562-b3fc-2c963f66afa6");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->name, a.name);
  EXPECT_EQ(found->uid, a.uid);
  EXPECT_EQ(reopened.find_by_name(a.name)->external_id, a.external_id);
  EXPECT_FALSE(reopened.find("someone else"));
}

TEST_F(AccountStoreTest, AwkwardIdsGetDistinctValidAccounts) {
  AccountStore accounts(open_state_db(dir_), UidRange{});
  std::set<std::string> names;
  std::set<uid_t> uids;
  for (const std::string& id : awkward_ids()) {
    Account a = accounts.get_or_create(id);
    EXPECT_EQ(a.external_id, id) << "ids are stored exactly, NUL bytes included";
    EXPECT_TRUE(is_valid_user_name(a.name)) << a.name;
    names.insert(a.name);
    uids.insert(a.uid);
  }
  EXPECT_EQ(names.size(), awkward_ids().size());
  EXPECT_EQ(uids.size(), awkward_ids().size());
}

TEST_F(AccountStoreTest, NameTakenByAnotherIdGetsALongerHash) {
  AccountStore accounts(open_state_db(dir_), UidRange{});
  // Simulate a 6-digit hash collision: another id already holds alice's usual name.
  {
    Db db = open_state_db(dir_);
    Statement st = db.prepare("INSERT INTO accounts VALUES ('intruder', ?1, 1000500, 1, 1)");
    st.bind(1, account_name("alice"));
    st.step();
  }
  Account a = accounts.get_or_create("alice");
  EXPECT_EQ(a.name, account_name("alice", kAccountNameHashChars + 1));
  EXPECT_EQ(accounts.find_by_name(account_name("alice"))->external_id, "intruder");
}

TEST(AccountName, OnlyTheIdsOwnNamesAreItsNames) {
  EXPECT_TRUE(is_account_name_of("alice@example.org", account_name("alice@example.org")));
  EXPECT_TRUE(is_account_name_of("alice@example.org", account_name("alice@example.org", kAccountNameHashMax)));
  EXPECT_FALSE(is_account_name_of("bob", account_name("alice@example.org")));
  EXPECT_FALSE(is_account_name_of("alice@example.org", "alice"));      // no hash
  EXPECT_FALSE(is_account_name_of("alice@example.org", "alice-3f2"));  // too short a hash
  EXPECT_FALSE(is_account_name_of("alice@example.org", "root"));
  EXPECT_FALSE(is_account_name_of("alice@example.org", ""));
  EXPECT_FALSE(is_account_name_of("alice@example.org", account_name("alice@example.org") + "/../x"));
}

// A restore (moves/restore_all.hpp) gets the name the account had when it is free, never a
// name that is another's now or was a deleted account's, nor one the id could not have had.
TEST_F(AccountStoreTest, ARestoredAccountGetsItsOldNameWhenFree) {
  AccountStore accounts(open_state_db(dir_), UidRange{});
  const std::string longer = account_name("alice", kAccountNameHashChars + 2);
  Account a = accounts.get_or_create_named("alice", longer);
  EXPECT_EQ(a.name, longer);
  EXPECT_EQ(accounts.get_or_create_named("alice", "whatever").name, longer) << "held: the same account";

  EXPECT_EQ(accounts.get_or_create_named("bob", "root").name, account_name("bob")) << "not a name of bob's";
  EXPECT_EQ(accounts.get_or_create_named("carol", account_name("bob")).name, account_name("carol"));

  Account dave = accounts.get_or_create("dave");
  EXPECT_FALSE(accounts.was_deleted(dave.name));
  ASSERT_TRUE(accounts.remove(dave.name, 5));
  EXPECT_TRUE(accounts.was_deleted(dave.name));
  Account again = accounts.get_or_create_named("dave", dave.name);
  EXPECT_NE(again.name, dave.name) << "a deleted account's name is never given again";
  EXPECT_NE(again.uid, dave.uid);
}

TEST_F(AccountStoreTest, ExhaustedUidRangeFailsClearly) {
  AccountStore accounts(open_state_db(dir_), UidRange{3000000, 4});  // slots 1..3
  for (int i = 0; i < 3; ++i) accounts.get_or_create("user" + std::to_string(i));
  try {
    accounts.get_or_create("one too many");
    FAIL() << "no error";
  } catch (const AccountsFull& e) {
    EXPECT_EQ(e.limit(), AccountsFull::Limit::uid_range);
    EXPECT_THAT(e.what(), HasSubstr("uid range 3000001-3000003 is exhausted"));
    EXPECT_THAT(e.what(), HasSubstr("[accounts] uid_count"));
  }
  EXPECT_FALSE(accounts.find("one too many")) << "a failed creation leaves nothing behind";
  EXPECT_EQ(accounts.get_or_create("user1").uid, 3000002u) << "existing accounts still work";
  EXPECT_THROW(AccountStore(open_state_db(dir_), UidRange{3000000, 1}), Error);
}

TEST_F(AccountStoreTest, MaxAccountsCapsCreationsNotKnownUsers) {
  AccountStore accounts(open_state_db(dir_), UidRange{3000000, 100});
  accounts.limit_accounts(2);
  EXPECT_FALSE(accounts.full());
  accounts.get_or_create("a");
  Account b = accounts.get_or_create("b");
  ASSERT_TRUE(accounts.full());
  EXPECT_EQ(accounts.full()->limit(), AccountsFull::Limit::max_accounts);
  try {
    accounts.get_or_create("c");
    FAIL() << "no error";
  } catch (const AccountsFull& e) {
    EXPECT_EQ(e.limit(), AccountsFull::Limit::max_accounts);
    EXPECT_THAT(e.what(), HasSubstr("max_accounts = 2"));
  }
  EXPECT_FALSE(accounts.find("c"));
  EXPECT_EQ(accounts.get_or_create("b").uid, b.uid) << "a known user is never refused";
  ASSERT_TRUE(accounts.remove(b.name, 5));
  EXPECT_FALSE(accounts.full()) << "a deleted account makes room under the cap";
}

TEST_F(AccountStoreTest, TouchRecordsActivity) {
  AccountStore accounts(open_state_db(dir_), UidRange{});
  Account a = accounts.get_or_create("alice");
  EXPECT_TRUE(accounts.touch(a.name, a.created + 100));
  EXPECT_EQ(accounts.find("alice")->last_seen, a.created + 100);
  EXPECT_FALSE(accounts.touch("nobody-000000", 1));
}

TEST_F(AccountStoreTest, ADeletedAccountsNameAndUidAreNeverGivenAgain) {
  AccountStore accounts(open_state_db(dir_), UidRange{2000000, 100});
  Account alice = accounts.get_or_create("alice");
  Account bob = accounts.get_or_create("bob");
  {
    Db db = open_state_db(dir_);
    db.exec(
        "INSERT INTO processes (id, account, command, status, exit_code, started, ended, log_path) VALUES ('p1', '" +
        bob.name + "', 'sleep', 'done', 0, 1, 2, 'x')");
    db.exec("INSERT INTO chat_sessions VALUES ('" + bob.name + "', 'chat', 'claude', 1)");
    db.exec(
        "INSERT INTO processes (id, account, command, status, exit_code, started, ended, log_path) VALUES ('p2', '" +
        alice.name + "', 'sleep', 'done', 0, 1, 2, 'x')");
  }
  std::optional<Account> removed = accounts.remove(bob.name, 1234);
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->external_id, "bob");
  EXPECT_FALSE(accounts.find("bob"));
  EXPECT_FALSE(accounts.remove(bob.name, 1235)) << "already gone";
  {
    Db db = open_state_db(dir_);
    EXPECT_EQ(db.query_int64("SELECT COUNT(*) FROM processes WHERE account = '" + bob.name + "'"), 0);
    EXPECT_EQ(db.query_int64("SELECT COUNT(*) FROM chat_sessions"), 0);
    EXPECT_EQ(db.query_int64("SELECT COUNT(*) FROM processes"), 1) << "other accounts' records stay";
    EXPECT_EQ(db.query_int64("SELECT deleted FROM deleted_accounts WHERE uid = " + std::to_string(bob.uid)), 1234);
  }

  // bob comes back: a new account, with neither the old name nor the old uid (the highest).
  Account again = accounts.get_or_create("bob");
  EXPECT_NE(again.name, bob.name);
  EXPECT_EQ(again.name, account_name("bob", kAccountNameHashChars + 1));
  EXPECT_EQ(again.uid, bob.uid + 1);
  EXPECT_EQ(accounts.get_or_create("carol").uid, bob.uid + 2);
  EXPECT_EQ(accounts.find("alice")->uid, alice.uid);
}

// 8 threads x 100 calls over 20 overlapping ids. Run twice: all threads sharing one store
// (its lock), and each thread with its own connection (SQLite's write lock and UNIQUE).
void hammer(const std::function<AccountStore&(int thread)>& store_for, AccountStore& check) {
  constexpr int kThreads = 8, kCalls = 100, kIds = 20;
  std::vector<std::map<std::string, std::pair<std::string, uid_t>>> seen(kThreads);
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < kCalls; ++i) {
          std::string id = "user-" + std::to_string((i * 7 + t) % kIds);
          Account a = store_for(t).get_or_create(id);
          auto [it, fresh] = seen[t].emplace(id, std::pair(a.name, a.uid));
          if (!fresh && it->second != std::pair(a.name, a.uid)) failures[t] = "account changed for " + id;
        }
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");

  std::vector<Account> all = check.list();
  ASSERT_EQ(all.size(), static_cast<size_t>(kIds));
  std::set<uid_t> uids;
  std::set<std::string> names;
  for (const Account& a : all) {
    uids.insert(a.uid);
    names.insert(a.name);
    for (const auto& per_thread : seen) {
      auto it = per_thread.find(a.external_id);
      if (it != per_thread.end()) {
        EXPECT_EQ(it->second, std::pair(a.name, a.uid)) << a.external_id;
      }
    }
  }
  EXPECT_EQ(uids.size(), static_cast<size_t>(kIds));
  EXPECT_EQ(names.size(), static_cast<size_t>(kIds));
  // Dense allocation: the 20 accounts hold slots 1..20.
  EXPECT_EQ(*uids.begin(), UidRange{}.base + 1);
  EXPECT_EQ(*uids.rbegin(), UidRange{}.base + kIds);
}

TEST_F(AccountStoreTest, ConcurrentCallersOnOneStoreAgree) {
  AccountStore shared(open_state_db(dir_), UidRange{});
  hammer([&](int) -> AccountStore& { return shared; }, shared);
}

TEST_F(AccountStoreTest, ConcurrentConnectionsAgree) {
  std::vector<std::unique_ptr<AccountStore>> stores;
  for (int t = 0; t < 8; ++t) stores.push_back(std::make_unique<AccountStore>(open_state_db(dir_), UidRange{}));
  AccountStore check(open_state_db(dir_), UidRange{});
  hammer([&](int t) -> AccountStore& { return *stores[static_cast<size_t>(t)]; }, check);
}

}  // namespace
}  // namespace agentbox
