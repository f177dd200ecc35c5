// nginx's consistent-hash ring as the nodes compute it. Agreement with a real nginx is shown in
// tests/e2e/test_cluster.py (10,000 ids); these are the properties an operator relies on.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "cluster/nginx_conf.hpp"
#include "cluster/placement.hpp"
#include "cluster/ring.hpp"
#include "util/error.hpp"

namespace agentbox::cluster {
namespace {

std::string user(int i) { return "user-" + std::to_string(i * 7919) + "@example.org"; }

TEST(ClusterRing, Crc32IsNginxsIeeeCrc) {
  EXPECT_EQ(crc32_of("123456789"), 0xCBF43926u);  // the CRC-32 check value
  EXPECT_EQ(crc32_of(""), 0u);
}

TEST(ClusterRing, EveryServerGets160PointsPerWeightUnit) {
  EXPECT_EQ(Ring({{"127.0.0.1:8101"}}).points(), 160u);
  EXPECT_EQ(Ring({{"127.0.0.1:8101", 3}, {"127.0.0.1:8102"}}).points(), 640u);
}

TEST(ClusterRing, ThreeNodesShareTenThousandUsersRoughlyEvenly) {
  Ring ring({{"127.0.0.1:8101"}, {"127.0.0.1:8102"}, {"127.0.0.1:8103"}});
  std::map<size_t, int> held;
  for (int i = 0; i < 10000; ++i) ++held[ring.owner(user(i))];
  ASSERT_EQ(held.size(), 3u);
  for (auto [node, count] : held) {
    EXPECT_GT(count, 2500) << node;
    EXPECT_LT(count, 4200) << node;
  }
}

TEST(ClusterRing, AddingANodeMovesUsersOnlyToIt) {
  Ring three({{"127.0.0.1:8101"}, {"127.0.0.1:8102"}, {"127.0.0.1:8103"}});
  Ring four({{"127.0.0.1:8101"}, {"127.0.0.1:8102"}, {"127.0.0.1:8103"}, {"127.0.0.1:8104"}});
  int moved = 0;
  for (int i = 0; i < 10000; ++i) {
    const size_t before = three.owner(user(i)), after = four.owner(user(i));
    if (before != after) {
      EXPECT_EQ(after, 3u) << user(i) << " moved between old nodes";
      ++moved;
    }
  }
  EXPECT_GT(moved, 1000);
  EXPECT_LT(moved, 4000);
}

TEST(ClusterRing, TheServerStringNotTheListOrderPlacesUsers) {
  Ring a({{"n1.example:8000"}, {"n2.example:8000"}});
  Ring b({{"n2.example:8000"}, {"n1.example:8000"}});
  for (int i = 0; i < 2000; ++i) EXPECT_EQ(a.owner(user(i)), 1 - b.owner(user(i))) << user(i);
}

TEST(ClusterRing, AHeavierNodeHoldsMore) {
  Ring ring({{"127.0.0.1:8101", 3}, {"127.0.0.1:8102"}});
  int first = 0;
  for (int i = 0; i < 10000; ++i) first += ring.owner(user(i)) == 0;
  EXPECT_GT(first, 6500);
}

class ClusterFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/agentbox-cluster-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
    return dir_ + "/" + name;
  }
  std::string dir_;
};

constexpr const char* kThree = R"(
[[node]]
name = "n1"
server = "127.0.0.1:8101"
[[node]]
name = "n2"
server = "127.0.0.1:8102"
admin_url = "http://127.0.0.1:9102/"
[[node]]
name = "n3"
server = "127.0.0.1:8103"
weight = 2
)";

