// The registration cache's options from the MLXA2A_RCACHE_* switches as the
// switch table filled them (core/config/rcache.h). rcache/ knows nothing of
// core (it is a lower layer), so core translates, here and only here.
#pragma once

#include <string>

#include "core/config/rcache.h"
#include "rcache/options.h"

namespace mlxa2a::core {

// Options for rcache::RegCache::create(). *error is set (and defaults returned)
// only if the switch table and rcache disagree, which a unit test rules out.
rcache::Options rcache_options(const config::RcacheSwitches& s, std::string* error);

}  // namespace mlxa2a::core
