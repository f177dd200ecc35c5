#pragma once
// Shared by the account-volume integration tests (root, loop devices, mkfs.ext4): a fresh base
// directory under /tmp with an AccountVolumes of quota'd loop images in it (32 MiB, 2000 inodes
// each), removed after the test; skipped where this host cannot make loop images.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "util/loop_image_probe.hpp"
#include "volumes/account_volumes.hpp"

namespace agentbox::testing {

class VolumesTest : public ::testing::Test {
 protected:
  // The base directory is /tmp/PREFIX-XXXXXX.
  explicit VolumesTest(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    std::string why;
    if (!loop_images_supported(&why)) GTEST_SKIP() << why;
    std::string tmpl = "/tmp/" + prefix_ + "-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    base_ = tmpl;
    volumes_.emplace(base_, make_volume_backend(true), [](const std::string&) { return DiskQuota{32ull << 20, 2000}; });
  }
  void TearDown() override {
    volumes_.reset();
    if (!base_.empty()) std::filesystem::remove_all(base_);
  }

  std::string base_;
  std::optional<AccountVolumes> volumes_;

 private:
  std::string prefix_;
};

}  // namespace agentbox::testing
