#pragma once
// What init reads of its box's processes from the box's own /proc (init is PID 1 of the box's
// pid namespace and sits in its network namespace): how many there are, which belong to a
// session, and which hold TCP sockets listening in the box.
#include <sys/types.h>

#include <string_view>
#include <vector>

#include "box/messages.hpp"

namespace agentbox::init {

// Processes besides init.
int count_processes();

// Every process whose session id is sid (a command is its session's leader: its own and its
// jobs', background ones included), the leader first if it is alive.
std::vector<pid_t> session_members(pid_t sid);

// TCP listeners of this network namespace (IPv4 and IPv6, each port once), each with a process
// that holds the socket where one can be seen. proc: "/proc" (tests: a fake tree).
std::vector<protocol::ListeningPort> listening_ports(std::string_view proc = "/proc");

// A /proc/net/tcp or tcp6 table's LISTEN rows: (port, socket inode).
std::vector<std::pair<uint16_t, unsigned long>> parse_tcp_listeners(std::string_view table);

}  // namespace agentbox::init
