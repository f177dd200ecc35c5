// The /etc snapshots `agentbox run`'s boxes share (box/etc_snapshots.hpp), from a host /etc of
// the test's own: made once and cloned, equal to a tree made for one box alone, made again
// when an input changes, an old one removed only when no box holds it, one snapshot for
// starts that race, and refused in a directory others may write. Root: open_tree needs it.
#include "box/etc_snapshots.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "box/contain/mounts.hpp"
#include "util/error.hpp"
#include "util/file_io.hpp"

namespace agentbox {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char t[] = "/tmp/abx-etcsnap-XXXXXX";
    path = ::mkdtemp(t);
    ::chmod(path.c_str(), 0755);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A host /etc with one of each kind the allowlist takes, and a secret it does not.
void make_host_etc(const fs::path& etc) {
  fs::create_directories(etc / "ld.so.conf.d");
  fs::create_directories(etc / "ssl/certs");
  fs::create_directories(etc / "ssl/private");
  std::ofstream(etc / "nsswitch.conf") << "passwd: files\n";
  std::ofstream(etc / "services") << "http 80/tcp\n";
  std::ofstream(etc / "ld.so.conf.d/x.conf") << "/opt/x\n";
  std::ofstream(etc / "ssl/openssl.cnf") << "[openssl]\n";
  std::ofstream(etc / "ssl/private/key.pem") << "secret\n";
  std::ofstream(etc / "shadow") << "root:secret\n";
  fs::create_symlink("/proc/self/mounts", etc / "mtab");
}

BoxSpec spec_named(const std::string& name) {
  BoxSpec s;
  s.name = name;
  s.hostname = "snapbox";
  s.uid = s.gid = 3999000;
  s.home_target = "/home/" + name;
  return s;
}

// Every entry under dir: relative path → kind and content (a link's target).
std::map<std::string, std::string> listing(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = e.path().lexically_relative(dir).string();
    if (e.is_symlink()) {
      out[rel] = "link " + fs::read_symlink(e.path()).string();
    } else if (e.is_directory()) {
      out[rel] = "dir";
    } else {
      struct stat st {};
      ::stat(e.path().c_str(), &st);
      out[rel] = "file " + std::to_string(st.st_mode & 07777) + " " + read_file(e.path(), 1 << 20);
    }
  }
  return out;
}

std::vector<std::string> snapshots(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

class EtcSnapshots : public ::testing::Test {
 protected:
  TempDir scratch;
  fs::path host = scratch.path / "host-etc";
  fs::path dir = scratch.path / "snapshots";
  void SetUp() override { make_host_etc(host); }
  mounts::EtcTree take(const BoxSpec& spec) { return shared_etc_tree(spec, dir, host); }
};

TEST_F(EtcSnapshots, MadeOnceAndClonedReadOnly) {
  const BoxSpec spec = spec_named("alice");
  const mode_t umask_was = ::umask(0002);  // a group-writable snapshot directory would be refused
  mounts::EtcTree a = take(spec);
  ::umask(umask_was);
  struct stat made {};
  ASSERT_EQ(::stat(dir.c_str(), &made), 0);
  EXPECT_EQ(made.st_mode & 07777, 0755u);
  mounts::EtcTree b = take(spec);
  ASSERT_TRUE(a.fd && b.fd && a.hold && b.hold);
  EXPECT_EQ(snapshots(dir).size(), 1u);
  EXPECT_EQ(a.dirs, (std::vector<std::string>{"ld.so.conf.d", "ssl/certs"}));
  EXPECT_EQ(a.dirs, b.dirs);
  struct stat st {};
  ASSERT_EQ(::fstat(a.hold.get(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  // The clone is a read-only mount: nothing can be created through it.
  EXPECT_LT(::mkdirat(a.fd.get(), "new", 0755), 0);
  EXPECT_EQ(errno, EROFS);
}

TEST_F(EtcSnapshots, HoldWhatATreeOfTheBoxsOwnHolds) {
  const BoxSpec spec = spec_named("alice");
  mounts::EtcTree tree = take(spec);
  const fs::path own = scratch.path / "own";
  fs::create_directory(own);
  UniqueFd host_fd(::open(host.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  UniqueFd own_fd(::open(own.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  EXPECT_EQ(mounts::fill_etc_dir(host_fd.get(), own_fd.get(), spec), tree.dirs);
  const auto shared = listing(dir / snapshots(dir).at(0));
  EXPECT_EQ(shared, listing(own));
  EXPECT_EQ(shared.count("shadow"), 0u);
  EXPECT_EQ(shared.count("ssl/private"), 0u);
  EXPECT_NE(shared.at("passwd").find("alice:x:3999000:3999000:alice:/home/alice:"), std::string::npos);
  EXPECT_EQ(shared.at("mtab"), "link /proc/self/mounts");
  EXPECT_EQ(shared.at("ld.so.conf.d"), "dir");  // empty: its content is bound at the start
}

TEST_F(EtcSnapshots, AChangedInputMakesANewOneAndTheOldGoesOnceNoBoxHoldsIt) {
  const BoxSpec spec = spec_named("alice");
  mounts::EtcTree first = take(spec);
  const std::string first_key = snapshots(dir).at(0);

  std::ofstream(host / "services", std::ios::app) << "https 443/tcp\n";
  mounts::EtcTree second = take(spec);
  auto names = snapshots(dir);
  ASSERT_EQ(names.size(), 2u) << "the first is held by a box: it stays";
  const std::string second_key = names[0] == first_key ? names[1] : names[0];
  EXPECT_NE(read_file(dir / second_key / "services", 4096).find("https"), std::string::npos);
  EXPECT_EQ(read_file(dir / first_key / "services", 4096), "http 80/tcp\n");

  first = {};                          // that box is gone
  fs::remove(host / "nsswitch.conf");  // an entry gone is a change too
  mounts::EtcTree third = take(spec);
  names = snapshots(dir);
  ASSERT_EQ(names.size(), 2u);
  EXPECT_TRUE(std::find(names.begin(), names.end(), first_key) == names.end()) << "unheld: removed";
  EXPECT_TRUE(std::find(names.begin(), names.end(), second_key) != names.end()) << "still held";
  EXPECT_FALSE(fs::exists(dir / names[0] / "nsswitch.conf") && fs::exists(dir / names[1] / "nsswitch.conf"));

  // Another box user (its own passwd) is another input as well.
  mounts::EtcTree bob = take(spec_named("bob"));
  EXPECT_EQ(snapshots(dir).size(), 3u);
}

TEST_F(EtcSnapshots, StartsThatRaceShareOneSnapshot) {
  const BoxSpec spec = spec_named("alice");
  constexpr int kStarts = 8;
  std::vector<mounts::EtcTree> trees(kStarts);
  std::vector<std::string> errors(kStarts);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStarts; ++i)
    threads.emplace_back([&, i] {
      try {
        trees[i] = take(spec);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStarts; ++i) {
    EXPECT_EQ(errors[i], "");
    EXPECT_TRUE(trees[i].fd);
  }
  EXPECT_EQ(snapshots(dir).size(), 1u) << "one snapshot, no half-made ones left";
}

TEST_F(EtcSnapshots, ADirectoryOthersMayWriteIsRefused) {
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 0777);
  try {
    take(spec_named("alice"));
    FAIL() << "a snapshot directory anyone may write was used";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("writable by others"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(snapshots(dir).empty());
}

}  // namespace
}  // namespace agentbox
