// cluster/md5: RFC 1321's own test suite, and agreement with OpenSSL's MD5 at every length
// around the block and padding boundaries (the tail takes one block or two).
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <string>

#include "cluster/md5.hpp"
#include "cluster/nginx_conf.hpp"
#include "util/random_hex.hpp"

namespace agentbox::cluster {
namespace {

std::string hex(const Md5Digest& d) { return hex_of(d.data(), d.size()); }

TEST(ClusterMd5, Rfc1321TestSuite) {
  EXPECT_EQ(hex(md5("")), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(hex(md5("a")), "0cc175b9c0f1b6a831c399e269772661");
  EXPECT_EQ(hex(md5("abc")), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(hex(md5("message digest")), "f96b697d7cb7938d525a2f31aaf161d0");
  EXPECT_EQ(hex(md5("abcdefghijklmnopqrstuvwxyz")), "c3fcd3d76192e4007dfb496cca67e13b");
  EXPECT_EQ(hex(md5("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")),
            "d174ab98d277d9f5a5611c2c9f419d9f");
  EXPECT_EQ(hex(md5("12345678901234567890123456789012345678901234567890123456789012345678901234567890")),
            "57edf4a22be3c955ac49da2e2107b67a");
}

TEST(ClusterMd5, AgreesWithOpenSslAtEveryLengthUpTo300) {
  std::string bytes;
  for (int n = 0; n <= 300; ++n) {
    unsigned char want[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    ASSERT_EQ(EVP_Digest(bytes.data(), bytes.size(), want, &len, EVP_md5(), nullptr), 1);
    ASSERT_EQ(hex(md5(bytes)), hex_of(want, len)) << "length " << n;
    bytes.push_back(static_cast<char>((n * 131 + 7) & 0xff));  // every byte value, NULs included
  }
}

TEST(ClusterMd5, PinsMapKeysAreItsLowerCaseHex) {
  EXPECT_EQ(md5_hex("alice"), hex(md5("alice")));
  EXPECT_EQ(md5_hex("alice"), "6384e2b2184bcbf58eccf10ca7a6563c");
}

}  // namespace
}  // namespace agentbox::cluster
