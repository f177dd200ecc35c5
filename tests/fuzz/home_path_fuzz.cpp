// Paths inside a home (fs/home_path.* and fs/confined_dir.*): the input's lines are a user
// path, a session cwd, and the target of a symlink "fz" made in the home for this input (absent
// lines are empty; no link without a third line). A home with files, directories and links that
// stay in, leave (relative and absolute), loop and point back in as the box sees it
// ("/home/alice/...") is made once in a temporary directory, beside a directory the paths must
// never reach.
//
// Checks: the lexical parse fails only with FsError (bad_request, forbidden); its rel has no
// empty, "." or ".." component and no '/' at either end; shown is the box home joined with rel;
// parsing shown (and rel) again gives the same path; parent().child(name()) is the path. Then
// ConfinedDir resolves it from the home's descriptor: open(), entry() and write_target() fail
// only with agentbox::Error, and every descriptor they return is the home or inside it (checked
// through /proc/self/fd), with an entry name that is one component.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fs/confined_dir.hpp"
#include "fs/fs_error.hpp"
#include "fs/home_path.hpp"
#include "fuzz_check.hpp"
#include "fuzz_scratch.hpp"
#include "util/error.hpp"

namespace {

using namespace agentbox;

constexpr std::string_view kBoxHome = "/home/alice";

std::string g_root;       // the scratch directory
std::string g_home;       // g_root/home, as the kernel names it (no links on the way)
ConfinedDir* g_confined;  // the home

void make(const std::string& rel, bool dir) {
  const std::string path = g_root + "/" + rel;
  if (dir) {
    if (::mkdir(path.c_str(), 0755) != 0) std::abort();
  } else {
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) std::abort();
    ::close(fd);
  }
}

void link(const std::string& target, const std::string& rel) {
  if (::symlink(target.c_str(), (g_root + "/" + rel).c_str()) != 0) std::abort();
}

std::string fd_path(int fd) {
  char buf[4096];
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf, sizeof buf);
  FUZZ_CHECK(n > 0);
  return std::string(buf, static_cast<std::size_t>(n));
}

bool inside_home(int fd) {
  const std::string p = fd_path(fd);
  return p == g_home || p.starts_with(g_home + "/");
}

bool one_component(std::string_view name) {
  return !name.empty() && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

void check_lexical(const HomePath& p) {
  const std::string& rel = p.rel;
  FUZZ_CHECK(!rel.starts_with('/') && !rel.ends_with('/'));
  for (std::string_view rest = rel; !rel.empty();) {
    const std::size_t slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    FUZZ_CHECK(!part.empty() && part != "." && part != "..");
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  FUZZ_CHECK(p.shown == std::string(kBoxHome) + (rel.empty() ? "" : "/" + rel));
  FUZZ_CHECK(parse_home_path(p.shown, kBoxHome).rel == rel);
  if (!rel.starts_with('~')) FUZZ_CHECK(parse_home_path(rel, kBoxHome).rel == rel);
  if (!p.is_home()) {
    const HomePath back = p.parent(kBoxHome).child(p.name());
    FUZZ_CHECK(back.rel == rel && back.shown == p.shown);
  }
}

template <class Fn>
void confined(Fn fn) {
  try {
    fn();
  } catch (const Error&) {  // FsError among them: a refusal, or a path that is not there
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_root = fuzz_scratch_dir("home");  // canonical: what /proc/self/fd shows
  g_home = g_root + "/home";
  make("home", true);
  make("outside", true);
  make("outside/secret", false);
  make("home/file.txt", false);
  make("home/dir", true);
  make("home/dir/sub", true);
  make("home/dir/sub/deep.txt", false);
  link("dir/sub", "home/link_in");                          // stays in
  link("../outside", "home/link_up");                       // leaves, relative
  link("../../outside/secret", "home/dir/link_up2");        // leaves from a subdirectory
  link("/home/alice/file.txt", "home/dir/link_abs_in");     // absolute, as the box sees the home
  link("/home/alice/../bob/x", "home/dir/link_abs_other");  // absolute, another home
  link(g_root + "/outside/secret", "home/link_abs_host");   // absolute, the host's path out
  link("loop", "home/loop");                                // a loop
  link("sub/../../link_up", "home/dir/link_chain");         // in, then out through another link
  g_confined = new ConfinedDir(ConfinedDir::open_home(g_home, kBoxHome, ::getuid(), ::getgid()));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> lines;
  for (int i = 0; i < 2; ++i) {
    std::size_t nl = input.find('\n');
    if (nl == std::string_view::npos) break;
    lines.push_back(input.substr(0, nl));
    input.remove_prefix(nl + 1);
  }
  lines.push_back(input);
  const std::string_view user_path = lines[0];
  const std::string_view cwd = lines.size() > 1 ? lines[1] : std::string_view();
  const bool with_link = lines.size() > 2;
  const std::string link_target(with_link ? lines[2] : std::string_view());

  HomePath p;
  try {
    p = parse_home_path(user_path, kBoxHome, cwd);
  } catch (const FsError& e) {
    FUZZ_CHECK(e.kind() == FsErrorKind::bad_request || e.kind() == FsErrorKind::forbidden);
    return 0;
  }
  check_lexical(p);

  // A target with a NUL cannot be a link's: the kernel would cut it.
  const std::string link_path = g_home + "/fz";
  const bool linked = with_link && !link_target.empty() && link_target.find('\0') == std::string::npos &&
                      link_target.size() < 4000 && ::symlink(link_target.c_str(), link_path.c_str()) == 0;

  const ConfinedDir& home = *g_confined;
  confined([&] {
    UniqueFd fd = home.open(p, O_PATH);
    FUZZ_CHECK(inside_home(fd.get()));
  });
  confined([&] {
    EntryRef e = home.entry(p);
    FUZZ_CHECK(inside_home(e.dir.get()) && one_component(e.name) && e.name != ".");
  });
  confined([&] {
    EntryRef e = home.write_target(p);
    FUZZ_CHECK(inside_home(e.dir.get()) && one_component(e.name) && e.name != ".");
  });
  if (linked) FUZZ_CHECK(::unlink(link_path.c_str()) == 0);
  return 0;
}
