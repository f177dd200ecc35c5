// What init reads of its box's processes (box/init/box_processes.hpp): the LISTEN rows of the
// kernel's TCP tables, and which process holds each listening socket, from a fake /proc tree.
#include "box/init/box_processes.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/scratch_dir.hpp"

namespace agentbox::init {
namespace {

namespace fs = std::filesystem;

// Two listeners (8124 on 127.0.0.1, 3000 on 0.0.0.0), an established connection, a TIME_WAIT.
constexpr const char* kTcp =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 0100007F:1FBC 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 41001 1 "
    "0000000000000000 100 0 0 10 0\n"
    "   1: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 41002 1 "
    "0000000000000000 100 0 0 10 0\n"
    "   2: 0100007F:1FBC 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 41003 1 "
    "0000000000000000 20 4 30 10 -1\n"
    "   3: 0100007F:A1B2 0100007F:1FBC 06 00000000:00000000 03:00000000 00000000     0        0 0 3 0000000000000000\n";
// An IPv6 listener on 3000 too (the same port once in the answer) and one on 5173.
constexpr const char* kTcp6 =
    "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
    "tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000000000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000  1000        0 41004 1 0000000000000000 100 0 0 10 0\n"
    "   1: 00000000000000000000000001000000:1435 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000  1000        0 41005 1 0000000000000000 100 0 0 10 0\n";

TEST(BoxProcesses, ParsesTheListenRowsOfATcpTable) {
  const auto rows = parse_tcp_listeners(kTcp);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], std::make_pair(uint16_t{8124}, 41001ul));
  EXPECT_EQ(rows[1], std::make_pair(uint16_t{3000}, 41002ul));
  EXPECT_EQ(parse_tcp_listeners(kTcp6).size(), 2u);
  EXPECT_TRUE(parse_tcp_listeners("").empty());
  EXPECT_TRUE(parse_tcp_listeners("header only\n").empty());
  EXPECT_TRUE(parse_tcp_listeners("header\n garbage line\n   0: zz\n").empty());
}

void write(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << content;
}

void socket_fd(const fs::path& proc, int pid, int fd, unsigned long inode) {
  fs::create_directories(proc / std::to_string(pid) / "fd");
  fs::create_symlink("socket:[" + std::to_string(inode) + "]", proc / std::to_string(pid) / "fd" / std::to_string(fd));
}

TEST(BoxProcesses, NamesTheProcessHoldingEachListener) {
  testing::ScratchDir dir("abx-fakeproc");
  const fs::path proc = dir.path();
  write(proc / "net/tcp", kTcp);
  write(proc / "net/tcp6", kTcp6);
  write(proc / "7/comm", "python3\n");
  socket_fd(proc, 7, 3, 41001);
  write(proc / "9/comm", "node\n");
  socket_fd(proc, 9, 20, 41002);
  socket_fd(proc, 9, 21, 41004);
  socket_fd(proc, 9, 22, 41003);      // a connection, not a listener
  write(proc / "12/comm", "node\n");  // a forked worker holding the same listener
  socket_fd(proc, 12, 20, 41002);
  fs::create_directories(proc / "1/fd");  // init, never listed

  const auto ports = listening_ports(proc.string());
  ASSERT_EQ(ports.size(), 3u);  // 3000 (v4 and v6 once), 5173 (no holder seen), 8124
  EXPECT_EQ(ports[0], (protocol::ListeningPort{3000, 9, "node"}));
  EXPECT_EQ(ports[1], (protocol::ListeningPort{5173, 0, ""}));
  EXPECT_EQ(ports[2], (protocol::ListeningPort{8124, 7, "python3"}));
}

}  // namespace
}  // namespace agentbox::init
