// Man pages generated from the switch registry at build time (docs/man/
// meson.build runs mlxa2a_man), so the installed pages list exactly the
// switches the library reads and cannot drift from them.
// Pure functions; no I/O.
#pragma once

#include <string>
#include <string_view>

#include "core/config/registry.h"

namespace mlxa2a::core::info {

// Text made safe for roff: backslashes escaped, a line that starts with '.'
// or '\'' guarded, so it prints as written.
std::string roff_escape(std::string_view text);

// One .TP entry per registered switch, every verbosity: name, type, default,
// scope, verbosity and description (defaults from r, which should be loaded
// from an empty environment).
std::string man_switch_list(const config::Registry& r);

// The page named "mlxa2a.7", "mlxa2a_info.1", "mlxa2a-tune.1" or "mlxa2a-run.1"; help_text is
// the program's --help output (section 1 pages quote it as their OPTIONS).
// Empty for an unknown name.
std::string man_page(std::string_view name, const config::Registry& r,
                     std::string_view version, std::string_view help_text);

}  // namespace mlxa2a::core::info
