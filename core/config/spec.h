// Switch specifications: the static description of every MLXA2A_* variable.
//
// Contract: a Spec is a compile-time constant owned by the switch table
// (core/config/switches.cc); nothing here allocates or touches the environment.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/config/net.h"
#include "core/config/rules.h"

namespace mlxa2a::core::config {

inline constexpr std::string_view kPrefix = "MLXA2A_";

enum class Type : std::uint8_t { Bool, Int, Size, Enum, String, Devices, Tune };
// Who should touch a switch, as in MPI_T's verbosity levels.
enum class Verbosity : std::uint8_t { User, Tuner, Developer };
// AllEqual switches change what ranks do collectively; they are compared across
// ranks before any engine runs and a mismatch makes mlxa2a stand aside everywhere.
enum class Scope : std::uint8_t { Local, AllEqual };
// Where a value came from, lowest precedence first.
enum class Source : std::uint8_t { Default, File, Env };

using Device = NetPort;  // one port of MLXA2A_NET_DEVICES (core/config/net.h)
struct Settings;        // core/config/switches.h

using Value = std::variant<bool, std::int64_t, std::uint64_t, std::string,
                           std::vector<Device>, rules::Table>;

// Extra validation beyond the type; returns "" when the value is acceptable,
// otherwise what is accepted (shown to the user).
using Check = std::string (*)(const Value&);

struct Spec {
  std::string_view name;  // without the MLXA2A_ prefix
  Type type;
  std::string_view default_text;
  std::string_view description;
  Verbosity verbosity = Verbosity::User;
  Scope scope = Scope::Local;
  std::span<const std::string_view> choices = {};  // Type::Enum only
  std::int64_t min = INT64_MIN;                    // Type::Int only
  std::int64_t max = INT64_MAX;                    // Type::Int only
  // Type::Size only: the largest value accepted. Below UINT64_MAX, `inf` is
  // refused too: sizes that shape shared segments must stay finite, since the
  // layout arithmetic of a huge value would not fit in memory (issue 11).
  std::uint64_t size_max = UINT64_MAX;
  Check check = nullptr;
  bool env_only = false;  // may not be set from the config file
  // May be changed while the job runs (an MPI_T control variable write,
  // docs/mpit.md); the next call follows it. Only Local switches whose
  // readers take each value as it comes qualify.
  bool runtime_writable = false;
  // Another switch (name without prefix) whose value this one takes while it
  // is itself at its default and that one is not (a file or the environment
  // set it): the registry then shows the value that applies, with the other
  // switch as its origin. Only switches read at set-up (not runtime_writable).
  std::string_view follows = {};
  // Stores the value into its field of Settings (settings_from); null for
  // switches whose readers convert it themselves.
  void (*store)(const Value&, Settings&) = nullptr;
};

std::string_view to_string(Type t);
std::string_view to_string(Verbosity v);
std::string_view to_string(Scope s);
std::string_view to_string(Source s);

}  // namespace mlxa2a::core::config
