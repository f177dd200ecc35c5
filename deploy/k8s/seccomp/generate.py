#!/usr/bin/env python3
"""Writes agentbox.json: containerd's RuntimeDefault seccomp profile (contrib/seccomp/
seccomp_default.go) as it comes out for an agentbox node on amd64 (CAP_SYS_ADMIN in the
bounding set, kernel >= 4.8), plus the calls a box start makes that older containerd releases
refuse even with CAP_SYS_ADMIN. Usage: generate.py seccomp_default.go > agentbox.json"""
import json
import re
import sys

# What agentbox adds to the runtime's default (SCALING-NOTES §8): pivot_root is refused "even
# with CAP_SYS_ADMIN"; clone3 (CLONE_INTO_CGROUP) and the new mount API are missing from
# releases before containerd 2.x; quotactl for the state volume's quotas.
AGENTBOX_EXTRA = ["pivot_root", "clone3", "fsopen", "fsconfig", "fsmount", "fspick",
                  "open_tree", "move_mount", "mount_setattr", "quotactl", "quotactl_fd"]

AF_ALG, AF_VSOCK = 38, 40


def names_after(src, marker, start=0):
    """The quoted names of the first Names: []string{...} block after marker (found from start)."""
    at = src.index(marker, start)
    block = src[src.index("Names: []string{", at):]
    block = block[:block.index("}")]
    return re.findall(r'"([a-z0-9_]+)"', block)


def main():
    src = open(sys.argv[1]).read()
    allow = names_after(src, "syscalls := []specs.LinuxSyscall{")
    allow += names_after(src, "GreaterEqualThan(")          # ptrace & co on kernels >= 4.8
    allow += names_after(src, 'case "amd64":', src.index("// include by arch"))  # not arches()
    allow += names_after(src, 'case "CAP_SYS_ADMIN":')
    allow = sorted(set(allow) | set(AGENTBOX_EXTRA))
    arg = lambda value, op: {"index": 0, "value": value, "op": op}
    syscalls = [{"names": allow, "action": "SCMP_ACT_ALLOW"}]
    # socket(2) for every family but AF_ALG and AF_VSOCK, as containerd writes it.
    for a in (arg(AF_ALG, "SCMP_CMP_LT"), arg(AF_ALG + 1, "SCMP_CMP_EQ"),
              arg(AF_VSOCK, "SCMP_CMP_GT")):
        syscalls.append({"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [a]})
    for persona in (0x0, 0x0008, 0x20000, 0x20008, 0xffffffff):
        syscalls.append({"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                         "args": [arg(persona, "SCMP_CMP_EQ")]})
    profile = {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": 1,
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "syscalls": syscalls,
    }
    json.dump(profile, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
