#pragma once
// Bounds on what the kernel queues in a relay's sockets (issue 30). Left to autotuning, a
// socket's buffers grow to tcp_rmem/tcp_wmem's maximum (32 MiB here) while data moves fast,
// and stay that full when the reader at the other end stops: an egress tunnel whose box never
// reads held ~22 MiB of the host's TCP memory, charged to no box. With both buffers fixed,
// a reader that stops stops the writer behind it (the window closes) within these bytes.
//
// Sizes are the kernel's figures, what getsockopt(SO_RCVBUF) and `ss -m` (rb, tb) report: the
// kernel doubles what setsockopt is given, for its own bookkeeping, so half is set. A listener's
// sizes pass to the sockets it accepts, whose window scale is chosen from them in the SYN-ACK;
// a socket about to connect() chooses its own in the SYN.
//
// The receive buffer is the window, so a stream's throughput is about it per round trip, and
// what one splice(2) of a relay can take at once: loopback needs a few hundred KiB to stay fast
// at few syscalls a byte (256K took twice the splices of 512K per GiB here). The send buffer
// only holds what waits for a slow reader and refills on each ACK: half the receive buffer.
#include <cstddef>

namespace agentbox::net {

// SO_RCVBUF = receive_bytes and SO_SNDBUF = receive_bytes / 2 on fd; above
// net.core.rmem_max/wmem_max only with CAP_NET_ADMIN (SO_*BUFFORCE is tried first, else the
// kernel caps the size at the maximum). 0: left to autotuning. Throws Error naming the option.
void bound_socket_buffers(int fd, size_t receive_bytes);

}  // namespace agentbox::net
