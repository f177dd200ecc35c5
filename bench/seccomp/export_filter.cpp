// export_filter OUT: writes the box's seccomp program, as built by the seccomp.cpp this is
// compiled with (today's, or an older one from git), as raw sock_filter bytes. bench only.
#include <cstdio>
#include <exception>
#include <vector>

#include "box/contain/seccomp.hpp"

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: export_filter OUT\n"), 2;
  try {
    const std::vector<sock_filter> program = agentbox::seccomp_filter::build_program();
    std::FILE* out = std::fopen(argv[1], "wb");
    if (!out || std::fwrite(program.data(), sizeof(sock_filter), program.size(), out) != program.size() ||
        std::fclose(out) != 0)
      return std::perror(argv[1]), 1;
    std::printf("%zu instructions\n", program.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "export_filter: %s\n", e.what());
    return 1;
  }
  return 0;
}
