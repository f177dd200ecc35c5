#pragma once
// NO_SANITIZE_ADDRESS marks a function ASan must not instrument: a clone(CLONE_VM) child that
// runs on a stack of its own until execve, which ASan cannot tell from a smashed one. Empty in
// builds without ASan (the released agentbox-init is static and uninstrumented).
#if defined(__SANITIZE_ADDRESS__)
#define NO_SANITIZE_ADDRESS __attribute__((no_sanitize("address")))
#else
#define NO_SANITIZE_ADDRESS
#endif
