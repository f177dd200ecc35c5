#include "volumes/ext4_superblock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdint>

#include "util/unique_fd.hpp"

namespace agentbox {
namespace {

// Offsets in the superblock (the kernel's Documentation/filesystems/ext4/super.rst); every
// field is little-endian.
constexpr off_t kSuperblockOffset = 1024;
constexpr size_t kSuperblockSize = 1024;
constexpr size_t kInodesCount = 0x00, kBlocksCountLo = 0x04, kFreeBlocksLo = 0x0C, kFreeInodes = 0x10,
                 kLogBlockSize = 0x18, kMagic = 0x38, kState = 0x3A, kFeatureIncompat = 0x60, kBlocksCountHi = 0x150,
                 kFreeBlocksHi = 0x158, kOverheadClusters = 0x248;
constexpr uint16_t kExt4Magic = 0xEF53;
constexpr uint32_t kIncompat64Bit = 0x80;
constexpr uint32_t kIncompatRecover = 0x4;                // needs_recovery: mounted, or not unmounted cleanly
constexpr uint16_t kStateValid = 0x1, kStateError = 0x2;  // s_state: EXT4_VALID_FS, EXT4_ERROR_FS

using Superblock = std::array<unsigned char, kSuperblockSize>;

bool read_superblock(const std::string& image, Superblock& sb) {
  UniqueFd fd(::open(image.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return false;
  return ::pread(fd.get(), sb.data(), sb.size(), kSuperblockOffset) == static_cast<ssize_t>(sb.size());
}

uint64_t le(const Superblock& sb, size_t at, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = bytes; i-- > 0;) v = (v << 8) | sb[at + i];
  return v;
}

}  // namespace

std::optional<VolumeUsage> ext4_image_usage(const std::string& image) {
  Superblock sb{};
  if (!read_superblock(image, sb)) return std::nullopt;
  if (le(sb, kMagic, 2) != kExt4Magic) return std::nullopt;
  const uint64_t log_block = le(sb, kLogBlockSize, 4);
  if (log_block > 6) return std::nullopt;  // blocks of 1 KiB to 64 KiB
  const uint64_t block_size = uint64_t{1024} << log_block;
  const bool wide = le(sb, kFeatureIncompat, 4) & kIncompat64Bit;
  const uint64_t blocks = le(sb, kBlocksCountLo, 4) | (wide ? le(sb, kBlocksCountHi, 4) << 32 : 0);
  const uint64_t free_blocks = le(sb, kFreeBlocksLo, 4) | (wide ? le(sb, kFreeBlocksHi, 4) << 32 : 0);
  const uint64_t overhead = le(sb, kOverheadClusters, 4);
  if (free_blocks + overhead > blocks) return std::nullopt;
  VolumeUsage u;
  u.bytes_limit = (blocks - overhead) * block_size;
  u.bytes_used = (blocks - overhead - free_blocks) * block_size;
  u.inodes_limit = le(sb, kInodesCount, 4);
  const uint64_t free_inodes = le(sb, kFreeInodes, 4);
  u.inodes_used = u.inodes_limit > free_inodes ? u.inodes_limit - free_inodes : 0;
  return u;
}

bool ext4_image_settled(const std::string& image) {
  Superblock sb{};
  if (!read_superblock(image, sb) || le(sb, kMagic, 2) != kExt4Magic) return false;
  const uint64_t state = le(sb, kState, 2);
  return !(le(sb, kFeatureIncompat, 4) & kIncompatRecover) && (state & kStateValid) && !(state & kStateError);
}

bool ext4_image_has_errors(const std::string& image) {
  Superblock sb{};
  return read_superblock(image, sb) && le(sb, kMagic, 2) == kExt4Magic && (le(sb, kState, 2) & kStateError);
}

}  // namespace agentbox
