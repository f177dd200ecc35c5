#include "fs/fs_error.hpp"

#include <cstring>
#include <optional>

namespace agentbox {
namespace {

struct ErrnoKind {
  int err;
  FsErrorKind kind;
};

// errno → kind. EXDEV and ELOOP come from openat2 refusing to leave the home (RESOLVE_BENEATH,
// RESOLVE_NO_XDEV, RESOLVE_NO_MAGICLINKS), so they are refusals, not missing files.
constexpr ErrnoKind kErrnoKinds[] = {
    {ENOENT, FsErrorKind::not_found},
    {ENOTDIR, FsErrorKind::not_found},
    {ENXIO, FsErrorKind::not_found},
    {EACCES, FsErrorKind::forbidden},
    {EPERM, FsErrorKind::forbidden},
    {EROFS, FsErrorKind::forbidden},
    {EXDEV, FsErrorKind::forbidden},
    {ELOOP, FsErrorKind::forbidden},
    {ETXTBSY, FsErrorKind::conflict},
    {EEXIST, FsErrorKind::conflict},
    {ENOTEMPTY, FsErrorKind::conflict},
    {EBUSY, FsErrorKind::conflict},
    {EISDIR, FsErrorKind::bad_request},
    {EINVAL, FsErrorKind::bad_request},
    {ENAMETOOLONG, FsErrorKind::bad_request},
    {EMLINK, FsErrorKind::bad_request},
    {EFBIG, FsErrorKind::too_large},
    {ENOSPC, FsErrorKind::insufficient_storage},
    {EDQUOT, FsErrorKind::insufficient_storage},
};

std::optional<FsErrorKind> kind_of(int err) {
  for (const auto& e : kErrnoKinds)
    if (e.err == err) return e.kind;
  return std::nullopt;
}

}  // namespace

void throw_fs_errno(int err, std::string_view shown) {
  // EXDEV's own text ("Invalid cross-device link") would only confuse the reader.
  std::string msg = err == EXDEV ? "Access denied: path leads outside the home directory" : std::strerror(err);
  msg += ": ";
  msg += shown;
  if (auto kind = kind_of(err)) throw FsError(*kind, std::move(msg), err);
  throw Error(std::move(msg), err);
}

}  // namespace agentbox
