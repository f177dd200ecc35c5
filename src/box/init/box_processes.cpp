#include "box/init/box_processes.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "util/file_io.hpp"

namespace agentbox::init {
namespace {

constexpr unsigned kTcpListen = 0x0A;  // st column of /proc/net/tcp: TCP_LISTEN

bool is_pid_name(const char* name) { return std::isdigit(static_cast<unsigned char>(name[0])) != 0; }

// The pids in proc, init's own excluded.
std::vector<pid_t> pids(const std::string& proc) {
  std::vector<pid_t> out;
  DIR* d = ::opendir(proc.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d))
    if (is_pid_name(e->d_name) && std::strcmp(e->d_name, "1") != 0) out.push_back(std::atoi(e->d_name));
  ::closedir(d);
  return out;
}

// The session id in /proc/PID/stat (field 6, after the command name in parentheses); -1 if gone.
pid_t session_of(pid_t pid) {
  const auto stat = read_file_if_exists("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!stat) return -1;
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return -1;
  char state;
  int ppid, pgrp, sid;
  if (std::sscanf(stat->c_str() + close + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4) return -1;
  return sid;
}

}  // namespace

int count_processes() { return static_cast<int>(pids("/proc").size()); }

std::vector<pid_t> session_members(pid_t sid) {
  std::vector<pid_t> out;
  for (pid_t pid : pids("/proc"))
    if (session_of(pid) == sid) out.push_back(pid);
  std::stable_partition(out.begin(), out.end(), [sid](pid_t p) { return p == sid; });
  return out;
}

std::vector<std::pair<uint16_t, unsigned long>> parse_tcp_listeners(std::string_view table) {
  std::vector<std::pair<uint16_t, unsigned long>> out;
  size_t pos = table.find('\n');  // the header line
  while (pos != std::string_view::npos && pos + 1 < table.size()) {
    const size_t end = table.find('\n', pos + 1);
    const std::string line(table.substr(pos + 1, end == std::string_view::npos ? end : end - pos - 1));
    pos = end;
    // "  0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000 0 12345 ..."
    char local[64], remote[64];
    unsigned st, uid;
    unsigned long inode;
    int slot;
    if (std::sscanf(line.c_str(), " %d: %63s %63s %x %*s %*s %*s %u %*d %lu", &slot, local, remote, &st, &uid,
                    &inode) != 6)
      continue;
    if (st != kTcpListen) continue;
    const char* colon = std::strrchr(local, ':');
    if (!colon) continue;
    out.emplace_back(static_cast<uint16_t>(std::strtoul(colon + 1, nullptr, 16)), inode);
  }
  return out;
}

std::vector<protocol::ListeningPort> listening_ports(std::string_view proc_root) {
  const std::string proc(proc_root);
  std::map<unsigned long, uint16_t> port_of_inode;
  std::map<uint16_t, protocol::ListeningPort> by_port;
  for (const char* table : {"/net/tcp", "/net/tcp6"}) {
    const auto text = read_file_if_exists(proc + table, 1 << 22);
    if (!text) continue;
    for (const auto& [port, inode] : parse_tcp_listeners(*text)) {
      port_of_inode[inode] = port;
      by_port.emplace(port, protocol::ListeningPort{port, 0, {}});
    }
  }
  // Who holds each socket: a process of the box whose descriptor links to socket:[INODE].
  for (pid_t pid : pids(proc)) {
    const std::string fd_dir = proc + "/" + std::to_string(pid) + "/fd";
    DIR* d = ::opendir(fd_dir.c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      if (!is_pid_name(e->d_name)) continue;
      char target[64];
      const ssize_t n = ::readlinkat(::dirfd(d), e->d_name, target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      unsigned long inode;
      if (std::sscanf(target, "socket:[%lu]", &inode) != 1) continue;
      auto it = port_of_inode.find(inode);
      if (it == port_of_inode.end()) continue;
      protocol::ListeningPort& p = by_port[it->second];
      if (p.pid != 0 && p.pid < pid) continue;  // the lowest pid: the one that opened it, usually
      p.pid = pid;
      auto comm = read_file_if_exists(proc + "/" + std::to_string(pid) + "/comm", 256);
      p.name = comm ? std::string(*comm).substr(0, comm->find('\n')) : std::string();
    }
    ::closedir(d);
  }
  std::vector<protocol::ListeningPort> out;
  for (auto& [port, p] : by_port) out.push_back(std::move(p));
  return out;
}

}  // namespace agentbox::init
