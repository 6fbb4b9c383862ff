// The shared-memory stage's status codes are mlxa2a's one status type
// (core/status.h); the alias keeps the shm code and its callers unchanged.
#pragma once

#include "core/status.h"

namespace mlxa2a::shm {

using Status = ::mlxa2a::Status;
using ::mlxa2a::to_string;

}  // namespace mlxa2a::shm
