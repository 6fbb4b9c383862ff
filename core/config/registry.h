// Registry: the current value of every switch, with where it came from.
//
// Sources, lowest precedence first: the spec's default, the config file named by
// MLXA2A_CONFIG_FILE, the environment. A value that does not parse produces one
// warning (variable, value, what is accepted) and the next source down keeps its
// value. MLXA2A_* names that match no switch are warned about (typos), with the
// nearest known name when one is close.
//
// Thread safety: load() is not; after it, the const methods are. The registry
// never prints: the runtime logs its warnings, mlxa2a_info prints them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config/spec.h"

namespace mlxa2a::core::config {

// MLXA2A_* variables of an environment, as NAME=value pairs (name with prefix).
using Environment = std::vector<std::pair<std::string, std::string>>;

// The process environment's MLXA2A_* variables.
Environment process_environment();

class Registry {
 public:
  struct Entry {
    const Spec* spec;
    Value value;
    std::string text;    // canonical text of value
    Source source;
    std::string origin;  // "default", "env", or "FILE:LINE"
  };

  explicit Registry(std::span<const Spec> specs);

  // (Re)loads every value from defaults, the config file and env.
  void load(const Environment& env);

  std::span<const Entry> entries() const { return entries_; }
  // Accepts the name with or without the MLXA2A_ prefix; nullptr if unknown.
  const Entry* find(std::string_view name) const;

  // Typed accessors; the name must exist with that type (checked: a mismatch is a
  // programming error and aborts in debug builds, returns a zero value otherwise).
  bool get_bool(std::string_view name) const;
  std::int64_t get_int(std::string_view name) const;
  std::uint64_t get_size(std::string_view name) const;
  const std::string& get_string(std::string_view name) const;  // Enum and String
  const std::vector<Device>& get_devices(std::string_view name) const;
  const rules::Table& get_tune(std::string_view name) const;

  const std::vector<std::string>& warnings() const { return warnings_; }

  // Sets one switch at run time (MPI_T, core/mpi/mpit.h) with `origin` as its
  // origin. false when the name is unknown or the text does not parse; then
  // *why says what is accepted and the value is unchanged (no warning kept).
  bool set(std::string_view name, std::string_view text, std::string origin, std::string* why);

  // FNV-1a hash of the canonical values of all AllEqual switches, and a
  // human-readable list of them for mismatch reports.
  std::uint64_t all_equal_hash() const;
  std::string all_equal_summary() const;

 private:
  Entry* find_mutable(std::string_view name);
  bool assign(Entry& e, std::string_view text, Source source, std::string origin);
  void load_file(const std::string& path);
  void apply_follows();  // Spec::follows, after every source is loaded
  void warn_unknown(std::string_view name, std::string_view where);
  const Value& typed(std::string_view name, Type a, Type b) const;

  std::span<const Spec> specs_;
  std::vector<Entry> entries_;
  std::vector<std::string> warnings_;
};

}  // namespace mlxa2a::core::config
