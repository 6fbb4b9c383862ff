#include "core/config/registry.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "core/config/parse.h"

extern char** environ;

namespace mlxa2a::core::config {

namespace {

std::string_view strip_prefix(std::string_view name) {
  if (name.substr(0, kPrefix.size()) == kPrefix) name.remove_prefix(kPrefix.size());
  return name;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

Environment process_environment() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    if (kv.substr(0, kPrefix.size()) != kPrefix) continue;
    const std::size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace_back(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

Registry::Registry(std::span<const Spec> specs) : specs_(specs) { load({}); }

void Registry::load(const Environment& env) {
  entries_.clear();
  warnings_.clear();
  for (const Spec& spec : specs_) {
    ParseResult r = parse_value(spec, spec.default_text);
    if (!r.value) std::abort();  // a bad default is a bug; unit tests parse every one
    entries_.push_back(Entry{&spec, *r.value, format_value(spec, *r.value),
                             Source::Default, "default"});
  }
  for (const auto& [name, value] : env) {
    if (strip_prefix(name) == "CONFIG_FILE" && !trim(value).empty()) {
      load_file(std::string(trim(value)));
    }
  }
  for (const auto& [name, value] : env) {
    if (Entry* e = find_mutable(name)) {
      assign(*e, value, Source::Env, "env");
    } else {
      warn_unknown(name, "in the environment");
    }
  }
  apply_follows();
}

void Registry::apply_follows() {
  for (Entry& e : entries_) {
    if (e.spec->follows.empty() || e.source != Source::Default) continue;
    const Entry* from = find(e.spec->follows);
    if (!from || from->source == Source::Default) continue;
    // Within this switch's own bounds: a followed value it would refuse is
    // warned about and leaves the default.
    assign(e, from->text, from->source,
           "MLXA2A_" + std::string(from->spec->name) + " (" + from->origin + ")");
  }
}

void Registry::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    warnings_.push_back("MLXA2A_CONFIG_FILE=" + path + ": cannot open: " +
                        std::strerror(errno) + "; no config file is used");
    return;
  }
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    const std::string origin = path + ":" + std::to_string(lineno);
    std::string_view l = trim(line);
    if (l.empty() || l.front() == '#') continue;
    const std::size_t eq = l.find('=');
    if (eq == std::string_view::npos) {
      warnings_.push_back(origin + ": expected MLXA2A_NAME = VALUE, got '" + std::string(l) + "'");
      continue;
    }
    const std::string_view name = trim(l.substr(0, eq));
    std::string_view value = trim(l.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    Entry* e = find_mutable(name);
    if (!e) {
      warn_unknown(name, "in " + origin);
    } else if (e->spec->env_only) {
      warnings_.push_back(origin + ": MLXA2A_" + std::string(e->spec->name) +
                          " can only be set in the environment; ignored");
    } else {
      assign(*e, value, Source::File, origin);
    }
  }
}

bool Registry::assign(Entry& e, std::string_view text, Source source, std::string origin) {
  ParseResult r = parse_value(*e.spec, text);
  if (!r.value) {
    warnings_.push_back("MLXA2A_" + std::string(e.spec->name) + "='" + std::string(text) +
                        "' (" + origin + ") is not valid: expected " + r.accepted +
                        "; using " + e.text + " (" + std::string(to_string(e.source)) + ")");
    return false;
  }
  e.text = format_value(*e.spec, *r.value);
  e.value = std::move(*r.value);
  e.source = source;
  e.origin = std::move(origin);
  return true;
}

bool Registry::set(std::string_view name, std::string_view text, std::string origin,
                   std::string* why) {
  Entry* e = find_mutable(name);
  if (!e) {
    *why = "no switch is named " + std::string(name);
    return false;
  }
  const std::size_t warned = warnings_.size();
  if (assign(*e, text, Source::Env, std::move(origin))) return true;
  *why = warnings_.back();
  warnings_.resize(warned);
  return false;
}

void Registry::warn_unknown(std::string_view name, std::string_view where) {
  const std::string_view bare = strip_prefix(name);
  std::string msg = "unknown variable MLXA2A_" + std::string(bare) + " " + std::string(where) +
                    " is ignored";
  const Spec* best = nullptr;
  std::size_t best_d = 3;  // suggest only close matches
  for (const Spec& s : specs_) {
    const std::size_t d = edit_distance(bare, s.name);
    if (d < best_d) {
      best_d = d;
      best = &s;
    }
  }
  if (best) msg += "; did you mean MLXA2A_" + std::string(best->name) + "?";
  warnings_.push_back(std::move(msg));
}

Registry::Entry* Registry::find_mutable(std::string_view name) {
  const std::string_view bare = strip_prefix(name);
  for (Entry& e : entries_) {
    if (e.spec->name == bare) return &e;
  }
  return nullptr;
}

const Registry::Entry* Registry::find(std::string_view name) const {
  return const_cast<Registry*>(this)->find_mutable(name);
}

const Value& Registry::typed(std::string_view name, Type a, Type b) const {
  const Entry* e = find(name);
  if (!e || (e->spec->type != a && e->spec->type != b)) std::abort();
  return e->value;
}

bool Registry::get_bool(std::string_view n) const {
  return std::get<bool>(typed(n, Type::Bool, Type::Bool));
}
std::int64_t Registry::get_int(std::string_view n) const {
  return std::get<std::int64_t>(typed(n, Type::Int, Type::Int));
}
std::uint64_t Registry::get_size(std::string_view n) const {
  return std::get<std::uint64_t>(typed(n, Type::Size, Type::Size));
}
const std::string& Registry::get_string(std::string_view n) const {
  return std::get<std::string>(typed(n, Type::Enum, Type::String));
}
const std::vector<Device>& Registry::get_devices(std::string_view n) const {
  return std::get<std::vector<Device>>(typed(n, Type::Devices, Type::Devices));
}
const rules::Table& Registry::get_tune(std::string_view n) const {
  return std::get<rules::Table>(typed(n, Type::Tune, Type::Tune));
}

std::uint64_t Registry::all_equal_hash() const {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : all_equal_summary()) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string Registry::all_equal_summary() const {
  std::string out;
  for (const Entry& e : entries_) {
    if (e.spec->scope != Scope::AllEqual) continue;
    if (!out.empty()) out += ' ';
    out += "MLXA2A_" + std::string(e.spec->name) + "=" + e.text;
  }
  return out;
}

}  // namespace mlxa2a::core::config
