#pragma once
// NO_SANITIZE_ADDRESS marks a function ASan must not instrument: a clone(CLONE_VM) child that
// runs on a stack of its own until execve, which ASan cannot tell from a smashed one. Empty in
// builds without ASan (the released agentbox-init is static and uninstrumented). GCC says ASan
// with __SANITIZE_ADDRESS__, clang with __has_feature(address_sanitizer).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AGENTBOX_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(AGENTBOX_ASAN)
#define NO_SANITIZE_ADDRESS __attribute__((no_sanitize("address")))
#else
#define NO_SANITIZE_ADDRESS
#endif
