// The zygote that clones the daemon's box inits (box/zygote.hpp): what it gives an init (no
// descriptor, environment or argument of its own), what it refuses to clone, that a dead
// zygote is replaced, and that it ends with its owner. BoxTest runs every box behaviour through
// it as well.
#include "box/zygote.hpp"

#include <gtest/gtest.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "box/box.hpp"
#include "box/messages.hpp"
#include "support/box_fixture.hpp"
#include "util/file_io.hpp"

namespace agentbox {
namespace {

using namespace agentbox::testing;
namespace fs = std::filesystem;

class ZygoteTest : public ::testing::Test {
 protected:
  uid_t uid = test_uid();
  TempHome home{uid};
  BoxSpec spec = make_spec(uid, home.dir);
  std::unique_ptr<Zygote> zygote = Zygote::start(default_init_path());

  BoxStartOptions options(const std::string& tag, Zygote* z) {
    BoxStartOptions o = start_options(tag);
    o.zygote = z;
    return o;
  }
};

bool alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// What /proc/PID/fd shows, as "fd -> target" with socket and anon inode numbers dropped so two
// processes can be compared. A device is named by its numbers ("chr 1:3" is /dev/null): its
// path depends on the mount namespace it was opened in.
std::set<std::string> descriptors(pid_t pid) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    std::string target = fs::read_symlink(e.path()).string();
    if (auto bracket = target.find('['); bracket != std::string::npos) target.erase(bracket);
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0 && S_ISCHR(st.st_mode))
      target = "chr " + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
    out.insert(e.path().filename().string() + " -> " + target);
  }
  return out;
}

std::string proc_file(pid_t pid, const char* name) {
  return read_file("/proc/" + std::to_string(pid) + "/" + name, 1 << 16);
}

// An init cloned by the zygote starts out as one exec'd for its box would: the same
// descriptors (nothing of the zygote's, in particular not its request socket), nothing in its
// environment but (exec'd) PATH, and "agentbox-init" as its whole command line.
TEST_F(ZygoteTest, InitHoldsNothingOfTheZygote) {
  auto from_zygote = Box::start(spec, options("zyg-fds", zygote.get()));
  auto execd = Box::start(spec, options("exec-fds", nullptr));
  EXPECT_EQ(descriptors(from_zygote->init_pid()), descriptors(execd->init_pid()));
  // Its stdio is /dev/null, never the starter's (the daemon's log, a caller's terminal).
  const std::set<std::string> fds = descriptors(from_zygote->init_pid());
  EXPECT_TRUE(fds.contains("0 -> chr 1:3") && fds.contains("1 -> chr 1:3")) << ::testing::PrintToString(fds);
#ifndef AGENTBOX_SANITIZE  // sanitizer builds keep stderr for init's reports
  EXPECT_TRUE(fds.contains("2 -> chr 1:3")) << ::testing::PrintToString(fds);
#endif
  const fs::path zygote_socket = fs::read_symlink("/proc/" + std::to_string(zygote->pid()) + "/fd/3");
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(from_zygote->init_pid()) + "/fd"))
    EXPECT_NE(fs::read_symlink(e.path()), zygote_socket) << "init holds the zygote's request socket";
  EXPECT_EQ(proc_file(execd->init_pid(), "environ"),
            std::string("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") + '\0');
  const std::string wiped = proc_file(from_zygote->init_pid(), "environ");
  EXPECT_EQ(wiped.find_first_not_of('\0'), std::string::npos) << wiped;
  for (pid_t pid : {from_zygote->init_pid(), execd->init_pid()}) {
    const std::string cmdline = proc_file(pid, "cmdline");
    EXPECT_EQ(cmdline.substr(0, cmdline.find('\0')), "agentbox-init");
    EXPECT_EQ(cmdline.find_first_not_of('\0', cmdline.find('\0')), std::string::npos) << "argument left in " << cmdline;
  }
  // Inside: the account's uid and hostname, init as pid 1, and no process but init and sh.
  Output o = run_piped(
      *from_zygote, {"sh", "-c", "id -u; hostname; tr -d '\\0' < /proc/1/cmdline; echo; set -- /proc/[0-9]*; echo $#"});
  EXPECT_EQ(o.out, std::to_string(uid) + "\ntestbox\nagentbox-init\n2\n");
}

