// Text forms of the switch registry, used by mlxa2a_info (and its tests).
// Pure functions of a loaded Registry.
#pragma once

#include <string>

#include "core/config/registry.h"

namespace mlxa2a::core::info {

struct RenderOptions {
  // Highest verbosity shown (user < tuner < developer).
  config::Verbosity max_verbosity = config::Verbosity::Tuner;
};

// A switch's type as shown to users ("int [0..64]", "enum (a|b)"), and its
// default in canonical form ("4096" shows as "4K").
std::string type_text(const config::Spec& s);
std::string default_text(const config::Spec& s);

// Human listing: name, type, default, current value and its source, description.
std::string render_listing(const config::Registry& r, const RenderOptions& o);
// A commented config file with the current values; valid MLXA2A_CONFIG_FILE input.
std::string render_config_file(const config::Registry& r, const RenderOptions& o);
// A JSON array of objects {name, type, default, value, source, origin, verbosity,
// scope, description, choices?}.
std::string render_json(const config::Registry& r, const RenderOptions& o);
// The decisions in the MLXA2A_TUNE_FILE the registry names, one per line with
// the size range each covers; empty when no file is set. A file that cannot
// be read or parsed is described, not hidden.
std::string render_tune_file(const config::Registry& r);

}  // namespace mlxa2a::core::info
