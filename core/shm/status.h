// Status codes of the shared-memory stage. No exception ever leaves core/shm:
// every fallible call returns one of these.
#pragma once

namespace mlxa2a::shm {

enum class [[nodiscard]] Status {
  ok = 0,
  invalid_argument,   // caller broke a documented precondition; nothing moved
  bootstrap_failed,   // Bootstrap::broadcast/barrier returned false
  create_failed,      // segment could not be created/attached on some rank
  peer_dead,          // a rank we waited for has exited
  peer_failed,        // another rank's run() failed (it set the node's failure flag)
  timeout,            // Options::timeout_ms elapsed while waiting
  aborted,            // Options::abort_requested returned true while waiting
  cma_failed,         // process_vm_readv failed after the probe said it works
  broken,             // an earlier run() failed; the instance is unusable
  transport_failed,   // the leaders' inter-node exchange failed (core/hier)
};

// Static string, never null.
const char* to_string(Status s) noexcept;

}  // namespace mlxa2a::shm