// The zygote clones boxes, nothing else: a request to share its memory or descriptors, or to
// make a user namespace, is refused, and it goes on serving.
TEST_F(ZygoteTest, RefusesWhatIsNotABoxsClone) {
  auto [control, control_child] = protocol::socket_pair();
  auto [events, events_child] = protocol::socket_pair();
  protocol::StartBox start;
  start.spec = spec;
  for (uint64_t bad : {uint64_t{CLONE_VM}, uint64_t{CLONE_FILES}, uint64_t{CLONE_NEWUSER}, uint64_t{CLONE_SIGHAND},
                       uint64_t{CLONE_PARENT}, uint64_t{CLONE_NEWNS | CLONE_THREAD}}) {
    try {
      zygote->clone_init(bad, -1, control_child.get(), events_child.get(), start, -1);
      ADD_FAILURE() << "cloned with flags " << std::hex << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not allowed"), std::string::npos) << e.what();
    }
  }
  const pid_t serving = zygote->pid();
  auto box = Box::start(spec, options("zyg-after-refusal", zygote.get()));
  EXPECT_EQ(zygote->pid(), serving);
  EXPECT_EQ(exit_status(run_piped(*box, {"true"}).status), 0);
}

// Messages that break the schema (not JSON, another version, an unknown type, a field of the
// wrong kind) are answered with CloneFailed and clone nothing; the zygote serves on.
TEST(ZygoteSessionTest, MalformedRequestsAreRefusedAndTheZygoteServesOn) {
  auto [ours, theirs] = protocol::socket_pair();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, theirs.get(), protocol::kInitControlFd);
  const std::string init = default_init_path();
  const char* argv[] = {"agentbox-init", "--zygote", nullptr};
  const char* envp[] = {protocol::kInitPath, nullptr};
  pid_t pid = -1;
  ASSERT_EQ(::posix_spawn(&pid, init.c_str(), &fa, nullptr, const_cast<char**>(argv), const_cast<char**>(envp)), 0);
  posix_spawn_file_actions_destroy(&fa);
  theirs.reset();

  auto [control, control_child] = protocol::socket_pair();
  auto [events, events_child] = protocol::socket_pair();
  const int fds[2] = {control_child.get(), events_child.get()};
  nlohmann::json good = protocol::encode(protocol::CloneInit{CLONE_NEWNS, {}});
  nlohmann::json other_version = good, unknown_type = good, wrong_kind = good;
  other_version["v"] = protocol::kVersion + 1;
  unknown_type["t"] = "fork";
  wrong_kind["flags"] = "all of them";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "{{{"},
      {"another version", other_version.dump()},
      {"an unknown type", unknown_type.dump()},
      {"a field of the wrong kind", wrong_kind.dump()},
  };
  for (const auto& [what, data] : cases) {
    ASSERT_TRUE(protocol::try_send(ours.get(), data, fds)) << what;
    protocol::Message reply = protocol::recv_reply(ours.get(), 5000, "zygote");
    auto answer = protocol::decode<protocol::ZygoteReply>(reply.body);
    ASSERT_TRUE(std::holds_alternative<protocol::CloneFailed>(answer)) << what << ": " << reply.body.dump();
    EXPECT_TRUE(reply.fds.empty()) << what << ": a pidfd came with a refusal";
  }
  EXPECT_EQ(::kill(pid, 0), 0) << "the zygote did not survive the malformed requests";
  ours.reset();  // it exits when its socket closes
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(ZygoteTest, AKilledZygoteIsReplacedOnTheNextStart) {
  const pid_t first = zygote->pid();
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, first, 0)));
  ASSERT_TRUE(pidfd);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  pollfd p{pidfd.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 5000), 1) << "the zygote did not die";
  auto box = Box::start(spec, options("zyg-restart", zygote.get()));
  EXPECT_NE(zygote->pid(), first);
  EXPECT_TRUE(alive(zygote->pid()));
  EXPECT_EQ(exit_status(run_piped(*box, {"true"}).status), 0);
}

