// The registration cache's options from the switch table. rcache/ knows nothing
// of core (it is a lower layer), so core translates: MLXA2A_RCACHE_ALIGN,
// _MAX_REGIONS, _MAX_BYTES (inf = unlimited) and _INVALIDATION.
#pragma once

#include <string>

#include "core/config/switches.h"
#include "rcache/options.h"

namespace mlxa2a::core {

// Options for rcache::RegCache::create(). *error is set (and defaults returned)
// only if the switch table and rcache disagree, which a unit test rules out.
rcache::Options rcache_options(const config::Settings& settings, std::string* error);

}  // namespace mlxa2a::core
