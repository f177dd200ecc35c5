// Red team, files: a box sees its own home and nothing of another box's, cannot write the
// system tree, and Landlock refuses writes even where the mount and file ownership would allow
// them. Each attack runs abx-probe inside `agentbox run`; each has a control that is ALLOWED.
#include <sys/stat.h>

#include <sstream>

#include "redteam/probe_runner.hpp"

namespace agentbox::redteam {
namespace {

// Box B keeps a secret in its home; box A looks for it by every name it could have.
TEST(RedteamFs, AnotherBoxsHomeIsInvisible) {
  BoxHome home_a, home_b;
  const std::string secret_in_b = std::string(kBoxHome) + "/secret";
  const std::string secret_on_host = home_b.path + "/secret";

  // Control: B writes and reads its own file, which lands in B's host directory.
  ASSERT_TRUE(Allowed(home_b.box().probe({"write-file", secret_in_b})));
  ASSERT_TRUE(Allowed(home_b.box().probe({"read-file", secret_in_b})));
  struct stat st {};
  ASSERT_EQ(::stat(secret_on_host.c_str(), &st), 0) << secret_on_host;
  EXPECT_EQ(st.st_uid, kBoxUid);  // same uid as box A's: only isolation keeps A out, not DAC
  // ... and root outside reads it (the file really is there to be stolen).
  ASSERT_TRUE(Allowed(probe_outside({"read-file", secret_on_host})));

  // Attack: A by B's host path, by the in-box path (its own, empty home), and by listing.
  BoxRun a = home_a.box();
  EXPECT_TRUE(Blocked(a.probe({"read-file", secret_on_host}), "ENOENT"));
  EXPECT_TRUE(Blocked(a.probe({"list-dir", home_b.path}), "ENOENT"));
  EXPECT_TRUE(Blocked(a.probe({"read-file", secret_in_b}), "ENOENT"));
}

// What follows "--" is the command's, never agentbox's: a command whose arguments someone
// else chose (an agent's, a script's) must not be able to widen its own box. Here box A's
// command carries "--bind /:/srv/host" and uses it to read box B's secret through the host's
// root (both boxes run as the same uid, so only the box boundary protects B). The "--env" before
// "--" matters: agentbox takes "--" as the end of that option's values, then parses the rest.
TEST(RedteamFs, CommandArgumentsCannotAddBindsOfTheHost) {
  BoxHome home_a, home_b;
  ASSERT_TRUE(Allowed(home_b.box().probe({"write-file", std::string(kBoxHome) + "/secret"})));
  // B's home in a world-traversable parent, as homes under /home are.
  ASSERT_EQ(::chmod(home_b.dir.path().c_str(), 0755), 0);

  const Argv attack = {agentbox_path(),
                       "run",
                       "--no-profile",
                       "--home",
                       home_a.path,
                       "--ro-bind",
                       probe_dir() + ":/probe",
                       "--env",
                       "A=b",
                       "--",
                       kProbeInBox,
                       "read-file",
                       "/srv/host" + home_b.path + "/secret",
                       "--bind",
                       "/:/srv/host"};
  const ProbeResult r = to_probe_result(run(attack), "inside a box whose command carries --bind");
  EXPECT_FALSE(Allowed(r)) << "an argument after -- became a bind of the host's root: " << r.run.describe();
  // What the command must get instead: its arguments verbatim (the probe rejects the extras).
  EXPECT_TRUE(r.line.starts_with("ERROR: usage: abx-probe read-file")) << r.run.describe();

  // The same, shown with echo: every argument after "--" reaches the command unchanged.
  const RunResult echo = run({agentbox_path(), "run", "--no-profile", "--home", home_a.path, "--env", "A=b", "--",
                              "/bin/echo", "-c", "--bind", "/:/srv/host"});
  EXPECT_EQ(echo.exit_code, 0) << echo.describe();
  EXPECT_EQ(echo.out, "-c --bind /:/srv/host\n") << echo.describe();
}

// The box's /etc is filtered: no shadow file at all.
TEST(RedteamFs, HostShadowFileIsNotInTheBox) {
  BoxHome home;
  EXPECT_TRUE(Blocked(home.box().probe({"read-file", "/etc/shadow"}), "ENOENT"));
  EXPECT_TRUE(Allowed(probe_outside({"read-file", "/etc/shadow"})));
}

// The system tree and the root are read-only; home, /tmp and /dev/shm are the box's to write.
TEST(RedteamFs, SystemTreeIsReadOnlyWhileHomeTmpAndShmAreWritable) {
  BoxHome home;
  BoxRun box = home.box();
  for (const char* path : {"/usr/abx-rt-x", "/usr/bin/abx-rt-x", "/etc/abx-rt-x", "/etc/passwd", "/abx-rt-x",
                           "/bin/abx-rt-x", "/lib/abx-rt-x", "/probe/abx-rt-x"}) {
    SCOPED_TRACE(path);
    EXPECT_TRUE(BlockedWithAnyOf(box.probe({"write-file", path}), {"EROFS", "EACCES"}));
  }
  EXPECT_FALSE(std::filesystem::exists("/usr/abx-rt-x"));
  EXPECT_FALSE(std::filesystem::exists(probe_dir() + "/abx-rt-x"));

  for (const std::string& path :
       {std::string(kBoxHome) + "/file", std::string("/tmp/file"), std::string("/dev/shm/file")}) {
    SCOPED_TRACE(path);
    EXPECT_TRUE(Allowed(box.probe({"write-file", path})));
  }
  EXPECT_TRUE(std::filesystem::exists(home.path + "/file"));
}

// /tmp, /dev/shm and the directory the /proc masks show are three directories of one tmpfs (a box
// makes one writable superblock, not six): a file made in one shows in neither other, nor in a
// mask, which stays read-only; /dev (a directory of the read-only root) takes no new entry, and
// `..` of /tmp is the box's root, not the tmpfs holding its siblings. Controls: each write lands
// where it was made, and reads back.
TEST(RedteamFs, TmpShmAndTheProcMasksShareATmpfsButNothingElse) {
  BoxHome home;
  const RunResult r = home.box().command(
      {"/bin/sh", "-c",
       "echo t > /tmp/abx-t && echo s > /dev/shm/abx-s && cat /tmp/abx-t /dev/shm/abx-s && "
       "for d in /tmp /dev/shm /proc/bus /proc/irq; do echo \"$d: $(ls -A $d)\"; done; ls -A /tmp/.. | tr '\\n' ' '; "
       "echo; for p in /proc/bus/abx-m /proc/irq/abx-m /dev/abx-d /abx-r; do touch $p 2>/dev/null && echo WROTE $p; "
       "done; "
       "ls /tmp/../shm /tmp/../empty 2>&1 | head -2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(r.out.starts_with("t\ns\n")) << r.out;  // controls: both writes read back
  EXPECT_NE(r.out.find("/tmp: abx-t\n/dev/shm: abx-s\n/proc/bus: \n/proc/irq: \n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("WROTE"), std::string::npos) << r.out;
  // The root's entries (no tmp/shm/empty siblings), and no such directories under it.
  EXPECT_NE(r.out.find(" usr "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/tmp/../shm': No such file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/tmp/../empty': No such file"), std::string::npos) << r.out;
}

// --bind gives write access exactly where asked; --ro-bind does not.
TEST(RedteamFs, BindsAreWritableOnlyWhenAskedFor) {
  BoxHome home;
  TempDir rw("rw"), ro("ro");
  ::chmod(rw.path().c_str(), 0777);  // the box uid may write there as far as DAC goes
  ::chmod(ro.path().c_str(), 0777);
  BoxRun box = home.box();
  box.bind(rw.path(), "/srv/rw").ro_bind(ro.path(), "/srv/ro");

  EXPECT_TRUE(Allowed(box.probe({"write-file", "/srv/rw/made-inside"})));
  EXPECT_TRUE(std::filesystem::exists(rw / "made-inside"));
  EXPECT_TRUE(BlockedWithAnyOf(box.probe({"write-file", "/srv/ro/made-inside"}), {"EROFS", "EACCES"}));
  EXPECT_FALSE(std::filesystem::exists(ro / "made-inside"));
  // The mount point's parent is on the read-only root: no files next to the binds either.
  EXPECT_TRUE(BlockedWithAnyOf(box.probe({"write-file", "/srv/next-to-binds"}), {"EROFS", "EACCES"}));
}

// The one place in a box where the mount is writable and the file belongs to the writer, yet
// Landlock says no: /proc is mounted read-write (the kernel needs no more), and
// /proc/self/comm is writable by its owner. Landlock grants /proc read-only, so writing it
// answers EACCES — Landlock's errno, not EROFS (mount) and not DAC (owner has w).
TEST(RedteamFs, LandlockRefusesWritesWhereMountAndOwnerAllowThem) {
  BoxHome home;
  BoxRun box = home.box();
  // Evidence that the mount is writable: /proc is "rw" in the box's own mount table.
  const RunResult mounts = box.command({"/bin/cat", "/proc/self/mounts"});
  ASSERT_EQ(mounts.exit_code, 0) << mounts.describe();
  std::istringstream lines(mounts.out);
  std::string line, proc_options;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string source, target, type, options;
    fields >> source >> target >> type >> options;
    if (target == "/proc" && type == "proc") proc_options = options;
  }
  ASSERT_FALSE(proc_options.empty()) << mounts.out;
  EXPECT_TRUE(proc_options == "rw" || proc_options.starts_with("rw,")) << proc_options;

  // Attack: inside, the box user writes its own comm.
  EXPECT_TRUE(Blocked(box.probe({"write-file", "/proc/self/comm"}), "EACCES"));
  // Control: any unprivileged user may do this outside a box (DAC allows the owner).
  EXPECT_TRUE(Allowed(probe_outside({"write-file", "/proc/self/comm"}, {.uid = kNobody})));
  // Reading /proc stays allowed inside (the rule is read-only, not absent).
  EXPECT_TRUE(Allowed(box.probe({"read-file", "/proc/self/comm"})));

  // Host tunables: root-owned, so DAC refuses too; listed to show /proc/sys is not a way out.
  EXPECT_TRUE(BlockedWithAnyOf(box.probe({"write-file", "/proc/sys/kernel/hostname"}), {"EACCES", "EROFS"}));
}

}  // namespace
}  // namespace agentbox::redteam