// Boxes outlive nothing they should: stop() returns once init and every process of the box
// are gone and the cgroup is removed, though init is the zygote's child, not ours.
TEST_F(ZygoteTest, StopEndsTheWholeBoxAndRemovesItsGroup) {
  BoxStartOptions o = options("zyg-stop", zygote.get());
  auto box = Box::start(spec, o);
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  const int fds[3] = {devnull.get(), devnull.get(), devnull.get()};
  SpawnRequest req;
  req.argv = {"sleep", "97.5"};
  req.env = {"PATH=/usr/bin:/bin"};
  req.tty = false;
  box->spawn(req, fds);
  EXPECT_GE(box->usage().pids, 2u) << "init and sleep are not counted in the box's group";
  // The group's directories, wherever this host keeps them (v1 hierarchies or v2).
  std::vector<fs::path> dirs;
  for (const char* root : {"/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup"}) {
    const fs::path dir = fs::path(root) / "agentbox" / o.cgroup_name;
    if (fs::exists(dir)) dirs.push_back(dir);
  }
  ASSERT_FALSE(dirs.empty()) << "no directory of group " << o.cgroup_name;
  const pid_t init = box->init_pid();
  box->stop();
  EXPECT_FALSE(alive(init));
  for (const auto& e : fs::directory_iterator("/proc")) {
    if (!std::isdigit(static_cast<unsigned char>(e.path().filename().string()[0]))) continue;
    std::string cmd;
    try {
      cmd = read_file((e.path() / "cmdline").string(), 4096);
    } catch (const Error&) {  // exited meanwhile
    }
    EXPECT_NE(cmd, std::string("sleep\0"
                               "97.5\0",
                               11))
        << "the box's sleep survived stop()";
  }
  for (const auto& dir : dirs) EXPECT_FALSE(fs::exists(dir)) << dir << " left behind";
}

// The zygote's boxes share one /etc template: each box sees its own passwd over it, and a box
// started after a change of the host's /etc sees the change, while one started before keeps
// the /etc it started with. /etc/papersize (allowlisted, harmless) is the host file changed.
TEST_F(ZygoteTest, EtcIsSharedYetFollowsTheHostsChanges) {
  const fs::path host = "/etc/papersize";
  std::optional<std::string> saved;
  if (fs::exists(host)) saved = read_file(host);
  struct Restore {
    const fs::path& path;
    const std::optional<std::string>& content;
    ~Restore() {
      if (content) {
        std::ofstream(path) << *content;
      } else {
        fs::remove(path);
      }
    }
  } restore{host, saved};
  const std::string marker = "a4-" + std::to_string(::getpid()) + "\n";

  auto before = Box::start(spec, options("zyg-etc-1", zygote.get()));
  // The template's way: the box's own files are bound over it (a copied /etc has no such mount).
  Output mounts = run_piped(*before, {"sh", "-c", "grep -c ' /etc/passwd ' /proc/self/mounts; cat /etc/hostname"});
  EXPECT_EQ(mounts.out, "1\ntestbox\n");
  std::ofstream(host) << marker;
  auto after = Box::start(spec, options("zyg-etc-2", zygote.get()));
  EXPECT_EQ(run_piped(*after, {"cat", "/etc/papersize"}).out, marker);
  EXPECT_NE(run_piped(*before, {"cat", "/etc/papersize"}).out, marker);
  Output own = run_piped(*after, {"sh", "-c", "getent passwd tester | cut -d: -f3; touch /etc/papersize 2>&1"});
  EXPECT_NE(own.out.find(std::to_string(uid) + "\n"), std::string::npos) << own.out;
  EXPECT_NE(own.out.find("Read-only file system"), std::string::npos) << own.out;
}

TEST_F(ZygoteTest, TheZygoteEndsWithItsOwner) {
  const pid_t pid = zygote->pid();
  auto box = Box::start(spec, options("zyg-owner", zygote.get()));
  const pid_t init = box->init_pid();
  zygote.reset();
  EXPECT_FALSE(alive(pid));
  // A box it made is the daemon's, not the zygote's: it keeps running.
  EXPECT_TRUE(alive(init));
  EXPECT_EQ(exit_status(run_piped(*box, {"true"}).status), 0);
}

}  // namespace
}  // namespace agentbox
