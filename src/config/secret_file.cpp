#include "config/secret_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace agentbox {

std::optional<std::string> read_secret_file(const std::string& path, bool missing_ok) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT && missing_ok) return std::nullopt;
    throw sys_error("open(" + path + ")");
  }
  struct stat st;
  check(::fstat(fd.get(), &st), "fstat(" + path + ")");
  if (!S_ISREG(st.st_mode)) throw Error(path + ": not a regular file");
  if (st.st_uid != ::geteuid()) throw Error(path + ": owned by uid " + std::to_string(st.st_uid) + ", not by us");
  if (st.st_mode & 077) {
    char mode[8];
    auto end = std::to_chars(mode, mode + sizeof mode, st.st_mode & 0777, 8).ptr;
    throw Error(path + ": readable by others (mode " + std::string(mode, end) + "); run chmod 600 on it");
  }
  std::string text(4096, '\0');
  size_t used = 0;
  while (used < text.size()) {
    ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw sys_error("read(" + path + ")");
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  text.resize(used);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace agentbox