TEST_F(ClusterFileTest, NodesPinsAndDefaults) {
  const std::string file = write("cluster.toml", kThree);
  write("pins.toml", "\"Alice\" = \"n3\"\n\"bob smith\" = \"n1\"\n");
  ClusterConfig c = load_cluster_config(file);
  ASSERT_EQ(c.nodes.size(), 3u);
  EXPECT_EQ(c.nodes[0].admin_url, "http://127.0.0.1:8101");
  EXPECT_EQ(c.nodes[1].admin_url, "http://127.0.0.1:9102");
  EXPECT_EQ(c.nodes[2].weight, 2u);
  EXPECT_EQ(c.pins_path, dir_ + "/pins.toml");
  Placement p(c, "n1");
  EXPECT_EQ(p.owner("Alice").name, "n3");
  EXPECT_EQ(p.owner("bob smith").name, "n1");
  EXPECT_TRUE(p.owns("bob smith"));
  // Pins are exact: another case of a pinned id is placed by the ring like anyone else.
  EXPECT_EQ(p.owner("alice").name, p.ring_owner("alice").name);
}

TEST_F(ClusterFileTest, MistakesAreNamed) {
  const auto error_of = [&](const std::string& text) {
    try {
      load_cluster_config(write("c.toml", text));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("").find("no [[node]]"), std::string::npos);
  EXPECT_NE(error_of("[[node]]\nname = \"n 1\"\nserver = \"a:1\"\n").find("name"), std::string::npos);
  EXPECT_NE(error_of("[[node]]\nname = \"n1\"\nserver = \"a\"\n").find("HOST:PORT"), std::string::npos);
  EXPECT_NE(error_of("[[node]]\nname = \"n1\"\nserver = \"a:1\"\nhost = \"x\"\n").find("host"), std::string::npos);
  EXPECT_NE(
      error_of("[[node]]\nname = \"n1\"\nserver = \"a:1\"\n[[node]]\nname = \"n1\"\nserver = \"a:2\"\n").find("twice"),
      std::string::npos);
  EXPECT_NE(error_of("[[node]]\nname = \"n1\"\nserver = \"a:1\"\nweight = 0\n").find("weight"), std::string::npos);
  EXPECT_NE(error_of("nodes = 1\n").find("unknown key"), std::string::npos);
  EXPECT_THROW(Placement(load_cluster_config(write("d.toml", kThree)), "n7"), UsageError);
  write("pins.toml", "\"x\" = \"n9\"\n");
  EXPECT_NE(error_of("[[node]]\nname = \"n1\"\nserver = \"a:1\"\n").find("n9"), std::string::npos);
}

TEST_F(ClusterFileTest, AWrittenClusterFileReadsBackAsItWas) {
  // drain and add write the file again: every field survives, and a value TOML must escape
  // (a quote, a backslash) is escaped, not cut.
  ClusterConfig c = load_cluster_config(write("cluster.toml", kThree));
  c.nodes[1].admin_url = "http://127.0.0.1:9102/a\"b\\c\td";
  c.nodes[2].drain = true;
  c.nodes.push_back({"n4", "[::1]:8104", "http://[::1]:8104", 1});
  const std::string again = write("again.toml", cluster_file_text(c));
  ClusterConfig r = load_cluster_config(again);
  ASSERT_EQ(r.nodes.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.nodes[i].name, c.nodes[i].name);
    EXPECT_EQ(r.nodes[i].server, c.nodes[i].server);
    EXPECT_EQ(r.nodes[i].admin_url, c.nodes[i].admin_url);
    EXPECT_EQ(r.nodes[i].weight, c.nodes[i].weight);
    EXPECT_EQ(r.nodes[i].drain, c.nodes[i].drain);
  }
  EXPECT_EQ(cluster_node_text(c.nodes[0]), "[[node]]\nname = \"n1\"\nserver = \"127.0.0.1:8101\"\n");
}

TEST(ClusterNginx, PinsAreKeyedByTheMd5OfTheExactId) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  const std::string map = nginx_pins_map({{"Alice", "n3"}, {"alice", "n1"}});
  EXPECT_NE(map.find(md5_hex("Alice") + " ab_node_n3;"), std::string::npos);
  EXPECT_NE(map.find(md5_hex("alice") + " ab_node_n1;"), std::string::npos);
}

}  // namespace
}  // namespace agentbox::cluster
