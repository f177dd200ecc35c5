#!/usr/bin/python3
"""Runs a command under an OCI seccomp profile (the JSON a Kubernetes Localhost profile is), as a
container runtime would load it, through libseccomp:

    seccomp_exec.py PROFILE [--without NAME]... -- CMD [ARG]...

--without drops a syscall from the profile's allow rules (to show a test would notice)."""
import ctypes
import ctypes.util
import json
import os
import sys

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_ERRNO = lambda errno: 0x00050000 | (errno & 0xFFFF)  # noqa: E731
OPS = {"SCMP_CMP_NE": 1, "SCMP_CMP_LT": 2, "SCMP_CMP_LE": 3, "SCMP_CMP_EQ": 4, "SCMP_CMP_GE": 5,
       "SCMP_CMP_GT": 6, "SCMP_CMP_MASKED_EQ": 7}
ARCHES = {"SCMP_ARCH_X86_64": 0xC000003E, "SCMP_ARCH_X86": 0x40000003, "SCMP_ARCH_X32": 0x4000003E}


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def main():
    argv = sys.argv[1:]
    split = argv.index("--")
    opts, cmd = argv[:split], argv[split + 1:]
    profile = json.load(open(opts[0]))
    without = {opts[i + 1] for i, o in enumerate(opts) if o == "--without"}

    lib = ctypes.CDLL(ctypes.util.find_library("seccomp"), use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(ArgCmp)]
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    ctx = lib.seccomp_init(SCMP_ACT_ERRNO(profile.get("defaultErrnoRet", 1)))
    for arch in profile.get("architectures", []):
        if ARCHES[arch] != 0xC000003E:  # the native one is there already
            rc = lib.seccomp_arch_add(ctx, ARCHES[arch])
            assert rc in (0, -17), (arch, rc)  # -EEXIST
    for rule in profile["syscalls"]:
        assert rule["action"] == "SCMP_ACT_ALLOW", rule
        args = rule.get("args") or []
        cmps = (ArgCmp * max(1, len(args)))(*[ArgCmp(a["index"], OPS[a["op"]], a["value"], a.get("valueTwo", 0))
                                              for a in args])
        for name in rule["names"]:
            if name in without:
                continue
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:  # not a syscall of this architecture (e.g. the 32-bit only ones)
                continue
            rc = lib.seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, len(args), cmps)
            assert rc == 0, (name, rc)
    # As a runtime loads it: before the container's process runs, for every thread it starts.
    rc = lib.seccomp_load(ctx)
    assert rc == 0, rc
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main()
